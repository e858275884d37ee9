//! Agents: registration (team key), lookup by capability and status, updates, removal.
//!
//! This is the registry of the task protocol (`register`, `lookup by capability`) and
//! the "valid team member" notion of the messaging contract: an agent is a member from
//! its registration until its removal, and only members send, receive and are found.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::auth::{self, TokenKind};
use super::error::{CoreError, CoreResult, ErrorCode};
use super::registry::{AgentRecord, AgentStatus, Caller, TeamRecord};
use super::time::Timestamp;
use super::{Core, Need, check_text, ids};
use crate::store::{self, StoreError};

pub const MAX_ROLE: usize = 100;
pub const MAX_CAPABILITIES: usize = 64;
pub const MAX_CAPABILITY: usize = 100;
pub const MAX_ADDRESS: usize = 2048;

/// Body of `POST /v1/teams/{team_id}/agents`.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RegisterAgent {
    /// 1–64 of `A-Z a-z 0-9 . _ -`, unique among the team's current members.
    #[schema(example = "planner")]
    pub agent_id: String,
    /// What the agent does, for people and for `sender_role` (1–100 characters).
    #[schema(example = "Planner")]
    pub role: String,
    /// Skills, matched case-insensitively (at most 64, each 1–100 characters).
    #[schema(example = json!(["planning", "python"]))]
    pub capabilities: Vec<String>,
    /// Where the agent can be reached outside Switchboard, if anywhere (free text).
    pub address: Option<String>,
    /// Defaults to `available`.
    pub status: Option<AgentStatus>,
}

/// An agent as others see it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AgentView {
    pub agent_id: String,
    pub team_id: String,
    pub role: String,
    pub capabilities: Vec<String>,
    pub address: Option<String>,
    pub status: AgentStatus,
    /// When false the agent can neither send nor receive.
    pub communication_enabled: bool,
    pub registered_at: Timestamp,
    pub updated_at: Timestamp,
    /// Whether it has a live WebSocket connection now.
    pub connected: bool,
    /// When its oldest live connection opened.
    pub connected_since: Option<Timestamp>,
    /// Its last activity over a connection (a frame, or its last disconnect).
    pub last_seen_at: Option<Timestamp>,
}

/// Answer of a registration. The token is shown here once and never again.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AgentRegistered {
    pub success: bool,
    pub agent: AgentView,
    /// The agent's bearer token. Store it: it cannot be shown again.
    pub token: String,
}

/// One agent.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AgentEnvelope {
    pub success: bool,
    pub agent: AgentView,
}

/// Agents matching a lookup, ordered by agent id.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AgentList {
    pub success: bool,
    pub agents: Vec<AgentView>,
    pub total_count: usize,
}

/// Answer of a removal.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AgentRemoved {
    pub success: bool,
    pub agent_id: String,
    pub removed_at: Timestamp,
}

/// Filters of an agent lookup.
#[derive(Debug, Clone, Default, Deserialize, Serialize, IntoParams, ToSchema)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct AgentQuery {
    /// Capabilities the agent must all have, comma-separated, case-insensitive.
    #[param(example = "python,review")]
    pub capability: Option<String>,
    /// Only agents with this status.
    pub status: Option<AgentStatus>,
}

/// Body of `PATCH /v1/teams/{team_id}/agents/{agent_id}`: any of the fields, at least one.
///
/// The agent itself may change `role`, `capabilities`, `address` and `status`; only the
/// team key (or admin) may change `communication_enabled`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateAgent {
    pub role: Option<String>,
    pub capabilities: Option<Vec<String>>,
    pub address: Option<String>,
    pub status: Option<AgentStatus>,
    pub communication_enabled: Option<bool>,
}

/// Validates capabilities and drops case-insensitive duplicates (first spelling wins).
fn clean_capabilities(capabilities: Vec<String>) -> CoreResult<Vec<String>> {
    if capabilities.len() > MAX_CAPABILITIES {
        return Err(CoreError::validation(
            "capabilities",
            format!("at most {MAX_CAPABILITIES} capabilities"),
        ));
    }
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(capabilities.len());
    for (i, cap) in capabilities.into_iter().enumerate() {
        check_text(&format!("capabilities[{i}]"), &cap, MAX_CAPABILITY)?;
        let cap = cap.trim().to_owned();
        if seen.insert(cap.to_lowercase()) {
            out.push(cap);
        }
    }
    Ok(out)
}

