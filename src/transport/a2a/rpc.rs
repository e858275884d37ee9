//! JSON-RPC 2.0 at an interface URL: the envelope, the method table, and errors in A2A's
//! codes. Who calls and which member is called are settled first, over HTTP (`401`,
//! `403`, `404` with the contract's body, as on REST); everything after is a JSON-RPC
//! answer with status 200.

use crate::core::ask::{self, Ask};
use switchboard_types::ids::{AgentId, TaskRef, TeamId};

use a2a::{
    A2AError, CancelTaskRequest, GetTaskRequest, JsonRpcError, JsonRpcId, ListTasksRequest,
    ListTasksResponse, SendMessageResponse,
};
use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Value, json};
use switchboard_types::ErrorCode;
use switchboard_types::decode::CommaList;
use switchboard_types::tasks::{Cancel, Task, TaskDetail, TaskQuery, TaskRole};

pub use super::errors::to_a2a;
use super::member::Member;
use super::v03::{self, Dialect};
use super::{A2aState, convert, push, send, stream, wire};
use crate::core::{Caller, CoreError};
use crate::transport::common::ApiError;

/// The header a client names its protocol version in.
const VERSION_HEADER: &str = "a2a-version";

/// The longest page `ListTasks` gives.
const MAX_PAGE: i32 = 100;

/// One member's interface, as one caller reaches it.
pub struct Interface {
    pub state: A2aState,
    pub caller: Caller,
    /// The caller's agent id: the originator of what it sends.
    pub me: AgentId,
    /// The member called: the target of what is sent (an agent, or a role's agents).
    pub member: Member,
    /// The protocol version of the request.
    pub dialect: Dialect,
}

impl Interface {
    /// Authenticates the caller (an agent of the team) and finds the member.
    async fn open(
        state: A2aState,
        team_id: TeamId,
        member: Member,
        headers: &HeaderMap,
    ) -> Result<Interface, ApiError> {
        let caller = state.authenticate(headers).await?;
        if !matches!(caller, Caller::Agent { .. }) {
            return Err(ApiError(CoreError::forbidden(
                "A2A calls are made by agents: use an agent token of the team",
            )));
        }
        let member = member.find(&state.core, &caller, team_id).await?;
        let whoami = state.core.dispatch(&caller, ask::WhoAmI {}).await?;
        let Some(me) = whoami.agent_id else {
            return Err(ApiError(CoreError::internal(
                "an agent token names no agent",
            )));
        };
        Ok(Interface {
            state,
            caller,
            me,
            member,
            dialect: Dialect::V1,
        })
    }

    /// Asks the core as the caller, the answer typed by what is asked.
    pub async fn call<A: Ask>(&self, ask: A) -> Result<A::Answer, A2AError> {
        self.state
            .core
            .dispatch(&self.caller, ask)
            .await
            .map_err(to_a2a)
    }

    /// A task of the caller's that was given to this member (`TaskNotFound` otherwise:
    /// another member's tasks are not reachable through this interface).
    pub async fn task(&self, task_id: &str) -> Result<TaskDetail, A2AError> {
        let task_id = self.reference(task_id);
        let detail = self.call(ask::GetTask { task_id }).await?;
        if self.owns(&detail.task) {
            Ok(detail)
        } else {
            Err(A2AError::task_not_found(&detail.task.task_id))
        }
    }

    /// How a task this caller gave is named to the core: always with the caller as its
    /// originator, so that a task of the same id the caller was given (ids are unique
    /// per originator; an A2A task's is `a2a-` and the message id) is never the one meant.
    pub fn reference(&self, task_id: &str) -> TaskRef {
        TaskRef::at(task_id, &self.me)
    }

    /// Whether a task belongs to this interface: the caller gave it to this member.
    pub fn owns(&self, task: &Task) -> bool {
        task.originating_agent_id == self.me && self.member.was_given(task)
    }
}

