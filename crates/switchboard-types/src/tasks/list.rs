//! Listing an agent's tasks: `GET /v1/tasks`'s filters and answer.

use serde::{Deserialize, Serialize};

use super::Task;
use crate::decode::CommaList;
use crate::error::ErrorBody;
use crate::ids::AgentId;
use crate::messages::wire_enum;
use crate::task_state::TaskStatus;
use crate::validate::check_text;

wire_enum! {
    "lowercase";
    /// Which tasks `GET /v1/tasks` lists.
    pub enum TaskRole {
        /// Tasks the caller submitted.
        Originated,
        /// Tasks the caller is or was assigned.
        Assigned,
    }
}

/// Filters of `GET /v1/tasks`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams, utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
pub struct TaskQuery {
    /// `originated` or `assigned`; both when absent.
    pub role: Option<TaskRole>,
    /// Only these statuses, e.g. `in-progress,input-required`.
    #[cfg_attr(feature = "openapi", param(value_type = Option<String>, example = "in-progress,input-required"))]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Vec<TaskStatus>>))]
    pub status: Option<CommaList<TaskStatus>>,
    /// Page size, 1–100 (default 50). Newest first.
    pub limit: Option<i64>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
    /// Only tasks submitted with this `target_agent_id` (what the caller gave one member;
    /// an A2A interface lists its tasks this way).
    #[cfg_attr(feature = "openapi", param(example = "coder", value_type = Option<String>))]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub target_agent_id: Option<AgentId>,
    /// Only tasks offered to this role (`assignee_role`), open or claimed since: what the
    /// caller gave a role's agents (the role's A2A interface lists its tasks this way).
    #[cfg_attr(feature = "openapi", param(example = "coder"))]
    pub assignee_role: Option<String>,
}

impl TaskQuery {
    /// The filters' value rules (the status list and the target are checked as they are
    /// parsed).
    pub fn validate(&self) -> Result<(), ErrorBody> {
        if let Some(role) = &self.assignee_role {
            check_text("assignee_role", role, crate::agents::MAX_ROLE)?;
        }
        Ok(())
    }
}

/// Answer of `GET /v1/tasks`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskList {
    pub success: bool,
    pub tasks: Vec<Task>,
    /// Pass as `cursor` for the next page; null on the last page.
    pub next_cursor: Option<String>,
}
