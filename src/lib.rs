//! Switchboard: a coordination server for teams of AI agents.
//!
//! Agents run in their own processes, in any language. They register with a team and
//! talk through Switchboard; every message is committed to storage before anyone is
//! told it exists.
//!
//! # Layout
//!
//! * [`config`] — the command line (`clap`), every flag also an environment variable.
//! * [`core`] — every rule: validation, who may do what, routing; transport-neutral.
//! * [`store`] — the only SQL: SQLite, migrations, the group-commit writer.
//! * [`hub`] — live connections per agent, bounded outboxes, push after commit.
//! * [`http`] — the REST transport and the OpenAPI document; thin handlers.
//! * [`ws`] — the WebSocket transport: upgrade, frames, the session loop.
//! * [`server`] — wiring and graceful shutdown; what `serve` and the tests start.
//! * [`telemetry`] — logging.

#![forbid(unsafe_code)]

pub mod callbacks;
pub mod cli;
pub mod client;
pub mod config;
pub mod core;
pub mod http;
pub mod hub;
pub mod server;
pub mod store;
pub mod telemetry;
pub mod ws;

/// Makes sure rustls has its process-wide crypto provider (ring) before any HTTP client
/// is built: reqwest is built without a default provider, and building a client
/// without one fails. Idempotent.
pub fn ensure_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
