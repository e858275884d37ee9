//! Communication metrics of a team (the contract's F9, "performance monitoring via
//! communication metrics").

use crate::ids::{AgentId, TeamId};
use serde::{Deserialize, Serialize};

use crate::time::Timestamp;

/// One agent's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentCommMetrics {
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub agent_id: AgentId,
    /// Messages of every kind it sent (messages, responses, broadcasts, requests).
    pub sent: i64,
    /// Inbox entries it received.
    pub received: i64,
    /// Of those, not marked read.
    pub unread: i64,
    /// Responses it gave (RESPOND_TO_MESSAGE).
    pub responses_given: i64,
    /// Median time from a message to this agent's response to it, in milliseconds, over
    /// the team's newest 10,000 responses; null when it gave none of them.
    pub median_response_time_ms: Option<f64>,
}

/// Answer of `GET /v1/teams/{team_id}/metrics`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TeamMetrics {
    pub success: bool,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub team_id: TeamId,
    /// Current members, by agent id.
    pub agents: Vec<AgentCommMetrics>,
    pub generated_at: Timestamp,
}
