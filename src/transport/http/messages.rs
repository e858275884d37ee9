//! `/v1/messages`: SEND_MESSAGE, GET_MESSAGES, MARK_MESSAGE_READ, RESPOND_TO_MESSAGE,
//! and reading one message.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use switchboard_types::MessageOp;
use switchboard_types::ids::MessageId;
use utoipa_axum::{router::OpenApiRouter, routes};

use switchboard_types::inbox::{InboxPage, InboxQuery};
use switchboard_types::messages::{
    MarkRead, MarkReadResult, MessageDetail, RespondResult, RespondToMessage, SendMessage,
    SendResult,
};
use switchboard_types::trace::TraceView;
use switchboard_types::{ErrorBody, Operation, Reply};

use super::{HttpState, created, ok};
use crate::transport::common::{
    ApiResult, Auth, IdempotencyKey, JsonBody, PathParams, QueryParams,
};

pub fn router() -> OpenApiRouter<HttpState> {
    OpenApiRouter::new()
        .routes(routes!(send_message, get_messages))
        .routes(routes!(mark_read))
        .routes(routes!(get_message))
        .routes(routes!(respond))
        .routes(routes!(get_trace))
}

/// SEND_MESSAGE: send a message to team members (agent token).
///
/// `recipient_agent_ids` lists members (not the sender) or is `["ALL"]`. With an
/// `Idempotency-Key` header, a retry returns the first answer instead of sending again.
#[utoipa::path(post, path = "/v1/messages", tag = "messages", security(("bearer" = [])),
    request_body = SendMessage,
    params(("Idempotency-Key" = Option<String>, Header, description = "Makes a retry return the first answer (1–255 visible ASCII characters)")),
    responses(
        (status = 201, description = "Committed; delivery_status says who has it", body = SendResult),
        (status = 400, description = "VALIDATION_ERROR, MESSAGE_TOO_LONG or INVALID_RECIPIENT (details.invalid_ids)", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN (sender_agent_id is not the caller) or COMMUNICATION_DISABLED", body = ErrorBody),
        (status = 404, description = "MESSAGE_NOT_FOUND (in_reply_to)", body = ErrorBody),
        (status = 409, description = "CONFLICT: the Idempotency-Key was used for a different request", body = ErrorBody),
        (status = 413, description = "PAYLOAD_TOO_LARGE", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED", body = ErrorBody),
        (status = 503, description = "UNAVAILABLE: nothing was sent", body = ErrorBody),
    ))]
async fn send_message(
    State(state): State<HttpState>,
    Auth(caller): Auth,
    IdempotencyKey(key): IdempotencyKey,
    JsonBody(input): JsonBody<SendMessage>,
) -> ApiResult<(StatusCode, Json<Reply>)> {
    created(
        state,
        &caller,
        Operation::Messages(MessageOp::SendMessage {
            message: input,
            idempotency_key: key,
        }),
    )
    .await
}

/// GET_MESSAGES: the caller's inbox (agent token), filtered, a page at a time.
///
/// Walk any number of messages by passing `next_cursor` back as `cursor` with the same
/// filters and sort order; no message is skipped or repeated.
#[utoipa::path(get, path = "/v1/messages", tag = "messages", security(("bearer" = [])),
    params(InboxQuery),
    responses(
        (status = 200, description = "One page of the inbox", body = InboxPage),
        (status = 400, description = "VALIDATION_ERROR: a bad filter, limit outside 1–100, a bad cursor", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: agent_id is not the caller, or not an agent token", body = ErrorBody),
    ))]
async fn get_messages(
    State(state): State<HttpState>,
    Auth(caller): Auth,
    QueryParams(query): QueryParams<InboxQuery>,
) -> ApiResult<Json<Reply>> {
    ok(
        state,
        &caller,
        Operation::Messages(MessageOp::GetMessages(query)),
    )
    .await
}

/// Read one message the caller sent or received, with its responses (and, for the
/// sender, who has read it). The team key reads any message of its team, with who read it.
#[utoipa::path(get, path = "/v1/messages/{message_id}", tag = "messages", security(("bearer" = [])),
    params(("message_id" = String, Path, description = "The message's id")),
    responses(
        (status = 200, description = "The message", body = MessageDetail),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: the admin token", body = ErrorBody),
        (status = 404, description = "MESSAGE_NOT_FOUND (also for messages the caller did not send or receive)", body = ErrorBody),
    ))]
