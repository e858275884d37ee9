//! Approvals as stored (`docs/approvals.md`).

use switchboard_types::approvals::{ApprovalStatus, DecidedWith};
use switchboard_types::ids::{AgentPk, ApprovalId, TaskPk, TeamPk};
use switchboard_types::time::Timestamp;

/// An approval (`pk` is ignored when one is added).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalRecord {
    pub pk: i64,
    pub team_pk: TeamPk,
    pub approval_id: ApprovalId,
    pub asker_pk: AgentPk,
    /// The task it belongs to, and that task's id as the asker named it.
    pub task_pk: Option<TaskPk>,
    pub task_id: Option<String>,
    pub summary: String,
    pub details: Option<String>,
    pub options: Vec<String>,
    pub status: ApprovalStatus,
    pub decision: Option<String>,
    pub comment: Option<String>,
    pub decider_pk: Option<AgentPk>,
    pub decided_with: Option<DecidedWith>,
    pub created_at: Timestamp,
    pub expires_at: Timestamp,
    pub decided_at: Option<Timestamp>,
}

/// A decision to write, if the approval is still pending and unexpired at `at`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalDecision {
    pub pk: i64,
    pub decision: String,
    pub comment: Option<String>,
    pub decider_pk: Option<AgentPk>,
    pub decided_with: DecidedWith,
    pub at: Timestamp,
}

/// Which of a team's approvals a list shows, newest first.
#[derive(Debug, Clone)]
pub struct ApprovalListSpec {
    pub status: Option<ApprovalStatus>,
    pub asker: Option<AgentPk>,
    pub task: Option<TaskPk>,
    /// Only those older than this row (a cursor).
    pub before: Option<i64>,
    pub limit: i64,
    /// What a status filter is decided as of: a pending approval past its time is expired.
    pub now: Timestamp,
}
