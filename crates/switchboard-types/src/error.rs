//! The one error body of Switchboard.
//!
//! Every operation that does not succeed answers with the contract's error body
//! (`success: false`, `error_code`, `error_message`, `details`, `suggested_action`),
//! whatever the transport. The codes are a closed set so clients can match on them; each
//! transport maps a code to its own status (an HTTP status, a reply frame, a tool error),
//! never to a different code.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Machine-readable error codes: the contract's seven plus what a server needs.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::VariantArray,
)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[strum(serialize_all = "SCREAMING_SNAKE_CASE")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum ErrorCode {
    /// Referenced agent does not exist in the team (contract).
    AgentNotFound,
    /// Referenced message does not exist, or is not visible to the caller (contract).
    MessageNotFound,
    /// A recipient is not a valid member of the team (contract).
    InvalidRecipient,
    /// Message content exceeds the length limits (contract).
    MessageTooLong,
    /// The message does not require a response (contract).
    ResponseNotRequired,
    /// The response deadline has passed (contract).
    ResponseDeadlinePassed,
    /// Communication is disabled for the agent or its team (contract).
    CommunicationDisabled,
    /// An agent with this id is already registered in the team.
    AgentAlreadyRegistered,
    /// Referenced task does not exist, or is not visible to the caller.
    TaskNotFound,
    /// The task is in a state where this action is not allowed.
    InvalidTaskTransition,
    /// No member can take the task: the target does not accept tasks, or no available
    /// agent has the required capabilities.
    NoSuitableAgent,
    /// A lease overlapping the one asked for is held by another agent (an exclusive one,
    /// or any when an exclusive one is asked for); `details.conflicts` names each holder,
    /// its resource and when it ends.
    LeaseConflict,
    /// The lease does not exist (it ended, was released, or never was), or is not the
    /// caller's to change.
    LeaseNotFound,
    /// The approval does not exist, or is not one the caller may see.
    ApprovalNotFound,
    /// The approval was decided already, or expired: `details.status` says which, and
    /// `details.decision` what was decided.
    ApprovalClosed,
    /// No token, or a token the server does not know.
    Unauthorized,
    /// A valid token acting outside its rights.
    Forbidden,
    /// The input is malformed or breaks a rule; `details.field` names the field.
    ValidationError,
    /// The resource does not exist (or the route is unknown).
    NotFound,
    /// The route exists but not with this HTTP method.
    MethodNotAllowed,
    /// The request conflicts with the current state (e.g. a duplicate id).
    Conflict,
    /// The request body or frame is larger than the server accepts.
    PayloadTooLarge,
    /// The request's URI is longer than the server accepts.
    UriTooLong,
    /// The request's headers are more, or larger, than the server accepts.
    HeadersTooLarge,
    /// The request's body did not arrive in the time the server allows.
    RequestTimeout,
    /// The caller sends faster than the server allows.
    RateLimited,
    /// The send would extend a causal chain past the team's loop guard (too many hops,
    /// or the same agents going round in the same order); `details` say which rule.
    LoopDetected,
    /// Storage (or another dependency) is not available; nothing was changed.
    Unavailable,
    /// A bug on our side; the request may or may not have taken effect.
    InternalError,
}

impl ErrorCode {
    /// The code as the wire shows it (`TASK_NOT_FOUND`), for bodies that carry it as
    /// text, such as the task protocol's `ErrorMessage`.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// What a client can usually do about an error with this code.
    pub fn default_suggestion(self) -> &'static str {
        match self {
            ErrorCode::AgentNotFound => {
                "Check the agent id; list the team's agents to see who is registered."
            }
            ErrorCode::MessageNotFound => {
                "Check the message id; only messages you sent or received are visible."
            }
            ErrorCode::InvalidRecipient => {
                "Send only to registered members of your team (not to yourself)."
            }
            ErrorCode::MessageTooLong => {
                "Shorten the text to at most 2000 characters; put bulk data in content.data or an attachment."
            }
            ErrorCode::ResponseNotRequired => "Send a new message instead of a response.",
            ErrorCode::ResponseDeadlinePassed => {
                "Send a new message to the original sender instead."
            }
            ErrorCode::CommunicationDisabled => {
                "Ask the team owner to enable communication for the team or agent."
            }
            ErrorCode::AgentAlreadyRegistered => {
                "Use a different agent_id, or remove the existing agent first."
            }
            ErrorCode::TaskNotFound => {
                "Check the task id; only its originator and assignees can see a task."
            }
            ErrorCode::InvalidTaskTransition => {
                "Read the task to see its current status and who may act on it."
            }
            ErrorCode::NoSuitableAgent => {
                "Register an agent with the required capabilities, or wait until one is available."
            }
            ErrorCode::LeaseConflict => {
                "Work on something else, or ask the holders named in details.conflicts; retry after their expires_at."
            }
            ErrorCode::LeaseNotFound => {
                "List the team's leases; the lease may have ended, and only its holder (or the team key) changes it."
            }
            ErrorCode::ApprovalNotFound => {
                "Check the approval id; an agent sees the approvals it asked, the team key every one of its team."
            }
            ErrorCode::ApprovalClosed => {
                "Read the approval: it was decided or it expired; ask again with a new request if it still matters."
            }
            ErrorCode::Unauthorized => "Send a valid token as 'Authorization: Bearer <token>'.",
            ErrorCode::Forbidden => "Use a token that has rights on this resource.",
            ErrorCode::ValidationError => {
                "Fix the field named in details and send the request again."
            }
            ErrorCode::NotFound => "Check the path and the ids in it.",
            ErrorCode::MethodNotAllowed => {
                "Use a method this path supports (see the Allow header)."
            }
            ErrorCode::Conflict => "Read the current state and retry with a different request.",
            ErrorCode::PayloadTooLarge => {
                "Send a smaller body; the limit is in details.limit_bytes."
            }
            ErrorCode::UriTooLong => {
                "Shorten the URI (long filters belong in fewer, broader ones); the limit is in details.limit_bytes."
            }
            ErrorCode::HeadersTooLarge => {
                "Send fewer or smaller headers; the limits are in details."
            }
            ErrorCode::RequestTimeout => {
                "Send the whole body at once, within details.limit_seconds of its head."
            }
            ErrorCode::RateLimited => {
                "Slow down and retry after the delay in details.retry_after_ms."
            }
            ErrorCode::LoopDetected => {
                "Stop answering this chain; start new work in a new thread, or ask the team owner to change loop_guard."
            }
            ErrorCode::Unavailable => "Retry later; nothing was changed by this request.",
            ErrorCode::InternalError => "Retry later and report the request id to the operator.",
        }
    }
}

