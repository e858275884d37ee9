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

/// A request slower than this (that did not wait for something it asked to wait for) is
/// logged at WARN: with two cores shared with everything else, a second is far past any
/// figure the benchmarks report, so it means trouble worth a line.
const SLOW: std::time::Duration = std::time::Duration::from_secs(1);

/// Counts requests and their latency by route template, method and status, and writes
/// the access log: every request at DEBUG on its own target (`switchboard::access`, so
/// an operator turns it on alone), a server error or a slow request at WARN. At INFO a
/// polling console and a health checker wrote two lines a second that said nothing.
pub(super) async fn track(
    State(metrics): State<RequestMetrics>,
    req: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let route = req.extensions().get::<MatchedPath>().cloned();
    let route = route.as_ref().map_or("unmatched", MatchedPath::as_str);
    let label = method_label(req.method());
    let method = req.method().clone();
    // The request id is copied only when the DEBUG line may be written (a copy per
    // request shows in the cost check); a WARN line has it from the request's span.
    let id = tracing::enabled!(target: "switchboard::access", tracing::Level::DEBUG)
        .then(|| req.headers().get(X_REQUEST_ID).cloned())
        .flatten();
    let (response, waited) = crate::core::sessions::noting_waits(next.run(req)).await;
    let status = response.status();
    let took = started.elapsed();
    let line = AccessLine {
        method: &method,
        route,
        status: status.as_u16(),
        duration_ms: millis(took),
        request_id: id.as_ref().and_then(|id| id.to_str().ok()).unwrap_or("-"),
    };
    if status.is_server_error() {
        line.warn("request answered with a server error");
    } else if took >= SLOW && !waited {
        line.warn("slow request");
    } else {
        line.debug();
    }
    metrics.record(route, label, status, took.as_secs_f64());
    response
}

/// One line of the access log.
struct AccessLine<'a> {
    method: &'a axum::http::Method,
    route: &'a str,
    status: u16,
    duration_ms: f64,
    request_id: &'a str,
}

impl AccessLine<'_> {
    fn warn(&self, what: &str) {
        tracing::warn!(
            target: "switchboard::access",
            method = %self.method,
            route = %self.route,
            status = self.status,
            duration_ms = self.duration_ms,
            "{what}"
        );
    }

    fn debug(&self) {
        tracing::debug!(
            target: "switchboard::access",
            method = %self.method,
            route = %self.route,
            status = self.status,
            duration_ms = self.duration_ms,
            request_id = self.request_id,
            "request"
        );
    }
}

/// A duration in milliseconds to the microsecond, as a person reads it (`0.042`, not
/// `0.041922999999999995`).
fn millis(took: std::time::Duration) -> f64 {
    (took.as_secs_f64() * 1_000_000.0).round() / 1000.0
}
