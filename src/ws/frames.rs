//! WebSocket frames: JSON text, one object each, with a `type`.
//!
//! Client → server: `ack`, `ping`, and every operation of the contract under the
//! contract's name (`send_message`, `get_messages`, `get_message`, `mark_message_read`,
//! `respond_to_message`, `broadcast_update`, `request_assistance`) with a client
//! `request_id` and the REST body's fields beside it (`idempotency_key` plays the
//! `Idempotency-Key` header). The task protocol's types are frames by their document
//! names: `TaskRequest` submits, `TaskResponse` (and `CallbackNotification`,
//! `ErrorMessage`) reports progress or a result, `HandoffNotification` hands off,
//! `ClarificationRequest` asks, `ClarificationResponse` answers; plus `cancel_task`,
//! `get_task` and `list_tasks`. Decoding errors name the field exactly as REST does.
//!
//! Server → client: `hello`, pushes (`message` and the task protocol's types), `caught_up`,
//! `reply` (`ok` with `result`, or not with `error`), `ErrorMessage` for frames that could
//! not be understood, and `pong`.

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::core::assistance::RequestAssistance;
use crate::core::broadcasts::BroadcastUpdate;
use crate::core::messages::{InboxQuery, MarkRead, RespondToMessage, SendMessage};
use crate::core::tasks::{
    Answer, CallbackStatus, Cancel, Clarify, Handoff, TaskQuery, TaskRequest, TaskResponseStatus,
    TaskResult,
};
use crate::core::{CoreError, ErrorCode};
use crate::http::extract::decode_value;

/// A frame from the client.
#[derive(Debug)]
pub enum ClientFrame {
    /// Everything up to `seq` has arrived; a reconnect without `since` resumes after it.
    Ack(i64),
    /// Application-level keep-alive (answered with `pong`).
    Ping,
    /// An operation, answered with a `reply` carrying `request_id`.
    Op { request_id: Value, op: Box<Op> },
}

/// An operation sent over the socket: the same inputs as REST.
#[derive(Debug)]
pub enum Op {
    SendMessage(SendMessage, Option<String>),
    GetMessages(InboxQuery),
    GetMessage(String),
    MarkRead(MarkRead),
    Respond(String, RespondToMessage, Option<String>),
    Broadcast(BroadcastUpdate, Option<String>),
    Assistance(RequestAssistance, Option<String>),
    /// The task protocol: what the frame names, with the claimed agent id (checked
    /// against the token by the core) where the type carries one.
    Task(TaskOp),
    /// Who the connection's token belongs to.
    WhoAmI,
}

/// A task protocol frame from the client.
#[derive(Debug)]
pub enum TaskOp {
    Submit(TaskRequest),
    Report {
        task_id: String,
        claimed: Option<String>,
        result: TaskResult,
    },
    Handoff {
        task_id: String,
        handoff: Handoff,
    },
    Clarify {
        task_id: String,
        claimed: Option<String>,
        clarify: Clarify,
    },
    Answer {
        task_id: String,
        clarification_id: String,
        claimed: Option<String>,
        answer: Answer,
    },
    Cancel {
        task_id: String,
        cancel: Cancel,
    },
    Get(String),
    List(TaskQuery),
}

/// A frame that could not be understood: the error and the `request_id` if it had one.
#[derive(Debug)]
pub struct BadFrame {
    pub request_id: Option<Value>,
    pub error: CoreError,
}

fn bad(request_id: Option<Value>, error: CoreError) -> Box<BadFrame> {
    Box::new(BadFrame { request_id, error })
}

