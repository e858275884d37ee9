//! `/v1/tasks/claim`, `/v1/tasks/{task_id}/extend` and `/v1/tasks/{task_id}/release`:
//! work offered to a role, taken, held and given back (`docs/tasks.md`, "Work any free agent can take").

use axum::Json;
use axum::extract::State;
use switchboard_types::claims::{ClaimTask, ExtendClaim, ReleaseTask, TaskClaimed};
use switchboard_types::ids::TaskRef;
use switchboard_types::tasks::TaskUpdated;
use switchboard_types::{ErrorBody, Operation, Reply, TaskOp};
use utoipa_axum::{router::OpenApiRouter, routes};

use super::{HttpState, ok};
use crate::transport::common::{ApiResult, Auth, JsonBody, PathParams};

pub fn router() -> OpenApiRouter<HttpState> {
    OpenApiRouter::new()
        .routes(routes!(claim))
        .routes(routes!(extend))
        .routes(routes!(release))
}

/// Claim the next task offered to the caller's role (agent token).
///
/// Among the open tasks submitted with `assignee_role` equal to the caller's role that it
/// may take (not its own; with one of their `required_capabilities`, if any), the most
/// urgent, then the oldest, becomes the caller's: `in-progress`, with a lease of
/// `lease_seconds` that each progress report starts again. A lease that runs out puts
/// the task back for the next claimer; after the team's `max_attempts` claims it fails.
/// With `wait_seconds`, waits that long for a task to be offered; `task: null` when none
/// was. Exactly one of several racing claims of a task wins, on every node.
#[utoipa::path(post, path = "/v1/tasks/claim", tag = "tasks", security(("bearer" = [])),
    request_body = ClaimTask,
    responses(
        (status = 200, description = "The task claimed, or `task: null` when none was open for the caller", body = TaskClaimed),
        (status = 400, description = "VALIDATION_ERROR: wait_seconds or lease_seconds out of range", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN (a key, not an agent) or COMMUNICATION_DISABLED", body = ErrorBody),
    ))]
async fn claim(
    State(state): State<HttpState>,
    Auth(caller): Auth,
    JsonBody(input): JsonBody<ClaimTask>,
) -> ApiResult<Json<Reply>> {
    ok(state, &caller, Operation::Tasks(TaskOp::ClaimTask(input))).await
}

/// Give a claimed task back to its role (its claimer): open again, offered to the role's
/// online agents; its attempts stay counted.
#[utoipa::path(post, path = "/v1/tasks/{task_id}/release", tag = "tasks", security(("bearer" = [])),
    params(("task_id" = String, Path, description = "The task: its id, or `id@originator` where the id alone names several of the caller's tasks")),
    request_body = ReleaseTask,
    responses(
        (status = 200, description = "Open again", body = TaskUpdated),
        (status = 400, description = "VALIDATION_ERROR", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: only the task's assignee gives it back", body = ErrorBody),
        (status = 404, description = "TASK_NOT_FOUND", body = ErrorBody),
        (status = 409, description = "CONFLICT (an ambiguous task id) or INVALID_TASK_TRANSITION: not a task offered to a role, or finished", body = ErrorBody),
    ))]
async fn release(
    State(state): State<HttpState>,
    Auth(caller): Auth,
    PathParams(task_id): PathParams<TaskRef>,
    JsonBody(input): JsonBody<ReleaseTask>,
) -> ApiResult<Json<Reply>> {
    ok(
        state,
        &caller,
        Operation::Tasks(TaskOp::ReleaseTask {
            task_id,
            release: input,
        }),
    )
    .await
}

/// Renew a claim's lease without a progress report (its claimer): it ends
/// `lease_seconds` from now (which becomes the claim's lease), or the claim's own lease
/// from now. For a long step with nothing to report yet; a progress report renews it
/// too.
#[utoipa::path(post, path = "/v1/tasks/{task_id}/extend", tag = "tasks", security(("bearer" = [])),
    params(("task_id" = String, Path, description = "The task: its id, or `id@originator` where the id alone names several of the caller's tasks")),
    request_body = ExtendClaim,
    responses(
        (status = 200, description = "The task with its new `lease_expires_at`", body = TaskUpdated),
        (status = 400, description = "VALIDATION_ERROR: lease_seconds out of range", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: only the task's claimer extends it", body = ErrorBody),
        (status = 404, description = "TASK_NOT_FOUND", body = ErrorBody),
        (status = 409, description = "CONFLICT (an ambiguous task id) or INVALID_TASK_TRANSITION: not claimed, waiting for an answer, or finished", body = ErrorBody),
    ))]
async fn extend(
    State(state): State<HttpState>,
    Auth(caller): Auth,
    PathParams(task_id): PathParams<TaskRef>,
    JsonBody(input): JsonBody<ExtendClaim>,
) -> ApiResult<Json<Reply>> {
    ok(
        state,
        &caller,
        Operation::Tasks(TaskOp::ExtendClaim {
            task_id,
            extend: input,
        }),
    )
    .await
}
