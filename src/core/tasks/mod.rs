//! The task protocol of `003_…`: its seven message types, and tasks as durable state.
//!
//! A task is submitted as a [`TaskRequest`], assigned to one agent, and lives through
//! clarification rounds, handoffs, progress reports and a final result (the rules are
//! in [`state`]). Every change is one transaction that updates the task, appends an
//! event to its history, writes the notifications the protocol prescribes as inbox
//! entries (pushed live as frames named by their type), and queues the signed callback.
//!
//! **Notifications are messages.** A `TaskRequest` for the assignee, a `TaskResponse`
//! for the originator, … are inbox entries of `kind: task` whose `content.data` is the
//! protocol object with its `type`; the WebSocket sends them as frames of that type.
//! So replay, acks, the inbox query and read marks work for them unchanged.

pub mod callback_url;
mod ops;
mod registry_requests;
pub mod state;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::{IntoParams, ToSchema};

use super::messages::{CommaList, Content, Priority, null_as_default};
use super::time::Timestamp;
use crate::hub::FrameKind;
pub use state::{Action, Party, Refusal, TaskState, TaskStatus};

/// Longest task description, question or answer.
pub const MAX_TASK_TEXT: usize = 2000;
/// Longest handoff or cancel reason.
pub const MAX_REASON: usize = 1000;
/// Most required capabilities of one task.
pub const MAX_CAPABILITIES: usize = 32;
/// Longest callback URL.
pub const MAX_CALLBACK_URL: usize = 2048;

/// The seven message types of the task protocol: frame `type`s on the WebSocket, the
/// `type` of a task notification's `content.data`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaskFrame {
    TaskRequest,
    TaskResponse,
    HandoffNotification,
    ClarificationRequest,
    ClarificationResponse,
    CallbackNotification,
    ErrorMessage,
}

impl TaskFrame {
    pub const ALL: [TaskFrame; 7] = [
        TaskFrame::TaskRequest,
        TaskFrame::TaskResponse,
        TaskFrame::HandoffNotification,
        TaskFrame::ClarificationRequest,
        TaskFrame::ClarificationResponse,
        TaskFrame::CallbackNotification,
        TaskFrame::ErrorMessage,
    ];

    pub fn name(self) -> &'static str {
        match self {
            TaskFrame::TaskRequest => "TaskRequest",
            TaskFrame::TaskResponse => "TaskResponse",
            TaskFrame::HandoffNotification => "HandoffNotification",
            TaskFrame::ClarificationRequest => "ClarificationRequest",
            TaskFrame::ClarificationResponse => "ClarificationResponse",
            TaskFrame::CallbackNotification => "CallbackNotification",
            TaskFrame::ErrorMessage => "ErrorMessage",
        }
    }

    pub fn from_name(name: &str) -> Option<TaskFrame> {
        TaskFrame::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// A task notification's frame: `(kind, body)` where the body holds the protocol
/// object's fields (without `type`), the message id and the time. `None` if `content`
/// is not a task notification.
pub(crate) fn notice_frame(
    message_id: &str,
    timestamp: Timestamp,
    content: &Content,
) -> Option<(FrameKind, String)> {
    let name = content.data.get("type")?.as_str()?;
    let frame = TaskFrame::from_name(name)?;
    let mut body = Map::with_capacity(content.data.len() + 1);
    for (key, value) in &content.data {
        if key != "type" {
            body.insert(key.clone(), value.clone());
        }
    }
    body.insert("message_id".into(), Value::String(message_id.to_owned()));
    body.insert(
        "timestamp".into(),
        serde_json::to_value(timestamp).unwrap_or(Value::Null),
    );
    let body = serde_json::to_string(&body).ok()?;
    Some((FrameKind::Typed(frame.name()), body))
}

/// `TaskRequest`: ask for work to be done (body of `POST /v1/tasks`, or a frame).
///
/// With `target_agent_id` the task goes to that agent; otherwise the available member
/// with the best match of `required_capabilities` gets it (connected agents first, then
/// the one with the fewest open tasks). Without either, and with a description
/// containing "register me as an agent" or "find an agent", the server itself handles
/// it (the registry by message).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskRequest {
    /// 1–64 of `A-Z a-z 0-9 . _ -`, unique in the team; generated when absent.
    #[serde(default)]
    #[schema(example = "summarise-q3")]
    pub task_id: Option<String>,
    /// What to do, 1–2000 characters.
    #[schema(example = "Summarise the Q3 incident reports")]
    pub description: String,
    /// Task data: any JSON object (`{}` when not given).
    #[serde(default, deserialize_with = "null_as_default")]
    #[schema(value_type = Object)]
    pub data: Map<String, Value>,
    /// Must be the calling agent.
    #[schema(example = "planner")]
    pub originating_agent_id: String,
    /// Where status changes are reported: an http(s) URL (POSTed a signed
    /// `CallbackNotification`) or a member's agent id (pushed to it).
    #[serde(default)]
    pub callback_url: Option<String>,
    /// Defaults to `normal`.
    #[serde(default)]
    pub priority: Option<Priority>,
    /// Capabilities the assignee should have (case-insensitive), at most 32.
    #[serde(default, deserialize_with = "null_as_default")]
    #[schema(example = json!(["summarise"]))]
    pub required_capabilities: Vec<String>,
    /// Give the task to this member (it must accept tasks: not `unavailable`, and its
    /// communication enabled).
    #[serde(default)]
    pub target_agent_id: Option<String>,
}

