//! Every operation of Switchboard as one enum, and every answer as another.
//!
//! A transport decodes its input (a REST request, a WebSocket frame, a tool call) into an
//! [`Operation`], hands it to the server's core with the caller, and encodes the
//! [`Reply`]. So an operation is defined once: its name here, its body types beside it,
//! its rules in the core.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::agents::{
    AgentEnvelope, AgentList, AgentQuery, AgentRegistered, AgentRemoved, RegisterAgent, UpdateAgent,
};
use crate::approvals::{ApprovalEnvelope, ApprovalList};
pub use crate::approvals::{ApprovalOp, ApprovalOpName};
use crate::assistance::{AssistanceResult, RequestAssistance};
use crate::broadcasts::{BroadcastResult, BroadcastUpdate};
use crate::claims::{ClaimTask, ExtendClaim, ReleaseTask, TaskClaimed};
use crate::ids::{AgentId, ClarificationId, LeaseId, MessageId, TaskRef, TeamId};
use crate::inbox::{InboxPage, InboxQuery};
use crate::leases::{AcquireLease, ExtendLease, LeaseEnvelope, LeaseList, LeaseQuery};
use crate::messages::{
    MarkRead, MarkReadResult, MessageDetail, RespondResult, RespondToMessage, SendMessage,
    SendResult,
};
use crate::metrics::TeamMetrics;
use crate::publish::{Publish, PublishResult, SetWatch, TeamActivity};
use crate::search::{SearchPage, SearchQuery};
use crate::tasks::{
    Answer, CallbackSecret, CallbackStatus, Cancel, Clarify, Handoff, TaskDetail, TaskList,
    TaskQuery, TaskRequest, TaskResult, TaskSubmitted, TaskUpdated,
};
use crate::teams::{
    CreateTeam, TeamCreated, TeamKeyRotated, TeamList, TeamView, UpdateTeam, WhoAmI,
};
use crate::traffic::{TeamTaskQuery, TrafficPage, TrafficQuery};

/// One operation with all of its input, by the resource it acts on: the core has one
/// exhaustive handler per resource, so an operation added here cannot fall through to an
/// "unhandled" error. The name (`Operation::name`) is the WebSocket frame `type` for the
/// operations an agent sends over the socket; the task protocol's keep the document's
/// type names.
#[derive(Debug, Clone)]
pub enum Operation {
    Teams(TeamOp),
    Agents(AgentOp),
    Messages(MessageOp),
    Tasks(TaskOp),
    Leases(LeaseOp),
    Approvals(ApprovalOp),
}

/// What is done to a team: its settings, its figures, its callback key, its activity.
#[derive(Debug, Clone, strum::EnumDiscriminants)]
#[strum_discriminants(
    name(TeamOpName),
    derive(strum::EnumString, strum::IntoStaticStr, strum::VariantArray, Hash),
    strum(serialize_all = "snake_case")
)]
pub enum TeamOp {
    /// Create a team (admin).
    CreateTeam(CreateTeam),
    /// Every team of the server (admin).
    ListTeams,
    GetTeam {
        team_id: TeamId,
    },
    /// Rename a team or switch its communication (team key).
    UpdateTeam {
        team_id: TeamId,
        patch: UpdateTeam,
    },
    TeamMetrics {
        team_id: TeamId,
    },
    /// The team's callback signing key (team key).
    #[strum_discriminants(strum(serialize = "get_callback_secret"))]
    CallbackSecret {
        team_id: TeamId,
    },
    RotateCallbackSecret {
        team_id: TeamId,
    },
    /// A new team key (team key or admin): the old one is refused from the answer on.
    RotateTeamKey {
        team_id: TeamId,
    },
    /// Per member, unread news and open tasks; whether the team is idle. Without a
    /// team id: the calling agent's team.
    GetActivity {
        team_id: Option<TeamId>,
    },
    /// Every message of the team in the order it was committed (team key): what an
    /// operator watches.
    #[strum_discriminants(strum(serialize = "team_messages"))]
    Traffic {
        team_id: TeamId,
        query: TrafficQuery,
    },
    /// Every task of the team, newest first (team key).
    TeamTasks {
        team_id: TeamId,
        query: TeamTaskQuery,
    },
}

