//! The loop guard's team settings.
//!
//! Agents that answer each other can talk in circles for hours (the case we were told
//! of: a three-agent loop, 398 messages in ten hours, that passed a pairwise check). The
//! server sees every hop, so it counts them: each message, response, publish and task
//! carries the length of the causal chain it extends, and a team refuses a send that
//! would make a chain too long, or that would go round the same agents in the same
//! order once too often (`LOOP_DETECTED`). The rules are in `docs/loop-guard.md`.

use serde::{Deserialize, Serialize};

use crate::error::ErrorBody;
use crate::ids::AgentId;

/// Longest chain a team allows unless it says otherwise.
pub const DEFAULT_MAX_HOPS: u32 = 64;
/// Highest `max_hops` a team may set (a chain longer than this is a loop by any measure).
pub const MAX_MAX_HOPS: u32 = 100_000;
/// How many sends going round the same agents stop a chain, unless the team says otherwise.
pub const DEFAULT_CYCLE_MESSAGES: u32 = 12;
/// Fewest `cycle_messages` a team may set (two turns of a two-agent cycle).
pub const MIN_CYCLE_MESSAGES: u32 = 4;
/// Most `cycle_messages` a team may set: what a message remembers of its chain.
pub const MAX_CYCLE_MESSAGES: u32 = 63;
/// The window of the cycle rule unless the team says otherwise: an hour.
pub const DEFAULT_CYCLE_WINDOW_SECONDS: u64 = 3_600;
/// Longest window a team may set: a week.
pub const MAX_CYCLE_WINDOW_SECONDS: u64 = 7 * 24 * 3_600;
/// Most distinct agents in a cycle the rule looks for.
pub const MAX_CYCLE_AGENTS: usize = 8;

/// A team's loop guard (`PATCH /v1/teams/{team_id}` with `loop_guard` replaces it; a
/// field left out takes its default).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LoopGuard {
    /// Longest causal chain: the send that would be hop `max_hops + 1` of its chain is
    /// refused. `0` switches the rule off.
    #[serde(default = "default_max_hops")]
    #[cfg_attr(feature = "openapi", schema(example = 64, maximum = 100000))]
    pub max_hops: u32,
    /// The cycle rule: a send is refused when it and the `cycle_messages` sends before it
    /// in its chain go round the same 2–8 agents in the same order (each sent by the agent
    /// that sent the one a cycle earlier), at least twice round, all within
    /// `cycle_window_seconds`. `0` switches the rule off; otherwise 4–63.
    #[serde(default = "default_cycle_messages")]
    #[cfg_attr(feature = "openapi", schema(example = 12, maximum = 63))]
    pub cycle_messages: u32,
    /// How recent the first of those sends must be for the cycle rule to apply.
    #[serde(default = "default_cycle_window")]
    #[cfg_attr(
        feature = "openapi",
        schema(example = 3600, minimum = 1, maximum = 604800)
    )]
    pub cycle_window_seconds: u64,
    /// A member told in its inbox (a message from `switchboard`) whenever the guard stops
    /// a chain; `null`: nobody.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub supervisor_agent_id: Option<AgentId>,
}

fn default_max_hops() -> u32 {
    DEFAULT_MAX_HOPS
}

fn default_cycle_messages() -> u32 {
    DEFAULT_CYCLE_MESSAGES
}

fn default_cycle_window() -> u64 {
    DEFAULT_CYCLE_WINDOW_SECONDS
}

impl Default for LoopGuard {
    fn default() -> Self {
        LoopGuard {
            max_hops: DEFAULT_MAX_HOPS,
            cycle_messages: DEFAULT_CYCLE_MESSAGES,
            cycle_window_seconds: DEFAULT_CYCLE_WINDOW_SECONDS,
            supervisor_agent_id: None,
        }
    }
}

impl LoopGuard {
    /// The value rules (the supervisor's membership is the server's to check).
    pub fn validate(&self) -> Result<(), ErrorBody> {
        if self.max_hops > MAX_MAX_HOPS {
            return Err(ErrorBody::validation(
                "loop_guard.max_hops",
                format!("loop_guard.max_hops must be from 0 (off) to {MAX_MAX_HOPS}"),
            ));
        }
        if self.cycle_messages != 0
            && !(MIN_CYCLE_MESSAGES..=MAX_CYCLE_MESSAGES).contains(&self.cycle_messages)
        {
            return Err(ErrorBody::validation(
                "loop_guard.cycle_messages",
                format!(
                    "loop_guard.cycle_messages must be 0 (off) or from {MIN_CYCLE_MESSAGES} to {MAX_CYCLE_MESSAGES}"
                ),
            ));
        }
        if !(1..=MAX_CYCLE_WINDOW_SECONDS).contains(&self.cycle_window_seconds) {
            return Err(ErrorBody::validation(
                "loop_guard.cycle_window_seconds",
                format!(
                    "loop_guard.cycle_window_seconds must be from 1 to {MAX_CYCLE_WINDOW_SECONDS}"
                ),
            ));
        }
        if let Some(id) = &self.supervisor_agent_id {
            id.check("loop_guard.supervisor_agent_id")?;
        }
        Ok(())
    }
}

/// Which rule of the guard stopped a chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum LoopRule {
    /// The chain would have been longer than `max_hops`.
    MaxHops,
    /// The chain kept going round the same agents in the same order.
    Cycle,
}

impl LoopRule {
    pub fn as_str(self) -> &'static str {
        match self {
            LoopRule::MaxHops => "max_hops",
            LoopRule::Cycle => "cycle",
        }
    }
}

/// A send the guard refused: the `details` of its `LOOP_DETECTED`, and what the team's
/// watchers and supervisor are told.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LoopStopped {
    pub rule: LoopRule,
    /// The agent whose send was refused.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub agent_id: AgentId,
    /// The chain's length had the send been accepted.
    pub chain_length: u32,
    /// The team's `max_hops` when the send was refused.
    pub max_hops: u32,
    /// The id of the chain's first message (a chain of messages).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_message_id: Option<String>,
    /// The id of the chain's first task (a chain of tasks, `parent_task_id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_task_id: Option<String>,
    /// The cycle, in the order it goes round, starting with the refused agent (`cycle`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<String>))]
    pub cycle_agent_ids: Vec<AgentId>,
    /// Who built the chain: the agents of its last sends, most sends first. The refused
    /// agent is the one that met the limit, not necessarily the one to blame.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<String>))]
    pub chain_agent_ids: Vec<AgentId>,
}
