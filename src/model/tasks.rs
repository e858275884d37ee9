//! Tasks as the store reads and writes them: the task, its history, a change to write,
//! a page's query, and the callbacks due.

use serde_json::{Map, Value};
use switchboard_types::ids::{AgentId, ClarificationId, TaskId};
use switchboard_types::ids::{AgentPk, TaskPk, TeamPk};
use switchboard_types::messages::Priority;
use switchboard_types::task_state::TaskStatus;
use switchboard_types::tasks::{
    CallbackDelivery, ClarificationRound, DeliveryState, TaskEventKind, TaskRole,
};
use switchboard_types::time::Timestamp;

/// A task as stored.
#[derive(Debug, Clone)]
pub struct TaskRecord {
    pub pk: TaskPk,
    pub team_pk: TeamPk,
    pub task_id: TaskId,
    pub description: String,
    pub data: Map<String, Value>,
    pub originator_pk: AgentPk,
    pub assignee_pk: Option<AgentPk>,
    pub callback_url: Option<String>,
    pub priority: Priority,
    pub required_capabilities: Vec<String>,
    pub target_agent_id: Option<AgentId>,
    pub status: TaskStatus,
    /// Whether notifications for the originator go to its inbox: not when it follows the
    /// task over the transport it created it by (A2A), where an inbox entry per change
    /// would only pile up unread.
    pub originator_inbox: bool,
    /// The open question (`clarification_id`, question) while input-required; it was
    /// asked by the assignee (a handoff drops it).
    pub clarification: Option<(ClarificationId, String)>,
    pub context: Vec<ClarificationRound>,
    pub result_data: Value,
    pub callback_delivery: Option<CallbackDelivery>,
    /// Bumped by every change; the change's event has this sequence number.
    pub version: i64,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// The causal chain it extends (`parent_task_id`; `None`: it starts one).
    pub chain: Option<super::Chain>,
    /// Its place in the trace it joined (`None`: its ordered id names its own trace).
    pub trace: Option<super::MessageTrace>,
    /// Bytes of data its history's entries hold (what the history bound counts).
    pub history_bytes: i64,
    /// The role it is offered to (`None`: given to an agent).
    pub assignee_role: Option<String>,
    /// How many times it was claimed.
    pub attempts: i64,
    /// The current claim's lease length (offered tasks, once claimed).
    pub lease_seconds: Option<i64>,
    /// When the current claim ends without progress (claimed and in progress only).
    pub lease_expires_at: Option<Timestamp>,
}

impl TaskRecord {
    /// Sets the claim's lease for the task as it now is: running from `now` while a
    /// claimed task is in progress (so each change of it — progress, an answer, a
    /// handoff — starts the clock again), stopped while its question waits for the
    /// originator, none for a task given to an agent, an open one or a finished one.
    pub fn set_lease(&mut self, now: Timestamp) {
        self.lease_expires_at = match (self.status, self.lease_seconds) {
            (TaskStatus::InProgress, Some(seconds))
                if self.assignee_role.is_some() && self.assignee_pk.is_some() =>
            {
                Some(Timestamp::from_micros(
                    now.micros()
                        .saturating_add(seconds.saturating_mul(1_000_000)),
                ))
            }
            _ => None,
        };
    }

    /// Makes `seconds` the claim's lease (for the changes that follow too) and starts it
    /// at the task's last change: a claim, and an explicit extend.
    pub fn start_lease(&mut self, seconds: u64) {
        self.lease_seconds = Some(i64::try_from(seconds).unwrap_or(i64::MAX));
        self.set_lease(self.updated_at);
    }

    /// Its chain: the stored one, or itself when it started one.
    pub fn chain(&self) -> super::Chain {
        self.chain.clone().unwrap_or_else(|| {
            super::Chain::first(self.task_id.as_str(), self.originator_pk, self.created_at)
        })
    }
}

/// A task as of one moment: its row, its history and its callbacks, read in one
/// snapshot. Read apart, a change committed between the reads gave a status older than
/// the history beside it, and a waiter that took the history's newest entry as its cursor
/// then waited for a change that had already happened (A2A `SendMessage` hung 60 s).
#[derive(Debug, Clone)]
pub struct TaskSnapshot {
    pub task: TaskRecord,
    /// Oldest first.
    pub events: Vec<TaskEventRecord>,
    /// Callbacks to the task's `callback_url`, oldest first.
    pub callbacks: Vec<CallbackDelivery>,
}

/// An entry of a task's history.
#[derive(Debug, Clone)]
pub struct TaskEventRecord {
    pub seq: i64,
    pub kind: TaskEventKind,
    pub actor_pk: Option<AgentPk>,
    pub status: TaskStatus,
    pub data: Map<String, Value>,
    pub created_at: Timestamp,
}

/// A change of a task, written with its event (and its callback) in one statement.
#[derive(Debug, Clone)]
pub struct TaskWrite {
    /// The task after the change.
    pub task: TaskRecord,
    /// The version the change was decided on; `None` for a new task.
    pub expected_version: Option<i64>,
    pub event: TaskEventRecord,
    /// `(url, body)` of the `CallbackNotification` to queue.
    pub callback: Option<(String, String)>,
    /// The budgets a new task spends from (see [`super::Charge`]).
    pub charges: Vec<super::Charge>,
}

/// Which tasks of an agent a list shows.
#[derive(Debug, Clone)]
pub struct TaskListSpec {
    pub role: Option<TaskRole>,
    pub statuses: Vec<TaskStatus>,
    /// Tasks older than this one (a cursor).
    pub before: Option<TaskPk>,
    /// Only tasks submitted with this `target_agent_id`.
    pub target: Option<AgentId>,
    /// Only tasks offered to this role.
    pub assignee_role: Option<String>,
    pub limit: i64,
}

/// A callback that is due for an attempt.
#[derive(Debug, Clone)]
pub struct DueCallback {
    pub pk: i64,
    pub task_pk: TaskPk,
    pub team_pk: TeamPk,
    pub url: String,
    pub event_seq: i64,
    /// Empty for a webhook's delivery: rendered when sent.
    pub body: String,
    pub attempts: i64,
    /// The task webhook it is for; `None` for the task's `callback_url`.
    pub webhook_pk: Option<i64>,
    /// Its task's id and trace: the POST carries the task's `traceparent`.
    pub task_id: String,
    pub trace: Option<super::MessageTrace>,
    /// When it was taken up for this attempt (the start of the attempt's span).
    pub taken_at: Timestamp,
}

/// The outcome of one callback attempt; pending ones are tried again at
/// `next_attempt_at`.
#[derive(Debug, Clone)]
pub struct Attempt {
    pub callback_pk: i64,
    pub task_pk: TaskPk,
    pub state: DeliveryState,
    pub attempts: i64,
    pub next_attempt_at: Timestamp,
    pub last_status: Option<i64>,
    pub last_error: Option<String>,
    pub finished_at: Option<Timestamp>,
    /// The same outcome as the task shows it.
    pub delivery: CallbackDelivery,
}
