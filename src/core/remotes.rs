//! Outside A2A agents: agents of the registry that the server itself acts for, because
//! the agent behind them lives elsewhere and speaks A2A. The A2A transport fetches and
//! checks the card and does the forwarding; the core keeps the rules: only a team's key
//! (or the admin) registers one, the URLs follow the callback rule (no private addresses
//! unless allowed), the agent is an ordinary member (registration's own rules), and the
//! server acts for it only while it is a member.

use switchboard_types::agents::{AgentRegistered, RegisterAgent, UpdateAgent};
use switchboard_types::ids::TeamId;
use switchboard_types::ids::{AgentId, AgentPk};
use switchboard_types::routing::Via;
use switchboard_types::time::Timestamp;

use super::Remotes;
use super::egress::urls;
use super::{Caller, Core, CoreError, CoreResult, Need};
pub use crate::model::RemoteAgentRecord;

/// Longest `Authorization` value kept for an outside agent.
const MAX_AUTHORIZATION: usize = 4096;

/// Where an outside agent is, as its transport found it.
#[derive(Debug, Clone)]
pub struct RemoteBinding {
    pub card_url: String,
    /// The card's interface that tasks go to.
    pub interface_url: String,
    /// The `Authorization` value its interface expects, if any.
    pub authorization: Option<String>,
    /// The card (JSON text).
    pub card: String,
}

impl Core {
    fn member_by_pk(
        &self,
        agent: AgentPk,
    ) -> CoreResult<std::sync::Arc<crate::model::AgentRecord>> {
        self.registry()
            .agent(agent)
            .filter(|a| a.is_member())
            .ok_or_else(|| {
                CoreError::new(
                    switchboard_types::ErrorCode::AgentNotFound,
                    "the outside agent was removed",
                )
            })
    }
}

impl<'a> Remotes<'a> {
    /// Checks a URL the server is asked to call for an outside agent.
    pub fn check_remote_url(self, url: &str, field: &str) -> CoreResult<()> {
        let allow_private = self.core.inner.tasks.allow_private_callbacks();
        urls::check_named(url, allow_private, field).map(|_| ())
    }

    /// Refuses a caller that may not register outside agents into the team, before
    /// anything is fetched on its behalf.
    pub fn may_register_remote(self, caller: &Caller, team_id: &TeamId) -> CoreResult<()> {
        self.core
            .team_for(caller, team_id, Need::Manage)
            .map(|_| ())
    }

    /// Registers an outside agent: the member (with registration's rules) and where it is.
    pub async fn register_remote_agent(
        self,
        caller: &Caller,
        team_id: &TeamId,
        agent: RegisterAgent,
        binding: RemoteBinding,
    ) -> CoreResult<(AgentRegistered, RemoteAgentRecord)> {
        let team = self.core.team_for(caller, team_id, Need::Manage)?;
        self.check_remote_url(&binding.card_url, "card_url")?;
        self.check_remote_url(&binding.interface_url, "interface_url")?;
        if let Some(value) = &binding.authorization
            && (value.len() > MAX_AUTHORIZATION || value.chars().any(char::is_control))
        {
            return Err(CoreError::validation(
                "authorization",
                format!(
                    "authorization must be at most {MAX_AUTHORIZATION} bytes without control characters"
                ),
            ));
        }
        let registered = self.core.register_agent(caller, team_id, agent).await?;
        let member = self
            .core
            .registry()
            .member(team.pk, &registered.agent.agent_id)
            .ok_or_else(|| CoreError::internal("a registered agent is not a member"))?;
        let now = Timestamp::now();
        let record = RemoteAgentRecord {
            agent_pk: member.pk,
            team_pk: team.pk,
            card_url: binding.card_url,
            interface_url: binding.interface_url,
            authorization: binding.authorization,
            card: binding.card,
            refreshed_at: now,
            created_at: now,
        };
        if let Err(err) = self.core.store().put_remote_agent(record.clone()).await {
            // Not an outside agent without its binding: undo the registration.
            let _undone = self
                .core
                .remove_agent(caller, team_id, &member.agent_id)
                .await;
            return Err(err.into());
        }
        Ok((registered, record))
    }

    /// The outside agents this node acts for now (see `store::Store::hold_remote_agents`):
    /// those it holds on PostgreSQL, `None` (every one) on SQLite.
    pub async fn hold_remote_agents(
        self,
        lease: std::time::Duration,
    ) -> CoreResult<Option<Vec<switchboard_types::ids::AgentPk>>> {
        Ok(self
            .core
            .store()
            .hold_remote_agents(self.core.node().node_id().as_str(), lease)
            .await?)
    }

    /// Every outside agent that is still a member.
    pub async fn remote_agents(self) -> CoreResult<Vec<RemoteAgentRecord>> {
        Ok(self.core.store().remote_agents().await?)
    }

    /// Records a refreshed card and what it says now (role, capabilities).
    pub async fn refresh_remote_agent(
        self,
        record: RemoteAgentRecord,
        role: String,
        capabilities: Vec<String>,
    ) -> CoreResult<()> {
        let agent = self.core.member_by_pk(record.agent_pk)?;
        let team = self
            .core
            .registry()
            .team(record.team_pk)
            .ok_or_else(|| CoreError::not_found("the team is gone"))?;
        self.core.store().put_remote_agent(record).await?;
        if agent.role != role || agent.capabilities != capabilities {
            let patch = UpdateAgent {
                role: Some(role),
                capabilities: Some(capabilities),
                ..UpdateAgent::default()
            };
            let as_team = Caller::Team { team: team.pk };
            self.core
                .update_agent(&as_team, &team.team_id, &agent.agent_id, patch)
                .await?;
        }
        Ok(())
    }

    /// The server acting as the member `agent` (an outside agent it forwards for);
    /// `AGENT_NOT_FOUND` once it is no member.
    pub fn acting_for(self, agent: AgentPk) -> CoreResult<Caller> {
        let member = self.core.member_by_pk(agent)?;
        Ok(Caller::Agent {
            team: member.team_pk,
            agent: member.pk,
            via: Via::Rest,
        })
    }

    /// The id of the member `agent`, if it is one.
    pub fn agent_id_of(self, agent: AgentPk) -> Option<AgentId> {
        self.core
            .member_by_pk(agent)
            .ok()
            .map(|a| a.agent_id.clone())
    }
}
