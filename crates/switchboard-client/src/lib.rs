//! A client for one Switchboard agent: typed methods for every operation of the
//! messaging contract and the task protocol, and a stream of what arrives for the agent.
//!
//! It depends on the wire types ([`switchboard_types`]) and its HTTP and WebSocket
//! libraries only, never on the server, so a Rust agent compiles no database or web
//! framework.
//!
//! The methods are the same whatever carries them; a [`Transport`] does the carrying.
//! Two are built in: [`HttpTransport`] (a request per operation; incoming entries by
//! polling the inbox from the last sequence number) and [`WsTransport`] (operations as
//! frames with request ids over one WebSocket; live push; reconnects by itself and
//! resumes after the last entry it handed out, so nothing is lost or seen twice). Both
//! hand out incoming entries as the same [`Incoming`] frames. Another transport is one
//! more implementation of the trait.
//!
//! ```no_run
//! use switchboard_client::{Client, ClientError};
//! use switchboard_types::messages::{MessageType, SendMessage};
//!
//! # async fn demo() -> Result<(), ClientError> {
//! let client = Client::websocket("http://127.0.0.1:8080", "sb_agent_…").await?;
//! let sent = client
//!     .send_message(
//!         SendMessage::new(client.agent_id(), &["coder"], MessageType::Request, "Review please"),
//!         None,
//!     )
//!     .await?;
//! println!("sent {}", sent.message_id);
//! let mut incoming = client.incoming();
//! while let Some(frame) = incoming.recv().await {
//!     println!("{} #{}", frame.kind(), frame.seq);
//! }
//! # Ok(()) }
//! ```
//!
//! Errors come back as one type, [`ClientError`]; a refusal by the server carries the
//! server's error body, so `err.code()` is the same `ErrorCode` REST and the socket use.

mod agent;
mod http;
pub mod mcp;
pub mod rest;
mod ws;

use futures_util::future::BoxFuture;
use serde::de::DeserializeOwned;
use serde_json::Value;
use switchboard_types::messages::MessageView;
use switchboard_types::{ErrorBody, ErrorCode, Operation};
use tokio::sync::mpsc;

pub use agent::Client;
pub use http::HttpTransport;
pub use ws::WsTransport;

/// What went wrong with a call.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server refused the operation; its error body, and the HTTP status if the
    /// answer came over HTTP.
    #[error("{}: {}", .error.error_code.as_str(), .error.error_message)]
    Server {
        status: Option<u16>,
        error: Box<ErrorBody>,
    },
    /// The request did not reach the server, or its answer did not come back (a
    /// dropped connection: the operation may or may not have taken effect; retry with
    /// an idempotency key to be safe).
    #[error("transport: {0}")]
    Transport(String),
    /// The server answered something this client does not understand.
    #[error("unexpected answer: {0}")]
    Decode(String),
}

impl ClientError {
    /// The server's error code, when the server refused.
    pub fn code(&self) -> Option<ErrorCode> {
        self.server_error().map(|e| e.error_code)
    }

    /// The server's error body, when the server refused.
    pub fn server_error(&self) -> Option<&ErrorBody> {
        match self {
            ClientError::Server { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// Something that arrived for the agent: an inbox entry, as the frame the WebSocket
/// pushes (`{"type": "message", "seq", "message": {…}}`, or a task protocol type with
/// its fields).
#[derive(Debug, Clone, PartialEq)]
pub struct Incoming {
    /// The agent's sequence number of the entry.
    pub seq: i64,
    /// The whole frame.
    pub frame: Value,
}

impl Incoming {
    /// `message`, or a task protocol type (`TaskRequest`, `TaskResponse`, …).
    pub fn kind(&self) -> &str {
        self.frame["type"].as_str().unwrap_or_default()
    }

    /// The message, for a `message` frame.
    pub fn message(&self) -> Option<MessageView> {
        (self.kind() == "message")
            .then(|| serde_json::from_value(self.frame["message"].clone()).ok())
            .flatten()
    }

    /// The frame as a task protocol type (e.g. a `ClarificationRequest`).
    pub fn task<T: DeserializeOwned>(&self) -> Option<T> {
        serde_json::from_value(self.frame.clone()).ok()
    }

    /// The frame for an inbox entry read over REST: rendered by the same function the
    /// server's pushes use, so both transports hand out identical frames.
    pub(crate) fn from_view(view: &MessageView) -> Result<Incoming, ClientError> {
        let seq = view
            .seq
            .ok_or_else(|| ClientError::Decode("an inbox entry without seq".into()))?;
        let text = switchboard_types::frames::push_frame(seq, view)
            .map_err(|e| ClientError::Decode(e.to_string()))?;
        let frame = serde_json::from_str(&text).map_err(|e| ClientError::Decode(e.to_string()))?;
        Ok(Incoming { seq, frame })
    }
}

/// How operations reach the server and what arrives comes back.
pub trait Transport: Send + Sync {
    /// Performs one operation; its result object, or the server's refusal.
    fn call<'a>(&'a self, operation: Operation) -> BoxFuture<'a, Result<Value, ClientError>>;

    /// Starts handing out incoming entries after sequence number `after` (`None`: where
    /// the server's cursor for the agent is, or the start). Each entry comes once, in
    /// order. Called at most once per transport.
    fn incoming(&self, after: Option<i64>) -> mpsc::Receiver<Incoming>;
}

/// Performs `operation` on any transport and reads its answer as `T`; for operations
/// [`Client`] has no method for (team administration with a team key or the admin
/// token).
pub async fn call<T: DeserializeOwned>(
    transport: &dyn Transport,
    operation: Operation,
) -> Result<T, ClientError> {
    decode(transport.call(operation).await?)
}

fn decode<T: DeserializeOwned>(value: Value) -> Result<T, ClientError> {
    serde_json::from_value(value).map_err(|e| ClientError::Decode(e.to_string()))
}

/// Reads an error body (REST or the socket's `error`) into a [`ClientError`].
pub(crate) fn server_error(status: Option<u16>, body: Value) -> ClientError {
    match serde_json::from_value::<ErrorBody>(body.clone()) {
        Ok(error) => ClientError::Server {
            status,
            error: Box::new(error),
        },
        Err(_) => ClientError::Decode(format!(
            "an error answer without the standard body (status {status:?}): {body}"
        )),
    }
}

/// Makes sure rustls has its process-wide crypto provider (ring) before an HTTP client
/// is built: reqwest is built without a default provider, and building a client without
/// one fails. Idempotent.
pub fn ensure_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
