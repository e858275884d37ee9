//! Every request counted and timed (`switchboard_http_requests_total`,
//! `switchboard_http_request_duration_seconds`, by route template, method and status),
//! and written to the access log.
//!
//! The metrics' handles are kept per route, not named through the `metrics` macros on
//! each request: a macro call with labels makes each label an owned string, hashes the
//! key and compares it in the recorder's registry — about 2,500 instructions a request,
//! more than a send spends on its span. A kept handle is an atomic add under a read lock.
//!
//! A method outside HTTP's own is labelled `other`: any token is a valid method, and a
//! label per method a client makes up would grow the registry (and every scrape) without
//! end. Routes are the router's templates (or `unmatched`), statuses our own answers.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderName, Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use metrics::{Counter, Histogram};

/// `X-Request-Id`, named once: a header looked up by a `&str` parses the name anew.
pub(super) const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The request metrics' handles, by route template.
#[derive(Clone, Default)]
pub(super) struct RequestMetrics(Arc<RwLock<HashMap<String, Route, foldhash::fast::RandomState>>>);

/// One route template's handles.
#[derive(Default)]
struct Route {
    /// By method label and status.
    requests: Vec<(&'static str, StatusCode, Counter)>,
    /// By method label.
    durations: Vec<(&'static str, Histogram)>,
}

impl RequestMetrics {
    fn record(&self, route: &str, method: &'static str, status: StatusCode, seconds: f64) {
        {
            let routes = self.0.read().unwrap_or_else(PoisonError::into_inner);
            if routes
                .get(route)
                .is_some_and(|known| known.record(method, status, seconds))
            {
                return;
            }
        }
        let mut routes = self.0.write().unwrap_or_else(PoisonError::into_inner);
        let known = routes.entry(route.to_owned()).or_default();
        known.register(route, method, status);
        known.record(method, status, seconds);
    }
}

impl Route {
    /// Records on the handles for `method` and `status`; false when there are none yet.
    fn record(&self, method: &str, status: StatusCode, seconds: f64) -> bool {
        let counter = self
            .requests
            .iter()
            .find(|(m, s, _)| *m == method && *s == status);
        let histogram = self.durations.iter().find(|(m, _)| *m == method);
        let (Some((_, _, counter)), Some((_, histogram))) = (counter, histogram) else {
            return false;
        };
        counter.increment(1);
        histogram.record(seconds);
        true
    }

    fn register(&mut self, route: &str, method: &'static str, status: StatusCode) {
        if !self
            .requests
            .iter()
            .any(|(m, s, _)| *m == method && *s == status)
        {
            let counter = metrics::counter!(
                "switchboard_http_requests_total",
                "method" => method,
                "route" => route.to_owned(),
                "status" => status.as_u16().to_string(),
            );
            self.requests.push((method, status, counter));
        }
        if !self.durations.iter().any(|(m, _)| *m == method) {
            let histogram = metrics::histogram!(
                "switchboard_http_request_duration_seconds",
                "method" => method,
                "route" => route.to_owned(),
            );
            self.durations.push((method, histogram));
        }
    }
}

/// `method`'s label: its name when HTTP defines it, else `other`.
fn method_label(method: &Method) -> &'static str {
    match method.as_str() {
        "GET" => "GET",
        "POST" => "POST",
        "PUT" => "PUT",
        "DELETE" => "DELETE",
        "PATCH" => "PATCH",
        "HEAD" => "HEAD",
        "OPTIONS" => "OPTIONS",
        "CONNECT" => "CONNECT",
        "TRACE" => "TRACE",
        _ => "other",
    }
}

/// Counts requests and their latency by route template, method and status.
pub(super) async fn track(
    State(metrics): State<RequestMetrics>,
    req: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let route = req.extensions().get::<MatchedPath>().cloned();
    let route = route.as_ref().map_or("unmatched", MatchedPath::as_str);
    let label = method_label(req.method());
    // The access log (one line per request at INFO on its own target, so an operator can
    // turn it off alone): the method and request id are kept only when it is written.
    let logged =
        tracing::enabled!(target: "switchboard::access", tracing::Level::INFO).then(|| {
            (
                req.method().clone(),
                req.headers().get(X_REQUEST_ID).cloned(),
            )
        });
    let response = next.run(req).await;
    let status = response.status();
    if let Some((method, id)) = &logged {
        tracing::info!(
            target: "switchboard::access",
            method = %method,
            route = %route,
            status = status.as_u16(),
            duration_ms = started.elapsed().as_secs_f64() * 1000.0,
            request_id = id.as_ref().and_then(|id| id.to_str().ok()).unwrap_or("-"),
            "request"
        );
    }
    metrics.record(route, label, status, started.elapsed().as_secs_f64());
    if status == StatusCode::INTERNAL_SERVER_ERROR {
        tracing::error!("request answered 500");
    }
    response
}