/// `POST /a2a/{team_id}/{agent_id}`: one JSON-RPC request.
pub async fn call(
    State(state): State<A2aState>,
    Path((team_id, member)): Path<(TeamId, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let member = Member::named(member);
    let mut interface = match Interface::open(state, team_id, member, &headers).await {
        Ok(interface) => interface,
        Err(err) => return err.into_response(),
    };
    // JSON-RPC over HTTP is JSON: a body declared as something else is refused as the
    // spec's ContentTypeNotSupportedError (-32005). No Content-Type is taken as JSON.
    if let Some(declared) = wire::not_json(&headers) {
        let id = as_sent(&body).map_or(JsonRpcId::Null, |sent| sent.0);
        let why = format!("Content-Type '{declared}' is not supported: send application/json");
        return answer(
            id,
            Err(A2AError::new(
                a2a::errors::error_code::CONTENT_TYPE_NOT_SUPPORTED,
                why,
            )),
        );
    }
    // A request without an `id` member is a notification: done, never answered.
    let (id, notification, method, params) = match as_sent(&body) {
        Some(parts) => parts,
        None => match envelope(&body) {
            Ok((id, notification, method, params)) => {
                (id, notification, method, Params::Tree(params))
            }
            Err((id, err)) => return answer(id, Err(err)),
        },
    };
    let dialect = match dialect_of(&headers, &method) {
        Ok(dialect) => dialect,
        Err(err) => return answer(id, Err(err)),
    };
    // The rule of every way in (`switchboard_types::strict`); the SDK's types are not
    // decoded through it, so it is checked on the request's text.
    if switchboard_types::strict::has_nul(&body) {
        let why = "a string may not contain U+0000 (NUL)";
        return answer(id, Err(A2AError::invalid_params(why)));
    }
    let (method, params) = match dialect {
        Dialect::V1 => (method, params),
        Dialect::V03 => match (v03::method(&method), params.into_value()) {
            (Some(method), Ok(params)) => match v03::params(method, params) {
                Ok(params) => (method.to_owned(), Params::Tree(params)),
                Err(err) => return answer(id, Err(err)),
            },
            (None, _) => return answer(id, Err(unknown_method(&method))),
            (_, Err(err)) => return answer(id, Err(err)),
        },
    };
    interface.dialect = dialect;
    if notification {
        notified(&interface, &method, params, &headers).await;
        return axum::http::StatusCode::NO_CONTENT.into_response();
    }
    match method.as_str() {
        "SendStreamingMessage" => match params.decode() {
            Ok(request) => stream::send(interface, (id, dialect), request, &headers).await,
            Err(err) => answer(id, Err(err)),
        },
        "SubscribeToTask" => match params.into_value() {
            Ok(params) => stream::subscribe(interface, (id, dialect), params, &headers).await,
            Err(err) => answer(id, Err(err)),
        },
        _ => answer_shown(id, unary(&interface, &method, params, &headers).await),
    }
}

/// A notification (JSON-RPC 2.0 §4.1): the server must not reply, so what it asks is
/// done as far as it makes sense without an answer — a send is sent (never waited for,
/// nor streamed: nobody would hear it), a subscription is nothing — and the outcome,
/// errors included, goes unsaid.
async fn notified(interface: &Interface, method: &str, params: Params<'_>, headers: &HeaderMap) {
    match method {
        "SendMessage" | "SendStreamingMessage" => {
            if let Ok(request) = params.decode() {
                let _ = send::submit(interface, &request, headers).await;
            }
        }
        "SubscribeToTask" => {}
        _ => {
            let _ = unary(interface, method, params, headers).await;
        }
    }
}

/// The methods answered with one response, each result serialized as the dialect shows
/// it.
async fn unary(
    interface: &Interface,
    method: &str,
    params: Params<'_>,
    headers: &HeaderMap,
) -> Result<Box<RawValue>, A2AError> {
    let dialect = interface.dialect;
    match method {
        "SendMessage" => {
            let task = send::blocking(interface, params.decode()?, headers).await?;
            shown(dialect, &SendMessageResponse::Task(task))
        }
        "GetTask" => {
            let request: GetTaskRequest = params.decode()?;
            let history = history_length(request.history_length)?;
            let detail = interface.task(&request.id).await?;
            shown(dialect, &convert::task_detail(&detail, history))
        }
        "ListTasks" => shown(dialect, &list(interface, params.decode()?).await?),
        "CancelTask" => shown(dialect, &cancel(interface, params.decode()?).await?),
        "CreateTaskPushNotificationConfig"
        | "GetTaskPushNotificationConfig"
        | "ListTaskPushNotificationConfigs"
        | "DeleteTaskPushNotificationConfig" => {
            let value = push::call(interface, method, params.into_value()?).await?;
            shown(dialect, &value)
        }
        "GetExtendedAgentCard" => Err(A2AError::extended_card_not_configured()),
        other => Err(unknown_method(other)),
    }
}

/// A request's `historyLength`: how many of the newest messages to show, so never
/// negative (`InvalidParams`, as the spec's validation says).
pub(super) fn history_length(asked: Option<i32>) -> Result<Option<i32>, A2AError> {
    match asked {
        Some(n) if n < 0 => Err(A2AError::invalid_params(format!(
            "historyLength: {n} is negative; give 0 or more (or leave it out for all)"
        ))),
        other => Ok(other),
    }
}

/// An unknown method, named in the answer as far as the echo bound allows (a peer's
/// 200 KB method name is not echoed back whole).
pub(super) fn unknown_method(method: &str) -> A2AError {
    A2AError::method_not_found(&switchboard_types::error::cut(method, 64))
}

/// A result as the dialect shows it, serialized straight from its type in 1.0 (the hot
/// path: no `Value` tree in between) and through the 0.3 rewrite otherwise.
fn shown<T: Serialize>(dialect: Dialect, result: &T) -> Result<Box<RawValue>, A2AError> {
    let raw = match dialect {
        Dialect::V1 => serde_json::value::to_raw_value(result),
        Dialect::V03 => serde_json::to_value(result)
            .and_then(|value| serde_json::value::to_raw_value(&dialect.result(value))),
    };
    raw.map_err(|e| A2AError::internal(format!("the result did not serialize: {e}")))
}

/// A request's params, parsed only into the type the method takes.
pub enum Params<'a> {
    /// As sent: a JSON object not yet parsed (the usual case).
    Text(&'a RawValue),
    /// A tree already (read by the general envelope, or rewritten from 0.3).
    Tree(Value),
}

impl Params<'_> {
    /// The params as the method's request, or `InvalidParams` saying what is wrong.
    pub fn decode<T: DeserializeOwned>(self) -> Result<T, A2AError> {
        match self {
            // An original (snake_case) field name: through the tree, which renames it.
            Params::Text(raw) if wire::has_snake_key(raw.get()) => decode(wire::proto_names(
                serde_json::from_str(raw.get())
                    .map_err(|e| A2AError::parse_error(e.to_string()))?,
            )?),
            Params::Text(raw) => {
                let mut parser = serde_json::Deserializer::from_str(raw.get());
                serde_path_to_error::deserialize(&mut parser).map_err(|e| {
                    let path = e.path().to_string();
                    let inner = e.into_inner();
                    // The same words as from a tree: the position is in the params, not
                    // in the request the client sent, so it would only mislead.
                    let at = format!(" at line {} column {}", inner.line(), inner.column());
                    let why = inner.to_string();
                    let why = why.strip_suffix(&at).unwrap_or(&why);
                    A2AError::invalid_params(format!("{path}: {why}"))
                })
            }
            Params::Tree(value) => decode(wire::proto_names(value)?),
        }
    }

    /// The params as a tree, for the methods that read them so.
    pub fn into_value(self) -> Result<Value, A2AError> {
        let value = match self {
            Params::Text(raw) => {
                serde_json::from_str(raw.get()).map_err(|e| A2AError::parse_error(e.to_string()))?
            }
            Params::Tree(value) => value,
        };
        wire::proto_names(value)
    }
}