/// Decodes a text frame.
pub fn decode(text: &str) -> Result<ClientFrame, Box<BadFrame>> {
    let value: Value = serde_json::from_str(text).map_err(|e| {
        bad(
            None,
            CoreError::validation("frame", format!("the frame is not valid JSON: {e}")),
        )
    })?;
    let Value::Object(mut fields) = value else {
        return Err(bad(
            None,
            CoreError::validation("frame", "a frame is a JSON object with a \"type\""),
        ));
    };
    let request_id = fields.remove("request_id");
    if let Some(id) = &request_id
        && !(id.is_string() || id.is_number())
    {
        return Err(bad(
            None,
            CoreError::validation("request_id", "request_id is a string or a number"),
        ));
    }
    let kind = match fields.remove("type") {
        Some(Value::String(kind)) => kind,
        Some(_) => {
            return Err(bad(
                request_id,
                CoreError::validation("type", "type must be a string"),
            ));
        }
        None => {
            return Err(bad(
                request_id,
                CoreError::validation("type", "the frame has no \"type\""),
            ));
        }
    };
    match kind.as_str() {
        "ack" => {
            #[derive(serde::Deserialize)]
            #[serde(deny_unknown_fields)]
            struct Ack {
                seq: i64,
            }
            let ack: Ack = decode_value(Value::Object(fields)).map_err(|e| bad(request_id, e))?;
            if ack.seq < 0 {
                return Err(bad(
                    None,
                    CoreError::validation("seq", "seq is not negative"),
                ));
            }
            Ok(ClientFrame::Ack(ack.seq))
        }
        "ping" => Ok(ClientFrame::Ping),
        _ => {
            let Some(request_id) = request_id else {
                return Err(bad(
                    None,
                    CoreError::validation(
                        "request_id",
                        format!("a \"{kind}\" frame needs a request_id"),
                    ),
                ));
            };
            decode_op(&kind, fields)
                .map(|op| ClientFrame::Op {
                    request_id: request_id.clone(),
                    op: Box::new(op),
                })
                .map_err(|e| bad(Some(request_id), e))
        }
    }
}

/// Names of the operations, for the unknown-type error.
pub const OPERATIONS: &[&str] = &[
    "send_message",
    "get_messages",
    "get_message",
    "mark_message_read",
    "respond_to_message",
    "broadcast_update",
    "request_assistance",
    "TaskRequest",
    "TaskResponse",
    "HandoffNotification",
    "ClarificationRequest",
    "ClarificationResponse",
    "CallbackNotification",
    "ErrorMessage",
    "cancel_task",
    "get_task",
    "list_tasks",
    "whoami",
];

