//! Teams: creation (admin), information, the team-wide communication switch, and who a
//! token belongs to.

use switchboard_types::ErrorCode;
use switchboard_types::ids::TeamId;
use switchboard_types::teams::{
    CreateTeam, DEFAULT_MAX_ATTEMPTS, TeamCreated, TeamKeyRotated, TeamList, TeamView, TokenKind,
    UpdateTeam, WhoAmI,
};
use switchboard_types::time::Timestamp;

use super::auth;
use super::{Caller, Core, CoreError, CoreResult, Need, ids};
use crate::model::TeamRecord;
use crate::store::StoreError;

impl Core {
    /// Creates a team (admin only) and mints its key.
    pub(super) async fn create_team(
        &self,
        caller: &Caller,
        input: CreateTeam,
    ) -> CoreResult<TeamCreated> {
        if *caller != Caller::Admin {
            return Err(CoreError::forbidden(
                "only the server admin token can create teams",
            ));
        }
        input.validate()?;
        let team_id = input
            .team_id
            .unwrap_or_else(|| ids::random_id("team").into());
        let key = auth::mint(TokenKind::Team);
        let now = Timestamp::now();
        let record = TeamRecord {
            pk: Default::default(),
            team_id: team_id.clone(),
            name: input.name.trim().to_owned(),
            key_id: key.id,
            key_hash: key.hash,
            communication_enabled: true,
            stomp_auto_register: true,
            stomp_default_context: None,
            retention: Default::default(),
            loop_guard: Default::default(),
            budgets: Default::default(),
            max_attempts: i64::from(DEFAULT_MAX_ATTEMPTS),
            approvers: Vec::new(),
            created_at: now,
            updated_at: now,
        };
        let core = self.clone();
        let team = self
            .store()
            .insert_team(record, move |team| {
                core.registry().put_team(team.clone());
                team
            })
            .await
            .map_err(|e| match e {
                StoreError::Conflict => CoreError::new(
                    ErrorCode::Conflict,
                    format!("a team with id '{team_id}' already exists"),
                )
                .with("team_id", team_id.as_str())
                .suggest("Choose another team_id, or leave it out to get a generated one."),
                other => other.into(),
            })?;
        tracing::info!(team_id = %team.team_id, "team created");
        Ok(TeamCreated {
            success: true,
            team_id: team.team_id.clone(),
            name: team.name,
            team_key: key.text,
            created_at: team.created_at,
        })
    }

    /// Every team of the server, by id (admin): what an operator cleans up or audits. A
    /// team key reads its own team at `GET /v1/teams/{team_id}`; it is not told of others.
    pub(super) fn list_teams(&self, caller: &Caller) -> CoreResult<TeamList> {
        if *caller != Caller::Admin {
            return Err(CoreError::forbidden(
                "only the server admin token lists teams; a team key reads its own team",
            ));
        }
        let mut teams = self.registry().teams();
        teams.sort_by(|a, b| a.team_id.cmp(&b.team_id));
        Ok(TeamList {
            success: true,
            teams: teams.iter().map(|t| self.team_view(t)).collect(),
        })
    }

    pub(super) fn get_team(&self, caller: &Caller, team_id: &TeamId) -> CoreResult<TeamView> {
        let team = self.team_for(caller, team_id, Need::Read)?;
        Ok(self.team_view(&team))
    }

    /// Renames a team or switches its communication (team key or admin).
    pub(super) async fn update_team(
        &self,
        caller: &Caller,
        team_id: &TeamId,
        patch: UpdateTeam,
    ) -> CoreResult<TeamView> {
        let team = self.team_for(caller, team_id, Need::Manage)?;
        patch.validate()?;
        if let Some(supervisor) = patch
            .loop_guard
            .as_ref()
            .and_then(|g| g.supervisor_agent_id.as_ref())
        {
            // A 400 naming the field, not the lookup's 404: the request's resource is the
            // team, which exists (a 404 read as "no such team" to generated clients).
            self.member_of(&team, supervisor).map_err(|_| {
                CoreError::validation(
                    "loop_guard.supervisor_agent_id",
                    format!("'{supervisor}' is not a member of this team"),
                )
                .with("agent_id", supervisor.as_str())
            })?;
        }
        if let Some(budgets) = &patch.budgets {
            budgets.validate(self.budget_ceiling())?;
        }
        if let Some(approvers) = &patch.approvers {
            super::approvals::check_approvers(self, &team, approvers)?;
        }
        let updated = self
            .change_team(team.pk, move |team| {
                if let Some(name) = patch.name {
                    team.name = name.trim().to_owned();
                }
                if let Some(enabled) = patch.communication_enabled {
                    team.communication_enabled = enabled;
                }
                if let Some(register) = patch.stomp_auto_register {
                    team.stomp_auto_register = register;
                }
                if let Some(context) = patch.stomp_default_context {
                    team.stomp_default_context = Some(context).filter(|c| !c.is_empty());
                }
                if let Some(retention) = patch.retention {
                    team.retention = retention;
                }
                if let Some(guard) = patch.loop_guard {
                    team.loop_guard = guard;
                }
                if let Some(budgets) = patch.budgets {
                    team.budgets = budgets;
                }
                if let Some(n) = patch.max_attempts {
                    team.max_attempts = i64::from(n);
                }
                if let Some(approvers) = patch.approvers {
                    team.approvers = approvers;
                }
            })
            .await?;
        Ok(self.team_view(&updated))
    }

