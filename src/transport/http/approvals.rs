//! `/v1/approvals`: approval checkpoints (`docs/approvals.md`).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use switchboard_types::approvals::{
    ApprovalEnvelope, ApprovalList, ApprovalQuery, ApprovalWait, DecideApproval, RequestApproval,
};
use switchboard_types::ids::ApprovalId;
use switchboard_types::{ApprovalOp, ErrorBody, Operation, Reply};
use utoipa_axum::{router::OpenApiRouter, routes};

use super::{HttpState, created, ok};
use crate::transport::common::{ApiResult, Auth, JsonBody, PathParams, QueryParams};

pub fn router() -> OpenApiRouter<HttpState> {
    OpenApiRouter::new()
        .routes(routes!(request_approval, list_approvals))
        .routes(routes!(get_approval))
        .routes(routes!(decide_approval))
}

/// Ask a person to decide (agent token). The approval is pending until the team key or
/// an approver decides it, or until `expires_in_seconds` pass (then it is `expired`: not
/// one of the options, never a go-ahead). The asker is told the outcome as an approval
/// event in its inbox, pushed on every transport; `GET /v1/approvals/{approval_id}` with
/// `wait_seconds` waits for it.
#[utoipa::path(post, path = "/v1/approvals", tag = "approvals", security(("bearer" = [])),
    request_body = RequestApproval,
    responses(
        (status = 201, description = "The approval, pending", body = ApprovalEnvelope),
        (status = 400, description = "VALIDATION_ERROR: summary, details, options or expires_in_seconds", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: not an agent token; or COMMUNICATION_DISABLED", body = ErrorBody),
        (status = 404, description = "TASK_NOT_FOUND: task_id is not a task the caller takes part in", body = ErrorBody),
        (status = 409, description = "INVALID_TASK_TRANSITION: the task is finished", body = ErrorBody),
        (status = 413, description = "PAYLOAD_TOO_LARGE", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED: 100 approvals of the agent pending", body = ErrorBody),
        (status = 503, description = "UNAVAILABLE", body = ErrorBody),
    ))]
async fn request_approval(
    State(state): State<HttpState>,
    Auth(caller): Auth,
    JsonBody(input): JsonBody<RequestApproval>,
) -> ApiResult<(StatusCode, Json<Reply>)> {
    let op = Operation::Approvals(ApprovalOp::RequestApproval(input));
    created(state, &caller, op).await
}

/// The team's approvals, newest first: the team key and approver agents see every one,
/// an agent the ones it asked.
#[utoipa::path(get, path = "/v1/approvals", tag = "approvals", security(("bearer" = [])),
    params(ApprovalQuery),
    responses(
        (status = 200, description = "One page of approvals", body = ApprovalList),
        (status = 400, description = "VALIDATION_ERROR: status, limit or cursor", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: the admin token, or an agent listing another's", body = ErrorBody),
        (status = 404, description = "AGENT_NOT_FOUND (asked_by) or TASK_NOT_FOUND (task_id)", body = ErrorBody),
    ))]
async fn list_approvals(
    State(state): State<HttpState>,
    Auth(caller): Auth,
    QueryParams(query): QueryParams<ApprovalQuery>,
) -> ApiResult<Json<Reply>> {
    ok(
        state,
        &caller,
        Operation::Approvals(ApprovalOp::ListApprovals(query)),
    )
    .await
}

/// One approval; with `wait_seconds`, answered once it is decided or expired, or when
/// the wait is over (still `pending`).
#[utoipa::path(get, path = "/v1/approvals/{approval_id}", tag = "approvals", security(("bearer" = [])),
    params(("approval_id" = String, Path, description = "The approval's id"), ApprovalWait),
    responses(
        (status = 200, description = "The approval as it stands", body = ApprovalEnvelope),
        (status = 400, description = "VALIDATION_ERROR: wait_seconds", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: the admin token", body = ErrorBody),
        (status = 404, description = "APPROVAL_NOT_FOUND: no approval of the team the caller may see has this id", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED: the credential's waiting calls", body = ErrorBody),
    ))]
async fn get_approval(
    State(state): State<HttpState>,
    Auth(caller): Auth,
    PathParams(approval_id): PathParams<ApprovalId>,
    QueryParams(wait): QueryParams<ApprovalWait>,
) -> ApiResult<Json<Reply>> {
    let op = ApprovalOp::GetApproval { approval_id, wait };
    ok(state, &caller, Operation::Approvals(op)).await
}

/// Decide a pending approval with one of its options: the team key, or an agent the team
/// names in its `approvers` (never the asker). A decided or expired approval is not
/// decided again.
#[utoipa::path(post, path = "/v1/approvals/{approval_id}/decision", tag = "approvals", security(("bearer" = [])),
    params(("approval_id" = String, Path, description = "The approval's id")),
    request_body = DecideApproval,
    responses(
        (status = 200, description = "The approval, decided", body = ApprovalEnvelope),
        (status = 400, description = "VALIDATION_ERROR: a decision not among the options (details.options), or the comment", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: the asker itself, an agent that is not an approver, the admin token", body = ErrorBody),
        (status = 404, description = "APPROVAL_NOT_FOUND", body = ErrorBody),
        (status = 409, description = "APPROVAL_CLOSED: decided already or expired (details.status, details.decision)", body = ErrorBody),
        (status = 413, description = "PAYLOAD_TOO_LARGE", body = ErrorBody),
        (status = 503, description = "UNAVAILABLE", body = ErrorBody),
    ))]
async fn decide_approval(
    State(state): State<HttpState>,
    Auth(caller): Auth,
    PathParams(approval_id): PathParams<ApprovalId>,
    JsonBody(decision): JsonBody<DecideApproval>,
) -> ApiResult<Json<Reply>> {
    let op = ApprovalOp::DecideApproval {
        approval_id,
        decision,
    };
    ok(state, &caller, Operation::Approvals(op)).await
}
