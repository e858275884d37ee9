//! The REST transport: decode, authenticate, call the core, encode.
//!
//! One file per resource, each exposing `router()`; routes are registered through
//! utoipa-axum's `OpenApiRouter`, so the OpenAPI document is built from the same list as
//! the routing and cannot drift from it. [`app`] wraps the routes of every transport the
//! server mounts (REST and those composed beside it) in the HTTP middleware.

mod agents;
mod approvals;
mod assistance;
mod broadcasts;
mod claims;
mod console;
mod leases;
mod linger;
mod messages;
mod openapi;
mod ops;
mod publish;
mod requests;
mod search;
mod tasks;
mod teams;
mod traffic;

use crate::core::trace::traced;
use std::time::Duration;
use switchboard_types::trace::TraceContext;

use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use switchboard_types::{ErrorBody, ErrorCode, Operation, Reply};
use tower::ServiceBuilder;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::cors::CorsLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::timeout::RequestBodyDeadlineLayer;
use tower_http::trace::TraceLayer;
use utoipa_axum::router::OpenApiRouter;
use utoipa_swagger_ui::SwaggerUi;

pub use openapi::BEARER;

use crate::core::{Caller, Core, CoreResult};
use crate::telemetry::MetricsHandle;
use crate::transport::common::{
    ApiError, ApiResult, BodyDeadline, BodyLimit, HasCore, TRACEPARENT, TRACESTATE,
};
use requests::X_REQUEST_ID;

/// What REST handlers need, behind one `Arc`: axum clones the state for every extractor
/// of every request, and one reference count is cheaper than cloning each handle.
#[derive(Clone)]
pub struct HttpState(std::sync::Arc<HttpParts>);

/// The parts of [`HttpState`].
pub struct HttpParts {
    pub core: Core,
    pub metrics: MetricsHandle,
}

impl HttpState {
    pub fn new(core: Core, metrics: MetricsHandle) -> HttpState {
        HttpState(std::sync::Arc::new(HttpParts { core, metrics }))
    }
}

impl HasCore for HttpState {
    fn core(&self) -> &Core {
        &self.0.core
    }
}

/// Settings of the HTTP transport.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    /// Largest accepted request body, in bytes.
    pub max_body_bytes: usize,
    /// Time a request body may take to arrive in full (`--http-body-timeout`).
    pub body_timeout: Duration,
}

/// Every REST route with its OpenAPI description.
pub fn routes() -> OpenApiRouter<HttpState> {
    OpenApiRouter::with_openapi(openapi::base())
        .merge(teams::router())
        .merge(agents::router())
        .merge(messages::router())
        .merge(broadcasts::router())
        .merge(assistance::router())
        .merge(tasks::router())
        .merge(claims::router())
        .merge(leases::router())
        .merge(approvals::router())
        .merge(search::router())
        .merge(publish::router())
        .merge(ops::router())
        .merge(traffic::router())
}

async fn dispatch(state: &HttpState, caller: &Caller, operation: Operation) -> CoreResult<Reply> {
    state.core().dispatch(caller, operation).await
}

/// Performs an operation; 200 with its answer.
async fn ok(state: HttpState, caller: &Caller, operation: Operation) -> ApiResult<Json<Reply>> {
    Ok(Json(dispatch(&state, caller, operation).await?))
}

/// Performs an operation that creates something; 201 with its answer.
async fn created(
    state: HttpState,
    caller: &Caller,
    operation: Operation,
) -> ApiResult<(StatusCode, Json<Reply>)> {
    Ok((
        StatusCode::CREATED,
        Json(dispatch(&state, caller, operation).await?),
    ))
}

/// The complete application: the routes given (REST and whatever is composed beside
/// it), the docs for `openapi`, the team console, fallbacks and middleware.
pub fn app(router: Router, openapi: utoipa::openapi::OpenApi, settings: &HttpSettings) -> Router {
    router
        .merge(
            SwaggerUi::new("/docs")
                .url("/openapi.json", openapi)
                .config(utoipa_swagger_ui::Config::default().validator_url("none")),
        )
        .merge(console::router())
        .fallback(unknown_route)
        .method_not_allowed_fallback(method_not_allowed)
        // One `layer` call with the whole stack: each `Router::layer` boxes every route
        // once more, and a boxed route clones what it wraps on every request, so twelve
        // calls cost 89 allocations a request where one costs a few (issue 63: the
        // round's new layers were most of a send's creep). Outermost first.
        .layer(
            ServiceBuilder::new()
                // Bearer tokens, not cookies, carry identity, so any origin may call the
                // API; browsers never attach credentials on their own.
                .layer(CorsLayer::permissive().max_age(Duration::from_secs(3600)))
                .layer(middleware::from_fn(guard_request_head))
                .layer(SetRequestIdLayer::new(X_REQUEST_ID, MakeRequestUuid))
                .layer(PropagateRequestIdLayer::new(X_REQUEST_ID))
                .layer(TraceLayer::new_for_http().make_span_with(request_span))
                .layer(CatchPanicLayer::custom(panic_response))
                .layer(axum::Extension(BodyDeadline(settings.body_timeout)))
                // A body that trickles in (or never comes) holds a task and a connection:
                // the whole of it must arrive within the deadline (not one byte per idle
                // period).
                .layer(RequestBodyDeadlineLayer::new(settings.body_timeout))
                // The deadline wraps the body in its own type; the layers inside take
                // axum's (as the router did between two `layer` calls).
                .map_request(|req: Request<_>| req.map(axum::body::Body::new))
                .layer(axum::Extension(BodyLimit(settings.max_body_bytes)))
                .layer(DefaultBodyLimit::max(settings.max_body_bytes))
                // Inside the deadline layer: the drain is bounded by the same deadline.
                .layer(middleware::from_fn(linger::drain_unread_body))
                .layer(middleware::from_fn_with_state(
                    requests::RequestMetrics::default(),
                    requests::track,
                )),
        )
}