impl From<TeamOp> for Operation {
    fn from(op: TeamOp) -> Operation {
        Operation::Teams(op)
    }
}

/// What is done to an agent of a team: registration, lookup, change, removal, and what
/// the calling agent says of itself (who it is, what it watches).
#[derive(Debug, Clone, strum::EnumDiscriminants)]
#[strum_discriminants(
    name(AgentOpName),
    derive(strum::EnumString, strum::IntoStaticStr, strum::VariantArray, Hash),
    strum(serialize_all = "snake_case")
)]
pub enum AgentOp {
    /// Register an agent (team key); answers its token once.
    RegisterAgent {
        team_id: TeamId,
        agent: RegisterAgent,
    },
    /// Look agents up by capability and status.
    ListAgents {
        team_id: TeamId,
        query: AgentQuery,
    },
    GetAgent {
        team_id: TeamId,
        agent_id: AgentId,
    },
    UpdateAgent {
        team_id: TeamId,
        agent_id: AgentId,
        patch: UpdateAgent,
    },
    /// Remove an agent (team key): its token stops working, its connections end.
    RemoveAgent {
        team_id: TeamId,
        agent_id: AgentId,
    },
    /// A new token for an agent (team key, admin, or the agent itself): the old one is
    /// refused from the answer on and the agent's live connections end.
    RotateAgentToken {
        team_id: TeamId,
        agent_id: AgentId,
    },
    /// Who the token belongs to.
    #[strum_discriminants(strum(serialize = "whoami"))]
    WhoAmI,
    /// Replace the caller's addresses and/or watched tags.
    SetWatch(SetWatch),
}

impl From<AgentOp> for Operation {
    fn from(op: AgentOp) -> Operation {
        Operation::Agents(op)
    }
}

/// The agent communication contract's operations, and MetaGPT-style publish.
#[derive(Debug, Clone, strum::EnumDiscriminants)]
#[strum_discriminants(
    name(MessageOpName),
    derive(strum::EnumString, strum::IntoStaticStr, strum::VariantArray, Hash),
    strum(serialize_all = "snake_case")
)]
pub enum MessageOp {
    /// SEND_MESSAGE.
    SendMessage {
        message: SendMessage,
        idempotency_key: Option<String>,
    },
    /// GET_MESSAGES.
    GetMessages(InboxQuery),
    /// One message the caller sent or received.
    GetMessage { message_id: MessageId },
    /// MARK_MESSAGE_READ.
    MarkMessageRead(MarkRead),
    /// RESPOND_TO_MESSAGE.
    RespondToMessage {
        message_id: MessageId,
        response: RespondToMessage,
        idempotency_key: Option<String>,
    },
    /// BROADCAST_UPDATE.
    BroadcastUpdate {
        update: BroadcastUpdate,
        idempotency_key: Option<String>,
    },
    /// REQUEST_ASSISTANCE.
    RequestAssistance {
        request: RequestAssistance,
        idempotency_key: Option<String>,
    },
    /// Publish under a tag to an address set (MetaGPT's `publish_message`).
    Publish {
        publish: Publish,
        idempotency_key: Option<String>,
    },
    /// The messages of a trace (W3C trace id): the team key, or an agent party to one.
    GetTrace { trace_id: String },
    /// Full-text search over what the caller may read (`docs/search.md`).
    SearchMessages(SearchQuery),
}

impl From<MessageOp> for Operation {
    fn from(op: MessageOp) -> Operation {
        Operation::Messages(op)
    }
}