fn decode_op(kind: &str, mut fields: Map<String, Value>) -> Result<Op, CoreError> {
    let mut key = || match fields.remove("idempotency_key") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(key)) => Ok(Some(key)),
        Some(_) => Err(CoreError::validation(
            "idempotency_key",
            "idempotency_key must be a string",
        )),
    };
    Ok(match kind {
        "send_message" => {
            let key = key()?;
            Op::SendMessage(decode_value(Value::Object(fields))?, key)
        }
        "broadcast_update" => {
            let key = key()?;
            Op::Broadcast(decode_value(Value::Object(fields))?, key)
        }
        "request_assistance" => {
            let key = key()?;
            Op::Assistance(decode_value(Value::Object(fields))?, key)
        }
        "respond_to_message" => {
            let key = key()?;
            let id = match fields.get("original_message_id") {
                Some(Value::String(id)) => id.clone(),
                _ => {
                    return Err(CoreError::validation(
                        "original_message_id",
                        "original_message_id (a string) names the message to respond to",
                    ));
                }
            };
            Op::Respond(id, decode_value(Value::Object(fields))?, key)
        }
        "get_messages" => {
            // The contract nests the filters; accept that shape as well as flat fields.
            if let Some(Value::Object(filters)) = fields.remove("filters") {
                for (name, value) in filters {
                    fields.entry(name).or_insert(value);
                }
            }
            Op::GetMessages(decode_value(Value::Object(fields))?)
        }
        "get_message" => {
            #[derive(serde::Deserialize)]
            #[serde(deny_unknown_fields)]
            struct One {
                message_id: String,
            }
            let one: One = decode_value(Value::Object(fields))?;
            Op::GetMessage(one.message_id)
        }
        "mark_message_read" => Op::MarkRead(decode_value(Value::Object(fields))?),
        "TaskRequest" => Op::Task(TaskOp::Submit(decode_value(Value::Object(fields))?)),
        "TaskResponse" => {
            #[derive(serde::Deserialize)]
            #[serde(deny_unknown_fields)]
            struct Frame {
                task_id: String,
                status: TaskResponseStatus,
                #[serde(default)]
                result_data: Value,
                #[serde(default)]
                agent_id: Option<String>,
            }
            let f: Frame = decode_value(Value::Object(fields))?;
            Op::Task(TaskOp::Report {
                task_id: f.task_id,
                claimed: f.agent_id,
                result: TaskResult {
                    status: f.status,
                    result_data: f.result_data,
                },
            })
        }
        "CallbackNotification" => {
            #[derive(serde::Deserialize)]
            #[serde(deny_unknown_fields)]
            struct Frame {
                task_id: String,
                status: CallbackStatus,
                #[serde(default)]
                result_data: Value,
                #[serde(default)]
                sent_to: Option<String>,
            }
            let f: Frame = decode_value(Value::Object(fields))?;
            let _ = f.sent_to;
            Op::Task(TaskOp::Report {
                task_id: f.task_id,
                claimed: None,
                result: TaskResult {
                    status: match f.status {
                        CallbackStatus::Complete => TaskResponseStatus::Success,
                        CallbackStatus::Failed => TaskResponseStatus::Failed,
                        CallbackStatus::InProgress => TaskResponseStatus::InProgress,
                    },
                    result_data: f.result_data,
                },
            })
        }
        "ErrorMessage" => {
            #[derive(serde::Deserialize)]
            #[serde(deny_unknown_fields)]
            struct Frame {
                task_id: String,
                error_message: String,
                #[serde(default)]
                error_code: Option<String>,
                #[serde(default)]
                originating_agent_id: Option<String>,
            }
            let f: Frame = decode_value(Value::Object(fields))?;
            Op::Task(TaskOp::Report {
                task_id: f.task_id,
                claimed: f.originating_agent_id,
                result: TaskResult {
                    status: TaskResponseStatus::Failed,
                    result_data: json!({
                        "error_code": f.error_code,
                        "error_message": f.error_message,
                    }),
                },
            })
        }
        "HandoffNotification" => {
            #[derive(serde::Deserialize)]
            #[serde(deny_unknown_fields)]
            struct Frame {
                task_id: String,
                new_agent_id: String,
                reason: String,
                #[serde(default)]
                current_agent_id: Option<String>,
            }
            let f: Frame = decode_value(Value::Object(fields))?;
            Op::Task(TaskOp::Handoff {
                task_id: f.task_id,
                handoff: Handoff {
                    new_agent_id: f.new_agent_id,
                    reason: f.reason,
                    current_agent_id: f.current_agent_id,
                },
            })
        }
        "ClarificationRequest" => {
            #[derive(serde::Deserialize)]
            #[serde(deny_unknown_fields)]
            struct Frame {
                task_id: String,
                question: String,
                #[serde(default)]
                requested_by: Option<String>,
            }
            let f: Frame = decode_value(Value::Object(fields))?;
            Op::Task(TaskOp::Clarify {
                task_id: f.task_id,
                claimed: f.requested_by,
                clarify: Clarify {
                    question: f.question,
                },
            })
        }
        "ClarificationResponse" => {
            #[derive(serde::Deserialize)]
            #[serde(deny_unknown_fields)]
            struct Frame {
                task_id: String,
                clarification_id: String,
                answer: String,
                #[serde(default)]
                response_provided_by: Option<String>,
            }
            let f: Frame = decode_value(Value::Object(fields))?;
            Op::Task(TaskOp::Answer {
                task_id: f.task_id,
                clarification_id: f.clarification_id,
                claimed: f.response_provided_by,
                answer: Answer { answer: f.answer },
            })
        }
        "cancel_task" => {
            #[derive(serde::Deserialize)]
            #[serde(deny_unknown_fields)]
            struct Frame {
                task_id: String,
                #[serde(default)]
                reason: Option<String>,
            }
            let f: Frame = decode_value(Value::Object(fields))?;
            Op::Task(TaskOp::Cancel {
                task_id: f.task_id,
                cancel: Cancel { reason: f.reason },
            })
        }
        "get_task" => {
            #[derive(serde::Deserialize)]
            #[serde(deny_unknown_fields)]
            struct Frame {
                task_id: String,
            }
            let f: Frame = decode_value(Value::Object(fields))?;
            Op::Task(TaskOp::Get(f.task_id))
        }
        "list_tasks" => Op::Task(TaskOp::List(decode_value(Value::Object(fields))?)),
        "whoami" => Op::WhoAmI,
        other => {
            return Err(
                CoreError::validation("type", format!("unknown frame type \"{other}\"")).with(
                    "known_types",
                    OPERATIONS
                        .iter()
                        .chain(["ack", "ping"].iter())
                        .copied()
                        .collect::<Vec<_>>(),
                ),
            );
        }
    })
}

