//! MCP (Model Context Protocol): any MCP-capable agent joins its team by configuration
//! alone and sees Switchboard's operations as tools. Streamable HTTP at `/mcp` through
//! the official Rust SDK (`rmcp`); the bearer token of each HTTP request decides who
//! calls, exactly as on REST.
//!
//! * `tools.rs` — the tool table: which operation each tool is, and what a model reads
//!   about it.
//! * `schema.rs` — each tool's input schema, cut from the REST operation's own
//!   parameters and body in the OpenAPI document (one definition of every field).
//!
//! A tool call decodes its arguments as a WebSocket frame of the same operation
//! ([`switchboard_types::frames::operation_from_fields`]) and calls
//! [`Core::dispatch`]: the answer is the REST body, the error the REST error body.

mod direct;
mod prompts;
mod resources;
mod schema;
mod sessions;
mod tools;

use crate::core::trace::traced;
use std::sync::Arc;
use switchboard_types::trace::TraceContext;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use rmcp::ErrorData as McpError;
use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, GetPromptRequestParams, GetPromptResponse,
    Implementation, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ReadResourceRequestParams,
    ReadResourceResponse, ServerCapabilities, ServerConfig, SubscribeRequestParams,
    SubscriptionFilter, Tool, UnsubscribeRequestParams,
};
use rmcp::service::{RequestContext, RoleServer, SubscriptionContext};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use switchboard_types::ErrorCode;
use switchboard_types::routing::Via;

use crate::core::sessions::Credential;
use crate::core::{Caller, Core, CoreError};
use crate::transport::common::{ApiError, TRACEPARENT, TRACESTATE, authenticate};

/// What every MCP session of this server shares: the core and the tool list (built once
/// from the OpenAPI document).
#[derive(Clone)]
pub struct McpState {
    core: Core,
    tools: Arc<Vec<Tool>>,
    /// This session's resource subscriptions (each session gets its own, see [`router`]).
    subscriptions: Arc<resources::Subscriptions>,
}

impl McpState {
    pub fn new(core: Core, doc: &utoipa::openapi::OpenApi) -> McpState {
        McpState {
            core,
            tools: Arc::new(tools::list(doc)),
            subscriptions: Arc::default(),
        }
    }

    /// The handler of a new session: shared core and tools, its own subscriptions.
    fn for_session(&self) -> McpState {
        McpState {
            subscriptions: Arc::default(),
            ..self.clone()
        }
    }
}

/// The `/mcp` route: the SDK's Streamable HTTP service behind our bearer check.
///
/// Host and Origin checks (the SDK's DNS-rebinding guard for unauthenticated local
/// servers) are off: every request here carries a token, and operators put the server
/// behind names the SDK cannot know.
///
/// A credential holds at most `--ws-max-per-agent` sessions (as for live connections,
/// counted by the core), and only its own (`sessions`); a session idle for 5 minutes
/// ends (the SDK's keep-alive).
pub fn router(state: McpState, max_body_bytes: usize) -> Router {
    let handler = state.clone();
    let config = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .disable_allowed_origins()
        // A request of the stateless revision (2026-07-28) whose first answer is its
        // result is answered as one JSON body rather than an SSE stream of one event (a
        // stream, a keep-alive timer and chunked framing per call). A call that says
        // something first (progress while it waits) still streams. Sessions of the
        // handshake revisions are not concerned.
        .with_json_response(true)
        .with_max_request_body_bytes(max_body_bytes);
    let manager = Arc::new(LocalSessionManager::default());
    let limit = Arc::new(sessions::SessionLimit::new(
        state.core.clone(),
        manager.clone(),
    ));
    let service = StreamableHttpService::new(move || Ok(handler.for_session()), manager, config);
    Router::new()
        .nest_service("/mcp", service)
        // One `layer` call for both: each call boxes the route once more, and a boxed
        // route clones what it wraps on every request (see `http::app`). Outermost first.
        .layer(
            tower::ServiceBuilder::new()
                .layer(middleware::from_fn_with_state(
                    (state.core.clone(), limit),
                    authenticated,
                ))
                .layer(middleware::from_fn_with_state(
                    (state.core, max_body_bytes),
                    json_rpc_only,
                )),
        )
}