/// The task protocol's operations: a task from its submission to its end.
#[derive(Debug, Clone, strum::EnumDiscriminants)]
#[strum_discriminants(
    name(TaskOpName),
    derive(strum::EnumString, strum::IntoStaticStr, strum::VariantArray, Hash),
    strum(serialize_all = "snake_case")
)]
pub enum TaskOp {
    /// Submit a task (or ask the registry by message).
    #[strum_discriminants(strum(serialize = "TaskRequest"))]
    SubmitTask(TaskRequest),
    GetTask {
        task_id: TaskRef,
    },
    ListTasks(TaskQuery),
    /// The assignee reports progress or the result. `agent_id`, when a frame carries
    /// it, must be the caller.
    #[strum_discriminants(strum(serialize = "TaskResponse"))]
    ReportTask {
        task_id: TaskRef,
        result: TaskResult,
        agent_id: Option<AgentId>,
    },
    /// The assignee reports with the protocol's `CallbackNotification` shape.
    #[strum_discriminants(strum(serialize = "CallbackNotification"))]
    ReportCallback(CallbackReport),
    /// The assignee reports a failure with the protocol's `ErrorMessage` shape.
    #[strum_discriminants(strum(serialize = "ErrorMessage"))]
    ReportError(ErrorReport),
    /// Hand a task to another agent (assignee or originator).
    #[strum_discriminants(strum(serialize = "HandoffNotification"))]
    HandOff {
        task_id: TaskRef,
        handoff: Handoff,
    },
    /// The assignee asks the originator a question. `requested_by`, when given, must be
    /// the caller.
    #[strum_discriminants(strum(serialize = "ClarificationRequest"))]
    Clarify {
        task_id: TaskRef,
        clarify: Clarify,
        requested_by: Option<AgentId>,
    },
    /// The originator answers the open question. `response_provided_by`, when given,
    /// must be the caller.
    #[strum_discriminants(strum(serialize = "ClarificationResponse"))]
    AnswerClarification {
        task_id: TaskRef,
        clarification_id: ClarificationId,
        answer: Answer,
        response_provided_by: Option<AgentId>,
    },
    /// The originator calls a task off.
    CancelTask {
        task_id: TaskRef,
        cancel: Cancel,
    },
    /// An agent takes the next task offered to its role (or waits for one).
    ClaimTask(ClaimTask),
    /// The claimer gives a task back to its role.
    ReleaseTask {
        task_id: TaskRef,
        release: ReleaseTask,
    },
    /// The claimer renews its claim's lease.
    ExtendClaim {
        task_id: TaskRef,
        extend: ExtendClaim,
    },
}

impl From<TaskOp> for Operation {
    fn from(op: TaskOp) -> Operation {
        Operation::Tasks(op)
    }
}

/// Leases on named resources (`docs/leases.md`): taken, renewed and released by the
/// agent that holds them; listed by anyone of the team; released by the team key too.
#[derive(Debug, Clone, strum::EnumDiscriminants)]
#[strum_discriminants(
    name(LeaseOpName),
    derive(strum::EnumString, strum::IntoStaticStr, strum::VariantArray, Hash),
    strum(serialize_all = "snake_case")
)]
pub enum LeaseOp {
    /// Take a lease as the calling agent, or be told who holds what overlaps it.
    AcquireLease {
        team_id: Option<TeamId>,
        lease: AcquireLease,
    },
    /// The holder renews its lease.
    ExtendLease {
        team_id: Option<TeamId>,
        lease_id: LeaseId,
        extend: ExtendLease,
    },
    /// The holder (or the team key) ends a lease.
    ReleaseLease {
        team_id: Option<TeamId>,
        lease_id: LeaseId,
    },
    /// The team's live leases.
    ListLeases {
        team_id: Option<TeamId>,
        query: LeaseQuery,
    },
}

impl From<LeaseOp> for Operation {
    fn from(op: LeaseOp) -> Operation {
        Operation::Leases(op)
    }
}

impl Operation {
    /// The operation's name (see the enum's documentation).
    pub fn name(&self) -> &'static str {
        self.kind().as_str()
    }

    /// Which operation this is, without its input.
    pub fn kind(&self) -> OperationName {
        match self {
            Operation::Teams(op) => OperationName::Teams(op.into()),
            Operation::Agents(op) => OperationName::Agents(op.into()),
            Operation::Messages(op) => OperationName::Messages(op.into()),
            Operation::Tasks(op) => OperationName::Tasks(op.into()),
            Operation::Leases(op) => OperationName::Leases(op.into()),
            Operation::Approvals(op) => OperationName::Approvals(op.into()),
        }
    }
}

