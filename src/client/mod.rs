//! A client for one agent: typed methods for every operation of the messaging contract
//! and the task protocol, and a stream of what arrives for the agent.
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
//! use switchboard::client::{Client, ClientError};
//! use switchboard::core::messages::{Content, MessageType, SendMessage};
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

mod http;
mod ws;

use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

pub use http::HttpTransport;
pub use ws::WsTransport;

use crate::core::assistance::{AssistanceResult, RequestAssistance};
use crate::core::broadcasts::{BroadcastResult, BroadcastUpdate};
use crate::core::messages::{
    Content, InboxPage, InboxQuery, MarkRead, MarkReadResult, MessageDetail, MessageType,
    MessageView, RespondResult, RespondToMessage, SendMessage, SendResult,
};
use crate::core::tasks::{
    Answer, Cancel, Clarify, Handoff, TaskDetail, TaskList, TaskQuery, TaskRequest, TaskResult,
    TaskSubmitted, TaskUpdated,
};
use crate::core::teams::WhoAmI;
use crate::core::{CoreError, ErrorCode};

/// What went wrong with a call.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server refused the operation; its error body, and the HTTP status if the
    /// answer came over HTTP.
    #[error("{}: {}", .error.error_code.as_text(), .error.error_message)]
    Server {
        status: Option<u16>,
        error: Box<CoreError>,
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
        match self {
            ClientError::Server { error, .. } => Some(error.error_code),
            _ => None,
        }
    }

    /// The server's error body, when the server refused.
    pub fn server_error(&self) -> Option<&CoreError> {
        match self {
            ClientError::Server { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// One operation, described for every transport: REST's method, path and query, the
/// socket's frame type and fields.
#[derive(Debug, Clone)]
pub struct Request {
    /// The WebSocket frame `type`.
    pub op: &'static str,
    pub method: reqwest::Method,
    /// REST path, e.g. `/v1/messages`.
    pub path: String,
    /// REST query string (without `?`), for reads.
    pub query: Option<String>,
    /// The REST body, and the frame's fields (for reads: the query as an object).
    pub body: Value,
    /// Fields the frame needs beyond the body (ids REST carries in the path).
    pub frame_extra: Map<String, Value>,
    pub idempotency_key: Option<String>,
}

impl Request {
    fn new(
        op: &'static str,
        method: reqwest::Method,
        path: impl Into<String>,
        body: Value,
    ) -> Self {
        Request {
            op,
            method,
            path: path.into(),
            query: None,
            body,
            frame_extra: Map::new(),
            idempotency_key: None,
        }
    }

    fn extra(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.frame_extra.insert(key.to_owned(), value.into());
        self
    }

    fn key(mut self, key: Option<&str>) -> Self {
        self.idempotency_key = key.map(str::to_owned);
        self
    }

    /// A read: the query goes in the REST query string and in the frame's fields.
    fn read(op: &'static str, path: impl Into<String>, query: Value) -> Self {
        let mut request = Request::new(op, reqwest::Method::GET, path, query);
        request.query = Some(query_string(&request.body));
        request
    }

    /// The frame that carries this request over the socket.
    pub fn frame(&self, request_id: u64) -> Value {
        let mut frame = Map::new();
        frame.insert("type".into(), json!(self.op));
        frame.insert("request_id".into(), json!(request_id));
        if let Value::Object(fields) = &self.body {
            for (k, v) in fields {
                if !v.is_null() {
                    frame.insert(k.clone(), v.clone());
                }
            }
        }
        for (k, v) in &self.frame_extra {
            frame.insert(k.clone(), v.clone());
        }
        if let Some(key) = &self.idempotency_key {
            frame.insert("idempotency_key".into(), json!(key));
        }
        Value::Object(frame)
    }
}

/// `a=1&b=x,y` from an object's non-null fields (lists comma-joined).
fn query_string(value: &Value) -> String {
    let mut out = form_urlencoded::Serializer::new(String::new());
    if let Value::Object(fields) = value {
        for (k, v) in fields {
            let text = match v {
                Value::Null => continue,
                Value::String(s) => s.clone(),
                Value::Array(items) => items
                    .iter()
                    .map(|i| i.as_str().map_or_else(|| i.to_string(), str::to_owned))
                    .collect::<Vec<_>>()
                    .join(","),
                other => other.to_string(),
            };
            out.append_pair(k, &text);
        }
    }
    out.finish()
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

    /// The frame as a task protocol type (e.g. [`crate::core::tasks::ClarificationRequest`]).
    pub fn task<T: DeserializeOwned>(&self) -> Option<T> {
        serde_json::from_value(self.frame.clone()).ok()
    }

    /// The frame for an inbox entry read over REST: rendered by the same functions the
    /// server's pushes use, so both transports hand out identical frames.
    pub(crate) fn from_view(view: &MessageView) -> Option<Incoming> {
        let seq = view.seq?;
        let text =
            match crate::core::tasks::notice_frame(&view.message_id, view.timestamp, &view.content)
            {
                Some((kind, body)) if view.kind == crate::core::messages::MessageKind::Task => {
                    crate::hub::frame_of(kind, seq, &body)
                }
                _ => {
                    // The frame adds `seq` itself, as the server's pushes do.
                    let unnumbered = MessageView {
                        seq: None,
                        ..view.clone()
                    };
                    crate::hub::frame_of(
                        crate::hub::FrameKind::Message,
                        seq,
                        &serde_json::to_string(&unnumbered).ok()?,
                    )
                }
            };
        let frame = serde_json::from_str(&text).ok()?;
        Some(Incoming { seq, frame })
    }
}

/// How operations reach the server and what arrives comes back.
pub trait Transport: Send + Sync {
    /// Performs one operation; its result object, or the server's refusal.
    fn call<'a>(&'a self, request: Request) -> BoxFuture<'a, Result<Value, ClientError>>;

    /// Starts handing out incoming entries after sequence number `after` (`None`: where
    /// the server's cursor for the agent is, or the start). Each entry comes once, in
    /// order. Called at most once per transport.
    fn incoming(&self, after: Option<i64>) -> mpsc::Receiver<Incoming>;
}

/// A client acting as one agent.
#[derive(Clone)]
pub struct Client {
    agent_id: String,
    team_id: String,
    transport: Arc<dyn Transport>,
}

impl Client {
    /// Over HTTP: one request per operation; incoming entries by polling the inbox.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), switchboard::client::ClientError> {
    /// use switchboard::client::Client;
    /// use switchboard::core::tasks::{TaskRequest, TaskResponseStatus, TaskResult};
    ///
    /// let worker = Client::http("http://127.0.0.1:8080", "sb_agent_…").await?;
    /// let mut incoming = worker.incoming();
    /// while let Some(entry) = incoming.recv().await {
    ///     if entry.kind() == "TaskRequest" {
    ///         let request: TaskRequest = entry.task().expect("a TaskRequest frame");
    ///         let task_id = request.task_id.unwrap_or_default();
    ///         let done = TaskResult { status: TaskResponseStatus::Success, result_data: "ok".into() };
    ///         worker.report(&task_id, done).await?;
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn http(base: &str, token: &str) -> Result<Client, ClientError> {
        Client::with_transport(Arc::new(HttpTransport::new(base, token)?)).await
    }

    /// Over one WebSocket, reconnecting by itself.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), switchboard::client::ClientError> {
    /// use switchboard::client::Client;
    /// use switchboard::core::ErrorCode;
    /// use switchboard::core::messages::{MessageType, SendMessage};
    ///
    /// let client = Client::websocket("http://127.0.0.1:8080", "sb_agent_…").await?;
    /// let message = SendMessage::new(client.agent_id(), &["nobody"], MessageType::Information, "hi");
    /// match client.send_message(message, Some("retry-key-1")).await {
    ///     Err(err) if err.code() == Some(ErrorCode::InvalidRecipient) => println!("no such agent"),
    ///     other => println!("{:?}", other.map(|sent| sent.message_id)),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn websocket(base: &str, token: &str) -> Result<Client, ClientError> {
        Client::with_transport(Arc::new(WsTransport::connect(base, token).await?)).await
    }

    /// A client on any transport; asks the server who the token belongs to.
    pub async fn with_transport(transport: Arc<dyn Transport>) -> Result<Client, ClientError> {
        let me: WhoAmI = decode(
            transport
                .call(Request::new(
                    "whoami",
                    reqwest::Method::GET,
                    "/v1/whoami",
                    json!({}),
                ))
                .await?,
        )?;
        match (me.agent_id, me.team_id) {
            (Some(agent_id), Some(team_id)) => Ok(Client {
                agent_id,
                team_id,
                transport,
            }),
            _ => Err(ClientError::Decode(
                "the token is not an agent token".to_owned(),
            )),
        }
    }

    pub fn agent_id(&self) -> &str {
        &self.agent_id
    }

    pub fn team_id(&self) -> &str {
        &self.team_id
    }

    /// Incoming entries, from where the server's cursor for this agent is (over the
    /// WebSocket: after its last acknowledged entry; over HTTP: from the start).
    pub fn incoming(&self) -> mpsc::Receiver<Incoming> {
        self.transport.incoming(None)
    }

    /// Incoming entries after sequence number `after`.
    pub fn incoming_after(&self, after: i64) -> mpsc::Receiver<Incoming> {
        self.transport.incoming(Some(after))
    }

    async fn call<T: DeserializeOwned>(&self, request: Request) -> Result<T, ClientError> {
        decode(self.transport.call(request).await?)
    }

    /// SEND_MESSAGE.
    pub async fn send_message(
        &self,
        input: SendMessage,
        idempotency_key: Option<&str>,
    ) -> Result<SendResult, ClientError> {
        self.call(
            Request::new(
                "send_message",
                reqwest::Method::POST,
                "/v1/messages",
                body(&input)?,
            )
            .key(idempotency_key),
        )
        .await
    }

    /// GET_MESSAGES.
    pub async fn get_messages(&self, query: InboxQuery) -> Result<InboxPage, ClientError> {
        self.call(Request::read("get_messages", "/v1/messages", body(&query)?))
            .await
    }

    /// One message the agent sent or received, with its responses.
    pub async fn get_message(&self, message_id: &str) -> Result<MessageDetail, ClientError> {
        self.call(
            Request::new(
                "get_message",
                reqwest::Method::GET,
                format!("/v1/messages/{}", segment(message_id)),
                json!({}),
            )
            .extra("message_id", message_id),
        )
        .await
    }

    /// MARK_MESSAGE_READ.
    pub async fn mark_read(&self, message_ids: &[&str]) -> Result<MarkReadResult, ClientError> {
        let input = MarkRead {
            agent_id: self.agent_id.clone(),
            message_ids: message_ids.iter().map(|s| (*s).to_owned()).collect(),
        };
        self.call(Request::new(
            "mark_message_read",
            reqwest::Method::POST,
            "/v1/messages/read",
            body(&input)?,
        ))
        .await
    }

    /// RESPOND_TO_MESSAGE.
    pub async fn respond(
        &self,
        message_id: &str,
        input: RespondToMessage,
        idempotency_key: Option<&str>,
    ) -> Result<RespondResult, ClientError> {
        self.call(
            Request::new(
                "respond_to_message",
                reqwest::Method::POST,
                format!("/v1/messages/{}/responses", segment(message_id)),
                body(&input)?,
            )
            .extra("original_message_id", message_id)
            .key(idempotency_key),
        )
        .await
    }

    /// BROADCAST_UPDATE.
    pub async fn broadcast(
        &self,
        input: BroadcastUpdate,
        idempotency_key: Option<&str>,
    ) -> Result<BroadcastResult, ClientError> {
        self.call(
            Request::new(
                "broadcast_update",
                reqwest::Method::POST,
                "/v1/broadcasts",
                body(&input)?,
            )
            .key(idempotency_key),
        )
        .await
    }

    /// REQUEST_ASSISTANCE.
    pub async fn request_assistance(
        &self,
        input: RequestAssistance,
        idempotency_key: Option<&str>,
    ) -> Result<AssistanceResult, ClientError> {
        self.call(
            Request::new(
                "request_assistance",
                reqwest::Method::POST,
                "/v1/assistance-requests",
                body(&input)?,
            )
            .key(idempotency_key),
        )
        .await
    }

    /// Submits a TaskRequest (`originating_agent_id` must be this agent).
    pub async fn submit_task(&self, input: TaskRequest) -> Result<TaskSubmitted, ClientError> {
        self.call(Request::new(
            "TaskRequest",
            reqwest::Method::POST,
            "/v1/tasks",
            body(&input)?,
        ))
        .await
    }

    /// A task with its history.
    pub async fn get_task(&self, task_id: &str) -> Result<TaskDetail, ClientError> {
        self.call(
            Request::new(
                "get_task",
                reqwest::Method::GET,
                format!("/v1/tasks/{}", segment(task_id)),
                json!({}),
            )
            .extra("task_id", task_id),
        )
        .await
    }

    /// The agent's tasks.
    pub async fn list_tasks(&self, query: TaskQuery) -> Result<TaskList, ClientError> {
        self.call(Request::read("list_tasks", "/v1/tasks", body(&query)?))
            .await
    }

    /// Hands a task to another agent.
    pub async fn handoff(&self, task_id: &str, input: Handoff) -> Result<TaskUpdated, ClientError> {
        self.task_action("HandoffNotification", task_id, "handoff", body(&input)?)
            .await
    }

    /// Asks the originator a question (the assignee).
    pub async fn clarify(&self, task_id: &str, input: Clarify) -> Result<TaskUpdated, ClientError> {
        self.task_action(
            "ClarificationRequest",
            task_id,
            "clarifications",
            body(&input)?,
        )
        .await
    }

    /// Answers the open question (the originator).
    pub async fn answer(
        &self,
        task_id: &str,
        clarification_id: &str,
        input: Answer,
    ) -> Result<TaskUpdated, ClientError> {
        let request = Request::new(
            "ClarificationResponse",
            reqwest::Method::POST,
            format!(
                "/v1/tasks/{}/clarifications/{}/answer",
                segment(task_id),
                segment(clarification_id)
            ),
            body(&input)?,
        )
        .extra("task_id", task_id)
        .extra("clarification_id", clarification_id);
        self.call(request).await
    }

    /// Reports progress or the result (the assignee).
    pub async fn report(
        &self,
        task_id: &str,
        input: TaskResult,
    ) -> Result<TaskUpdated, ClientError> {
        self.task_action("TaskResponse", task_id, "result", body(&input)?)
            .await
    }

    /// Cancels a task (the originator).
    pub async fn cancel(&self, task_id: &str, input: Cancel) -> Result<TaskUpdated, ClientError> {
        self.task_action("cancel_task", task_id, "cancel", body(&input)?)
            .await
    }

    async fn task_action(
        &self,
        op: &'static str,
        task_id: &str,
        action: &str,
        body: Value,
    ) -> Result<TaskUpdated, ClientError> {
        self.call(
            Request::new(
                op,
                reqwest::Method::POST,
                format!("/v1/tasks/{}/{action}", segment(task_id)),
                body,
            )
            .extra("task_id", task_id),
        )
        .await
    }
}

impl SendMessage {
    /// A message with the required fields; the rest at their defaults.
    pub fn new(sender: &str, to: &[&str], message_type: MessageType, text: &str) -> SendMessage {
        SendMessage {
            sender_agent_id: sender.to_owned(),
            recipient_agent_ids: to.iter().map(|s| (*s).to_owned()).collect(),
            message_type,
            content: Content {
                text: text.to_owned(),
                ..Content::default()
            },
            priority: Default::default(),
            requires_response: false,
            context_reference: None,
            response_deadline: None,
            thread_id: None,
            in_reply_to: None,
        }
    }
}

fn body(value: &impl Serialize) -> Result<Value, ClientError> {
    serde_json::to_value(value).map_err(|e| ClientError::Decode(format!("encoding: {e}")))
}

fn decode<T: DeserializeOwned>(value: Value) -> Result<T, ClientError> {
    serde_json::from_value(value).map_err(|e| ClientError::Decode(e.to_string()))
}

/// An id as one path segment.
fn segment(id: &str) -> String {
    form_urlencoded::byte_serialize(id.as_bytes()).collect()
}

/// Reads an error body (REST or the socket's `error`) into a [`ClientError`].
pub(crate) fn server_error(status: Option<u16>, body: Value) -> ClientError {
    match serde_json::from_value::<CoreError>(body.clone()) {
        Ok(error) => ClientError::Server {
            status,
            error: Box::new(error),
        },
        Err(_) => ClientError::Decode(format!(
            "an error answer without the standard body (status {status:?}): {body}"
        )),
    }
}