/// What the SDK refuses as undecodable (HTTP 415 with a text body, "fail to deserialize
/// request body", which no client reads as an answer) is answered as JSON-RPC says, in a
/// JSON body (HTTP 400, `id` null): `-32700` for bad JSON or nesting past the parser's
/// depth, `-32600` for a batch (MCP dropped batches in 2025-06-18), a member named twice
/// (the project's strict reading, `switchboard_types::strict`), or anything else that is
/// not a JSON-RPC message. A request the SDK takes is not read twice: the body is only
/// looked at again when the SDK refused it. A plain stateless `tools/call` is answered
/// here, without the SDK's per-request service ([`direct`]). A body that is not JSON by its
/// `Content-Type` keeps the SDK's answer.
async fn json_rpc_only(
    State((core, max_body_bytes)): State<(Core, usize)>,
    request: Request,
    next: Next,
) -> Response {
    if request.method() != axum::http::Method::POST {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let json = parts
        .headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    let bytes = match axum::body::to_bytes(body, max_body_bytes).await {
        Ok(bytes) => bytes,
        Err(_) => {
            let err = CoreError::new(ErrorCode::PayloadTooLarge, "the request body is too large")
                .with("limit_bytes", max_body_bytes);
            return ApiError(err).into_response();
        }
    };
    if let Some(call) = direct::recognise(&parts, &bytes)
        && let Some(caller) = parts.extensions.get::<Caller>()
    {
        return direct::answer(&core, caller, call).await;
    }
    if let Some(refusal) = bad_tool_call(&bytes) {
        return refusal;
    }
    let response = next
        .run(Request::from_parts(
            parts,
            axum::body::Body::from(bytes.clone()),
        ))
        .await;
    if response.status() != axum::http::StatusCode::UNSUPPORTED_MEDIA_TYPE || !json {
        return response;
    }
    let (code, why) = why_not_json_rpc(&bytes);
    let answer = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": code, "message": why},
    });
    (axum::http::StatusCode::BAD_REQUEST, axum::Json(answer)).into_response()
}

/// A `tools/call` whose params are not what the method takes — not an object, no
/// `name` or one that is not a string, `arguments` that are not an object — answered
/// `-32602` (invalid params), as JSON-RPC has it: the SDK, failing to read them as a
/// `tools/call`, answered `-32601` (no such method), which sends a client looking for a
/// method that exists. Only bodies that name the method are parsed again.
fn bad_tool_call(bytes: &[u8]) -> Option<Response> {
    const METHOD: &[u8] = b"tools/call";
    if !bytes.windows(METHOD.len()).any(|w| w == METHOD) {
        return None;
    }
    let request: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    if request.get("method")?.as_str()? != "tools/call" {
        return None;
    }
    let id = request.get("id")?.clone();
    let params = request.get("params");
    let why = match params {
        Some(serde_json::Value::Object(params)) => {
            match (params.get("name"), params.get("arguments")) {
                (None, _) => "params.name is required: the tool to call",
                (Some(name), _) if !name.is_string() => "params.name must be a string",
                (_, Some(arguments)) if !arguments.is_object() && !arguments.is_null() => {
                    "params.arguments must be an object (the tool's arguments by name)"
                }
                _ => return None,
            }
        }
        _ => "params must be an object with the tool's name and arguments",
    };
    let answer = serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": -32602, "message": why},
    });
    Some(axum::Json(answer).into_response())
}

/// An error the SDK answers in plain text (a `Content-Type` that is not JSON, an
/// `Accept` without JSON and SSE, an unknown session) as a JSON-RPC error in a JSON body,
/// with the same status — what the reference TypeScript SDK answers (`-32001` for an
/// unknown session, `-32000` otherwise), and what A2A answers here for the same case: a
/// client reads every refusal the same way.
async fn json_rpc_error_body(response: Response) -> Response {
    let status = response.status();
    let typed = response
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("application/json") || t.starts_with("text/event-stream"));
    if !status.is_client_error() || typed {
        return response;
    }
    let text = axum::body::to_bytes(response.into_body(), 64 * 1024)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
        .unwrap_or_default();
    let code = if status == axum::http::StatusCode::NOT_FOUND {
        -32001
    } else {
        -32000
    };
    let message = match text.as_str() {
        "" => status.canonical_reason().unwrap_or("refused").to_owned(),
        text => text.to_owned(),
    };
    let answer = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": code, "message": message},
    });
    (status, axum::Json(answer)).into_response()
}

/// Why a body the SDK could not decode is no JSON-RPC message: the JSON-RPC error code
/// and the reason.
fn why_not_json_rpc(bytes: &[u8]) -> (i64, String) {
    use serde::Deserialize;
    let mut reader = serde_json::Deserializer::from_slice(bytes);
    let read = serde_json::Value::deserialize(switchboard_types::strict::Strict(&mut reader))
        .and_then(|value| reader.end().map(|()| value));
    match read {
        Err(e) if e.is_syntax() || e.is_eof() => (-32700, format!("not JSON: {e}")),
        Err(e) => (-32600, e.to_string()),
        Ok(serde_json::Value::Array(_)) => (
            -32600,
            "a batch (a JSON array) is not a request: MCP takes one message per POST".into(),
        ),
        Ok(serde_json::Value::Object(_)) => (
            -32600,
            "not a JSON-RPC request, notification or response".into(),
        ),
        Ok(_) => (-32600, "a JSON-RPC message is an object".into()),
    }
}

