//! Integration tests: the real server on an ephemeral port, real HTTP and WebSocket
//! clients, a fresh SQLite file per test (and the same tests again on PostgreSQL, a
//! database per test: `engines`). One binary, one module per area.

mod inspector;
mod pg;
mod process;
mod python;
mod support;
mod wsclient;

mod a2a;
mod access;
mod agents;
mod budgets;
mod cli;
mod client;
mod console;
mod coordination;
mod database_files;
mod deploy;
mod differential;
mod docs;
mod engines;
mod errors;
mod faults;
mod feed;
mod first_start;
mod guide;
mod hardening;
mod hostile;
mod inbox;
mod large_inbox;
mod layout;
mod leases;
mod live;
mod loops;
mod mcp;
mod migrate_db;
mod node;
mod nodes;
mod otlp;
mod persistence;
mod publish;
mod readme;
mod respond;
mod retention;
mod rotation;
mod send;
mod services;
mod stomp;
mod storage;
mod store_contract;
mod task_traces;
mod tasks;
mod teams;
mod traces;
mod traffic;