async fn get_message(
    State(state): State<HttpState>,
    Auth(caller): Auth,
    PathParams(message_id): PathParams<MessageId>,
) -> ApiResult<Json<Reply>> {
    ok(
        state,
        &caller,
        Operation::Messages(MessageOp::GetMessage { message_id }),
    )
    .await
}

/// The messages of a trace (W3C trace id), oldest first, from the server's own records:
/// who sent what kind of message to whom, by which transport, and each one's span and
/// parent span — never content. The team key sees every message of the trace in its
/// team; an agent, the trace of any message it sent or received (`docs/tracing.md`).
#[utoipa::path(get, path = "/v1/traces/{trace_id}", tag = "messages", security(("bearer" = [])),
    params(("trace_id" = String, Path, description = "32 lowercase hex digits: the trace id of a `traceparent`")),
    responses(
        (status = 200, description = "The trace's hops", body = TraceView),
        (status = 400, description = "VALIDATION_ERROR: not a trace id", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: the admin token", body = ErrorBody),
        (status = 404, description = "NOT_FOUND (also for a trace the agent took no part in)", body = ErrorBody),
    ))]
async fn get_trace(
    State(state): State<HttpState>,
    Auth(caller): Auth,
    PathParams(trace_id): PathParams<String>,
) -> ApiResult<Json<Reply>> {
    ok(
        state,
        &caller,
        Operation::Messages(MessageOp::GetTrace { trace_id }),
    )
    .await
}

/// MARK_MESSAGE_READ: mark messages of the caller's inbox read.
#[utoipa::path(post, path = "/v1/messages/read", tag = "messages", security(("bearer" = [])),
    request_body = MarkRead,
    responses(
        (status = 200, description = "What was marked, already read, or not found", body = MarkReadResult),
        (status = 400, description = "VALIDATION_ERROR", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: agent_id is not the caller", body = ErrorBody),
        (status = 503, description = "UNAVAILABLE", body = ErrorBody),
    ))]
async fn mark_read(
    State(state): State<HttpState>,
    Auth(caller): Auth,
    JsonBody(input): JsonBody<MarkRead>,
) -> ApiResult<Json<Reply>> {
    ok(
        state,
        &caller,
        Operation::Messages(MessageOp::MarkMessageRead(input)),
    )
    .await
}

/// RESPOND_TO_MESSAGE: answer a message that requires a response.
///
/// The response goes to the original's sender and `additional_recipients`, and the
/// original records it. A responder may follow `partial` responses with more; after a
/// final status (completed, unable, delegated) it cannot respond again.
#[utoipa::path(post, path = "/v1/messages/{message_id}/responses", tag = "messages", security(("bearer" = [])),
    params(
        ("message_id" = String, Path, description = "The original message's id"),
        ("Idempotency-Key" = Option<String>, Header, description = "Makes a retry return the first answer"),
    ),
    request_body = RespondToMessage,
    responses(
        (status = 201, description = "The response was committed", body = RespondResult),
        (status = 400, description = "VALIDATION_ERROR, MESSAGE_TOO_LONG, or INVALID_RECIPIENT (not a recipient of the original; a bad additional recipient)", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN or COMMUNICATION_DISABLED", body = ErrorBody),
        (status = 404, description = "MESSAGE_NOT_FOUND", body = ErrorBody),
        (status = 409, description = "RESPONSE_NOT_REQUIRED, RESPONSE_DEADLINE_PASSED, or CONFLICT (a final response was already given)", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED", body = ErrorBody),
        (status = 503, description = "UNAVAILABLE", body = ErrorBody),
    ))]
async fn respond(
    State(state): State<HttpState>,
    Auth(caller): Auth,
    IdempotencyKey(key): IdempotencyKey,
    PathParams(message_id): PathParams<MessageId>,
    JsonBody(input): JsonBody<RespondToMessage>,
) -> ApiResult<(StatusCode, Json<Reply>)> {
    created(
        state,
        &caller,
        Operation::Messages(MessageOp::RespondToMessage {
            message_id,
            response: input,
            idempotency_key: key,
        }),
    )
    .await
}
