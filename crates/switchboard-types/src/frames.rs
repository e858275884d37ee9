//! WebSocket frames: JSON text, one object each, with a `type`.
//!
//! Client → server ([`ClientFrame`]): `ack`, `ping`, and the operations an agent performs
//! (see [`socket_operations`]) with a client `request_id` and the REST body's fields
//! beside it (`idempotency_key` plays the `Idempotency-Key` header). Decoding errors
//! name the field exactly as REST does.
//!
//! Server → client ([`ServerFrame`]): `hello`, pushes (`message` and the task protocol's
//! types), `caught_up`, `reply` (`ok` with `result`, or not with `error`), `ErrorMessage`
//! for frames that could not be understood, and `pong`.

use crate::ids::{AgentId, TeamId};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::error::ErrorBody;
use crate::messages::MessageView;
use crate::operation::{
    AgentOp, AgentOpName, ApprovalOp, ApprovalOpName, LeaseOp, LeaseOpName, MessageOp,
    MessageOpName, Operation, OperationName, TaskOp, TaskOpName, TeamOp, TeamOpName,
};
use crate::trace::TraceContext;

/// The frame `type`s of the operations an agent may send over the socket.
pub fn socket_operations() -> Vec<&'static str> {
    OperationName::all()
        .filter(|name| name.on_socket())
        .map(OperationName::as_str)
        .collect()
}

/// A frame from the client.
#[derive(Debug, Clone)]
pub enum ClientFrame {
    /// Everything up to `seq` has arrived; a reconnect without `since` resumes after it.
    Ack { seq: i64 },
    /// Application-level keep-alive (answered with `pong`).
    Ping,
    /// An operation, answered with a `reply` carrying `request_id` (a string or number).
    /// Its `traceparent` and `tracestate` fields (W3C Trace Context, as the HTTP headers
    /// of REST) place it in the caller's trace.
    Request {
        request_id: Value,
        operation: Box<Operation>,
        trace: TraceContext,
    },
}

/// A frame that could not be understood: the error and the `request_id` if it had one.
#[derive(Debug, Clone)]
pub struct BadFrame {
    pub request_id: Option<Value>,
    pub error: ErrorBody,
}

type Fields = Map<String, Value>;

fn bad(request_id: Option<Value>, error: ErrorBody) -> Box<BadFrame> {
    Box::new(BadFrame { request_id, error })
}

impl ClientFrame {
    /// Decodes a text frame.
    pub fn decode(text: &str) -> Result<ClientFrame, Box<BadFrame>> {
        let mut de = serde_json::Deserializer::from_str(text);
        let value = Value::deserialize(crate::strict::Strict(&mut de))
            .and_then(|value| de.end().map(|()| value))
            .map_err(|e| {
                let why = if e.is_data() {
                    "is not accepted"
                } else {
                    "is not valid JSON"
                };
                bad(
                    None,
                    ErrorBody::validation("frame", format!("the frame {why}: {e}")),
                )
            })?;
        let Value::Object(mut fields) = value else {
            return Err(bad(
                None,
                ErrorBody::validation("frame", "a frame is a JSON object with a \"type\""),
            ));
        };
        let request_id = fields.remove("request_id");
        if let Some(id) = &request_id
            && !(id.is_string() || id.is_number())
        {
            return Err(bad(
                None,
                ErrorBody::validation("request_id", "request_id is a string or a number"),
            ));
        }
        let kind = match fields.remove("type") {
            Some(Value::String(kind)) => kind,
            Some(_) => {
                return Err(bad(
                    request_id,
                    ErrorBody::validation("type", "type must be a string"),
                ));
            }
            None => {
                return Err(bad(
                    request_id,
                    ErrorBody::validation("type", "the frame has no \"type\""),
                ));
            }
        };
        match (kind.as_str(), request_id) {
            ("ack", request_id) => {
                let seq: i64 = take(&mut fields, "seq").map_err(|e| bad(request_id.clone(), e))?;
                none_left(fields).map_err(|e| bad(request_id, e))?;
                if seq < 0 {
                    return Err(bad(
                        None,
                        ErrorBody::validation("seq", "seq must not be negative"),
                    ));
                }
                Ok(ClientFrame::Ack { seq })
            }
            ("ping", _) => Ok(ClientFrame::Ping),
            (kind, None) => Err(bad(
                None,
                ErrorBody::validation(
                    "request_id",
                    format!("a \"{kind}\" frame needs a request_id"),
                ),
            )),
            (kind, Some(request_id)) => {
                let trace =
                    trace_fields(&mut fields).map_err(|e| bad(Some(request_id.clone()), e))?;
                match operation_from_fields(kind, fields) {
                    Ok(operation) => Ok(ClientFrame::Request {
                        request_id,
                        operation: Box::new(operation),
                        trace,
                    }),
                    Err(error) => Err(bad(Some(request_id), error)),
                }
            }
        }
    }