/// The `status` of a [`TaskResponse`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum TaskResponseStatus {
    Success,
    Failed,
    InProgress,
}

/// `TaskResponse`: how a task is doing, from the agent working on it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct TaskResponse {
    pub task_id: String,
    /// Any JSON value (usually an object); null when there is none.
    #[schema(value_type = Object)]
    pub result_data: Value,
    pub status: TaskResponseStatus,
    /// The agent completing the task (`switchboard` for the registry by message).
    pub agent_id: String,
}

/// `HandoffNotification`: the task moved from one agent to another.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct HandoffNotification {
    pub task_id: String,
    /// The assignee before the handoff.
    pub current_agent_id: String,
    pub new_agent_id: String,
    pub reason: String,
    /// Who handed it off (the old assignee or the originator).
    pub handed_off_by: String,
}

/// `ClarificationRequest`: the assignee needs an answer before it can go on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ClarificationRequest {
    pub task_id: String,
    /// Answer with this id.
    pub clarification_id: String,
    pub question: String,
    pub requested_by: String,
}

/// `ClarificationResponse`: the originator's answer, added to the task's context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ClarificationResponse {
    pub task_id: String,
    pub clarification_id: String,
    pub answer: String,
    pub response_provided_by: String,
}

/// The `status` of a [`CallbackNotification`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum CallbackStatus {
    Complete,
    Failed,
    InProgress,
}

/// `CallbackNotification`: a task's status change, POSTed to its callback URL (signed)
/// or pushed to its callback agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CallbackNotification {
    pub task_id: String,
    #[schema(value_type = Object)]
    pub result_data: Value,
    pub status: CallbackStatus,
    /// The callback URL or agent id.
    pub sent_to: String,
    /// The task's own status after the change.
    pub task_status: TaskStatus,
    /// What happened (the task event's `kind`).
    pub event: String,
    /// The task event's sequence number: callbacks of a task are sent in this order.
    pub event_seq: i64,
    /// The task's current assignee.
    pub assignee_agent_id: Option<String>,
    pub timestamp: Timestamp,
}

/// `ErrorMessage`: why a task (or a frame) failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ErrorMessage {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// One of the standard error codes.
    pub error_code: String,
    pub error_message: String,
    pub originating_agent_id: String,
}

/// Body of `POST /v1/tasks/{task_id}/handoff`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Handoff {
    /// A member that accepts tasks, not the current assignee.
    pub new_agent_id: String,
    /// Why, 1–1000 characters.
    pub reason: String,
    /// Optional: the assignee the caller believes the task has; if it has another, the
    /// handoff is refused (`INVALID_TASK_TRANSITION`) instead of taking the task from
    /// someone the caller did not mean.
    #[serde(default)]
    pub current_agent_id: Option<String>,
}

/// Body of `POST /v1/tasks/{task_id}/clarifications`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Clarify {
    /// 1–2000 characters.
    pub question: String,
}