/// A refusal, as every transport sends it.
///
/// `success` is always false. Constructors pick a default `suggested_action` per code so
/// every error tells the client what to do next.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[error("{}: {error_message}", error_code.as_str())]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = CoreError))]
pub struct ErrorBody {
    /// Always `false`.
    pub success: bool,
    pub error_code: ErrorCode,
    /// A sentence for a person.
    pub error_message: String,
    /// Structured facts about the error (e.g. `field`, `invalid_ids`); may be empty.
    /// Boxed so an error stays small on the `Err` path of every result.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub details: Box<Map<String, Value>>,
    /// What the client can do about it.
    pub suggested_action: String,
}

/// Longest text an error echoes back (a message, or a string in `details`): a body
/// never grows with what the client sent.
pub const MAX_ECHO_CHARS: usize = 256;
/// Most items of a list in `details` (e.g. `invalid_ids`).
pub const MAX_ECHO_ITEMS: usize = 100;

/// `text` cut to at most `max` characters, saying how much was left out: the one rule
/// for anything a peer wrote that reaches an error text or a log line (an error body's
/// strings, an A2A error's method name, …), so neither grows with what was sent.
pub fn cut(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(max) {
        None => std::borrow::Cow::Borrowed(text),
        Some((at, _)) => {
            let rest = text[at..].chars().count();
            std::borrow::Cow::Owned(format!("{}… ({rest} more characters)", &text[..at]))
        }
    }
}

fn bounded_text(text: String, max: usize) -> String {
    match cut(&text, max) {
        std::borrow::Cow::Borrowed(_) => text,
        std::borrow::Cow::Owned(cut) => cut,
    }
}

/// A `details` value with its strings and lists bounded.
fn bounded(value: Value) -> Value {
    match value {
        Value::String(text) => Value::String(bounded_text(text, MAX_ECHO_CHARS)),
        Value::Array(items) => Value::Array(
            items
                .into_iter()
                .take(MAX_ECHO_ITEMS)
                .map(bounded)
                .collect(),
        ),
        Value::Object(fields) => {
            Value::Object(fields.into_iter().map(|(k, v)| (k, bounded(v))).collect())
        }
        other => other,
    }
}

impl ErrorBody {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ErrorBody {
            success: false,
            error_code: code,
            // Messages quote input (an id, a list of names): bounded like details.
            error_message: bounded_text(message.into(), 4 * MAX_ECHO_CHARS),
            details: Box::default(),
            suggested_action: code.default_suggestion().to_owned(),
        }
    }

    /// Adds one entry to `details` (strings and lists bounded, see [`MAX_ECHO_CHARS`]).
    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.details.insert(key.to_owned(), bounded(value.into()));
        self
    }

    /// Replaces the default `suggested_action`.
    pub fn suggest(mut self, action: impl Into<String>) -> Self {
        self.suggested_action = action.into();
        self
    }

    /// A rule about one input field was broken; `details.field` names it.
    pub fn validation(field: &str, message: impl Into<String>) -> Self {
        ErrorBody::new(ErrorCode::ValidationError, message).with("field", field)
    }
}

#[cfg(test)]
mod tests {
    use strum::VariantArray;

    use super::*;

    #[test]
    fn codes_read_the_same_through_serde_and_strum() {
        for code in ErrorCode::VARIANTS {
            let json = serde_json::to_value(code).expect("json");
            assert_eq!(json, Value::String(code.as_str().to_owned()));
            assert_eq!(code.as_str().parse::<ErrorCode>().ok(), Some(*code));
        }
    }
}
