//! The operator's views of a team (team key): its messages as one timeline and its
//! tasks as one list. The console reads them; so can anyone with the team key and curl.

use axum::Json;
use axum::extract::State;
use switchboard_types::ids::TeamId;
use switchboard_types::tasks::TaskList;
use switchboard_types::traffic::{TeamTaskQuery, TrafficPage, TrafficQuery};
use switchboard_types::{ErrorBody, Operation, Reply, TeamOp};
use utoipa_axum::{router::OpenApiRouter, routes};

use super::{HttpState, ok};
use crate::transport::common::{ApiResult, Auth, PathParams, QueryParams};

pub fn router() -> OpenApiRouter<HttpState> {
    OpenApiRouter::new()
        .routes(routes!(team_messages))
        .routes(routes!(team_tasks))
}

/// The team's traffic (team key): every message, response, broadcast, publish and task
/// notification, in the order it was stored, with its recipients.
///
/// Without `after`, the newest `limit` messages; then pass `next_after` back as `after`
/// to follow what comes next (oldest first, none skipped or repeated on one database).
#[utoipa::path(get, path = "/v1/teams/{team_id}/messages", tag = "teams", security(("bearer" = [])),
    params(("team_id" = String, Path, description = "The team's id"), TrafficQuery),
    responses(
        (status = 200, description = "One page of the team's messages", body = TrafficPage),
        (status = 400, description = "VALIDATION_ERROR: limit outside 1–100, a negative `after`", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: not this team's key", body = ErrorBody),
        (status = 404, description = "NOT_FOUND (admin only; others get 403)", body = ErrorBody),
    ))]
async fn team_messages(
    State(state): State<HttpState>,
    Auth(caller): Auth,
    PathParams(team_id): PathParams<TeamId>,
    QueryParams(query): QueryParams<TrafficQuery>,
) -> ApiResult<Json<Reply>> {
    ok(
        state,
        &caller,
        Operation::Teams(TeamOp::Traffic { team_id, query }),
    )
    .await
}

/// The team's tasks (team key), newest first, whoever originated them; read one with its
/// history at `GET /v1/tasks/{task_id}@{originator}`.
#[utoipa::path(get, path = "/v1/teams/{team_id}/tasks", tag = "tasks", security(("bearer" = [])),
    params(("team_id" = String, Path, description = "The team's id"), TeamTaskQuery),
    responses(
        (status = 200, description = "One page of the team's tasks", body = TaskList),
        (status = 400, description = "VALIDATION_ERROR: a bad status, limit or cursor", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: not this team's key", body = ErrorBody),
        (status = 404, description = "NOT_FOUND (admin only; others get 403)", body = ErrorBody),
    ))]
async fn team_tasks(
    State(state): State<HttpState>,
    Auth(caller): Auth,
    PathParams(team_id): PathParams<TeamId>,
    QueryParams(query): QueryParams<TeamTaskQuery>,
) -> ApiResult<Json<Reply>> {
    ok(
        state,
        &caller,
        Operation::Teams(TeamOp::TeamTasks { team_id, query }),
    )
    .await
}