/// An operation without its input: what a frame's `type` or a tool names. The names are
/// the ones the resource enums' `strum_discriminants` attributes give, written once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OperationName {
    Teams(TeamOpName),
    Agents(AgentOpName),
    Messages(MessageOpName),
    Tasks(TaskOpName),
    Leases(LeaseOpName),
    Approvals(ApprovalOpName),
}

/// A resource's operation name as one of all operations' names.
macro_rules! operation_names {
    ($($resource:ident($name:ty);)*) => {$(
        impl From<$name> for OperationName {
            fn from(name: $name) -> OperationName {
                OperationName::$resource(name)
            }
        }
    )*};
}

operation_names! {
    Teams(TeamOpName);
    Agents(AgentOpName);
    Messages(MessageOpName);
    Tasks(TaskOpName);
    Leases(LeaseOpName);
    Approvals(ApprovalOpName);
}

impl OperationName {
    /// The operation of this name, if any.
    pub fn parse(name: &str) -> Option<OperationName> {
        use std::str::FromStr;
        None.or_else(|| {
            MessageOpName::from_str(name)
                .ok()
                .map(OperationName::Messages)
        })
        .or_else(|| TaskOpName::from_str(name).ok().map(OperationName::Tasks))
        .or_else(|| AgentOpName::from_str(name).ok().map(OperationName::Agents))
        .or_else(|| TeamOpName::from_str(name).ok().map(OperationName::Teams))
        .or_else(|| LeaseOpName::from_str(name).ok().map(OperationName::Leases))
        .or_else(|| {
            ApprovalOpName::from_str(name)
                .ok()
                .map(OperationName::Approvals)
        })
    }

    /// Its name: the frame `type` (the task protocol's keep the document's type names).
    pub fn as_str(self) -> &'static str {
        match self {
            OperationName::Teams(n) => n.into(),
            OperationName::Agents(n) => n.into(),
            OperationName::Messages(n) => n.into(),
            OperationName::Tasks(n) => n.into(),
            OperationName::Leases(n) => n.into(),
            OperationName::Approvals(n) => n.into(),
        }
    }

    /// Whether an agent may send the operation as a frame (the rest are REST-only: team
    /// and registry management). Exhaustive, so a new operation says whether the socket
    /// carries it.
    pub fn on_socket(self) -> bool {
        match self {
            OperationName::Teams(name) => match name {
                TeamOpName::GetActivity => true,
                TeamOpName::CreateTeam
                | TeamOpName::ListTeams
                | TeamOpName::GetTeam
                | TeamOpName::UpdateTeam
                | TeamOpName::TeamMetrics
                | TeamOpName::CallbackSecret
                | TeamOpName::RotateCallbackSecret
                | TeamOpName::RotateTeamKey
                | TeamOpName::Traffic
                | TeamOpName::TeamTasks => false,
            },
            OperationName::Agents(name) => match name {
                AgentOpName::WhoAmI | AgentOpName::SetWatch => true,
                AgentOpName::RegisterAgent
                | AgentOpName::ListAgents
                | AgentOpName::GetAgent
                | AgentOpName::UpdateAgent
                | AgentOpName::RemoveAgent
                | AgentOpName::RotateAgentToken => false,
            },
            OperationName::Messages(_)
            | OperationName::Tasks(_)
            | OperationName::Leases(_)
            | OperationName::Approvals(_) => true,
        }
    }

    /// Every operation's name.
    pub fn all() -> impl Iterator<Item = OperationName> {
        use strum::VariantArray;
        let teams = TeamOpName::VARIANTS
            .iter()
            .map(|n| OperationName::Teams(*n));
        let agents = AgentOpName::VARIANTS
            .iter()
            .map(|n| OperationName::Agents(*n));
        let messages = MessageOpName::VARIANTS
            .iter()
            .map(|n| OperationName::Messages(*n));
        let tasks = TaskOpName::VARIANTS
            .iter()
            .map(|n| OperationName::Tasks(*n));
        let leases = LeaseOpName::VARIANTS
            .iter()
            .map(|n| OperationName::Leases(*n));
        let approvals = ApprovalOpName::VARIANTS
            .iter()
            .map(|n| OperationName::Approvals(*n));
        teams
            .chain(agents)
            .chain(messages)
            .chain(tasks)
            .chain(leases)
            .chain(approvals)
    }
}