/// The envelope of a well-formed request, its params left unparsed; `None` for anything
/// unusual (another shape, an escaped `method`, a repeated key, …), which [`envelope`]
/// then reads and, when it is wrong, says why.
///
/// A member named twice fails the derived struct (`duplicate field`), so such a request
/// is read by [`envelope`], which refuses it.
fn as_sent(body: &[u8]) -> Option<(JsonRpcId, bool, String, Params<'_>)> {
    #[derive(Deserialize)]
    struct Sent<'a> {
        jsonrpc: &'a str,
        /// `None` when absent (a notification); `Some(None)` for `"id": null`.
        #[serde(borrow, default, deserialize_with = "present")]
        id: Option<Option<&'a RawValue>>,
        method: &'a str,
        #[serde(borrow)]
        params: Option<&'a RawValue>,
    }
    fn present<'de, D: serde::Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Option<&'de RawValue>>, D::Error> {
        Option::<&'de RawValue>::deserialize(d).map(Some)
    }
    let sent: Sent = serde_json::from_slice(body).ok()?;
    if sent.jsonrpc != "2.0" {
        return None;
    }
    let notification = sent.id.is_none();
    let id = match sent.id.flatten().map(RawValue::get) {
        None | Some("null") => JsonRpcId::Null,
        Some(text) if text.starts_with('"') => JsonRpcId::String(serde_json::from_str(text).ok()?),
        Some(text) => JsonRpcId::Number(serde_json::from_str(text).ok()?),
    };
    let params = match sent.params {
        None => Params::Tree(Value::Object(Default::default())),
        Some(raw) if raw.get().starts_with('{') => Params::Text(raw),
        Some(_) => return None,
    };
    Some((id, notification, sent.method.to_owned(), params))
}