/// Body of `POST /v1/tasks/{task_id}/clarifications/{clarification_id}/answer`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Answer {
    /// 1–2000 characters.
    pub answer: String,
}

/// Body of `POST /v1/tasks/{task_id}/result`: a progress report or the final result.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskResult {
    /// `in-progress` for an update; `success` or `failed` ends the task.
    pub status: TaskResponseStatus,
    /// Any JSON value (null when not given).
    #[serde(default)]
    #[schema(value_type = Object)]
    pub result_data: Value,
}

/// Body of `POST /v1/tasks/{task_id}/cancel`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Cancel {
    /// Why (at most 1000 characters).
    #[serde(default)]
    pub reason: Option<String>,
}

/// One answered clarification round: part of the task's context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ClarificationRound {
    pub clarification_id: String,
    pub question: String,
    pub requested_by: String,
    pub answer: String,
    pub response_provided_by: String,
    pub answered_at: Timestamp,
}

/// What became of a callback POST.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum DeliveryState {
    /// Not delivered yet; will be tried again.
    Pending,
    /// The receiver answered 2xx.
    Delivered,
    /// Every attempt failed; given up.
    Failed,
}

/// One CallbackNotification POSTed (or being POSTed) to the task's callback URL.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CallbackDelivery {
    /// Also sent as the `Switchboard-Delivery` header.
    pub delivery_id: i64,
    /// The task event it reports.
    pub event_seq: i64,
    pub state: DeliveryState,
    pub attempts: i64,
    /// The receiver's last HTTP status, if it answered.
    pub last_status: Option<i64>,
    pub last_error: Option<String>,
    /// When it was delivered or given up.
    pub finished_at: Option<Timestamp>,
}

/// A task as its parties see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Task {
    pub task_id: String,
    pub description: String,
    #[schema(value_type = Object)]
    pub data: Map<String, Value>,
    pub originating_agent_id: String,
    /// Null when nobody suitable was found.
    pub assignee_agent_id: Option<String>,
    pub status: TaskStatus,
    pub priority: Priority,
    pub required_capabilities: Vec<String>,
    pub target_agent_id: Option<String>,
    pub callback_url: Option<String>,
    /// The open question while `status` is `input-required`.
    pub open_clarification: Option<ClarificationRequest>,
    /// Answered clarification rounds, oldest first.
    pub context: Vec<ClarificationRound>,
    /// The last reported result data.
    #[schema(value_type = Object)]
    pub result_data: Value,
    /// The latest callback's delivery (URL callbacks only).
    pub callback_delivery: Option<CallbackDelivery>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// One entry of a task's history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct TaskEvent {
    /// 1, 2, 3, … per task.
    pub seq: i64,
    /// submitted | assignment_failed | clarification_requested | clarification_answered
    /// | handed_off | progress | succeeded | failed | canceled
    pub kind: String,
    /// Who caused it.
    pub agent_id: Option<String>,
    /// The task's status after it.
    pub status: TaskStatus,
    /// What it carried (question, answer, reason, result, new assignee, …).
    #[schema(value_type = Object)]
    pub data: Map<String, Value>,
    pub timestamp: Timestamp,
}

/// Answer of `GET /v1/tasks/{task_id}`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TaskDetail {
    pub success: bool,
    pub task: Task,
    /// The history, oldest first.
    pub events: Vec<TaskEvent>,
    /// Every callback POST of the task, oldest first, with its outcome.
    pub callbacks: Vec<CallbackDelivery>,
}

/// Answer of a task action (handoff, clarification, answer, result, cancel).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TaskUpdated {
    pub success: bool,
    /// The task after the action.
    pub task: Task,
}

/// Answer of `POST /v1/tasks`: the protocol's response to a TaskRequest.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TaskSubmitted {
    /// False when the task failed (nobody suitable) or a registry request was refused.
    pub success: bool,
    /// `in-progress` naming the assignee, or `failed`; for the registry by message,
    /// `success` or `failed` with the document's texts.
    pub task_response: TaskResponse,
    /// Why it failed.
    pub error_message: Option<ErrorMessage>,
    /// The stored task (absent for the registry by message, which stores no task).
    pub task: Option<Task>,
}

