//! `/v1/teams/{team_id}/agents`: the registry.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use switchboard_types::AgentOp;
use switchboard_types::ids::{AgentId, TeamId};
use utoipa_axum::{router::OpenApiRouter, routes};

use switchboard_types::agents::{
    AgentEnvelope, AgentList, AgentQuery, AgentRegistered, AgentRemoved, RegisterAgent, UpdateAgent,
};
use switchboard_types::{ErrorBody, Operation, Reply};

use super::{HttpState, created, ok};
use crate::transport::common::{ApiResult, Auth, JsonBody, PathParams, QueryParams};

pub fn router() -> OpenApiRouter<HttpState> {
    OpenApiRouter::new()
        .routes(routes!(register_agent, list_agents))
        .routes(routes!(get_agent, update_agent, remove_agent))
        .routes(routes!(rotate_agent_token))
}

/// Register an agent (team key). Answers the agent's token, once.
#[utoipa::path(post, path = "/v1/teams/{team_id}/agents", tag = "agents", security(("bearer" = [])),
    params(("team_id" = String, Path, description = "The team's id")),
    request_body = RegisterAgent,
    responses(
        (status = 201, description = "Agent registered; store its token", body = AgentRegistered),
        (status = 400, description = "VALIDATION_ERROR", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: not this team's key", body = ErrorBody),
        (status = 404, description = "NOT_FOUND", body = ErrorBody),
        (status = 409, description = "AGENT_ALREADY_REGISTERED", body = ErrorBody),
        (status = 413, description = "PAYLOAD_TOO_LARGE", body = ErrorBody),
        (status = 503, description = "UNAVAILABLE", body = ErrorBody),
    ))]
async fn register_agent(
    State(state): State<HttpState>,
    Auth(caller): Auth,
    PathParams(team_id): PathParams<TeamId>,
    JsonBody(input): JsonBody<RegisterAgent>,
) -> ApiResult<(StatusCode, Json<Reply>)> {
    let agent = input;
    created(
        state,
        &caller,
        Operation::Agents(AgentOp::RegisterAgent { team_id, agent }),
    )
    .await
}

/// Look agents up by capability and/or status (any member, the team key, the admin).
#[utoipa::path(get, path = "/v1/teams/{team_id}/agents", tag = "agents", security(("bearer" = [])),
    params(("team_id" = String, Path, description = "The team's id"), AgentQuery),
    responses(
        (status = 200, description = "Matching agents, by agent id", body = AgentList),
        (status = 400, description = "VALIDATION_ERROR: a bad filter", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN", body = ErrorBody),
        (status = 404, description = "NOT_FOUND", body = ErrorBody),
    ))]
async fn list_agents(
    State(state): State<HttpState>,
    Auth(caller): Auth,
    PathParams(team_id): PathParams<TeamId>,
    QueryParams(query): QueryParams<AgentQuery>,
) -> ApiResult<Json<Reply>> {
    ok(
        state,
        &caller,
        Operation::Agents(AgentOp::ListAgents { team_id, query }),
    )
    .await
}

/// Read one agent.
#[utoipa::path(get, path = "/v1/teams/{team_id}/agents/{agent_id}", tag = "agents", security(("bearer" = [])),
    params(("team_id" = String, Path, description = "The team's id"),
           ("agent_id" = String, Path, description = "The agent's id")),
    responses(
        (status = 200, description = "The agent", body = AgentEnvelope),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN", body = ErrorBody),
        (status = 404, description = "AGENT_NOT_FOUND", body = ErrorBody),
    ))]
async fn get_agent(
    State(state): State<HttpState>,
    Auth(caller): Auth,
    PathParams((team_id, agent_id)): PathParams<(TeamId, AgentId)>,
) -> ApiResult<Json<Reply>> {
    ok(
        state,
        &caller,
        Operation::Agents(AgentOp::GetAgent { team_id, agent_id }),
    )
    .await
}

/// Update an agent: the agent itself (status, role, capabilities, address) or the team
/// key (also `communication_enabled`).
#[utoipa::path(patch, path = "/v1/teams/{team_id}/agents/{agent_id}", tag = "agents", security(("bearer" = [])),
    params(("team_id" = String, Path, description = "The team's id"),
           ("agent_id" = String, Path, description = "The agent's id")),
    request_body = UpdateAgent,
    responses(
        (status = 200, description = "The updated agent", body = AgentEnvelope),
        (status = 400, description = "VALIDATION_ERROR", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: another agent, or a team-key-only field", body = ErrorBody),
        (status = 404, description = "AGENT_NOT_FOUND", body = ErrorBody),
        (status = 503, description = "UNAVAILABLE", body = ErrorBody),
    ))]
async fn update_agent(
    State(state): State<HttpState>,
    Auth(caller): Auth,
    PathParams((team_id, agent_id)): PathParams<(TeamId, AgentId)>,
    JsonBody(patch): JsonBody<UpdateAgent>,
) -> ApiResult<Json<Reply>> {
    ok(
        state,
        &caller,
        Operation::Agents(AgentOp::UpdateAgent {
            team_id,
            agent_id,
            patch,
        }),
    )
    .await
}

/// Remove an agent (team key). Its token stops working immediately.
#[utoipa::path(delete, path = "/v1/teams/{team_id}/agents/{agent_id}", tag = "agents", security(("bearer" = [])),
    params(("team_id" = String, Path, description = "The team's id"),
           ("agent_id" = String, Path, description = "The agent's id")),
    responses(
        (status = 200, description = "The agent was removed", body = AgentRemoved),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN", body = ErrorBody),
        (status = 404, description = "AGENT_NOT_FOUND", body = ErrorBody),
        (status = 503, description = "UNAVAILABLE", body = ErrorBody),
    ))]
async fn remove_agent(
    State(state): State<HttpState>,
    Auth(caller): Auth,
    PathParams((team_id, agent_id)): PathParams<(TeamId, AgentId)>,
) -> ApiResult<Json<Reply>> {
    ok(
        state,
        &caller,
        Operation::Agents(AgentOp::RemoveAgent { team_id, agent_id }),
    )
    .await
}

/// Give an agent a new token (team key, admin, or the agent itself). The old token is
/// refused from this answer on, on every node; the agent's live connections end (they
/// were opened with the old one). Answers the new token, once.
#[utoipa::path(post, path = "/v1/teams/{team_id}/agents/{agent_id}/token", tag = "agents", security(("bearer" = [])),
    params(("team_id" = String, Path, description = "The team's id"),
           ("agent_id" = String, Path, description = "The agent's id")),
    responses(
        (status = 200, description = "The agent with its new token; store it", body = AgentRegistered),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: another agent's token, or another team", body = ErrorBody),
        (status = 404, description = "AGENT_NOT_FOUND", body = ErrorBody),
        (status = 503, description = "UNAVAILABLE", body = ErrorBody),
    ))]
async fn rotate_agent_token(
    State(state): State<HttpState>,
    Auth(caller): Auth,
    PathParams((team_id, agent_id)): PathParams<(TeamId, AgentId)>,
) -> ApiResult<Json<Reply>> {
    ok(
        state,
        &caller,
        Operation::Agents(AgentOp::RotateAgentToken { team_id, agent_id }),
    )
    .await
}
