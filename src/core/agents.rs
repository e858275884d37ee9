//! Agents: registration (team key), lookup by capability and status, updates, removal.
//!
//! This is the registry of the task protocol (`register`, `lookup by capability`) and
//! the "valid team member" notion of the messaging contract: an agent is a member from
//! its registration until its removal, and only members send, receive and are found.

use switchboard_types::ErrorCode;
use switchboard_types::agents::{
    AgentEnvelope, AgentList, AgentQuery, AgentRegistered, AgentRemoved, AgentStatus, AgentView,
    RegisterAgent, UpdateAgent,
};
use switchboard_types::ids::{AgentId, TeamId};
use switchboard_types::teams::TokenKind;
use switchboard_types::time::Timestamp;

use super::auth;
use super::sessions::{Credential, SessionKind};
use super::{Caller, Core, CoreError, CoreResult, Need};
use crate::model::{AgentRecord, TeamRecord};
use crate::store::StoreError;

impl Core {
    /// Registers an agent (team key or admin) and mints its token.
    pub(super) async fn register_agent(
        &self,
        caller: &Caller,
        team_id: &TeamId,
        input: RegisterAgent,
    ) -> CoreResult<AgentRegistered> {
        let team = self.team_for(caller, team_id, Need::Manage)?;
        let capabilities = input.validate()?;
        let subscription = input.subscription()?;
        if self.registry().member(team.pk, &input.agent_id).is_some() {
            return Err(already_registered(&input.agent_id));
        }
        let token = auth::mint(TokenKind::Agent);
        let now = Timestamp::now();
        let mut record = AgentRecord {
            pk: Default::default(),
            team_pk: team.pk,
            agent_id: input.agent_id.clone(),
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
            addresses: None,
            watch: Vec::new(),
            stomp_bridge: input.stomp_bridge.unwrap_or(false),
        };
        record.subscribe(subscription);
        let core = self.clone();
        // The unique key decides races between two registrations.
        let agent = self
            .store()
            .insert_agent(record, move |agent| {
                core.registry().put_agent(agent.clone());
                agent
            })
            .await
            .map_err(|e| match e {
                StoreError::Conflict => already_registered(&input.agent_id),
                other => other.into(),
            })?;
        tracing::info!(team_id = %team.team_id, agent_id = %agent.agent_id, "agent registered");
        Ok(AgentRegistered {
            success: true,
            agent: self.agent_view(&team, &agent),
            token: token.text,
        })
    }