    /// The frame as the client sends it.
    pub fn encode(&self) -> Result<String, EncodeError> {
        let mut frame = Fields::new();
        match self {
            ClientFrame::Ack { seq } => {
                frame.insert("type".into(), json!("ack"));
                frame.insert("seq".into(), json!(seq));
            }
            ClientFrame::Ping => {
                frame.insert("type".into(), json!("ping"));
            }
            ClientFrame::Request {
                request_id,
                operation,
                trace,
            } => {
                frame.insert("type".into(), json!(operation.name()));
                frame.insert("request_id".into(), request_id.clone());
                if let Some(parent) = &trace.parent {
                    frame.insert("traceparent".into(), json!(parent.to_string()));
                    if let Some(state) = &trace.state {
                        frame.insert("tracestate".into(), json!(state));
                    }
                }
                let fields = operation_fields(operation)?
                    .ok_or(EncodeError::NotCarried(operation.name()))?;
                frame.extend(fields);
            }
        }
        Ok(Value::Object(frame).to_string())
    }
}

/// Takes a request frame's `traceparent` and `tracestate`: strings when given; a
/// malformed `traceparent` is ignored (the request starts a trace) and takes its
/// `tracestate` with it, as the W3C recommendation says.
fn trace_fields(fields: &mut Fields) -> Result<TraceContext, ErrorBody> {
    let parent: Option<String> = take(fields, "traceparent")?;
    let state: Option<String> = take(fields, "tracestate")?;
    Ok(TraceContext::from_values(
        parent.as_deref(),
        state.as_deref(),
    ))
}

