//! The task protocol of `003_…`: its seven message types, the REST bodies of a task's
//! life, and tasks as their parties see them.

use crate::ids::{AgentId, ClarificationId, TaskId, TaskRef};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use crate::callbacks::{CallbackDelivery, CallbackSecret, DeliveryState};
use crate::decode::null_as_default;
use crate::error::ErrorBody;
use crate::messages::{Priority, wire_enum};
use crate::task_state::TaskStatus;
use crate::time::Timestamp;

mod list;
use crate::validate::{
    CapabilityLimits, check_message_text, check_optional, check_text, clean_capabilities,
};
pub use list::{TaskList, TaskQuery, TaskRole};

/// Longest task description, question or answer.
pub const MAX_TASK_TEXT: usize = 2000;
/// Longest handoff or cancel reason.
pub const MAX_REASON: usize = 1000;
/// Longest callback URL.
pub const MAX_CALLBACK_URL: usize = 2048;
/// What a task may require. Narrower than what an agent may list
/// ([`crate::agents::AGENT_CAPABILITY_LIMITS`]): a task names the few skills it needs.
pub const REQUIRED_CAPABILITY_LIMITS: CapabilityLimits = CapabilityLimits {
    max_count: 32,
    max_len: 64,
};
/// The agent id the server itself answers as (the registry by message, failed
/// assignments).
pub const SERVER_AGENT_ID: &str = "switchboard";

/// The seven message types of the task protocol: frame `type`s on the WebSocket, the
/// `type` of a task notification's `content.data`.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::VariantArray,
)]
pub enum TaskFrame {
    /// A task offered to the recipient's role (an extension of the protocol): claim it
    /// with `POST /v1/tasks/claim`; another agent of the role may be first.
    TaskOffer,
    TaskRequest,
    TaskResponse,
    HandoffNotification,
    ClarificationRequest,
    ClarificationResponse,
    CallbackNotification,
    ErrorMessage,
}

impl TaskFrame {
    /// The type's name, as the document writes it.
    pub fn name(self) -> &'static str {
        self.into()
    }

    pub fn from_name(name: &str) -> Option<TaskFrame> {
        name.parse().ok()
    }
}

wire_enum! {
    "snake_case";
    /// What happened to a task: the `kind` of an entry of its history.
    pub enum TaskEventKind {
        /// Submitted and assigned.
        Submitted,
        /// Submitted, but nobody could take it.
        AssignmentFailed,
        ClarificationRequested,
        ClarificationAnswered,
        HandedOff,
        Progress,
        Succeeded,
        Failed,
        Canceled,
        /// An agent of the task's role claimed it.
        Claimed,
        /// Its claimer gave it back, or was removed: open again.
        Released,
        /// Its claimer's lease ran out: open again, or failed after the team's
        /// `max_attempts`.
        LeaseExpired,
        /// Its claimer renewed the lease without reporting progress.
        LeaseExtended,
        /// A party asked a person to decide something about it (`docs/approvals.md`);
        /// `data` holds the approval.
        ApprovalRequested,
        /// That approval was decided or expired; `data` holds the outcome.
        ApprovalDecided,
    }
}

/// `TaskRequest`: ask for work to be done (body of `POST /v1/tasks`, or a frame).
///
/// With `target_agent_id` the task goes to that agent; with `assignee_role` it is offered
/// to the agents of that role and waits, `open`, until one of them claims it
/// (`POST /v1/tasks/claim`); otherwise the available member with the best match of
/// `required_capabilities` gets it (connected agents first, then the one with the fewest
/// open tasks). Without either, and with a description
/// containing "register me as an agent" or "find an agent", the server itself handles
/// it (the registry by message).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TaskRequest {
    /// 1–64 of `A-Z a-z 0-9 . _ -`, unique among the tasks of its originator (another
    /// agent may use the same id for its own task); generated when absent.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(example = "summarise-q3"))]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub task_id: Option<TaskId>,
    /// What to do, 1–2000 characters.
    #[cfg_attr(
        feature = "openapi",
        schema(example = "Summarise the Q3 incident reports")
    )]
    pub description: String,
    /// Task data: any JSON object (`{}` when not given).
    #[serde(default, deserialize_with = "null_as_default")]
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub data: Map<String, Value>,
    /// Must be the calling agent.
    #[cfg_attr(feature = "openapi", schema(example = "planner"))]
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub originating_agent_id: AgentId,
    /// Where status changes are reported: an http(s) URL (POSTed a signed
    /// `CallbackNotification`) or a member's agent id (pushed to it).
    #[serde(default)]
    pub callback_url: Option<String>,
    /// Defaults to `normal`.
    #[serde(default)]
    pub priority: Option<Priority>,
    /// Capabilities the assignee should have (case-insensitive), at most 32.
    #[serde(default, deserialize_with = "null_as_default")]
    #[cfg_attr(feature = "openapi", schema(example = json!(["summarise"])))]
    pub required_capabilities: Vec<String>,
    /// Give the task to this member (it must accept tasks: not `unavailable`, and its
    /// communication enabled).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub target_agent_id: Option<AgentId>,
    /// The task this one is part of (its id, or `id@originator`; the caller must be its
    /// originator or an assignee): the loop guard counts the chain of tasks it makes
    /// (an extension of the protocol; A2A's `referenceTaskIds`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub parent_task_id: Option<TaskRef>,
    /// Offer the task to any agent of this role (1–100 characters, as agents' roles are
    /// written) instead of choosing one: it is `open` until one claims it, and comes back
    /// when its claimer's lease runs out (an extension of the protocol). Not with
    /// `target_agent_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(example = "coder"))]
    pub assignee_role: Option<String>,
}