/// Which tasks `GET /v1/tasks` lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum TaskRole {
    /// Tasks the caller submitted.
    Originated,
    /// Tasks the caller is or was assigned.
    Assigned,
}

/// Filters of `GET /v1/tasks`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, IntoParams, ToSchema)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct TaskQuery {
    /// `originated` or `assigned`; both when absent.
    pub role: Option<TaskRole>,
    /// Only these statuses, e.g. `in-progress,input-required`.
    #[param(value_type = Option<String>, example = "in-progress,input-required")]
    #[schema(value_type = Option<Vec<TaskStatus>>)]
    pub status: Option<CommaList<TaskStatus>>,
    /// Page size, 1–100 (default 50). Newest first.
    pub limit: Option<i64>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// Answer of `GET /v1/tasks`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TaskList {
    pub success: bool,
    pub tasks: Vec<Task>,
    /// Pass as `cursor` for the next page; null on the last page.
    pub next_cursor: Option<String>,
}

/// Answer of the team's callback secret endpoints.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CallbackSecret {
    pub success: bool,
    pub team_id: String,
    /// The HMAC-SHA256 key of the `Switchboard-Signature` header.
    pub secret: String,
    pub rotated_at: Timestamp,
}

/// Settings of the task protocol.
#[derive(Debug, Clone, Copy, Default)]
pub struct TaskSettings {
    /// Accept callback URLs on loopback and private networks (tests, closed networks).
    pub allow_private_callbacks: bool,
}

/// A task as stored.
#[derive(Debug, Clone)]
pub struct TaskRecord {
    pub pk: i64,
    pub team_pk: i64,
    pub task_id: String,
    pub description: String,
    pub data: Map<String, Value>,
    pub originator_pk: i64,
    pub assignee_pk: Option<i64>,
    pub callback_url: Option<String>,
    pub priority: Priority,
    pub required_capabilities: Vec<String>,
    pub target_agent_id: Option<String>,
    pub status: TaskStatus,
    /// The open question (`clarification_id`, question) while input-required; it was
    /// asked by the assignee (a handoff drops it).
    pub clarification: Option<(String, String)>,
    pub context: Vec<ClarificationRound>,
    pub result_data: Value,
    pub callback_delivery: Option<CallbackDelivery>,
    /// Bumped by every change; the change's event has this sequence number.
    pub version: i64,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// A task event as stored.
#[derive(Debug, Clone)]
pub struct TaskEventRecord {
    pub seq: i64,
    pub kind: &'static str,
    pub actor_pk: Option<i64>,
    pub status: TaskStatus,
    pub data: Map<String, Value>,
    pub created_at: Timestamp,
}

/// A stored event, read back (its kind as text).
#[derive(Debug, Clone)]
pub struct StoredTaskEvent {
    pub seq: i64,
    pub kind: String,
    pub actor_pk: Option<i64>,
    pub status: TaskStatus,
    pub data: Map<String, Value>,
    pub created_at: Timestamp,
}

/// The task protocol's state held in memory beside the store.
#[derive(Default)]
pub struct TaskRuntime {
    pub settings: TaskSettings,
    /// Open tasks per assignee, for balancing assignment; changed after commits only.
    open: std::sync::Mutex<std::collections::HashMap<i64, i64>>,
    /// Woken when a callback was queued, so the sender does not wait for its next poll.
    pub callbacks_queued: tokio::sync::Notify,
}

impl TaskRuntime {
    pub fn new(settings: TaskSettings, open: Vec<(i64, i64)>) -> TaskRuntime {
        TaskRuntime {
            settings,
            open: std::sync::Mutex::new(open.into_iter().collect()),
            callbacks_queued: tokio::sync::Notify::new(),
        }
    }

    fn open_tasks(&self, agent_pk: i64) -> i64 {
        self.open
            .lock()
            .map(|open| open.get(&agent_pk).copied().unwrap_or(0))
            .unwrap_or(0)
    }

    fn adjust_open(&self, agent_pk: i64, delta: i64) {
        if let Ok(mut open) = self.open.lock() {
            let count = open.entry(agent_pk).or_insert(0);
            *count = (*count + delta).max(0);
        }
    }
}

/// The agent id the server itself answers as (the registry by message, failed
/// assignments).
pub const SERVER_AGENT_ID: &str = "switchboard";