/// Why a frame could not be written.
#[derive(Debug, thiserror::Error)]
pub enum EncodeError {
    /// Team administration is REST only.
    #[error("{0} is not carried over the WebSocket; use REST")]
    NotCarried(&'static str),
    #[error("the frame could not be encoded: {0}")]
    Json(#[from] serde_json::Error),
}

/// Takes field `name` out of a frame; absent reads as `null` (so optional fields may be
/// left out) and a required one is reported missing.
fn take<T: DeserializeOwned>(fields: &mut Fields, name: &str) -> Result<T, ErrorBody> {
    let value = fields.remove(name);
    let missing = value.is_none();
    // Through `Strict`, so that the error speaks JSON ("an integer"), not Rust ("i64").
    T::deserialize(crate::strict::Strict(value.unwrap_or(Value::Null))).map_err(|e| {
        let why = if missing {
            format!("missing field `{name}`")
        } else {
            e.to_string()
        };
        ErrorBody::validation(name, format!("{name}: {why}"))
    })
}

/// Decodes what is left of a frame as a body type (which refuses unknown fields).
fn rest<T: DeserializeOwned>(fields: Fields) -> Result<T, ErrorBody> {
    crate::decode::decode_value(Value::Object(fields))
}

/// Refuses fields a frame does not have.
fn none_left(fields: Fields) -> Result<(), ErrorBody> {
    match fields.keys().next() {
        None => Ok(()),
        Some(name) => {
            let name = crate::decode::visible_field(name);
            Err(ErrorBody::validation(
                &name,
                format!("{name}: unknown field `{name}`"),
            ))
        }
    }
}

/// Decodes the fields of an operation frame of type `kind` (without `type` and
/// `request_id`): every transport that takes operations as JSON objects (WebSocket
/// frames, MCP tool calls) decodes them here, so a field means the same everywhere.
pub fn operation_from_fields(kind: &str, fields: Fields) -> Result<Operation, ErrorBody> {
    match OperationName::parse(kind) {
        Some(name) if name.on_socket() => operation_of(name, fields),
        _ => Err(unknown_type(kind)),
    }
}

/// Every frame `type` a client may send.
fn known_types() -> Vec<&'static str> {
    let mut known = socket_operations();
    known.extend(["ack", "ping"]);
    known
}

/// Decodes the fields of the operation `name` (one the socket carries).
pub fn operation_of(name: OperationName, fields: Fields) -> Result<Operation, ErrorBody> {
    match name {
        OperationName::Messages(name) => decode_message(name, fields),
        OperationName::Tasks(name) => decode_task(name, fields),
        OperationName::Agents(name) => decode_agent(name, fields),
        OperationName::Teams(name) => decode_team(name, fields),
        OperationName::Leases(name) => decode_lease(name, fields),
        OperationName::Approvals(name) => decode_approval(name, fields),
    }
}

/// Approvals: the team is always the caller's own.
fn decode_approval(name: ApprovalOpName, mut f: Fields) -> Result<Operation, ErrorBody> {
    Ok(Operation::Approvals(match name {
        ApprovalOpName::RequestApproval => ApprovalOp::RequestApproval(rest(f)?),
        ApprovalOpName::DecideApproval => ApprovalOp::DecideApproval {
            approval_id: take(&mut f, "approval_id")?,
            decision: rest(f)?,
        },
        ApprovalOpName::GetApproval => ApprovalOp::GetApproval {
            approval_id: take(&mut f, "approval_id")?,
            wait: rest(f)?,
        },
        ApprovalOpName::ListApprovals => ApprovalOp::ListApprovals(rest(f)?),
    }))
}

/// Leases: the team is the caller's own unless `team_id` names it.
fn decode_lease(name: LeaseOpName, mut f: Fields) -> Result<Operation, ErrorBody> {
    let team_id = take(&mut f, "team_id")?;
    Ok(Operation::Leases(match name {
        LeaseOpName::AcquireLease => LeaseOp::AcquireLease {
            team_id,
            lease: rest(f)?,
        },
        LeaseOpName::ExtendLease => LeaseOp::ExtendLease {
            team_id,
            lease_id: take(&mut f, "lease_id")?,
            extend: rest(f)?,
        },
        LeaseOpName::ReleaseLease => {
            let lease_id = take(&mut f, "lease_id")?;
            none_left(f)?;
            LeaseOp::ReleaseLease { team_id, lease_id }
        }
        LeaseOpName::ListLeases => LeaseOp::ListLeases {
            team_id,
            query: rest(f)?,
        },
    }))
}

fn decode_message(name: MessageOpName, mut f: Fields) -> Result<Operation, ErrorBody> {
    Ok(match name {
        MessageOpName::SendMessage => Operation::Messages(MessageOp::SendMessage {
            idempotency_key: take(&mut f, "idempotency_key")?,
            message: rest(f)?,
        }),
        MessageOpName::GetMessages => {
            Operation::Messages(MessageOp::GetMessages(rest(unnest_filters(f))?))
        }
        MessageOpName::GetMessage => {
            let message_id = take(&mut f, "message_id")?;
            none_left(f)?;
            Operation::Messages(MessageOp::GetMessage { message_id })
        }
        MessageOpName::SearchMessages => Operation::Messages(MessageOp::SearchMessages(rest(f)?)),
        MessageOpName::GetTrace => {
            let trace_id = take(&mut f, "trace_id")?;
            none_left(f)?;
            Operation::Messages(MessageOp::GetTrace { trace_id })
        }
        MessageOpName::MarkMessageRead => Operation::Messages(MessageOp::MarkMessageRead(rest(f)?)),
        MessageOpName::RespondToMessage => Operation::Messages(MessageOp::RespondToMessage {
            idempotency_key: take(&mut f, "idempotency_key")?,
            message_id: match f.get("original_message_id") {
                Some(Value::String(id)) => id.clone().into(),
                _ => {
                    return Err(ErrorBody::validation(
                        "original_message_id",
                        "original_message_id (a string) names the message to respond to",
                    ));
                }
            },
            response: rest(f)?,
        }),
        MessageOpName::BroadcastUpdate => Operation::Messages(MessageOp::BroadcastUpdate {
            idempotency_key: take(&mut f, "idempotency_key")?,
            update: rest(f)?,
        }),
        MessageOpName::RequestAssistance => Operation::Messages(MessageOp::RequestAssistance {
            idempotency_key: take(&mut f, "idempotency_key")?,
            request: rest(f)?,
        }),
        MessageOpName::Publish => Operation::Messages(MessageOp::Publish {
            idempotency_key: take(&mut f, "idempotency_key")?,
            publish: rest(f)?,
        }),
    })
}

/// The task protocol's frames (and the task reads).
fn decode_task(name: TaskOpName, mut f: Fields) -> Result<Operation, ErrorBody> {
    Ok(match name {
        TaskOpName::SubmitTask => Operation::Tasks(TaskOp::SubmitTask(rest(f)?)),
        TaskOpName::ReportTask => Operation::Tasks(TaskOp::ReportTask {
            task_id: take(&mut f, "task_id")?,
            agent_id: take(&mut f, "agent_id")?,
            result: rest(f)?,
        }),
        TaskOpName::ReportCallback => Operation::Tasks(TaskOp::ReportCallback(rest(f)?)),
        TaskOpName::ReportError => Operation::Tasks(TaskOp::ReportError(rest(f)?)),
        TaskOpName::HandOff => Operation::Tasks(TaskOp::HandOff {
            task_id: take(&mut f, "task_id")?,
            handoff: rest(f)?,
        }),
        TaskOpName::Clarify => Operation::Tasks(TaskOp::Clarify {
            task_id: take(&mut f, "task_id")?,
            requested_by: take(&mut f, "requested_by")?,
            clarify: rest(f)?,
        }),
        TaskOpName::AnswerClarification => Operation::Tasks(TaskOp::AnswerClarification {
            task_id: take(&mut f, "task_id")?,
            clarification_id: take(&mut f, "clarification_id")?,
            response_provided_by: take(&mut f, "response_provided_by")?,
            answer: rest(f)?,
        }),
        TaskOpName::CancelTask => Operation::Tasks(TaskOp::CancelTask {
            task_id: take(&mut f, "task_id")?,
            cancel: rest(f)?,
        }),
        TaskOpName::GetTask => {
            let task_id = take(&mut f, "task_id")?;
            none_left(f)?;
            Operation::Tasks(TaskOp::GetTask { task_id })
        }
        TaskOpName::ListTasks => Operation::Tasks(TaskOp::ListTasks(rest(f)?)),
        TaskOpName::ClaimTask => Operation::Tasks(TaskOp::ClaimTask(rest(f)?)),
        TaskOpName::ReleaseTask => Operation::Tasks(TaskOp::ReleaseTask {
            task_id: take(&mut f, "task_id")?,
            release: rest(f)?,
        }),
        TaskOpName::ExtendClaim => Operation::Tasks(TaskOp::ExtendClaim {
            task_id: take(&mut f, "task_id")?,
            extend: rest(f)?,
        }),
    })
}

fn decode_agent(name: AgentOpName, f: Fields) -> Result<Operation, ErrorBody> {
    Ok(match name {
        AgentOpName::WhoAmI => {
            none_left(f)?;
            Operation::Agents(AgentOp::WhoAmI)
        }
        AgentOpName::SetWatch => Operation::Agents(AgentOp::SetWatch(rest(f)?)),
        AgentOpName::RegisterAgent
        | AgentOpName::ListAgents
        | AgentOpName::GetAgent
        | AgentOpName::UpdateAgent
        | AgentOpName::RemoveAgent
        | AgentOpName::RotateAgentToken => return Err(unknown_type(name.into())),
    })
}

fn decode_team(name: TeamOpName, mut f: Fields) -> Result<Operation, ErrorBody> {
    Ok(match name {
        TeamOpName::GetActivity => {
            let team_id = take(&mut f, "team_id")?;
            none_left(f)?;
            Operation::Teams(TeamOp::GetActivity { team_id })
        }
        TeamOpName::CreateTeam
        | TeamOpName::ListTeams
        | TeamOpName::GetTeam
        | TeamOpName::UpdateTeam
        | TeamOpName::TeamMetrics
        | TeamOpName::CallbackSecret
        | TeamOpName::RotateCallbackSecret
        | TeamOpName::RotateTeamKey
        | TeamOpName::Traffic
        | TeamOpName::TeamTasks => return Err(unknown_type(name.into())),
    })
}

/// The answer to a type that is no operation, or one the socket does not carry.
fn unknown_type(kind: &str) -> ErrorBody {
    ErrorBody::validation("type", format!("unknown frame type \"{kind}\""))
        .with("known_types", known_types())
}

/// The contract nests GET_MESSAGES' filters under `filters`; flat fields work too.
fn unnest_filters(mut fields: Fields) -> Fields {
    if let Some(Value::Object(filters)) = fields.remove("filters") {
        for (name, value) in filters {
            fields.entry(name).or_insert(value);
        }
    }
    fields
}

/// The first frame of a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    pub agent_id: AgentId,
    pub team_id: TeamId,
    /// This connection's id (in the server's log lines too).
    pub connection_id: u64,
    /// Replay starts after this sequence number.
    pub resume_after: i64,
    /// How often the server pings; answer before the next one.
    pub heartbeat_interval_ms: u64,
}

