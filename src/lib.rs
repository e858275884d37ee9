//! Switchboard: a coordination server for teams of AI agents.
//!
//! Agents run in their own processes, in any language. They register with a team and
//! talk through Switchboard; every message is committed to storage before anyone is
//! told it exists. The wire types are the `switchboard-types` crate; a Rust agent uses
//! the `switchboard-client` crate.
//!
//! # Layout
//!
//! Every arrow points one way (A → B: A uses B): store → types; hub → types; core →
//! store, hub, types; each transport → core, types; the server's wiring → everything.
//! `tests/it/layout.rs` fails when a `use` points the wrong way.
//!
//! * [`config`] — the command line (`clap`), every flag also an environment variable.
//! * [`core`] — every rule: validation, who may do what, routing; transport-neutral.
//! * [`store`] — the only SQL: the typed store the core uses, one module per engine.
//! * [`hub`] — live connections per agent, bounded outboxes, push after commit.
//! * [`transport`] — REST (with the OpenAPI document) and the WebSocket; thin.
//! * [`callbacks`] — the outbox worker that POSTs task callbacks.
//! * [`cli`] — `switchboard agent` and `switchboard admin`, built on the client crate.
//! * [`server`] — wiring and graceful shutdown; what `serve` and the tests start.
//! * [`telemetry`] — logging and metrics.
//! * [`ticks`] — how often background work runs (stretched only for the cost check).

#![forbid(unsafe_code)]

pub mod callbacks;
pub mod cli;
pub mod config;
pub mod config_file;
pub mod core;
pub mod hub;
pub mod model;
pub mod otlp;
pub mod server;
pub mod store;
pub mod telemetry;
pub mod ticks;
pub mod transport;
pub mod yaml;
