//! `/v1/tasks`: the task protocol over REST, and the team's callback secret.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use switchboard_types::ids::{ClarificationId, TaskRef, TeamId};
use utoipa_axum::{router::OpenApiRouter, routes};

use switchboard_types::tasks::{
    Answer, CallbackSecret, Cancel, Clarify, Handoff, TaskDetail, TaskList, TaskQuery, TaskRequest,
    TaskResult, TaskSubmitted, TaskUpdated,
};
use switchboard_types::{ErrorBody, Operation, Reply, TaskOp, TeamOp};

use super::{HttpState, created, dispatch, ok};
use crate::transport::common::{ApiResult, Auth, JsonBody, PathParams, QueryParams};

pub fn router() -> OpenApiRouter<HttpState> {
    OpenApiRouter::new()
        .routes(routes!(submit_task, list_tasks))
        .routes(routes!(get_task))
        .routes(routes!(handoff))
        .routes(routes!(clarify))
        .routes(routes!(answer))
        .routes(routes!(report))
        .routes(routes!(cancel))
        .routes(routes!(get_callback_secret, rotate_callback_secret))
}

/// Submit a TaskRequest (agent token; the registry by message also takes the team key).
///
/// The task goes to `target_agent_id`, or to the available member with the best match of
/// `required_capabilities` (connected first, then fewest open tasks). The assignee gets
/// a `TaskRequest`, the originator a `TaskResponse` (in-progress, naming the assignee).
/// If nobody is suitable the task is stored as failed and the answer carries an
/// `ErrorMessage` (`NO_SUITABLE_AGENT`). A description containing "register me as an
/// agent" or "find an agent", with no target and no capabilities, is answered by the
/// server itself (200, no task stored).
#[utoipa::path(post, path = "/v1/tasks", tag = "tasks", security(("bearer" = [])),
    request_body = TaskRequest,
    responses(
        (status = 201, description = "The task was stored: assigned (success true) or failed at once (success false, error_message says why)", body = TaskSubmitted),
        (status = 200, description = "A registry request was answered (task_response success or failed)", body = TaskSubmitted),
        (status = 400, description = "VALIDATION_ERROR (callback_url on a private address without --allow-private-callbacks, too many capabilities, …) or MESSAGE_TOO_LONG", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN (originating_agent_id is not the caller) or COMMUNICATION_DISABLED", body = ErrorBody),
        (status = 404, description = "AGENT_NOT_FOUND: target_agent_id or a callback agent is not a member", body = ErrorBody),
        (status = 409, description = "CONFLICT: the team already has a task with this task_id", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED", body = ErrorBody),
        (status = 503, description = "UNAVAILABLE: nothing was stored", body = ErrorBody),
    ))]
async fn submit_task(
    State(state): State<HttpState>,
    Auth(caller): Auth,
    JsonBody(input): JsonBody<TaskRequest>,
) -> ApiResult<(StatusCode, Json<Reply>)> {
    let reply = dispatch(&state, &caller, Operation::Tasks(TaskOp::SubmitTask(input))).await?;
    // A stored task is created; a registry request answered by the server is not.
    let status = match &reply {
        Reply::TaskSubmitted(submitted) if submitted.task.is_none() => StatusCode::OK,
        _ => StatusCode::CREATED,
    };
    Ok((status, Json(reply)))
}

/// The caller's tasks (agent token), newest first: those it originated and those it is
/// or was assigned.
#[utoipa::path(get, path = "/v1/tasks", tag = "tasks", security(("bearer" = [])),
    params(TaskQuery),
    responses(
        (status = 200, description = "One page of tasks", body = TaskList),
        (status = 400, description = "VALIDATION_ERROR: a bad role, status, limit or cursor", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: not an agent token", body = ErrorBody),
    ))]
async fn list_tasks(
    State(state): State<HttpState>,
    Auth(caller): Auth,
    QueryParams(query): QueryParams<TaskQuery>,
) -> ApiResult<Json<Reply>> {
    ok(state, &caller, Operation::Tasks(TaskOp::ListTasks(query))).await
}

/// A task with its full history and callback deliveries (its originator and any
/// assignee, past or present, and the team key).
#[utoipa::path(get, path = "/v1/tasks/{task_id}", tag = "tasks", security(("bearer" = [])),
    params(("task_id" = String, Path, description = "The task: its id, or `id@originator` where the id alone names several of the caller's tasks")),
    responses(
        (status = 200, description = "The task", body = TaskDetail),
        (status = 400, description = "VALIDATION_ERROR: the task reference is not `id` or `id@originator`", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: the admin token", body = ErrorBody),
        (status = 404, description = "TASK_NOT_FOUND (also for tasks the caller is no party to)", body = ErrorBody),
        (status = 409, description = "CONFLICT: the id names several tasks the caller takes part in; name one as `id@originator`", body = ErrorBody),
    ))]
