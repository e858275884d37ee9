//! `/v1/publish`, `/v1/watch` and the team's activity: MetaGPT-style publish and watch.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use switchboard_types::ids::TeamId;
use utoipa_axum::{router::OpenApiRouter, routes};

use switchboard_types::agents::AgentEnvelope;
use switchboard_types::publish::{Publish, PublishResult, SetWatch, TeamActivity};
use switchboard_types::{AgentOp, ErrorBody, MessageOp, Operation, Reply, TeamOp};

use super::{HttpState, created, ok};
use crate::transport::common::{ApiResult, Auth, IdempotencyKey, JsonBody, PathParams};

pub fn router() -> OpenApiRouter<HttpState> {
    OpenApiRouter::new()
        .routes(routes!(publish))
        .routes(routes!(activity))
        .routes(routes!(own_activity))
        .routes(routes!(set_watch))
}

/// Publish a message under a tag (`cause_by`) to an address set (`send_to`).
///
/// MetaGPT's delivery, in two stages: (1) every member, the sender excluded, whose
/// addresses (default: its agent id and role; set them with `PATCH` on the agent or the
/// `set_watch` frame) meet `send_to` gets an inbox entry of kind `publish` — all of them
/// for `<all>` (the default), the sender itself for `<self>`; (2) the entry is news for
/// an agent that watches `cause_by` (exactly, or by a `prefix*`) or whom `send_to` names
/// by agent id. The answer lists the recipients and those for whom it is news, and says
/// `no_recipients: true` when nobody was addressed (the message is stored all the same).
#[utoipa::path(post, path = "/v1/publish", tag = "publish", security(("bearer" = [])),
    params(("Idempotency-Key" = Option<String>, Header, description = "Makes a retry return the first answer")),
    request_body = Publish,
    responses(
        (status = 201, description = "Committed to every recipient's inbox", body = PublishResult),
        (status = 400, description = "VALIDATION_ERROR or MESSAGE_TOO_LONG", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN or COMMUNICATION_DISABLED", body = ErrorBody),
        (status = 409, description = "CONFLICT: the Idempotency-Key was used for a different request", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED", body = ErrorBody),
        (status = 503, description = "UNAVAILABLE", body = ErrorBody),
    ))]
async fn publish(
    State(state): State<HttpState>,
    Auth(caller): Auth,
    IdempotencyKey(key): IdempotencyKey,
    JsonBody(input): JsonBody<Publish>,
) -> ApiResult<(StatusCode, Json<Reply>)> {
    created(
        state,
        &caller,
        Operation::Messages(MessageOp::Publish {
            publish: input,
            idempotency_key: key,
        }),
    )
    .await
}

/// Whether the team is idle: per member, unread news and open tasks (any member, the
/// team key, the admin).
///
/// The team is idle when nobody has unread news and no task is open — when a MetaGPT
/// environment would stop. WebSocket connections opened with `?activity=true` get a
/// `team_activity` frame with this body whenever it turns idle or busy.
#[utoipa::path(get, path = "/v1/teams/{team_id}/activity", tag = "publish", security(("bearer" = [])),
    params(("team_id" = String, Path, description = "The team's id")),
    responses(
        (status = 200, description = "The team's activity", body = TeamActivity),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN", body = ErrorBody),
        (status = 404, description = "NOT_FOUND", body = ErrorBody),
        (status = 503, description = "UNAVAILABLE", body = ErrorBody),
    ))]
async fn activity(
    State(state): State<HttpState>,
    Auth(caller): Auth,
    PathParams(team_id): PathParams<TeamId>,
) -> ApiResult<Json<Reply>> {
    let team_id = Some(team_id);
    ok(
        state,
        &caller,
        Operation::Teams(TeamOp::GetActivity { team_id }),
    )
    .await
}

/// The calling agent's team's activity (as `GET /v1/teams/{team_id}/activity`).
#[utoipa::path(get, path = "/v1/activity", tag = "publish", security(("bearer" = [])),
    responses(
        (status = 200, description = "The team's activity", body = TeamActivity),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: not an agent token", body = ErrorBody),
        (status = 503, description = "UNAVAILABLE", body = ErrorBody),
    ))]
async fn own_activity(
    State(state): State<HttpState>,
    Auth(caller): Auth,
) -> ApiResult<Json<Reply>> {
    ok(
        state,
        &caller,
        Operation::Teams(TeamOp::GetActivity { team_id: None }),
    )
    .await
}

/// Replace the calling agent's watched tags and/or addresses.
///
/// The same as `PATCH /v1/teams/{team_id}/agents/{agent_id}` with `addresses` and
/// `watch`, and as the `set_watch` frame: each set given replaces the current one (an
/// empty `addresses` restores the default, the agent id and its role); the next publish
/// follows the new sets.
#[utoipa::path(put, path = "/v1/watch", tag = "publish", security(("bearer" = [])),
    request_body = SetWatch,
    responses(
        (status = 200, description = "The agent with its new sets", body = AgentEnvelope),
        (status = 400, description = "VALIDATION_ERROR", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: not an agent token, or agent_id is another agent", body = ErrorBody),
        (status = 503, description = "UNAVAILABLE", body = ErrorBody),
    ))]
async fn set_watch(
    State(state): State<HttpState>,
    Auth(caller): Auth,
    JsonBody(input): JsonBody<SetWatch>,
) -> ApiResult<Json<Reply>> {
    ok(state, &caller, Operation::Agents(AgentOp::SetWatch(input))).await
}