fn check_address(address: &Option<String>) -> CoreResult<()> {
    match address {
        Some(a) if a.chars().count() > MAX_ADDRESS => Err(CoreError::validation(
            "address",
            format!("address must be at most {MAX_ADDRESS} characters"),
        )),
        _ => Ok(()),
    }
}

impl Core {
    /// Registers an agent (team key or admin) and mints its token.
    pub async fn register_agent(
        &self,
        caller: &Caller,
        team_id: &str,
        input: RegisterAgent,
    ) -> CoreResult<AgentRegistered> {
        let team = self.team_for(caller, team_id, Need::Manage)?;
        ids::check_id("agent_id", &input.agent_id)?;
        check_text("role", &input.role, MAX_ROLE)?;
        let capabilities = clean_capabilities(input.capabilities)?;
        check_address(&input.address)?;
        if self.registry().member(team.pk, &input.agent_id).is_some() {
            return Err(already_registered(&input.agent_id));
        }

        let token = auth::mint(TokenKind::Agent);
        let now = Timestamp::now();
        let record = AgentRecord {
            pk: 0,
            team_pk: team.pk,
            agent_id: input.agent_id,
            role: input.role.trim().to_owned(),
            capabilities,
            address: input.address,
            status: input.status.unwrap_or(AgentStatus::Available),
            communication_enabled: true,
            token_id: Some(token.id),
            token_hash: Some(token.hash),
            registered_at: now,
            updated_at: now,
            removed_at: None,
        };
        let core = self.clone();
        let agent = self
            .store()
            .write_then(
                move |tx| {
                    Box::pin(async move {
                        // The unique key decides races between two registrations.
                        let pk = store::agents::insert(tx.conn().await?, &record)
                            .await
                            .map_err(|e| match e {
                                StoreError::Conflict => already_registered(&record.agent_id),
                                other => other.into(),
                            })?;
                        Ok::<_, CoreError>(AgentRecord { pk, ..record })
                    })
                },
                move |agent| {
                    core.registry().put_agent(agent.clone());
                    Ok(agent)
                },
            )
            .await?;
        tracing::info!(team_id = %team.team_id, agent_id = %agent.agent_id, "agent registered");
        Ok(AgentRegistered {
            success: true,
            agent: self.agent_view(&team, &agent),
            token: token.text,
        })
    }

