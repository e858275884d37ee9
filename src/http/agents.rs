//! `/v1/teams/{team_id}/agents`: the registry.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::AppState;
use super::error::ApiResult;
use super::extract::{Auth, JsonBody, PathParams, QueryParams};
use crate::core::CoreError;
use crate::core::agents::{
    AgentEnvelope, AgentList, AgentQuery, AgentRegistered, AgentRemoved, RegisterAgent, UpdateAgent,
};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(register_agent, list_agents))
        .routes(routes!(get_agent, update_agent, remove_agent))
}

/// Register an agent (team key). Answers the agent's token, once.
#[utoipa::path(post, path = "/v1/teams/{team_id}/agents", tag = "agents", security(("bearer" = [])),
    params(("team_id" = String, Path, description = "The team's id")),
    request_body = RegisterAgent,
    responses(
        (status = 201, description = "Agent registered; store its token", body = AgentRegistered),
        (status = 400, description = "VALIDATION_ERROR", body = CoreError),
        (status = 401, description = "UNAUTHORIZED", body = CoreError),
        (status = 403, description = "FORBIDDEN: not this team's key", body = CoreError),
        (status = 404, description = "NOT_FOUND", body = CoreError),
        (status = 409, description = "AGENT_ALREADY_REGISTERED", body = CoreError),
        (status = 413, description = "PAYLOAD_TOO_LARGE", body = CoreError),
        (status = 503, description = "UNAVAILABLE", body = CoreError),
    ))]
async fn register_agent(
    State(state): State<AppState>,
    Auth(caller): Auth,
    PathParams(team_id): PathParams<String>,
    JsonBody(input): JsonBody<RegisterAgent>,
) -> ApiResult<(StatusCode, Json<AgentRegistered>)> {
    let registered = state.core.register_agent(&caller, &team_id, input).await?;
    Ok((StatusCode::CREATED, Json(registered)))
}

/// Look agents up by capability and/or status (any member, the team key, the admin).
#[utoipa::path(get, path = "/v1/teams/{team_id}/agents", tag = "agents", security(("bearer" = [])),
    params(("team_id" = String, Path, description = "The team's id"), AgentQuery),
    responses(
        (status = 200, description = "Matching agents, by agent id", body = AgentList),
        (status = 400, description = "VALIDATION_ERROR: a bad filter", body = CoreError),
        (status = 401, description = "UNAUTHORIZED", body = CoreError),
        (status = 403, description = "FORBIDDEN", body = CoreError),
        (status = 404, description = "NOT_FOUND", body = CoreError),
    ))]
async fn list_agents(
    State(state): State<AppState>,
    Auth(caller): Auth,
    PathParams(team_id): PathParams<String>,
    QueryParams(query): QueryParams<AgentQuery>,
) -> ApiResult<Json<AgentList>> {
    Ok(Json(state.core.list_agents(&caller, &team_id, &query)?))
}

/// Read one agent.
#[utoipa::path(get, path = "/v1/teams/{team_id}/agents/{agent_id}", tag = "agents", security(("bearer" = [])),
    params(("team_id" = String, Path, description = "The team's id"),
           ("agent_id" = String, Path, description = "The agent's id")),
    responses(
        (status = 200, description = "The agent", body = AgentEnvelope),
        (status = 401, description = "UNAUTHORIZED", body = CoreError),
        (status = 403, description = "FORBIDDEN", body = CoreError),
        (status = 404, description = "AGENT_NOT_FOUND", body = CoreError),
    ))]
async fn get_agent(
    State(state): State<AppState>,
    Auth(caller): Auth,
    PathParams((team_id, agent_id)): PathParams<(String, String)>,
) -> ApiResult<Json<AgentEnvelope>> {
    Ok(Json(state.core.get_agent(&caller, &team_id, &agent_id)?))
}

/// Update an agent: the agent itself (status, role, capabilities, address) or the team
/// key (also `communication_enabled`).
#[utoipa::path(patch, path = "/v1/teams/{team_id}/agents/{agent_id}", tag = "agents", security(("bearer" = [])),
    params(("team_id" = String, Path, description = "The team's id"),
           ("agent_id" = String, Path, description = "The agent's id")),
    request_body = UpdateAgent,
    responses(
        (status = 200, description = "The updated agent", body = AgentEnvelope),
        (status = 400, description = "VALIDATION_ERROR", body = CoreError),
        (status = 401, description = "UNAUTHORIZED", body = CoreError),
        (status = 403, description = "FORBIDDEN: another agent, or a team-key-only field", body = CoreError),
        (status = 404, description = "AGENT_NOT_FOUND", body = CoreError),
        (status = 503, description = "UNAVAILABLE", body = CoreError),
    ))]
async fn update_agent(
    State(state): State<AppState>,
    Auth(caller): Auth,
    PathParams((team_id, agent_id)): PathParams<(String, String)>,
    JsonBody(patch): JsonBody<UpdateAgent>,
) -> ApiResult<Json<AgentEnvelope>> {
    Ok(Json(
        state
            .core
            .update_agent(&caller, &team_id, &agent_id, patch)
            .await?,
    ))
}

/// Remove an agent (team key). Its token stops working immediately.
#[utoipa::path(delete, path = "/v1/teams/{team_id}/agents/{agent_id}", tag = "agents", security(("bearer" = [])),
    params(("team_id" = String, Path, description = "The team's id"),
           ("agent_id" = String, Path, description = "The agent's id")),
    responses(
        (status = 200, description = "The agent was removed", body = AgentRemoved),
        (status = 401, description = "UNAUTHORIZED", body = CoreError),
        (status = 403, description = "FORBIDDEN", body = CoreError),
        (status = 404, description = "AGENT_NOT_FOUND", body = CoreError),
        (status = 503, description = "UNAVAILABLE", body = CoreError),
    ))]
async fn remove_agent(
    State(state): State<AppState>,
    Auth(caller): Auth,
    PathParams((team_id, agent_id)): PathParams<(String, String)>,
) -> ApiResult<Json<AgentRemoved>> {
    Ok(Json(
        state
            .core
            .remove_agent(&caller, &team_id, &agent_id)
            .await?,
    ))
}