/// The access log's span of a request: its method, its path (only: a query string may
/// carry `access_token`) and its request id.
fn request_span(req: &Request) -> tracing::Span {
    let id = req
        .headers()
        .get(X_REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("-");
    tracing::info_span!("request", method = %req.method(), path = %req.uri().path(), request_id = %id)
}

/// Longest URI accepted (414 above).
pub const MAX_URI_BYTES: usize = 8 * 1024;
/// Most headers of a request: hyper's own bound, which it answers with a bare 431
/// before the middleware runs (raising it made hyper set up room for that many headers
/// on every request: 7% of the /healthz ceiling, measured with callgrind).
pub const MAX_HEADER_COUNT: usize = 100;
/// Most bytes of all header names and values of a request (431 above).
pub const MAX_HEADER_BYTES: usize = 64 * 1024;

/// Refuses a request whose URI or header bytes exceed the limits, with the error body
/// (hyper lets heads up to its outer bounds through for this; see `server::listener`).
///
/// Also drops an unacceptable `X-Request-Id` (see [`sanitize_request_id`]) and serves
/// a request that carries a W3C `traceparent` inside its trace context (REST, MCP and
/// A2A alike; `core::trace`): one middleware for all three, since each `from_fn` layer
/// costs a boxed future per request.
async fn guard_request_head(mut req: Request, next: Next) -> Response {
    sanitize_request_id(&mut req);
    let uri = uri_len(req.uri());
    if uri > MAX_URI_BYTES {
        let refused = ErrorBody::new(
            ErrorCode::UriTooLong,
            format!("the URI has {uri} bytes; at most {MAX_URI_BYTES} are accepted"),
        )
        .with("limit_bytes", MAX_URI_BYTES);
        return ApiError::from(refused).into_response();
    }
    let bytes: usize = req
        .headers()
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len())
        .sum();
    if bytes > MAX_HEADER_BYTES {
        let refused = ErrorBody::new(
            ErrorCode::HeadersTooLarge,
            format!(
                "the request has {bytes} bytes of headers; at most {MAX_HEADER_BYTES} are accepted"
            ),
        )
        .with("limit_count", MAX_HEADER_COUNT)
        .with("limit_bytes", MAX_HEADER_BYTES);
        return ApiError::from(refused).into_response();
    }
    match trace_context(&req) {
        Some(context) => traced(context, next.run(req)).await,
        None => next.run(req).await,
    }
}

/// The W3C trace context of a request that carries a `traceparent` (valid or not: an
/// invalid one starts a new trace, and its `tracestate` is dropped).
fn trace_context(req: &Request) -> Option<TraceContext> {
    let header = |name| req.headers().get(name).and_then(|v| v.to_str().ok());
    let parent = header(TRACEPARENT)?;
    Some(TraceContext::from_values(Some(parent), header(TRACESTATE)))
}

/// Longest `X-Request-Id` a client may choose.
const MAX_REQUEST_ID: usize = 64;

/// Drops a client's `X-Request-Id` that is long or has characters beyond
/// `A-Z a-z 0-9 . _ : -`, so a fresh one is generated: the id is written into every log
/// line of the request and must not be able to forge or flood them.
fn sanitize_request_id(req: &mut Request) {
    let acceptable = |v: &axum::http::HeaderValue| {
        let bytes = v.as_bytes();
        !bytes.is_empty()
            && bytes.len() <= MAX_REQUEST_ID
            && bytes
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
    };
    if req
        .headers()
        .get(X_REQUEST_ID)
        .is_some_and(|v| !acceptable(v))
    {
        req.headers_mut().remove(X_REQUEST_ID);
    }
}

/// The URI's length as sent, without formatting it.
fn uri_len(uri: &axum::http::Uri) -> usize {
    let scheme = uri.scheme_str().map_or(0, |s| s.len() + 3);
    let authority = uri.authority().map_or(0, |a| a.as_str().len());
    let rest = uri.path_and_query().map_or(0, |p| p.as_str().len());
    scheme + authority + rest
}

async fn unknown_route(method: Method, uri: axum::http::Uri) -> ApiError {
    ErrorBody::new(
        ErrorCode::NotFound,
        format!("no route for {method} {}", uri.path()),
    )
    .with("path", uri.path())
    .into()
}

async fn method_not_allowed(method: Method, uri: axum::http::Uri) -> ApiError {
    ErrorBody::new(
        ErrorCode::MethodNotAllowed,
        format!("{method} is not allowed on {}", uri.path()),
    )
    .into()
}

fn panic_response(_: Box<dyn std::any::Any + Send + 'static>) -> Response {
    ApiError(crate::core::CoreError::internal(
        "a request handler panicked",
    ))
    .into_response()
}
