//! The operator's view of a team: every message that passed through it, and every task
//! it holds, for its team key (the console, or an operator with curl). Agents read their
//! own inbox and tasks instead; these views exist because a team key had no way to see
//! its team's conversation at all.

use serde::{Deserialize, Serialize};

use crate::decode::CommaList;
use crate::ids::AgentId;
use crate::messages::MessageView;
use crate::task_state::TaskStatus;

/// Query of `GET /v1/teams/{team_id}/messages`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams, utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
pub struct TrafficQuery {
    /// Only messages after this position (a previous page's `next_after`), oldest first.
    /// Without it: the newest `limit` messages, oldest first, so a viewer starts at the
    /// present and follows from there.
    pub after: Option<i64>,
    /// Page size, 1–100 (default 50).
    pub limit: Option<i64>,
}

/// Answer of `GET /v1/teams/{team_id}/messages`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TrafficPage {
    pub success: bool,
    /// Oldest first.
    pub entries: Vec<TrafficEntry>,
    /// Pass as `after` for what follows: the last entry's position (the request's `after`
    /// when nothing followed it).
    pub next_after: i64,
    /// Whether more messages follow this page already.
    pub more: bool,
}

/// One message of the team's traffic, as its team key sees it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TrafficEntry {
    /// Its place in the team's traffic (not a recipient's `seq`); the last entry's is the
    /// page's `next_after`. Entries come in the order they were committed: on SQLite
    /// positions increase; on PostgreSQL with several nodes writing, a message whose
    /// position was taken before another's but committed after it comes after it, with
    /// the smaller position. Following `next_after` shows every message once, either way.
    pub position: i64,
    /// The message as GET_MESSAGES shows it (`seq` absent and `read_status` false: it is
    /// no one's inbox entry here; `GET /v1/messages/{message_id}` says who read it).
    pub message: MessageView,
    /// Who it was addressed to.
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<String>))]
    pub recipient_agent_ids: Vec<AgentId>,
}

/// Query of `GET /v1/teams/{team_id}/tasks`: the team's tasks, newest first.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams, utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
pub struct TeamTaskQuery {
    /// Only these statuses, e.g. `in-progress,input-required`.
    #[cfg_attr(feature = "openapi", param(value_type = Option<String>, example = "in-progress,input-required"))]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Vec<TaskStatus>>))]
    pub status: Option<CommaList<TaskStatus>>,
    /// Page size, 1–100 (default 50).
    pub limit: Option<i64>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
}