/// Reads the JSON-RPC envelope: `(id, method, params)`, or the error to answer with
/// (and the id, when one could be read).
///
/// JSON-RPC's members are named once: `"method":"SendMessage","method":"GetTask"` ran
/// GetTask (the last one won) where a stricter reader would run the first.
fn envelope(body: &[u8]) -> Result<(JsonRpcId, bool, String, Value), (JsonRpcId, A2AError)> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| (JsonRpcId::Null, A2AError::parse_error(e.to_string())))?;
    let members = wire::top_level_members(body).unwrap_or_default();
    if let Some(twice) = wire::repeated(&members) {
        let why = format!(
            "the request names '{}' twice",
            switchboard_types::error::cut(twice, 64)
        );
        return Err((JsonRpcId::Null, A2AError::invalid_request(why)));
    }
    let notification = !members.iter().any(|m| m == "id");
    let Value::Object(mut fields) = value else {
        return Err((
            JsonRpcId::Null,
            A2AError::invalid_request("a JSON-RPC request is an object"),
        ));
    };
    let id = match fields.remove("id") {
        None | Some(Value::Null) => JsonRpcId::Null,
        Some(Value::String(s)) => JsonRpcId::String(s),
        Some(Value::Number(n)) if n.is_i64() => JsonRpcId::Number(n.as_i64().unwrap_or(0)),
        Some(_) => {
            return Err((
                JsonRpcId::Null,
                A2AError::invalid_request("id is a string or an integer"),
            ));
        }
    };
    if fields.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err((id, A2AError::invalid_request("jsonrpc must be \"2.0\"")));
    }
    let Some(Value::String(method)) = fields.remove("method") else {
        return Err((id, A2AError::invalid_request("method is a string")));
    };
    let params = match fields.remove("params") {
        None | Some(Value::Null) => Value::Object(Default::default()),
        Some(params @ Value::Object(_)) => params,
        Some(_) => {
            return Err((id, A2AError::invalid_params("params is an object")));
        }
    };
    Ok((id, notification, method, params))
}

