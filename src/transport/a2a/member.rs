//! Who an A2A interface reaches: one member of the team (`/a2a/{team_id}/{agent_id}`), or
//! any free agent of a role (`/a2a/{team_id}/role:{role}`). A message to a role is a task
//! offered to it (`docs/tasks.md`, "Work any free agent can take"): the first of its agents
//! to claim it works it, and the A2A client follows it as it follows any task — `SUBMITTED`
//! while open, `WORKING` once claimed, back to `SUBMITTED` if a lease runs out. An agent id
//! never holds a `:`, so the two forms never name the same thing.

use switchboard_types::ErrorBody;
use switchboard_types::ErrorCode;
use switchboard_types::agents::{AgentQuery, AgentView};
use switchboard_types::ids::{AgentId, TeamId};
use switchboard_types::tasks::Task;

use crate::core::{Caller, Core, ask};
use crate::transport::common::ApiError;

/// What a role's interface is named by, before the role.
pub const ROLE_PREFIX: &str = "role:";

/// The member an interface URL names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Member {
    /// One agent: what is sent goes to it (`target_agent_id`).
    Agent(AgentId),
    /// Any agent of the role: what is sent is offered to them (`assignee_role`).
    Role(String),
}

impl Member {
    /// The member a path segment names (already percent-decoded).
    pub fn named(segment: String) -> Member {
        match segment.strip_prefix(ROLE_PREFIX) {
            Some(role) => Member::Role(role.to_owned()),
            None => Member::Agent(segment.into()),
        }
    }

    /// The path segment naming it (not yet percent-encoded).
    pub fn segment(&self) -> String {
        match self {
            Member::Agent(id) => id.to_string(),
            Member::Role(role) => format!("{ROLE_PREFIX}{role}"),
        }
    }

    /// Whether `task` was given to this member: targeted at the agent, or offered to the
    /// role (whoever claimed it since).
    pub fn was_given(&self, task: &Task) -> bool {
        match self {
            Member::Agent(id) => task.target_agent_id.as_deref() == Some(id.as_str()),
            Member::Role(role) => {
                task.target_agent_id.is_none() && task.assignee_role.as_deref() == Some(role)
            }
        }
    }

    /// Checks that the member exists in the team, as `caller` sees it: the agent, or at
    /// least one agent of the role (a role nobody has is no one to address; a typo would
    /// leave its tasks open for ever). Answers the member as the registry spells it.
    pub async fn find(
        self,
        core: &Core,
        caller: &Caller,
        team_id: TeamId,
    ) -> Result<Member, ApiError> {
        match self {
            Member::Agent(agent_id) => {
                let found = core
                    .dispatch(caller, ask::GetAgent { team_id, agent_id })
                    .await?;
                Ok(Member::Agent(found.agent.agent_id))
            }
            Member::Role(role) => {
                role_members(core, caller, team_id, &role).await?;
                Ok(Member::Role(role))
            }
        }
    }
}

/// The team's agents of `role`; `404 AGENT_NOT_FOUND` when it has none.
pub async fn role_members(
    core: &Core,
    caller: &Caller,
    team_id: TeamId,
    role: &str,
) -> Result<Vec<AgentView>, ApiError> {
    let query = AgentQuery::default();
    let list = core
        .dispatch(
            caller,
            ask::ListAgents {
                team_id: team_id.clone(),
                query,
            },
        )
        .await?;
    let members: Vec<AgentView> = list.agents.into_iter().filter(|a| a.role == role).collect();
    if members.is_empty() {
        return Err(ApiError(
            ErrorBody::new(
                ErrorCode::AgentNotFound,
                format!(
                    "no agent of team '{team_id}' has role '{role}': a role is reached at \
                     /a2a/{team_id}/{ROLE_PREFIX}{{role}} while one of its agents is registered"
                ),
            )
            .into(),
        ));
    }
    Ok(members)
}
