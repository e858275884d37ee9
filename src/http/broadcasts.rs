//! `/v1/broadcasts`: BROADCAST_UPDATE.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::AppState;
use super::error::ApiResult;
use super::extract::{Auth, IdempotencyKey, JsonBody};
use crate::core::CoreError;
use crate::core::broadcasts::{BroadcastResult, BroadcastUpdate};

pub fn router() -> OpenApiRouter<AppState> {
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
        (status = 400, description = "VALIDATION_ERROR or MESSAGE_TOO_LONG", body = CoreError),
        (status = 401, description = "UNAUTHORIZED", body = CoreError),
        (status = 403, description = "FORBIDDEN or COMMUNICATION_DISABLED", body = CoreError),
        (status = 409, description = "CONFLICT: the Idempotency-Key was used for a different request", body = CoreError),
        (status = 429, description = "RATE_LIMITED", body = CoreError),
        (status = 503, description = "UNAVAILABLE", body = CoreError),
    ))]
async fn broadcast(
    State(state): State<AppState>,
    Auth(caller): Auth,
    IdempotencyKey(key): IdempotencyKey,
    JsonBody(input): JsonBody<BroadcastUpdate>,
) -> ApiResult<(StatusCode, Json<BroadcastResult>)> {
    let answer = state.core.broadcast(&caller, input, key.as_deref()).await?;
    Ok((StatusCode::CREATED, Json(answer)))
}