/// Refuses a request without a valid token with the REST error body (401), a session
/// another credential opened (404), and a new session beyond the credential's bound
/// (429); otherwise hands the caller to the tools in the request's extensions.
async fn authenticated(
    State((core, limit)): State<(Core, Arc<sessions::SessionLimit>)>,
    mut request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let header = request
        .headers()
        .get(AUTHORIZATION)
        .map(|v| v.to_str().unwrap_or(""));
    let caller = authenticate(&core, header).await?.by(Via::Mcp);
    request.extensions_mut().insert(caller);
    let owner = Credential::from(&caller);
    let named = request
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    // Another credential's session is answered as an unknown one.
    if let Some(id) = &named
        && !limit.may_use(id, owner)
    {
        return Err(CoreError::new(ErrorCode::NotFound, "no such MCP session")
            .with("field", "Mcp-Session-Id")
            .suggest("Open a session of your own with initialize.")
            .into());
    }
    // A POST without a session id opens one (an initialize of the handshake revisions).
    let opens = request.method() == axum::http::Method::POST && named.is_none();
    if opens {
        limit.admit(&caller).await?;
    } else {
        limit.sweep_if_due().await;
    }
    let ends = request.method() == axum::http::Method::DELETE;
    let mut response = json_rpc_error_body(next.run(request).await).await;
    // The SDK answers a session's end 202; the official clients expect 200 or 204 and
    // log "Session termination failed: 202" on every close. Ending is idempotent: a
    // session already ended (or never known to this credential) ends again quietly.
    if ends && response.status() == axum::http::StatusCode::ACCEPTED {
        *response.status_mut() = axum::http::StatusCode::NO_CONTENT;
    }
    if ends {
        // The session no longer counts for its credential, at once.
        limit.sweep().await;
    }
    if opens
        && let Some(id) = response.headers().get("mcp-session-id")
        && let Ok(id) = id.to_str()
    {
        limit.opened(id, &caller).await?;
    }
    Ok(response)
}

/// The W3C trace context of the HTTP request that carried this MCP request.
fn trace_of(context: &RequestContext<RoleServer>) -> TraceContext {
    let parts = context.extensions.get::<axum::http::request::Parts>();
    let header = |name| {
        parts
            .and_then(|p| p.headers.get(name))
            .and_then(|v| v.to_str().ok())
    };
    TraceContext::from_values(header(TRACEPARENT), header(TRACESTATE))
}

/// The caller the bearer check put on this request.
fn caller_of(context: &RequestContext<RoleServer>) -> Result<Caller, McpError> {
    context
        .extensions
        .get::<axum::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Caller>())
        .copied()
        .ok_or_else(|| McpError::internal_error("the request was not authenticated", None))
}

impl ServerHandler for McpState {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_prompts()
            .enable_resources()
            .enable_resources_subscribe()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new(
                "switchboard",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(tools::INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(self.tools.to_vec()))
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        Ok(ListPromptsResult::with_all_items(prompts::list()))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        prompts::get(&request.name, request.arguments.as_ref())
            .map(Into::into)
            .ok_or_else(|| {
                McpError::invalid_params(format!("no prompt named '{}'", request.name), None)
            })
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        Ok(ListResourcesResult::with_all_items(resources::list()))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Ok(ListResourceTemplatesResult::with_all_items(
            resources::templates(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let caller = caller_of(&context)?;
        Ok(resources::read(&self.core, &caller, &request.uri)
            .await?
            .into())
    }

    // The subscription model of the handshake revisions (up to 2025-11-25), which the
    // SDKs' clients speak today.
    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let caller = caller_of(&context)?;
        self.subscriptions
            .subscribe(&self.core, caller, request.uri, context.peer.clone())
            .await
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.subscriptions.unsubscribe(&request.uri);
        Ok(())
    }

    /// `subscriptions/listen` (2026-07-28): the resource URIs this server serves; no
    /// list ever changes, so no list-changed notifications.
    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let asked = requested
            .resource_subscriptions
            .as_deref()
            .unwrap_or_default();
        Some(
            SubscriptionFilter::builder()
                .resource_subscriptions(resources::known(asked))
                .build(),
        )
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        let caller = caller_of(context.request_context())?;
        // A listen stream holds its connection until the client ends it: it counts among
        // the credential's waiting calls, and past the cap the stream ends with the error.
        let _place = self
            .core
            .live()
            .hold_wait(&caller)
            .map_err(resources::refused)?;
        resources::listen(&self.core, caller, context).await;
        Ok(())
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools.iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let caller = caller_of(&context)?;
        let Some(tool) = tools::find(&request.name) else {
            return Err(McpError::invalid_params(
                format!("no tool named '{}'", request.name),
                None,
            ));
        };
        let arguments = request.arguments.unwrap_or_default();
        let progress = context.meta.get_progress_token();
        let peer = context.peer.clone();
        let total = tools::wait_total(&arguments);
        let on_tick = move |waited: std::time::Duration| {
            let (Some(token), peer) = (progress.clone(), peer.clone()) else {
                return;
            };
            let mut update = ProgressNotificationParam::new(token, waited.as_millis() as f64);
            update.total = total;
            update.message = Some("waiting for the inbox".into());
            tokio::spawn(async move {
                // A client that went away needs no progress.
                let _ = peer.notify_progress(update).await;
            });
        };
        // The session runs the call on its own task: the HTTP request's trace context is
        // read from its headers here (the middleware's scope does not reach this task).
        let call = tools::call(&self.core, &caller, tool, arguments, on_tick);
        Ok(traced(trace_of(&context), call).await.into())
    }
}