/// The answer to an operation frame: `ok` with `result`, or not with `error`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReplyFrame<R> {
    pub request_id: Value,
    pub ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<R>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorBody>,
}

/// A task protocol push: the recipient's `seq` and the protocol object's fields (with its
/// `message_id` and `timestamp`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskPush {
    pub seq: i64,
    #[serde(flatten)]
    pub fields: Map<String, Value>,
}

/// A frame from the server. `R` is the type of a reply's result (the server's answer
/// type when it writes, any JSON when a client reads).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum ServerFrame<R = Value> {
    #[serde(rename = "hello")]
    Hello(Hello),
    /// Replay is done up to `seq`; live frames follow.
    #[serde(rename = "caught_up")]
    CaughtUp {
        seq: i64,
    },
    #[serde(rename = "pong")]
    Pong,
    #[serde(rename = "reply")]
    Reply(ReplyFrame<R>),
    /// An inbox entry of any kind but `task`; the message carries `seq` too.
    #[serde(rename = "message")]
    Message {
        seq: i64,
        message: Box<MessageView>,
    },
    TaskRequest(TaskPush),
    TaskResponse(TaskPush),
    HandoffNotification(TaskPush),
    ClarificationRequest(TaskPush),
    ClarificationResponse(TaskPush),
    CallbackNotification(TaskPush),
    /// A task's `ErrorMessage` push (with `seq`), or the answer to a frame that could not
    /// be understood (the error body, `originating_agent_id`, and `request_id` if any).
    ErrorMessage(Map<String, Value>),
    /// The team turned idle or busy (connections opened with `?activity=true`; the
    /// first one right after `caught_up`). Not an inbox entry: no `seq`, no ack.
    #[serde(rename = "team_activity")]
    TeamActivity {
        activity: Box<crate::publish::TeamActivity>,
    },
}

impl<R: Serialize> ServerFrame<R> {
    /// The frame's text.
    pub fn to_text(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string(self)
    }
}

impl BadFrame {
    /// The `ErrorMessage` frame answering it, from the connection's agent.
    pub fn to_frame(&self, agent_id: &str) -> ServerFrame {
        let mut fields = match serde_json::to_value(&self.error) {
            Ok(Value::Object(fields)) => fields,
            _ => Map::new(),
        };
        fields.insert("originating_agent_id".into(), json!(agent_id));
        if let Some(id) = &self.request_id {
            fields.insert("request_id".into(), id.clone());
        }
        ServerFrame::ErrorMessage(fields)
    }
}

mod encode;
mod push;

use encode::operation_fields;

pub use push::{PushKind, activity_frame, push_body, push_frame, push_text};

#[cfg(test)]
mod tests;
