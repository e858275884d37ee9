//! A2A (the Agent2Agent protocol, v1.0): every member of a team is an A2A agent at
//! `/a2a/{team_id}/{agent_id}`, and every role at `/a2a/{team_id}/role:{role}`, so the
//! stock A2A clients hand it work without knowing Switchboard. An A2A message becomes a task of the task protocol (targeted at that
//! member, originated by the caller), its states and questions come back as A2A task
//! states, its result as an artifact; the task is durable, so a stream that drops resumes
//! from a sequence number and a retried send never makes a second task.
//!
//! * `member.rs` — who an interface URL names: an agent, or any agent of a role.
//! * `card.rs` — agent cards (a role's too) and the team directory, from the registry.
//! * `rpc.rs` — JSON-RPC 2.0: the envelope, the method table, errors in A2A's codes.
//! * `send.rs` — `SendMessage`: a new task, or the answer to the open question.
//! * `stream.rs` — SSE for `SendStreamingMessage` and `SubscribeToTask`.
//! * `push.rs` — push notification configs, as the core's task webhooks.
//! * `convert.rs` — tasks, messages and history events in A2A's shapes.
//! * `v03.rs` — A2A 0.3's method names and shapes, rewritten to and from 1.0.
//! * `wire.rs` — JSON-RPC's envelope rules and ProtoJSON's names, beyond serde.
//!
//! Types are the official crate's (`a2a-lf`): ProtoJSON names and only spec fields.

mod card;
mod convert;
mod errors;
mod member;
mod outside;
mod push;
mod rpc;
mod send;
mod stream;
mod v03;
mod wire;

pub use outside::Delegation;

use axum::Router;
use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;
use axum::routing::{get, post};
use switchboard_types::routing::Via;

use crate::core::{Caller, Core};
use crate::transport::common::{ApiError, authenticate};

/// What every A2A request needs: the core.
#[derive(Clone)]
pub struct A2aState {
    core: Core,
}

impl A2aState {
    /// The caller behind the request's bearer token (`401` with the contract's body if
    /// nobody). A2A is request/response over HTTP: no live route back, as for REST.
    async fn authenticate(&self, headers: &HeaderMap) -> Result<Caller, ApiError> {
        let header = headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok());
        Ok(authenticate(&self.core, header).await?.by(Via::Rest))
    }
}

/// The A2A routes: cards, the directory, and each member's JSON-RPC interface. An agent
/// holds at most `--ws-max-per-agent` SSE streams at once (as for live connections and
/// MCP sessions, counted by the core): each keeps a task following the task.
pub fn router(core: Core) -> Router {
    push::register(&core);
    Router::new()
        .route("/a2a/{team_id}/agents", get(card::directory))
        .route(
            "/a2a/{team_id}/.well-known/agent-card.json",
            get(card::no_team_card),
        )
        .route(
            "/a2a/{team_id}/{agent_id}/.well-known/agent-card.json",
            get(card::card),
        )
        .route("/a2a/{team_id}/{agent_id}", post(rpc::call))
        // The same interface with a trailing slash: the 1.0 test kit's client always
        // adds one, Agno's A2A client posts to `base_url + "/"`, and the JS SDK's card
        // resolver wants the base URL to end in one.
        .route("/a2a/{team_id}/{agent_id}/", post(rpc::call))
        .with_state(A2aState { core })
}
