//! Switchboard's model and wire API, shared by the server and every client.
//!
//! Everything a message to or from Switchboard is made of lives here, once: the bodies
//! of every request and answer, the WebSocket frames, the one [`Operation`] enum every
//! transport hands to the server's core, the error body and its codes, and the value
//! rules (lengths, list sizes) that need nothing but the value. No runtime, database or
//! web framework: a Rust agent that depends on this crate compiles none of them.
//! OpenAPI schemas are behind the `openapi` feature.
//!
//! # Layout
//!
//! * [`error`] — [`ErrorCode`] and [`ErrorBody`], the contract's error.
//! * [`time`], [`ids`] — timestamps on the wire, client ids and typed row keys.
//! * [`decode`], [`strict`], [`validate`] — input decoding that names the field and
//!   refuses what serde alone would let through; value rules.
//! * [`teams`], [`agents`], [`messages`], [`inbox`], [`broadcasts`], [`assistance`],
//!   [`metrics`], [`tasks`], [`task_state`], [`publish`], [`traffic`], [`loops`], [`leases`] — the
//!   bodies, one module per resource.
//! * [`operation`] — [`Operation`] and [`Reply`].
//! * [`frames`] — [`ClientFrame`] and [`ServerFrame`], push rendering.

#![forbid(unsafe_code)]

pub mod agents;
pub mod approvals;
pub mod assistance;
pub mod broadcasts;
pub mod budgets;
pub mod callbacks;
pub mod claims;
pub mod decode;
pub mod error;
pub mod frames;
pub mod ids;
pub mod inbox;
pub mod leases;
pub mod loops;
pub mod messages;
pub mod metrics;
#[cfg(feature = "openapi")]
pub mod openapi;
#[cfg(feature = "openapi")]
mod openapi_rules;
pub mod operation;
pub mod publish;
pub mod routing;
pub mod search;
pub mod strict;
pub mod task_state;
pub mod tasks;
pub mod teams;
pub mod time;
pub mod trace;
pub mod traffic;
pub mod validate;

pub use error::{ErrorBody, ErrorCode};
pub use frames::{ClientFrame, ServerFrame};
pub use operation::{
    AgentOp, AgentOpName, ApprovalOp, ApprovalOpName, LeaseOp, LeaseOpName, MessageOp,
    MessageOpName, Operation, OperationName, Reply, TaskOp, TaskOpName, TeamOp, TeamOpName,
};
pub use time::Timestamp;
