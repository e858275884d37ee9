//! `/v1/broadcasts`: BROADCAST_UPDATE.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use switchboard_types::MessageOp;
use utoipa_axum::{router::OpenApiRouter, routes};

use switchboard_types::broadcasts::{BroadcastResult, BroadcastUpdate};
use switchboard_types::{ErrorBody, Operation, Reply};

use super::{HttpState, created};
use crate::transport::common::{ApiResult, Auth, IdempotencyKey, JsonBody};

pub fn router() -> OpenApiRouter<HttpState> {
    OpenApiRouter::new().routes(routes!(broadcast))
}

/// BROADCAST_UPDATE: send an update to every other member of the team.
///
/// Recipients get an inbox entry of kind `broadcast`: the summary is its text, and
/// `content.data` holds update_type, urgency, details, impact, action_required. Urgency
/// sets the priority: info and attention → normal, action_required → high, critical →
/// urgent.
#[utoipa::path(post, path = "/v1/broadcasts", tag = "messages", security(("bearer" = [])),
    params(("Idempotency-Key" = Option<String>, Header, description = "Makes a retry return the first answer")),
    request_body = BroadcastUpdate,
    responses(
        (status = 201, description = "Committed to every recipient's inbox", body = BroadcastResult),
        (status = 400, description = "VALIDATION_ERROR or MESSAGE_TOO_LONG", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN or COMMUNICATION_DISABLED", body = ErrorBody),
        (status = 409, description = "CONFLICT: the Idempotency-Key was used for a different request", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED", body = ErrorBody),
        (status = 503, description = "UNAVAILABLE", body = ErrorBody),
    ))]
async fn broadcast(
    State(state): State<HttpState>,
    Auth(caller): Auth,
    IdempotencyKey(key): IdempotencyKey,
    JsonBody(input): JsonBody<BroadcastUpdate>,
) -> ApiResult<(StatusCode, Json<Reply>)> {
    created(
        state,
        &caller,
        Operation::Messages(MessageOp::BroadcastUpdate {
            update: input,
            idempotency_key: key,
        }),
    )
    .await
}
