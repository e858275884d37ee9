//! Teams: creation (admin), information, and the team-wide communication switch.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::auth::{self, TokenKind};
use super::error::{CoreError, CoreResult, ErrorCode};
use super::registry::{Caller, TeamRecord};
use super::time::Timestamp;
use super::{Core, Need, check_text, ids};
use crate::store::{self, StoreError};

/// Longest team name.
pub const MAX_TEAM_NAME: usize = 200;

/// Body of `POST /v1/teams`.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateTeam {
    /// A name for people, 1–200 characters.
    #[schema(example = "research-squad")]
    pub name: String,
    /// The team's id (1–64 of `A-Z a-z 0-9 . _ -`); generated when absent.
    #[schema(example = "research")]
    pub team_id: Option<String>,
}

/// Answer of `POST /v1/teams`. The team key is shown here once and never again.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TeamCreated {
    pub success: bool,
    pub team_id: String,
    pub name: String,
    /// Registers agents and manages the team. Store it: it cannot be shown again.
    pub team_key: String,
    pub created_at: Timestamp,
}

/// A team as its members and owner see it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TeamView {
    pub success: bool,
    pub team_id: String,
    pub name: String,
    /// When false, no member can send anything (`COMMUNICATION_DISABLED`).
    pub communication_enabled: bool,
    /// Current members.
    pub agent_count: usize,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// Body of `PATCH /v1/teams/{team_id}`: any of the fields, at least one.
#[derive(Debug, Clone, Default, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateTeam {
    pub name: Option<String>,
    /// Switches sending off (or on) for every member of the team.
    pub communication_enabled: Option<bool>,
}

impl Core {
    /// Creates a team (admin only) and mints its key.
    pub async fn create_team(&self, caller: &Caller, input: CreateTeam) -> CoreResult<TeamCreated> {
        if *caller != Caller::Admin {
            return Err(CoreError::forbidden(
                "only the server admin token can create teams",
            ));
        }
        check_text("name", &input.name, MAX_TEAM_NAME)?;
        let team_id = match input.team_id {
            Some(id) => {
                ids::check_id("team_id", &id)?;
                id
            }
            None => ids::random_id("team"),
        };
        let key = auth::mint(TokenKind::Team);
        let now = Timestamp::now();
        let record = TeamRecord {
            pk: 0,
            team_id: team_id.clone(),
            name: input.name.trim().to_owned(),
            key_id: key.id,
            key_hash: key.hash,
            communication_enabled: true,
            created_at: now,
            updated_at: now,
        };
        let registry = self.clone();
        let team = self
            .store()
            .write_then(
                move |tx| {
                    Box::pin(async move {
                        let pk = store::teams::insert(tx.conn().await?, &record).await.map_err(|e| match e {
                            StoreError::Conflict => CoreError::new(
                                ErrorCode::Conflict,
                                format!("a team with id '{}' already exists", record.team_id),
                            )
                            .with("team_id", record.team_id.as_str())
                            .suggest("Choose another team_id, or leave it out to get a generated one."),
                            other => other.into(),
                        })?;
                        Ok::<_, CoreError>(TeamRecord { pk, ..record })
                    })
                },
                move |team| {
                    registry.registry().put_team(team.clone());
                    Ok(team)
                },
            )
            .await?;
        tracing::info!(team_id = %team.team_id, "team created");
        Ok(TeamCreated {
            success: true,
            team_id: team.team_id,
            name: team.name,
            team_key: key.text,
            created_at: team.created_at,
        })
    }

    pub fn get_team(&self, caller: &Caller, team_id: &str) -> CoreResult<TeamView> {
        let team = self.team_for(caller, team_id, Need::Read)?;
        Ok(self.team_view(&team))
    }

    /// Renames a team or switches its communication (team key or admin).
    pub async fn update_team(
        &self,
        caller: &Caller,
        team_id: &str,
        patch: UpdateTeam,
    ) -> CoreResult<TeamView> {
        let team = self.team_for(caller, team_id, Need::Manage)?;
        if patch.name.is_none() && patch.communication_enabled.is_none() {
            return Err(CoreError::validation(
                "body",
                "give at least one of: name, communication_enabled",
            ));
        }
        if let Some(name) = &patch.name {
            check_text("name", name, MAX_TEAM_NAME)?;
        }
        let pk = team.pk;
        let core = self.clone();
        let updated = self
            .store()
            .write_then(
                move |tx| {
                    Box::pin(async move {
                        // Read inside the transaction: a concurrent patch earlier in the
                        // batch is seen, so neither is lost.
                        let conn = tx.conn().await?;
                        let mut team = store::teams::get(&mut *conn, pk).await?;
                        if let Some(name) = patch.name {
                            team.name = name.trim().to_owned();
                        }
                        if let Some(enabled) = patch.communication_enabled {
                            team.communication_enabled = enabled;
                        }
                        team.updated_at = Timestamp::now();
                        store::teams::update(conn, &team).await?;
                        Ok::<_, StoreError>(team)
                    })
                },
                move |team| {
                    core.registry().put_team(team.clone());
                    Ok(team)
                },
            )
            .await?;
        Ok(self.team_view(&updated))
    }

    fn team_view(&self, team: &TeamRecord) -> TeamView {
        TeamView {
            success: true,
            team_id: team.team_id.clone(),
            name: team.name.clone(),
            communication_enabled: team.communication_enabled,
            agent_count: self.registry().member_count(team.pk),
            created_at: team.created_at,
            updated_at: team.updated_at,
        }
    }
}

/// Who a token belongs to (`GET /v1/whoami`): lets a client or the command line learn
/// its own agent id and team from the token alone.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WhoAmI {
    pub success: bool,
    /// `admin`, `team` (a team key) or `agent`.
    pub kind: String,
    pub team_id: Option<String>,
    pub agent_id: Option<String>,
}

impl Core {
    pub fn whoami(&self, caller: &Caller) -> CoreResult<WhoAmI> {
        let team_id = |pk: i64| self.registry().team(pk).map(|t| t.team_id.clone());
        Ok(match *caller {
            Caller::Admin => WhoAmI {
                success: true,
                kind: "admin".into(),
                team_id: None,
                agent_id: None,
            },
            Caller::Team { team } => WhoAmI {
                success: true,
                kind: "team".into(),
                team_id: team_id(team),
                agent_id: None,
            },
            Caller::Agent { .. } => {
                let (team, agent) = self.acting_agent(caller)?;
                WhoAmI {
                    success: true,
                    kind: "agent".into(),
                    team_id: Some(team.team_id.clone()),
                    agent_id: Some(agent.agent_id.clone()),
                }
            }
        })
    }
}
