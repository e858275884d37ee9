//! The WebSocket transport: `GET /v1/ws`.
//!
//! The token is checked before the upgrade (a bad one gets the usual 401 body); browsers,
//! which cannot set headers on a WebSocket, may pass it as `?access_token=`. `?since=N`
//! replays everything after sequence number N; without it the session resumes after the
//! agent's last `ack`. Frames are `switchboard_types::frames`; the session is in
//! [`session`].

mod session;

use std::time::Duration;

use axum::extract::State;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::http::header::AUTHORIZATION;
use axum::http::{HeaderMap, Uri};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use switchboard_types::ErrorBody;
use switchboard_types::routing::Via;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use utoipa::IntoParams;
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::core::{Core, CoreError};
use crate::transport::common::{ApiError, HasCore, bearer, decode_query};

/// Settings of the WebSocket transport.
#[derive(Debug, Clone)]
pub struct WsSettings {
    /// How often the server pings; a connection that has not answered by the next ping
    /// is closed (4001).
    pub ping_interval: Duration,
    /// Largest frame or message accepted (1009 above).
    pub max_frame_bytes: usize,
}

/// What the upgrade handler needs.
#[derive(Clone)]
pub struct WsState {
    pub core: Core,
    pub settings: WsSettings,
    /// Cancelled at shutdown: every session closes with 1001.
    pub shutdown: CancellationToken,
    /// Tracks sessions, so shutdown can wait for them (axum's graceful shutdown does not
    /// wait for upgraded connections).
    pub tracker: TaskTracker,
}

/// Query parameters of `GET /v1/ws`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct WsQuery {
    /// Replay every inbox entry after this sequence number (default: after the last ack).
    pub since: Option<i64>,
    /// The agent token, for clients that cannot send an `Authorization` header.
    pub access_token: Option<String>,
    /// Only news: skip publishes the agent does not watch (live and in replay; their
    /// seqs still count, so acks and `caught_up` work as usual).
    pub news_only: Option<bool>,
    /// Also send `team_activity` frames: the team's activity after `caught_up`, then
    /// whenever the team turns idle or busy.
    pub activity: Option<bool>,
}

impl HasCore for WsState {
    fn core(&self) -> &Core {
        &self.core
    }
}

/// The WebSocket route with its OpenAPI description.
pub fn routes() -> OpenApiRouter<WsState> {
    OpenApiRouter::new().routes(routes!(connect))
}

/// Live push: upgrade to a WebSocket (agent token).
///
/// The server sends `hello`, replays every inbox entry after the cursor (`?since=` or
/// the last `ack`) as `{"type":"message","seq":N,"message":{…}}` frames, then `caught_up`,
/// then each new entry as it is committed. Send `{"type":"ack","seq":N}` as entries are
/// processed. Every REST operation of the contract is also a frame (`send_message`,
/// `get_messages`, `get_message`, `mark_message_read`, `respond_to_message`,
/// `broadcast_update`, `request_assistance`, and `publish` and `set_watch`) with a
/// `request_id`, answered by `{"type":"reply","request_id":…,"ok":…}`. `?news_only=true`
/// skips publishes the agent does not watch; `?activity=true` adds `team_activity`
/// frames. Close codes: 1001 shutdown, 1009 frame too
/// large, 1013 server connection limit reached, 4001 keep-alive timeout, 4003 agent
/// removed, 4008 outbox overflow (reconnect and resume), 4029 the agent holds too many
/// connections (`--ws-max-per-agent`, 16 by default).
#[utoipa::path(get, path = "/v1/ws", tag = "live", security(("bearer" = [])),
    params(WsQuery),
    responses(
        (status = 101, description = "Switching to the WebSocket protocol"),
        (status = 400, description = "VALIDATION_ERROR: not a WebSocket upgrade, or a bad parameter", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: not an agent token", body = ErrorBody),
    ))]
async fn connect(
    State(state): State<WsState>,
    headers: HeaderMap,
    uri: Uri,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    match open(&state, upgrade, &headers, &uri).await {
        Ok(response) => response,
        Err(err) => ApiError(err).into_response(),
    }
}

async fn open(
    state: &WsState,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
    headers: &HeaderMap,
    uri: &Uri,
) -> Result<Response, CoreError> {
    let query: WsQuery = decode_query(uri.query().unwrap_or(""))?;
    let header = headers.get(AUTHORIZATION).map(|v| v.to_str().unwrap_or(""));
    let token = match (header, query.access_token.as_deref()) {
        (Some(_), _) | (None, None) => bearer(header)?,
        (None, Some(token)) => token,
    };
    let caller = state
        .core
        .identity()
        .authenticate(token)
        .await?
        .by(Via::Websocket);
    let resume_after = state.core.live().resume_after(&caller, query.since).await?;
    let upgrade = upgrade.map_err(|rejection| {
        ErrorBody::validation(
            "upgrade",
            format!("this endpoint needs a WebSocket upgrade: {rejection}"),
        )
    })?;
    let session = session::Session {
        core: state.core.clone(),
        caller,
        resume_after,
        news_only: query.news_only.unwrap_or(false),
        activity: query.activity.unwrap_or(false),
        ping_interval: state.settings.ping_interval,
        shutdown: state.shutdown.clone(),
    };
    let tracker = state.tracker.clone();
    let max = state.settings.max_frame_bytes;
    Ok(upgrade
        // Small buffers: most connections are idle most of the time, and the library's
        // 128 KiB defaults would cost that much memory per connection.
        .read_buffer_size(4 * 1024)
        .write_buffer_size(8 * 1024)
        .max_write_buffer_size(max.saturating_mul(2).max(64 * 1024))
        .max_message_size(max)
        .max_frame_size(max)
        .on_upgrade(move |socket| tracker.track_future(session.run(socket))))
}
