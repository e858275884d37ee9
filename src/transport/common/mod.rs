//! What every transport needs and none owns: deciding the caller from a token, decoding
//! input with errors that name the field, the one table from error code to HTTP
//! status, and the settings of an accepted socket. Transports built on axum share the extractors here through [`HasCore`].

mod auth;
mod error;
mod extract;
pub mod gate;
pub mod socket;

pub use auth::{authenticate, bearer};
pub use error::{ApiError, ApiResult, status_for};
pub use extract::{
    Auth, BodyDeadline, BodyLimit, IdempotencyKey, JsonBody, PathParams, QueryParams, decode_query,
    read_body, too_large,
};

use crate::core::Core;

/// W3C Trace Context's headers, named once: every request over HTTP (REST, MCP) is
/// looked at for them, and a header looked up by a `&str` parses the name anew.
pub const TRACEPARENT: axum::http::HeaderName = axum::http::HeaderName::from_static("traceparent");
pub const TRACESTATE: axum::http::HeaderName = axum::http::HeaderName::from_static("tracestate");

/// A transport's router state that can reach the core: what the shared extractors need.
pub trait HasCore: Clone + Send + Sync + 'static {
    fn core(&self) -> &Core;
}