wire_enum! {
    "kebab-case";
    /// The `status` of a [`TaskResponse`].
    pub enum TaskResponseStatus { Success, Failed, InProgress }
}

/// `TaskResponse`: how a task is doing, from the agent working on it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskResponse {
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub task_id: TaskId,
    /// Any JSON value (usually an object); null when there is none.
    #[cfg_attr(feature = "openapi", schema(value_type = Value))]
    pub result_data: Value,
    pub status: TaskResponseStatus,
    /// The agent completing the task (`switchboard` for the registry by message).
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub agent_id: AgentId,
}

/// `HandoffNotification`: the task moved from one agent to another.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HandoffNotification {
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub task_id: TaskId,
    /// The assignee before the handoff.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub current_agent_id: AgentId,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub new_agent_id: AgentId,
    pub reason: String,
    /// Who handed it off (the old assignee or the originator).
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub handed_off_by: AgentId,
}

/// `ClarificationRequest`: the assignee needs an answer before it can go on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ClarificationRequest {
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub task_id: TaskId,
    /// Answer with this id.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub clarification_id: ClarificationId,
    pub question: String,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub requested_by: AgentId,
}

/// `ClarificationResponse`: the originator's answer, added to the task's context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ClarificationResponse {
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub task_id: TaskId,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub clarification_id: ClarificationId,
    pub answer: String,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub response_provided_by: AgentId,
}

wire_enum! {
    "kebab-case";
    /// The `status` of a [`CallbackNotification`].
    pub enum CallbackStatus { Complete, Failed, InProgress }
}

/// `CallbackNotification`: a task's status change, POSTed to its callback URL (signed)
/// or pushed to its callback agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CallbackNotification {
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub task_id: TaskId,
    #[cfg_attr(feature = "openapi", schema(value_type = Value))]
    pub result_data: Value,
    pub status: CallbackStatus,
    /// The callback URL or agent id.
    pub sent_to: String,
    /// The task's own status after the change.
    pub task_status: TaskStatus,
    /// What happened (the task event's `kind`).
    pub event: TaskEventKind,
    /// The task event's sequence number: callbacks of a task are sent in this order.
    pub event_seq: i64,
    /// The task's current assignee.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub assignee_agent_id: Option<AgentId>,
    pub timestamp: Timestamp,
}

/// `ErrorMessage`: why a task (or a frame) failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorMessage {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub task_id: Option<TaskId>,
    /// One of the standard error codes.
    pub error_code: String,
    pub error_message: String,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub originating_agent_id: AgentId,
}

/// Body of `POST /v1/tasks/{task_id}/handoff`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Handoff {
    /// A member that accepts tasks, not the current assignee.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub new_agent_id: AgentId,
    /// Why, 1–1000 characters.
    pub reason: String,
    /// Optional: the assignee the caller believes the task has; if it has another, the
    /// handoff is refused (`INVALID_TASK_TRANSITION`) instead of taking the task from
    /// someone the caller did not mean.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub current_agent_id: Option<AgentId>,
}

/// Body of `POST /v1/tasks/{task_id}/clarifications`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Clarify {
    /// 1–2000 characters.
    pub question: String,
}

/// Body of `POST /v1/tasks/{task_id}/clarifications/{clarification_id}/answer`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Answer {
    /// 1–2000 characters.
    pub answer: String,
}

/// Body of `POST /v1/tasks/{task_id}/result`: a progress report or the final result.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TaskResult {
    /// `in-progress` for an update; `success` or `failed` ends the task.
    pub status: TaskResponseStatus,
    /// Any JSON value (null when not given).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Value))]
    pub result_data: Value,
}

/// Body of `POST /v1/tasks/{task_id}/cancel`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Cancel {
    /// Why (at most 1000 characters).
    #[serde(default)]
    pub reason: Option<String>,
}

/// One answered clarification round: part of the task's context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ClarificationRound {
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub clarification_id: ClarificationId,
    pub question: String,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub requested_by: AgentId,
    pub answer: String,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub response_provided_by: AgentId,
    pub answered_at: Timestamp,
}

