//! The transports: how clients reach the core. Each one decodes its input into an
//! [`Operation`](switchboard_types::Operation), authenticates the caller, calls
//! [`Core::dispatch`](crate::core::Core::dispatch) and encodes the answer; none holds a
//! rule of the contract.
//!
//! * [`common`] — what every transport needs and none owns: token → caller, decoding
//!   with field-naming errors, the error → HTTP status table.
//! * [`http`] — REST with its OpenAPI document, the docs UI, operations endpoints.
//! * [`ws`] — the WebSocket: live push, replay, operations as frames.
//! * [`stomp`] — STOMP for Wise Agents and other STOMP clients.
//! * [`mcp`] — MCP tools at `/mcp` for MCP-capable agents.
//! * [`a2a`] — every member as an A2A agent at `/a2a/{team_id}/{agent_id}`.
//!
//! Transports never import each other; the server's wiring composes their routers.

pub mod a2a;
pub mod common;
pub mod http;
pub mod mcp;
pub mod stomp;
pub mod ws;