/// A `CallbackNotification` sent by an assignee: its status is a report on the task.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallbackReport {
    pub task_id: TaskRef,
    pub status: CallbackStatus,
    #[serde(default)]
    pub result_data: Value,
    /// Accepted for the protocol's shape; the server knows where callbacks go.
    #[serde(default)]
    pub sent_to: Option<String>,
}

/// An `ErrorMessage` sent by an assignee: the task failed for this reason.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorReport {
    pub task_id: TaskRef,
    pub error_message: String,
    #[serde(default)]
    pub error_code: Option<String>,
    /// When given, must be the caller.
    #[serde(default)]
    pub originating_agent_id: Option<AgentId>,
}

/// The answer of an operation: one variant per answer type, serialised as that type
/// alone (no tag), so a REST body, a reply frame's `result` and a tool's structured
/// content are the same JSON.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Reply {
    TeamCreated(TeamCreated),
    TeamKeyRotated(TeamKeyRotated),
    Teams(TeamList),
    Team(TeamView),
    TeamMetrics(TeamMetrics),
    CallbackSecret(CallbackSecret),
    AgentRegistered(AgentRegistered),
    Agents(AgentList),
    Agent(AgentEnvelope),
    AgentRemoved(AgentRemoved),
    WhoAmI(WhoAmI),
    Sent(SendResult),
    Inbox(InboxPage),
    Message(Box<MessageDetail>),
    MarkedRead(MarkReadResult),
    Responded(RespondResult),
    Broadcast(BroadcastResult),
    Assistance(AssistanceResult),
    TaskSubmitted(Box<TaskSubmitted>),
    Task(Box<TaskDetail>),
    Tasks(TaskList),
    TaskUpdated(Box<TaskUpdated>),
    TaskClaimed(Box<TaskClaimed>),
    Published(PublishResult),
    Activity(TeamActivity),
    Traffic(TrafficPage),
    Trace(crate::trace::TraceView),
    Lease(LeaseEnvelope),
    Leases(LeaseList),
    Approval(Box<ApprovalEnvelope>),
    Search(SearchPage),
    Approvals(ApprovalList),
}

#[cfg(test)]
mod tests {
    use super::OperationName;

    /// The names clients send (frame `type`s, the access table's rows): each once, each
    /// parsed back to its operation, and no second spelling of a renamed one.
    #[test]
    fn every_operation_has_one_name_that_parses_back() {
        let names: Vec<&str> = OperationName::all().map(OperationName::as_str).collect();
        let unique: std::collections::BTreeSet<&str> = names.iter().copied().collect();
        assert_eq!(names.len(), unique.len(), "{names:?}");
        for name in OperationName::all() {
            assert_eq!(OperationName::parse(name.as_str()), Some(name));
        }
        for expected in [
            "send_message",
            "get_callback_secret",
            "whoami",
            "TaskRequest",
            "TaskResponse",
            "CallbackNotification",
            "ErrorMessage",
            "HandoffNotification",
            "ClarificationRequest",
            "ClarificationResponse",
            "get_activity",
        ] {
            assert!(
                unique.contains(expected),
                "{expected} missing from {names:?}"
            );
        }
        for other_spelling in ["submit_task", "who_am_i", "report_task", "callback_secret"] {
            assert_eq!(
                OperationName::parse(other_spelling),
                None,
                "{other_spelling}"
            );
        }
    }
}