/// The dialect of a request: `A2A-Version` 1.x (or none) is 1.0, 0.3 is 0.3; a request
/// that names no version and uses a 0.3 method name is 0.3 too (0.3 clients sent no
/// header). Any other version is `VersionNotSupported`.
fn dialect_of(headers: &HeaderMap, method: &str) -> Result<Dialect, A2AError> {
    let version = headers
        .get(VERSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .trim();
    match version {
        "" if v03::method(method).is_some() => Ok(Dialect::V03),
        "" | "1" => Ok(Dialect::V1),
        "0.3" | "0.3.0" => Ok(Dialect::V03),
        v if v.starts_with("1.") => Ok(Dialect::V1),
        other => Err(A2AError::version_not_supported(other)),
    }
}

/// A method's params, or `InvalidParams` saying what is wrong with them.
pub fn decode<T: DeserializeOwned>(params: Value) -> Result<T, A2AError> {
    serde_path_to_error::deserialize(params).map_err(|e| {
        let path = e.path().to_string();
        A2AError::invalid_params(format!("{path}: {}", e.into_inner()))
    })
}

/// A JSON-RPC response, status 200.
pub fn answer(id: JsonRpcId, result: Result<Value, A2AError>) -> Response {
    Json(response(id, result)).into_response()
}

/// [`answer`] with a result serialized already (see [`shown`]).
fn answer_shown(id: JsonRpcId, result: Result<Box<RawValue>, A2AError>) -> Response {
    #[derive(Serialize)]
    struct Answer {
        jsonrpc: &'static str,
        id: JsonRpcId,
        result: Box<RawValue>,
    }
    match result {
        Ok(result) => Json(Answer {
            jsonrpc: "2.0",
            id,
            result,
        })
        .into_response(),
        Err(err) => answer(id, Err(err)),
    }
}

/// A JSON-RPC response object.
pub fn response(id: JsonRpcId, result: Result<Value, A2AError>) -> Value {
    match result {
        Ok(result) => json!({ "jsonrpc": "2.0", "id": id, "result": result }),
        Err(err) => {
            let error: JsonRpcError = err.to_jsonrpc_error();
            json!({ "jsonrpc": "2.0", "id": id, "error": error })
        }
    }
}

/// `ListTasks`: the caller's tasks given to this member, newest first (the core's
/// `target_agent_id` or `assignee_role` filter). `contextId` and `statusTimestampAfter` narrow the page
/// afterwards, so with them a page may hold fewer than `pageSize`; `totalSize` counts
/// the page.
async fn list(
    interface: &Interface,
    request: ListTasksRequest,
) -> Result<ListTasksResponse, A2AError> {
    let size = request.page_size.unwrap_or(50);
    if !(1..=MAX_PAGE).contains(&size) {
        return Err(A2AError::invalid_params(format!(
            "pageSize is 1 to {MAX_PAGE}"
        )));
    }
    let status = match &request.status {
        None | Some(a2a::TaskState::Unspecified) => None,
        Some(state) => match convert::statuses_of(state) {
            statuses if statuses.is_empty() => return Ok(empty_page(size)),
            statuses => Some(CommaList(statuses)),
        },
    };
    let (target_agent_id, assignee_role) = match &interface.member {
        Member::Agent(id) => (Some(id.clone()), None),
        Member::Role(role) => (None, Some(role.clone())),
    };
    let query = TaskQuery {
        role: Some(TaskRole::Originated),
        status,
        limit: Some(i64::from(size)),
        cursor: request.page_token.filter(|t| !t.is_empty()),
        target_agent_id,
        assignee_role,
    };
    let list = interface.call(ask::ListTasks { query }).await?;
    let after = request.status_timestamp_after.map(|t| t.timestamp_micros());
    let history = history_length(request.history_length)?.or(Some(0));
    let tasks: Vec<a2a::Task> = list
        .tasks
        .iter()
        .filter(|t| {
            request
                .context_id
                .as_ref()
                .is_none_or(|c| *c == convert::context_of(t))
        })
        .filter(|t| after.is_none_or(|after| t.updated_at.micros() >= after))
        .map(|t| {
            let mut task = convert::task(t, history);
            if request.include_artifacts != Some(true) {
                task.artifacts = None;
            }
            task
        })
        .collect();
    let count = i32::try_from(tasks.len()).unwrap_or(MAX_PAGE);
    Ok(ListTasksResponse {
        tasks,
        next_page_token: list.next_cursor.unwrap_or_default(),
        page_size: size,
        total_size: count,
    })
}

fn empty_page(size: i32) -> ListTasksResponse {
    ListTasksResponse {
        tasks: Vec::new(),
        next_page_token: String::new(),
        page_size: size,
        total_size: 0,
    }
}

/// `CancelTask`: a finished task is `TaskNotCancelable`.
async fn cancel(interface: &Interface, request: CancelTaskRequest) -> Result<a2a::Task, A2AError> {
    interface.task(&request.id).await?;
    let reason = request
        .metadata
        .as_ref()
        .and_then(|m| m.get("reason"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let operation = ask::CancelTask {
        task_id: interface.reference(&request.id),
        cancel: Cancel { reason },
    };
    let canceled = interface
        .state
        .core
        .dispatch(&interface.caller, operation)
        .await;
    match canceled {
        Ok(updated) => Ok(convert::task(&updated.task, None)),
        Err(err) if err.code() == ErrorCode::InvalidTaskTransition => {
            Err(A2AError::task_not_cancelable(&request.id))
        }
        Err(err) => Err(to_a2a(err)),
    }
}
