//! `/v1/teams`: create and list (admin), read, update, a new key.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use switchboard_types::ids::TeamId;
use utoipa_axum::{router::OpenApiRouter, routes};

use switchboard_types::metrics::TeamMetrics;
use switchboard_types::teams::{
    CreateTeam, TeamCreated, TeamKeyRotated, TeamList, TeamView, UpdateTeam, WhoAmI,
};
use switchboard_types::{AgentOp, ErrorBody, Operation, Reply, TeamOp};

use super::{HttpState, created, ok};
use crate::transport::common::{ApiResult, Auth, JsonBody, PathParams};

pub fn router() -> OpenApiRouter<HttpState> {
    OpenApiRouter::new()
        .routes(routes!(create_team, list_teams))
        .routes(routes!(get_team, update_team))
        .routes(routes!(rotate_team_key))
        .routes(routes!(team_metrics))
        .routes(routes!(whoami))
}

/// Create a team (admin token). Answers the team key, once.
#[utoipa::path(post, path = "/v1/teams", tag = "teams", security(("bearer" = [])),
    request_body = CreateTeam,
    responses(
        (status = 201, description = "Team created; store the team key", body = TeamCreated),
        (status = 400, description = "VALIDATION_ERROR", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: not the admin token", body = ErrorBody),
        (status = 409, description = "CONFLICT: the team id is taken", body = ErrorBody),
        (status = 413, description = "PAYLOAD_TOO_LARGE", body = ErrorBody),
        (status = 503, description = "UNAVAILABLE", body = ErrorBody),
    ))]
async fn create_team(
    State(state): State<HttpState>,
    Auth(caller): Auth,
    JsonBody(input): JsonBody<CreateTeam>,
) -> ApiResult<(StatusCode, Json<Reply>)> {
    created(state, &caller, Operation::Teams(TeamOp::CreateTeam(input))).await
}

/// Read a team (any of its agents, its team key, or the admin).
#[utoipa::path(get, path = "/v1/teams/{team_id}", tag = "teams", security(("bearer" = [])),
    params(("team_id" = String, Path, description = "The team's id")),
    responses(
        (status = 200, description = "The team", body = TeamView),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: another team's token", body = ErrorBody),
        (status = 404, description = "NOT_FOUND (admin only; others get 403)", body = ErrorBody),
    ))]
async fn get_team(
    State(state): State<HttpState>,
    Auth(caller): Auth,
    PathParams(team_id): PathParams<TeamId>,
) -> ApiResult<Json<Reply>> {
    ok(
        state,
        &caller,
        Operation::Teams(TeamOp::GetTeam { team_id }),
    )
    .await
}

/// Rename a team or switch its communication on or off (team key or admin).
#[utoipa::path(patch, path = "/v1/teams/{team_id}", tag = "teams", security(("bearer" = [])),
    params(("team_id" = String, Path, description = "The team's id")),
    request_body = UpdateTeam,
    responses(
        (status = 200, description = "The updated team", body = TeamView),
        (status = 400, description = "VALIDATION_ERROR", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: not this team's key", body = ErrorBody),
        (status = 404, description = "NOT_FOUND", body = ErrorBody),
        (status = 503, description = "UNAVAILABLE", body = ErrorBody),
    ))]
async fn update_team(
    State(state): State<HttpState>,
    Auth(caller): Auth,
    PathParams(team_id): PathParams<TeamId>,
    JsonBody(patch): JsonBody<UpdateTeam>,
) -> ApiResult<Json<Reply>> {
    ok(
        state,
        &caller,
        Operation::Teams(TeamOp::UpdateTeam { team_id, patch }),
    )
    .await
}

/// Communication metrics per agent: sent, received, unread, responses given and the
/// median response time (any member, the team key, the admin).
#[utoipa::path(get, path = "/v1/teams/{team_id}/metrics", tag = "teams", security(("bearer" = [])),
    params(("team_id" = String, Path, description = "The team's id")),
    responses(
        (status = 200, description = "Per-agent figures, by agent id", body = TeamMetrics),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN", body = ErrorBody),
        (status = 404, description = "NOT_FOUND", body = ErrorBody),
        (status = 503, description = "UNAVAILABLE", body = ErrorBody),
    ))]
async fn team_metrics(
    State(state): State<HttpState>,
    Auth(caller): Auth,
    PathParams(team_id): PathParams<TeamId>,
) -> ApiResult<Json<Reply>> {
    ok(
        state,
        &caller,
        Operation::Teams(TeamOp::TeamMetrics { team_id }),
    )
    .await
}

/// Who the token belongs to: its kind, team and agent id.
#[utoipa::path(get, path = "/v1/whoami", tag = "teams", security(("bearer" = [])),
    responses(
        (status = 200, description = "The token's owner", body = WhoAmI),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
    ))]
async fn whoami(State(state): State<HttpState>, Auth(caller): Auth) -> ApiResult<Json<Reply>> {
    ok(state, &caller, Operation::Agents(AgentOp::WhoAmI)).await
}

/// Give the team a new key (team key or admin). The old key is refused from this answer
/// on, on every node (a console signed in with it is refused at its next request).
/// Answers the new key, once.
#[utoipa::path(post, path = "/v1/teams/{team_id}/key", tag = "teams", security(("bearer" = [])),
    params(("team_id" = String, Path, description = "The team's id")),
    responses(
        (status = 200, description = "The new team key; store it", body = TeamKeyRotated),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: not the team key", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: no such team (admin)", body = ErrorBody),
        (status = 503, description = "UNAVAILABLE", body = ErrorBody),
    ))]
async fn rotate_team_key(
    State(state): State<HttpState>,
    Auth(caller): Auth,
    PathParams(team_id): PathParams<TeamId>,
) -> ApiResult<Json<Reply>> {
    ok(
        state,
        &caller,
        Operation::Teams(TeamOp::RotateTeamKey { team_id }),
    )
    .await
}

/// Every team of the server, by id (admin token). A team key reads its own team at
/// `GET /v1/teams/{team_id}`.
#[utoipa::path(get, path = "/v1/teams", tag = "teams", security(("bearer" = [])),
    responses(
        (status = 200, description = "Every team", body = TeamList),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: not the admin token", body = ErrorBody),
    ))]
async fn list_teams(State(state): State<HttpState>, Auth(caller): Auth) -> ApiResult<Json<Reply>> {
    ok(state, &caller, Operation::Teams(TeamOp::ListTeams)).await
}
