//! Why an operation did not succeed, until a transport turns it into the wire's error
//! body ([`CoreError::into_body`]).
//!
//! A refusal by a rule of the contract carries its body from the start (the code, the
//! sentence, the details a client needs). Everything else stays a typed cause inside the
//! server — a storage failure, an internal retry signal — and becomes a body only at the
//! edge, where the cause is logged and never sent.

use serde_json::Value;
use switchboard_types::ids::AgentId;
use switchboard_types::{ErrorBody, ErrorCode};

use crate::store::StoreError;

/// An operation's failure.
#[derive(Debug, thiserror::Error)]
pub enum CoreError {
    /// A rule of the contract said no; the body says why.
    #[error("{0}")]
    Refused(Box<ErrorBody>),
    /// Storage failed; the client learns only that storage was unavailable.
    #[error("storage: {0}")]
    Store(#[from] StoreError),
    /// A bug on our side; the text is logged, not sent.
    #[error("internal: {0}")]
    Internal(String),
}

/// Shorthand for the result of every core operation.
pub type CoreResult<T> = Result<T, CoreError>;

impl From<ErrorBody> for CoreError {
    fn from(body: ErrorBody) -> Self {
        CoreError::Refused(Box::new(body))
    }
}

/// How long a client is asked to wait after a storage failure.
pub const STORAGE_RETRY_AFTER_MS: u64 = 1000;

impl CoreError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ErrorBody::new(code, message).into()
    }

    /// A rule about one input field was broken; `details.field` names it.
    pub fn validation(field: &str, message: impl Into<String>) -> Self {
        ErrorBody::validation(field, message).into()
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        CoreError::new(ErrorCode::Unauthorized, message)
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        CoreError::new(ErrorCode::Forbidden, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        CoreError::new(ErrorCode::NotFound, message)
    }

    pub fn agent_not_found(agent_id: &AgentId) -> Self {
        CoreError::new(
            ErrorCode::AgentNotFound,
            format!("agent '{agent_id}' does not exist in this team"),
        )
        .with("agent_id", agent_id)
    }

    pub fn communication_disabled(message: impl Into<String>) -> Self {
        CoreError::new(ErrorCode::CommunicationDisabled, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        CoreError::Internal(message.into())
    }

    /// Adds one entry to a refusal's `details` (other errors have none to show).
    pub fn with(self, key: &str, value: impl Into<Value>) -> Self {
        match self {
            CoreError::Refused(body) => CoreError::Refused(Box::new(body.with(key, value))),
            other => other,
        }
    }

    /// Replaces a refusal's suggested action.
    pub fn suggest(self, action: impl Into<String>) -> Self {
        match self {
            CoreError::Refused(body) => CoreError::Refused(Box::new(body.suggest(action))),
            other => other,
        }
    }

    /// The code the client will see.
    pub fn code(&self) -> ErrorCode {
        match self {
            CoreError::Refused(body) => body.error_code,
            CoreError::Store(_) => ErrorCode::Unavailable,
            CoreError::Internal(_) => ErrorCode::InternalError,
        }
    }

    /// The refusal's body, if this is one.
    pub fn refusal(&self) -> Option<&ErrorBody> {
        match self {
            CoreError::Refused(body) => Some(body),
            _ => None,
        }
    }

    /// The error body a transport sends. Causes the client must not see (storage
    /// errors, bugs) are logged here and replaced by a sentence.
    pub fn into_body(self) -> ErrorBody {
        match self {
            CoreError::Refused(body) => *body,
            CoreError::Store(cause) => {
                tracing::error!(error = %cause, "storage failure");
                let message = if cause.is_full() {
                    "the server's storage is full; nothing was changed"
                } else {
                    "the server could not reach its storage; nothing was changed"
                };
                // Storage trouble passes (space is freed, a lock is released): the
                // client is told when to try again, in `details` and `Retry-After`.
                ErrorBody::new(ErrorCode::Unavailable, message)
                    .with("retry_after_ms", STORAGE_RETRY_AFTER_MS)
            }
            CoreError::Internal(cause) => {
                tracing::error!(error = %cause, "internal error");
                ErrorBody::new(
                    ErrorCode::InternalError,
                    "the server hit a bug while handling this request",
                )
            }
        }
    }
}