    /// Applies `change` to a team's row as the writer's transaction sees it (so
    /// concurrent changes compose), stamps it, and puts it in the registry after the
    /// commit (every node's, before the answer).
    async fn change_team(
        &self,
        team: switchboard_types::ids::TeamPk,
        change: impl FnOnce(&mut TeamRecord) + Send + 'static,
    ) -> CoreResult<TeamRecord> {
        let core = self.clone();
        self.store()
            .update_team(
                team,
                move |team| {
                    change(team);
                    team.updated_at = Timestamp::now();
                    Ok::<_, CoreError>(())
                },
                move |team| {
                    core.registry().put_team(team.clone());
                    team
                },
            )
            .await
    }

    /// A new team key (team key or admin). The old one is refused from the answer on:
    /// the registry of every node holds the change before it is answered. A console
    /// signed in with the old key is refused at its next request.
    pub(super) async fn rotate_team_key(
        &self,
        caller: &Caller,
        team_id: &TeamId,
    ) -> CoreResult<TeamKeyRotated> {
        let team = self.team_for(caller, team_id, Need::Manage)?;
        let key = auth::mint(TokenKind::Team);
        let (id, hash) = (key.id.clone(), key.hash);
        let updated = self
            .change_team(team.pk, move |team| {
                team.key_id = id;
                team.key_hash = hash;
            })
            .await?;
        tracing::info!(team_id = %updated.team_id, "team key rotated");
        Ok(TeamKeyRotated {
            success: true,
            team_id: updated.team_id.clone(),
            team_key: key.text,
            rotated_at: updated.updated_at,
        })
    }

    fn team_view(&self, team: &TeamRecord) -> TeamView {
        TeamView {
            success: true,
            team_id: team.team_id.clone(),
            name: team.name.clone(),
            communication_enabled: team.communication_enabled,
            stomp_auto_register: team.stomp_auto_register,
            stomp_default_context: team.stomp_default_context.clone(),
            agent_count: self.registry().member_count(team.pk),
            retention: team.retention,
            effective_retention: self.retention_of(team),
            loop_guard: team.loop_guard.clone(),
            budgets: team.budgets,
            budgets_in_force: team.budgets.within(self.budget_ceiling()),
            max_attempts: u32::try_from(team.max_attempts).unwrap_or(DEFAULT_MAX_ATTEMPTS),
            approvers: team.approvers.clone(),
            created_at: team.created_at,
            updated_at: team.updated_at,
        }
    }

    /// Who a token belongs to.
    pub(super) fn whoami(&self, caller: &Caller) -> CoreResult<WhoAmI> {
        let team_id = |pk| self.registry().team(pk).map(|t| t.team_id.clone());
        Ok(match *caller {
            Caller::Admin => WhoAmI {
                success: true,
                kind: TokenKind::Admin,
                team_id: None,
                agent_id: None,
            },
            Caller::Team { team } => WhoAmI {
                success: true,
                kind: TokenKind::Team,
                team_id: team_id(team),
                agent_id: None,
            },
            Caller::Agent { .. } => {
                let (team, agent) = self.identity().acting_agent(caller)?;
                WhoAmI {
                    success: true,
                    kind: TokenKind::Agent,
                    team_id: Some(team.team_id.clone()),
                    agent_id: Some(agent.agent_id.clone()),
                }
            }
        })
    }
}