    /// Looks agents up by capabilities (all must match) and/or status.
    pub(super) fn list_agents(
        &self,
        caller: &Caller,
        team_id: &TeamId,
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

    pub(super) fn get_agent(
        &self,
        caller: &Caller,
        team_id: &TeamId,
        agent_id: &AgentId,
    ) -> CoreResult<AgentEnvelope> {
        let team = self.team_for(caller, team_id, Need::Read)?;
        let agent = self.member_of(&team, agent_id)?;
        Ok(AgentEnvelope {
            success: true,
            agent: self.agent_view(&team, &agent),
        })
    }

    /// Updates an agent: the agent itself (not its communication switch) or the team key.
    pub(super) async fn update_agent(
        &self,
        caller: &Caller,
        team_id: &TeamId,
        agent_id: &AgentId,
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
        let capabilities = patch.validate()?;
        let subscription = patch.subscription()?;
        self.change_agent(&team, agent.pk, move |agent| {
            if let Some(role) = patch.role {
                agent.role = role.trim().to_owned();
            }
            if let Some(capabilities) = capabilities {
                agent.capabilities = capabilities;
            }
            if patch.address.is_some() {
                agent.address = patch.address;
            }
            if let Some(status) = patch.status {
                agent.status = status;
            }
            if let Some(enabled) = patch.communication_enabled {
                agent.communication_enabled = enabled;
            }
            agent.subscribe(subscription);
            agent.updated_at = Timestamp::now();
        })
        .await
    }

    /// Applies `change` to a member's row as the writer's transaction sees it (so
    /// concurrent changes compose) and to the registry after the commit.
    pub(super) async fn change_agent(
        &self,
        team: &TeamRecord,
        agent: switchboard_types::ids::AgentPk,
        change: impl FnOnce(&mut AgentRecord) + Send + 'static,
    ) -> CoreResult<AgentEnvelope> {
        let core = self.clone();
        let updated = self
            .store()
            .update_agent(
                agent,
                move |agent| {
                    if !agent.is_member() {
                        return Err(CoreError::agent_not_found(&agent.agent_id));
                    }
                    change(agent);
                    Ok(())
                },
                move |agent| {
                    core.registry().put_agent(agent.clone());
                    agent
                },
            )
            .await?;
        Ok(AgentEnvelope {
            success: true,
            agent: self.agent_view(team, &updated),
        })
    }

    /// Removes an agent (team key or admin): it stops being a member and its token stops
    /// working at once. What it sent and received stays.
    pub(super) async fn remove_agent(
        &self,
        caller: &Caller,
        team_id: &TeamId,
        agent_id: &AgentId,
    ) -> CoreResult<AgentRemoved> {
        let team = self.team_for(caller, team_id, Need::Manage)?;
        let agent = self.member_of(&team, agent_id)?;
        let core = self.clone();
        let removed = self
            .store()
            .update_agent(
                agent.pk,
                move |agent| {
                    if !agent.is_member() {
                        return Err(CoreError::agent_not_found(&agent.agent_id));
                    }
                    let now = Timestamp::now();
                    agent.removed_at = Some(now);
                    agent.updated_at = now;
                    agent.token_id = None;
                    agent.token_hash = None;
                    Ok(())
                },
                move |agent| {
                    core.registry().put_agent(agent.clone());
                    agent
                },
            )
            .await?;
        // Its token no longer works; its live connections end too.
        self.hub().kick(removed.pk);
        // Its leases stopped counting with the removal (a lease counts only while its
        // holder is a member); their rows go now, so the team's list is short.
        // Work it claimed goes back to its role now, not when the claim's lease ends.
        self.holds().release_all_of(&removed).await;
        tracing::info!(team_id = %team.team_id, agent_id = %removed.agent_id, "agent removed");
        Ok(AgentRemoved {
            success: true,
            agent_id: removed.agent_id.clone(),
            removed_at: removed.removed_at.unwrap_or(removed.updated_at),
        })
    }

    /// A new token for an agent (team key, admin, or the agent itself). The old one is
    /// refused from the answer on (the registry of every node holds the change before
    /// it is answered), and the agent's live connections, opened with the old one, end.
    pub(super) async fn rotate_agent_token(
        &self,
        caller: &Caller,
        team_id: &TeamId,
        agent_id: &AgentId,
    ) -> CoreResult<AgentRegistered> {
        let team = self.team_for(caller, team_id, Need::Read)?;
        let agent = self.member_of(&team, agent_id)?;
        match caller {
            Caller::Agent { agent: me, .. } if *me != agent.pk => {
                return Err(CoreError::forbidden(
                    "an agent may rotate only its own token; the team key rotates any",
                ));
            }
            _ => {}
        }
        let token = auth::mint(TokenKind::Agent);
        let (id, hash) = (token.id.clone(), token.hash);
        let changed = self
            .change_agent(&team, agent.pk, move |agent| {
                agent.token_id = Some(id);
                agent.token_hash = Some(hash);
                agent.updated_at = Timestamp::now();
            })
            .await?;
        self.hub().kick(agent.pk);
        tracing::info!(team_id = %team.team_id, agent_id = %agent.agent_id, "agent token rotated");
        Ok(AgentRegistered {
            success: true,
            agent: changed.agent,
            token: token.text,
        })
    }

    fn agent_view(&self, team: &TeamRecord, agent: &AgentRecord) -> AgentView {
        let presence = self.hub().presence(agent.pk);
        let (stomp_queues, deaf) = self.queue_presence(agent.pk);
        AgentView {
            stomp_queues,
            deaf,
            stomp_bridge: agent.stomp_bridge,
            mcp_sessions: self.sessions_held(Credential::Agent(agent.pk), SessionKind::Mcp),
            a2a_streams: self.sessions_held(Credential::Agent(agent.pk), SessionKind::A2aStream),
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
            addresses: agent.effective_addresses(),
            watch: agent.watch.clone(),
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