/// A task as its parties see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Task {
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub task_id: TaskId,
    pub description: String,
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub data: Map<String, Value>,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub originating_agent_id: AgentId,
    /// Null when nobody suitable was found.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub assignee_agent_id: Option<AgentId>,
    pub status: TaskStatus,
    pub priority: Priority,
    pub required_capabilities: Vec<String>,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub target_agent_id: Option<AgentId>,
    pub callback_url: Option<String>,
    /// The open question while `status` is `input-required`.
    pub open_clarification: Option<ClarificationRequest>,
    /// Answered clarification rounds, oldest first.
    pub context: Vec<ClarificationRound>,
    /// The last reported result data.
    #[cfg_attr(feature = "openapi", schema(value_type = Value))]
    pub result_data: Value,
    /// The latest callback's delivery (URL callbacks only).
    pub callback_delivery: Option<CallbackDelivery>,
    /// The role the task is offered to (absent: given to an agent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assignee_role: Option<String>,
    /// How many times it was claimed (offered tasks only).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub attempts: i64,
    /// When the claimer's lease runs out unless it reports progress (claimed and in
    /// progress only; a question waiting for its answer stops the clock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub lease_expires_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// W3C `traceparent` naming the task's span in its trace: its notifications are its
    /// children, and whoever works on it sends this back to continue the trace
    /// (`docs/tracing.md`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(example = "00-019ac5f2b6d07c53a1e0c2b7d9f4e813-5b2e0f1c9a7d3e44-01")
    )]
    pub traceparent: Option<String>,
    /// W3C `tracestate` the trace came with, handed on unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracestate: Option<String>,
}

impl Task {
    /// Its `traceparent` and `tracestate`, those present, as name and value: what any
    /// transport writes to hand the trace on.
    pub fn trace_fields(&self) -> impl Iterator<Item = (&'static str, &str)> {
        crate::trace::fields(&self.traceparent, &self.tracestate)
    }
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// One entry of a task's history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskEvent {
    /// 1, 2, 3, … per task.
    pub seq: i64,
    /// What happened.
    pub kind: TaskEventKind,
    /// Who caused it.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub agent_id: Option<AgentId>,
    /// The task's status after it.
    pub status: TaskStatus,
    /// What it carried (question, answer, reason, result, new assignee, …).
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub data: Map<String, Value>,
    pub timestamp: Timestamp,
}

/// Answer of `GET /v1/tasks/{task_id}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskDetail {
    pub success: bool,
    pub task: Task,
    /// The history, oldest first.
    pub events: Vec<TaskEvent>,
    /// Every callback POST of the task, oldest first, with its outcome.
    pub callbacks: Vec<CallbackDelivery>,
    /// The approvals asked about the task, oldest first (`docs/approvals.md`): a
    /// `pending` one is what the task waits on.
    #[serde(default)]
    pub approvals: Vec<crate::approvals::Approval>,
}

/// Answer of a task action (handoff, clarification, answer, result, cancel).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskUpdated {
    pub success: bool,
    /// The task after the action.
    pub task: Task,
}

/// Answer of `POST /v1/tasks`: the protocol's response to a TaskRequest.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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

impl TaskRequest {
    /// The value rules: a well-formed task id when given, the description, and the
    /// required capabilities (returned cleaned).
    pub fn validate(&self) -> Result<Vec<String>, ErrorBody> {
        if let Some(id) = &self.task_id {
            id.check("task_id")?;
        }
        check_message_text("description", &self.description, MAX_TASK_TEXT)?;
        crate::messages::check_data_size("data", &self.data)?;
        if let Some(role) = &self.assignee_role {
            check_text("assignee_role", role, crate::agents::MAX_ROLE)?;
            if self.target_agent_id.is_some() {
                return Err(ErrorBody::validation(
                    "assignee_role",
                    "give target_agent_id or assignee_role, not both",
                ));
            }
        }
        clean_capabilities(
            "required_capabilities",
            self.required_capabilities.clone(),
            REQUIRED_CAPABILITY_LIMITS,
        )
    }
}

impl Handoff {
    pub fn validate(&self) -> Result<(), ErrorBody> {
        check_text("reason", &self.reason, MAX_REASON)
    }
}

impl Clarify {
    pub fn validate(&self) -> Result<(), ErrorBody> {
        check_message_text("question", &self.question, MAX_TASK_TEXT)
    }
}

impl Answer {
    pub fn validate(&self) -> Result<(), ErrorBody> {
        check_message_text("answer", &self.answer, MAX_TASK_TEXT)
    }
}

impl Cancel {
    pub fn validate(&self) -> Result<(), ErrorBody> {
        check_optional("reason", &self.reason, MAX_REASON)
    }
}

impl From<CallbackStatus> for TaskResponseStatus {
    /// What an assignee's `CallbackNotification` frame reports, as a result.
    fn from(status: CallbackStatus) -> Self {
        match status {
            CallbackStatus::Complete => TaskResponseStatus::Success,
            CallbackStatus::Failed => TaskResponseStatus::Failed,
            CallbackStatus::InProgress => TaskResponseStatus::InProgress,
        }
    }
}

impl From<TaskStatus> for CallbackStatus {
    /// The status a callback reports for a task in `status`.
    fn from(status: TaskStatus) -> Self {
        match status {
            TaskStatus::Open | TaskStatus::InProgress | TaskStatus::InputRequired => {
                CallbackStatus::InProgress
            }
            TaskStatus::Success => CallbackStatus::Complete,
            TaskStatus::Failed | TaskStatus::Canceled => CallbackStatus::Failed,
        }
    }
}