async fn get_task(
    State(state): State<HttpState>,
    Auth(caller): Auth,
    PathParams(task_id): PathParams<TaskRef>,
) -> ApiResult<Json<Reply>> {
    ok(
        state,
        &caller,
        Operation::Tasks(TaskOp::GetTask { task_id }),
    )
    .await
}

/// Hand the task to another agent (its assignee or originator).
///
/// The new assignee gets the `TaskRequest` (with the context gathered so far); the
/// originator, the old and the new assignee get a `HandoffNotification`. An open
/// clarification is dropped.
#[utoipa::path(post, path = "/v1/tasks/{task_id}/handoff", tag = "tasks", security(("bearer" = [])),
    params(("task_id" = String, Path, description = "The task: its id, or `id@originator` where the id alone names several of the caller's tasks")),
    request_body = Handoff,
    responses(
        (status = 200, description = "Handed off", body = TaskUpdated),
        (status = 400, description = "VALIDATION_ERROR", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: the caller is neither assignee nor originator; COMMUNICATION_DISABLED", body = ErrorBody),
        (status = 404, description = "TASK_NOT_FOUND or AGENT_NOT_FOUND (new_agent_id)", body = ErrorBody),
        (status = 409, description = "CONFLICT (an ambiguous task id; name it `id@originator`) or INVALID_TASK_TRANSITION (finished task, same assignee) or NO_SUITABLE_AGENT (the new agent does not accept tasks)", body = ErrorBody),
    ))]
async fn handoff(
    State(state): State<HttpState>,
    Auth(caller): Auth,
    PathParams(task_id): PathParams<TaskRef>,
    JsonBody(input): JsonBody<Handoff>,
) -> ApiResult<Json<Reply>> {
    ok(
        state,
        &caller,
        Operation::Tasks(TaskOp::HandOff {
            task_id,
            handoff: input,
        }),
    )
    .await
}

/// Ask the originator a question (the assignee); the task becomes `input-required` and
/// the originator gets a `ClarificationRequest` with its `clarification_id`.
#[utoipa::path(post, path = "/v1/tasks/{task_id}/clarifications", tag = "tasks", security(("bearer" = [])),
    params(("task_id" = String, Path, description = "The task: its id, or `id@originator` where the id alone names several of the caller's tasks")),
    request_body = Clarify,
    responses(
        (status = 201, description = "Asked; task.open_clarification holds the id", body = TaskUpdated),
        (status = 400, description = "VALIDATION_ERROR or MESSAGE_TOO_LONG", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: only the assignee asks", body = ErrorBody),
        (status = 404, description = "TASK_NOT_FOUND", body = ErrorBody),
        (status = 409, description = "CONFLICT (an ambiguous task id; name it `id@originator`) or INVALID_TASK_TRANSITION: a question is open, or the task is finished", body = ErrorBody),
    ))]
async fn clarify(
    State(state): State<HttpState>,
    Auth(caller): Auth,
    PathParams(task_id): PathParams<TaskRef>,
    JsonBody(input): JsonBody<Clarify>,
) -> ApiResult<(StatusCode, Json<Reply>)> {
    created(
        state,
        &caller,
        Operation::Tasks(TaskOp::Clarify {
            task_id,
            clarify: input,
            requested_by: None,
        }),
    )
    .await
}

/// Answer the open question (the originator); the answer joins the task's context, the
/// task resumes, and the assignee gets a `ClarificationResponse`.
#[utoipa::path(post, path = "/v1/tasks/{task_id}/clarifications/{clarification_id}/answer", tag = "tasks", security(("bearer" = [])),
    params(
        ("task_id" = String, Path, description = "The task: its id, or `id@originator` where the id alone names several of the caller's tasks"),
        ("clarification_id" = String, Path, description = "The open question's id"),
    ),
    request_body = Answer,
    responses(
        (status = 200, description = "Answered; the task is in-progress again", body = TaskUpdated),
        (status = 400, description = "VALIDATION_ERROR or MESSAGE_TOO_LONG", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: only the originator answers", body = ErrorBody),
        (status = 404, description = "TASK_NOT_FOUND", body = ErrorBody),
        (status = 409, description = "CONFLICT (an ambiguous task id; name it `id@originator`) or INVALID_TASK_TRANSITION: no such open question, or the task is finished", body = ErrorBody),
    ))]