    /// Looks agents up by capabilities (all must match) and/or status.
    pub fn list_agents(
        &self,
        caller: &Caller,
        team_id: &str,
        query: &AgentQuery,
    ) -> CoreResult<AgentList> {
        let team = self.team_for(caller, team_id, Need::Read)?;
        let wanted: Vec<&str> = query
            .capability
            .as_deref()
            .map(|c| {
                c.split(',')
                    .map(str::trim)
                    .filter(|c| !c.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        let agents: Vec<AgentView> = self
            .registry()
            .members(team.pk)
            .iter()
            .filter(|a| query.status.is_none_or(|s| a.status == s))
            .filter(|a| wanted.iter().all(|w| a.has_capability(w)))
            .map(|a| self.agent_view(&team, a))
            .collect();
        Ok(AgentList {
            success: true,
            total_count: agents.len(),
            agents,
        })
    }

    pub fn get_agent(
        &self,
        caller: &Caller,
        team_id: &str,
        agent_id: &str,
    ) -> CoreResult<AgentEnvelope> {
        let team = self.team_for(caller, team_id, Need::Read)?;
        let agent = self.member_of(&team, agent_id)?;
        Ok(AgentEnvelope {
            success: true,
            agent: self.agent_view(&team, &agent),
        })
    }

    /// Updates an agent: the agent itself (not its communication switch) or the team key.
    pub async fn update_agent(
        &self,
        caller: &Caller,
        team_id: &str,
        agent_id: &str,
        patch: UpdateAgent,
    ) -> CoreResult<AgentEnvelope> {
        let team = self.team_for(caller, team_id, Need::Read)?;
        let agent = self.member_of(&team, agent_id)?;
        if let Caller::Agent { agent: me, .. } = caller {
            if *me != agent.pk {
                return Err(CoreError::forbidden("an agent may only update itself"));
            }
            if patch.communication_enabled.is_some() {
                return Err(CoreError::forbidden(
                    "only the team key can switch an agent's communication",
                ));
            }
        }
        if patch.role.is_none()
            && patch.capabilities.is_none()
            && patch.address.is_none()
            && patch.status.is_none()
            && patch.communication_enabled.is_none()
        {
            return Err(CoreError::validation(
                "body",
                "give at least one of: role, capabilities, address, status, communication_enabled",
            ));
        }
        if let Some(role) = &patch.role {
            check_text("role", role, MAX_ROLE)?;
        }
        let capabilities = patch.capabilities.map(clean_capabilities).transpose()?;
        check_address(&patch.address)?;

        let pk = agent.pk;
        let core = self.clone();
        let updated = self
            .store()
            .write_then(
                move |tx| {
                    Box::pin(async move {
                        // Read inside the transaction so concurrent patches compose.
                        let conn = tx.conn().await?;
                        let mut agent = store::agents::get(&mut *conn, pk).await?;
                        if !agent.is_member() {
                            return Err(CoreError::agent_not_found(&agent.agent_id));
                        }
                        if let Some(role) = patch.role {
                            agent.role = role.trim().to_owned();
                        }
                        if let Some(capabilities) = capabilities {
                            agent.capabilities = capabilities;
                        }
                        if let Some(address) = patch.address {
                            agent.address = Some(address);
                        }
                        if let Some(status) = patch.status {
                            agent.status = status;
                        }
                        if let Some(enabled) = patch.communication_enabled {
                            agent.communication_enabled = enabled;
                        }
                        agent.updated_at = Timestamp::now();
                        store::agents::update(conn, &agent).await?;
                        Ok(agent)
                    })
                },
                move |agent| {
                    core.registry().put_agent(agent.clone());
                    Ok(agent)
                },
            )
            .await?;
        Ok(AgentEnvelope {
            success: true,
            agent: self.agent_view(&team, &updated),
        })
    }

    /// Removes an agent (team key or admin): it stops being a member and its token stops
    /// working at once. What it sent and received stays.
    pub async fn remove_agent(
        &self,
        caller: &Caller,
        team_id: &str,
        agent_id: &str,
    ) -> CoreResult<AgentRemoved> {
        let team = self.team_for(caller, team_id, Need::Manage)?;
        let agent = self.member_of(&team, agent_id)?;
        let pk = agent.pk;
        let core = self.clone();
        let removed = self
            .store()
            .write_then(
                move |tx| {
                    Box::pin(async move {
                        let conn = tx.conn().await?;
                        let mut agent = store::agents::get(&mut *conn, pk).await?;
                        if !agent.is_member() {
                            return Err(CoreError::agent_not_found(&agent.agent_id));
                        }
                        let now = Timestamp::now();
                        agent.removed_at = Some(now);
                        agent.updated_at = now;
                        agent.token_id = None;
                        agent.token_hash = None;
                        store::agents::update(conn, &agent).await?;
                        Ok(agent)
                    })
                },
                move |agent| {
                    core.registry().put_agent(agent.clone());
                    Ok(agent)
                },
            )
            .await?;
        // Its token no longer works; its live connections end too.
        self.hub().kick(removed.pk);
        tracing::info!(team_id = %team.team_id, agent_id = %removed.agent_id, "agent removed");
        Ok(AgentRemoved {
            success: true,
            agent_id: removed.agent_id.clone(),
            removed_at: removed.removed_at.unwrap_or(removed.updated_at),
        })
    }

    /// A current member of `team` by id, or `AGENT_NOT_FOUND`.
    pub(crate) fn member_of(
        &self,
        team: &TeamRecord,
        agent_id: &str,
    ) -> CoreResult<Arc<AgentRecord>> {
        self.registry()
            .member(team.pk, agent_id)
            .ok_or_else(|| CoreError::agent_not_found(agent_id))
    }

    pub(crate) fn agent_view(&self, team: &TeamRecord, agent: &AgentRecord) -> AgentView {
        let presence = self.hub().presence(agent.pk);
        AgentView {
            connected: presence.connected,
            connected_since: presence.connected_since,
            last_seen_at: presence.last_seen_at,
            agent_id: agent.agent_id.clone(),
            team_id: team.team_id.clone(),
            role: agent.role.clone(),
            capabilities: agent.capabilities.clone(),
            address: agent.address.clone(),
            status: agent.status,
            communication_enabled: agent.communication_enabled,
            registered_at: agent.registered_at,
            updated_at: agent.updated_at,
        }
    }
}

fn already_registered(agent_id: &str) -> CoreError {
    CoreError::new(
        ErrorCode::AgentAlreadyRegistered,
        format!("agent '{agent_id}' is already registered in this team"),
    )
    .with("agent_id", agent_id)
}