/// The first frame of a session.
pub fn hello(
    agent_id: &str,
    team_id: &str,
    connection_id: u64,
    resume_after: i64,
    heartbeat_ms: u128,
) -> String {
    json!({
        "type": "hello",
        "agent_id": agent_id,
        "team_id": team_id,
        "connection_id": connection_id,
        "resume_after": resume_after,
        "heartbeat_interval_ms": heartbeat_ms,
    })
    .to_string()
}

/// Sent once replay is done: everything up to `seq` was sent, live frames follow.
pub fn caught_up(seq: i64) -> String {
    json!({"type": "caught_up", "seq": seq}).to_string()
}

pub fn pong() -> &'static str {
    r#"{"type":"pong"}"#
}

/// The answer to an operation.
pub fn reply<T: Serialize>(request_id: &Value, result: Result<T, CoreError>) -> String {
    match result {
        Ok(result) => {
            json!({"type": "reply", "request_id": request_id, "ok": true, "result": result})
        }
        Err(error) => {
            json!({"type": "reply", "request_id": request_id, "ok": false, "error": error})
        }
    }
    .to_string()
}

/// The answer to a frame that could not be understood: the task protocol's
/// `ErrorMessage`, carrying the standard error body.
pub fn error_message(frame: &BadFrame, agent_id: &str) -> String {
    let mut body = serde_json::to_value(&frame.error).unwrap_or_else(|_| json!({}));
    if let Value::Object(map) = &mut body {
        map.insert("type".into(), json!("ErrorMessage"));
        map.insert("originating_agent_id".into(), json!(agent_id));
        if let Some(id) = &frame.request_id {
            map.insert("request_id".into(), id.clone());
        }
    }
    body.to_string()
}

/// The error for a binary frame.
pub fn binary_refused() -> Box<BadFrame> {
    bad(
        None,
        CoreError::new(
            ErrorCode::ValidationError,
            "binary frames are not supported; send JSON text frames",
        )
        .with("field", "frame"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> Box<BadFrame> {
        decode(text).expect_err(text)
    }

    #[test]
    fn decodes_acks_pings_and_operations() {
        assert!(matches!(
            decode(r#"{"type":"ack","seq":5}"#),
            Ok(ClientFrame::Ack(5))
        ));
        assert!(matches!(
            decode(r#"{"type":"ping"}"#),
            Ok(ClientFrame::Ping)
        ));
        let frame = decode(
            r#"{"type":"send_message","request_id":"r1","idempotency_key":"k","sender_agent_id":"a","recipient_agent_ids":["b"],"message_type":"request","content":{"text":"x"}}"#,
        );
        let Ok(ClientFrame::Op { request_id, op }) = frame else {
            panic!("{frame:?}");
        };
        assert_eq!(request_id, json!("r1"));
        let Op::SendMessage(body, key) = *op else {
            panic!("not a send");
        };
        assert_eq!(key.as_deref(), Some("k"));
        assert_eq!(body.recipient_agent_ids, vec!["b"]);
        let nested = decode(
            r#"{"type":"get_messages","request_id":7,"filters":{"unread_only":true},"limit":5}"#,
        );
        let Ok(ClientFrame::Op { op, .. }) = nested else {
            panic!("{nested:?}");
        };
        let Op::GetMessages(q) = *op else {
            panic!("not an inbox query");
        };
        assert_eq!((q.unread_only, q.limit), (Some(true), Some(5)));
    }

    #[test]
    fn bad_frames_name_what_is_wrong() {
        assert_eq!(err("{nope").error.details["field"], "frame");
        assert_eq!(err("[1]").error.details["field"], "frame");
        assert_eq!(err(r#"{"request_id":"r"}"#).error.details["field"], "type");
        let unknown = err(r#"{"type":"teleport","request_id":"r9"}"#);
        assert_eq!(unknown.error.details["field"], "type");
        assert_eq!(unknown.request_id, Some(json!("r9")));
        assert_eq!(
            err(r#"{"type":"send_message"}"#).error.details["field"],
            "request_id"
        );
        let missing = err(r#"{"type":"send_message","request_id":"r2","sender_agent_id":"a"}"#);
        assert_eq!(missing.error.details["field"], "recipient_agent_ids");
        assert_eq!(missing.request_id, Some(json!("r2")));
        assert_eq!(err(r#"{"type":"ack"}"#).error.details["field"], "seq");
        assert_eq!(
            err(r#"{"type":"ack","seq":-1}"#).error.details["field"],
            "seq"
        );
    }
}