async fn answer(
    State(state): State<HttpState>,
    Auth(caller): Auth,
    PathParams((task_id, clarification_id)): PathParams<(TaskRef, ClarificationId)>,
    JsonBody(input): JsonBody<Answer>,
) -> ApiResult<Json<Reply>> {
    ok(
        state,
        &caller,
        Operation::Tasks(TaskOp::AnswerClarification {
            task_id,
            clarification_id,
            answer: input,
            response_provided_by: None,
        }),
    )
    .await
}

/// Report progress (`in-progress`) or the result (`success`, `failed`) (the assignee);
/// the originator gets each `TaskResponse`.
#[utoipa::path(post, path = "/v1/tasks/{task_id}/result", tag = "tasks", security(("bearer" = [])),
    params(("task_id" = String, Path, description = "The task: its id, or `id@originator` where the id alone names several of the caller's tasks")),
    request_body = TaskResult,
    responses(
        (status = 200, description = "Recorded", body = TaskUpdated),
        (status = 400, description = "VALIDATION_ERROR", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: only the assignee reports", body = ErrorBody),
        (status = 404, description = "TASK_NOT_FOUND", body = ErrorBody),
        (status = 409, description = "CONFLICT (an ambiguous task id; name it `id@originator`) or INVALID_TASK_TRANSITION: the task is finished (or waits for an answer, for progress)", body = ErrorBody),
    ))]
async fn report(
    State(state): State<HttpState>,
    Auth(caller): Auth,
    PathParams(task_id): PathParams<TaskRef>,
    JsonBody(input): JsonBody<TaskResult>,
) -> ApiResult<Json<Reply>> {
    ok(
        state,
        &caller,
        Operation::Tasks(TaskOp::ReportTask {
            task_id,
            result: input,
            agent_id: None,
        }),
    )
    .await
}

/// Cancel the task (the originator); the assignee gets a failed `TaskResponse` with
/// `result_data.canceled: true`.
#[utoipa::path(post, path = "/v1/tasks/{task_id}/cancel", tag = "tasks", security(("bearer" = [])),
    params(("task_id" = String, Path, description = "The task: its id, or `id@originator` where the id alone names several of the caller's tasks")),
    request_body = Cancel,
    responses(
        (status = 200, description = "Canceled", body = TaskUpdated),
        (status = 400, description = "VALIDATION_ERROR", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: only the originator cancels", body = ErrorBody),
        (status = 404, description = "TASK_NOT_FOUND", body = ErrorBody),
        (status = 409, description = "CONFLICT (an ambiguous task id; name it `id@originator`) or INVALID_TASK_TRANSITION: the task is finished", body = ErrorBody),
    ))]
async fn cancel(
    State(state): State<HttpState>,
    Auth(caller): Auth,
    PathParams(task_id): PathParams<TaskRef>,
    JsonBody(input): JsonBody<Cancel>,
) -> ApiResult<Json<Reply>> {
    ok(
        state,
        &caller,
        Operation::Tasks(TaskOp::CancelTask {
            task_id,
            cancel: input,
        }),
    )
    .await
}

/// The key task callbacks of this team are signed with (team key or admin).
///
/// Each callback POST carries `Switchboard-Signature: t=<unix seconds>,v1=<hex>` where
/// the hex is HMAC-SHA256 with this secret over `<t>.<raw body>`.
#[utoipa::path(get, path = "/v1/teams/{team_id}/callback-secret", tag = "tasks", security(("bearer" = [])),
    params(("team_id" = String, Path, description = "The team's id")),
    responses(
        (status = 200, description = "The secret", body = CallbackSecret),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: not the team key", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: no such team (admin)", body = ErrorBody),
    ))]
async fn get_callback_secret(
    State(state): State<HttpState>,
    Auth(caller): Auth,
    PathParams(team_id): PathParams<TeamId>,
) -> ApiResult<Json<Reply>> {
    ok(
        state,
        &caller,
        Operation::Teams(TeamOp::CallbackSecret { team_id }),
    )
    .await
}

/// Replace the team's callback secret (team key or admin); later callbacks use the new
/// one.
#[utoipa::path(post, path = "/v1/teams/{team_id}/callback-secret", tag = "tasks", security(("bearer" = [])),
    params(("team_id" = String, Path, description = "The team's id")),
    responses(
        (status = 200, description = "The new secret", body = CallbackSecret),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: not the team key", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: no such team (admin)", body = ErrorBody),
    ))]
async fn rotate_callback_secret(
    State(state): State<HttpState>,
    Auth(caller): Auth,
    PathParams(team_id): PathParams<TeamId>,
) -> ApiResult<Json<Reply>> {
    ok(
        state,
        &caller,
        Operation::Teams(TeamOp::RotateCallbackSecret { team_id }),
    )
    .await
}
