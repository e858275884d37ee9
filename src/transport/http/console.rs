//! The team console at `/console`: three static files built into the binary, so it works
//! offline and with nothing installed, like `/docs`. It holds no rule and no private
//! endpoint: the page calls the same REST API every agent and operator calls, with the
//! credential the person signs in with (kept in the tab's `sessionStorage` only).
//!
//! Served with a Content-Security-Policy that allows nothing but this origin's own
//! script, style and API: no inline script, no third-party origin, no framing. The
//! script renders every string a peer wrote as text (`textContent`), never as HTML.

use axum::Router;
use axum::http::header::{self, HeaderValue};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;

const INDEX: &str = include_str!("../../../console/index.html");
const SCRIPT: &str = include_str!("../../../console/console.js");
const STYLE: &str = include_str!("../../../console/console.css");

/// Only this origin's own files and API; nothing inline, nothing framed.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'";

/// The console's routes (state-free: the page talks to the API itself).
pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        // A person who opens the server's address finds the console, not a JSON 404.
        .route("/", get(|| async { Redirect::temporary("/console") }))
        .route(
            "/console",
            get(|| async { page(INDEX, "text/html; charset=utf-8") }),
        )
        .route(
            "/console/",
            get(|| async { Redirect::permanent("/console") }),
        )
        .route(
            "/console/console.js",
            get(|| async { page(SCRIPT, "text/javascript; charset=utf-8") }),
        )
        .route(
            "/console/console.css",
            get(|| async { page(STYLE, "text/css; charset=utf-8") }),
        )
}

fn page(body: &'static str, content_type: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(CSP),
            ),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
            (
                header::REFERRER_POLICY,
                HeaderValue::from_static("no-referrer"),
            ),
            (header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        body,
    )
        .into_response()
}
