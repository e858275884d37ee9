//! The REST transport: decode, authenticate, call the core, encode.
//!
//! One file per resource, each exposing `router()`; routes are registered through
//! utoipa-axum's `OpenApiRouter`, so the OpenAPI document is built from the same list as
//! the routing and cannot drift from it.

pub mod agents;
pub mod assistance;
pub mod broadcasts;
pub mod error;
pub mod extract;
pub mod messages;
pub mod openapi;
pub mod ops;
pub mod tasks;
pub mod teams;

use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request};
use axum::http::{HeaderName, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::cors::CorsLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;
use utoipa_axum::router::OpenApiRouter;
use utoipa_swagger_ui::SwaggerUi;

use crate::core::{Core, CoreError, ErrorCode};
use error::ApiError;
use extract::BodyLimit;

/// Everything a handler may need, behind one `Arc`.
///
/// axum clones the state for every extractor of every request; one reference count is
/// cheaper than cloning each handle (a cancellation token's clone takes a lock).
#[derive(Clone)]
pub struct AppState(std::sync::Arc<AppParts>);

/// The parts of [`AppState`].
pub struct AppParts {
    pub core: Core,
    pub metrics: ops::MetricsHandle,
    pub ws: crate::ws::WsContext,
}

impl AppState {
    pub fn new(parts: AppParts) -> AppState {
        AppState(std::sync::Arc::new(parts))
    }
}

impl std::ops::Deref for AppState {
    type Target = AppParts;

    fn deref(&self) -> &AppParts {
        &self.0
    }
}

/// Settings of the HTTP transport.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    /// Largest accepted request body, in bytes.
    pub max_body_bytes: usize,
}

/// All API routes with their OpenAPI description.
pub fn api() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(openapi::base())
        .merge(teams::router())
        .merge(agents::router())
        .merge(messages::router())
        .merge(broadcasts::router())
        .merge(assistance::router())
        .merge(tasks::router())
        .merge(crate::ws::router())
        .merge(ops::router())
}

/// The OpenAPI document, as served at `/openapi.json` and committed in `openapi/`.
pub fn openapi_document() -> utoipa::openapi::OpenApi {
    api().into_openapi()
}

/// The complete application: API, docs, fallbacks and middleware.
pub fn app(state: AppState, settings: &HttpSettings) -> Router {
    let (router, openapi) = api().split_for_parts();
    let request_id = HeaderName::from_static("x-request-id");
    router
        .merge(
            SwaggerUi::new("/docs")
                .url("/openapi.json", openapi)
                .config(utoipa_swagger_ui::Config::default().validator_url("none")),
        )
        .fallback(unknown_route)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn(track_metrics))
        .layer(DefaultBodyLimit::max(settings.max_body_bytes))
        .layer(axum::Extension(BodyLimit(settings.max_body_bytes)))
        .layer(CatchPanicLayer::custom(panic_response))
        .layer(
            TraceLayer::new_for_http().make_span_with(|req: &Request| {
                let id = req
                    .headers()
                    .get("x-request-id")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("-");
                tracing::info_span!("request", method = %req.method(), uri = %req.uri(), request_id = %id)
            }),
        )
        .layer(PropagateRequestIdLayer::new(request_id.clone()))
        .layer(SetRequestIdLayer::new(request_id, MakeRequestUuid))
        // Bearer tokens, not cookies, carry identity, so any origin may call the API;
        // browsers never attach credentials on their own.
        .layer(CorsLayer::permissive().max_age(Duration::from_secs(3600)))
        .with_state(state)
}

async fn unknown_route(method: Method, uri: axum::http::Uri) -> ApiError {
    ApiError(
        CoreError::not_found(format!("no route for {method} {}", uri.path()))
            .with("path", uri.path()),
    )
}

async fn method_not_allowed(method: Method, uri: axum::http::Uri) -> ApiError {
    ApiError(CoreError::new(
        ErrorCode::MethodNotAllowed,
        format!("{method} is not allowed on {}", uri.path()),
    ))
}

fn panic_response(_: Box<dyn std::any::Any + Send + 'static>) -> Response {
    tracing::error!("a request handler panicked");
    ApiError(CoreError::internal(
        "the server hit a bug while handling this request",
    ))
    .into_response()
}

/// Counts requests and their latency by route template and status.
async fn track_metrics(req: Request, next: Next) -> Response {
    let started = Instant::now();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let method = req.method().as_str().to_owned();
    let response = next.run(req).await;
    let status = response.status();
    metrics::counter!(
        "switchboard_http_requests_total",
        "method" => method.clone(),
        "route" => route.clone(),
        "status" => status.as_u16().to_string(),
    )
    .increment(1);
    metrics::histogram!(
        "switchboard_http_request_duration_seconds",
        "method" => method,
        "route" => route,
    )
    .record(started.elapsed().as_secs_f64());
    if status == StatusCode::INTERNAL_SERVER_ERROR {
        tracing::error!("request answered 500");
    }
    response
}
