//! `/v1/assistance-requests`: REQUEST_ASSISTANCE.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use switchboard_types::MessageOp;
use utoipa_axum::{router::OpenApiRouter, routes};

use switchboard_types::assistance::{AssistanceResult, RequestAssistance};
use switchboard_types::{ErrorBody, Operation, Reply};

use super::{HttpState, created};
use crate::transport::common::{ApiResult, Auth, IdempotencyKey, JsonBody};

pub fn router() -> OpenApiRouter<HttpState> {
    OpenApiRouter::new().routes(routes!(request_assistance))
}

/// REQUEST_ASSISTANCE: ask for help and get the members who can give it, ranked.
///
/// `capability_match` is the share of `required_capabilities` an agent has; responders
/// are ranked by it, then by availability (available, busy, unavailable), then agent id.
/// Agents with no matching capability are left out unless named in `target_agents`.
/// With `target_agents` the request goes to them only; without, it is broadcast to the
/// team (`broadcast_sent: true`). It arrives as a message of kind `assistance_request`
/// that requires a response by the deadline; answer it with RESPOND_TO_MESSAGE.
#[utoipa::path(post, path = "/v1/assistance-requests", tag = "messages", security(("bearer" = [])),
    params(("Idempotency-Key" = Option<String>, Header, description = "Makes a retry return the first answer")),
    request_body = RequestAssistance,
    responses(
        (status = 201, description = "The request was committed and delivered", body = AssistanceResult),
        (status = 400, description = "VALIDATION_ERROR, MESSAGE_TOO_LONG, or INVALID_RECIPIENT (target_agents)", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN or COMMUNICATION_DISABLED", body = ErrorBody),
        (status = 409, description = "CONFLICT: the Idempotency-Key was used for a different request", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED", body = ErrorBody),
        (status = 503, description = "UNAVAILABLE", body = ErrorBody),
    ))]
async fn request_assistance(
    State(state): State<HttpState>,
    Auth(caller): Auth,
    IdempotencyKey(key): IdempotencyKey,
    JsonBody(input): JsonBody<RequestAssistance>,
) -> ApiResult<(StatusCode, Json<Reply>)> {
    created(
        state,
        &caller,
        Operation::Messages(MessageOp::RequestAssistance {
            request: input,
            idempotency_key: key,
        }),
    )
    .await
}
