//! Integration tests: the real server on an ephemeral port, real HTTP and WebSocket
//! clients, a fresh SQLite file per test. One binary, one module per area.

mod support;

mod agents;
mod cli;
mod docs;
mod errors;
mod persistence;
mod readme;
mod teams;
