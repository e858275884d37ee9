//! `/v1/teams/{team_id}/leases`: leases on named resources (`docs/leases.md`).

use axum::Json;
use axum::extract::State;
use switchboard_types::ids::{LeaseId, TeamId};
use switchboard_types::leases::{AcquireLease, ExtendLease, LeaseEnvelope, LeaseList, LeaseQuery};
use switchboard_types::{ErrorBody, LeaseOp, Operation, Reply};
use utoipa_axum::{router::OpenApiRouter, routes};

use super::{HttpState, ok};
use crate::transport::common::{ApiResult, Auth, JsonBody, PathParams, QueryParams};

pub fn router() -> OpenApiRouter<HttpState> {
    OpenApiRouter::new()
        .routes(routes!(acquire_lease, list_leases))
        .routes(routes!(release_lease))
        .routes(routes!(extend_lease))
}

/// Take a lease on a resource, as the calling agent (agent token). Asking again for a
/// resource you hold, of the same kind, renews that lease.
#[utoipa::path(put, path = "/v1/teams/{team_id}/leases", tag = "leases", security(("bearer" = [])),
    params(("team_id" = String, Path, description = "The team's id")),
    request_body = AcquireLease,
    responses(
        (status = 200, description = "The lease, granted (or renewed)", body = LeaseEnvelope),
        (status = 400, description = "VALIDATION_ERROR: the resource, ttl_seconds or reason", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: not an agent of this team", body = ErrorBody),
        (status = 404, description = "NOT_FOUND", body = ErrorBody),
        (status = 409, description = "LEASE_CONFLICT (details.conflicts names each holder), or CONFLICT: a lease limit", body = ErrorBody),
        (status = 413, description = "PAYLOAD_TOO_LARGE", body = ErrorBody),
        (status = 503, description = "UNAVAILABLE", body = ErrorBody),
    ))]
async fn acquire_lease(
    State(state): State<HttpState>,
    Auth(caller): Auth,
    PathParams(team_id): PathParams<TeamId>,
    JsonBody(lease): JsonBody<AcquireLease>,
) -> ApiResult<Json<Reply>> {
    let team_id = Some(team_id);
    ok(
        state,
        &caller,
        Operation::Leases(LeaseOp::AcquireLease { team_id, lease }),
    )
    .await
}

/// The team's live leases, oldest first (any member, the team key, the admin);
/// optionally one holder's, or those overlapping a resource.
#[utoipa::path(get, path = "/v1/teams/{team_id}/leases", tag = "leases", security(("bearer" = [])),
    params(("team_id" = String, Path, description = "The team's id"), LeaseQuery),
    responses(
        (status = 200, description = "The live leases", body = LeaseList),
        (status = 400, description = "VALIDATION_ERROR: a bad resource filter", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: another team's token", body = ErrorBody),
        (status = 404, description = "NOT_FOUND, or AGENT_NOT_FOUND: an unknown holder", body = ErrorBody),
    ))]
async fn list_leases(
    State(state): State<HttpState>,
    Auth(caller): Auth,
    PathParams(team_id): PathParams<TeamId>,
    QueryParams(query): QueryParams<LeaseQuery>,
) -> ApiResult<Json<Reply>> {
    let team_id = Some(team_id);
    ok(
        state,
        &caller,
        Operation::Leases(LeaseOp::ListLeases { team_id, query }),
    )
    .await
}

/// Release a lease: its holder, or the team key (or the admin) for any of the team's.
#[utoipa::path(delete, path = "/v1/teams/{team_id}/leases/{lease_id}", tag = "leases", security(("bearer" = [])),
    params(("team_id" = String, Path, description = "The team's id"),
           ("lease_id" = String, Path, description = "The lease's id")),
    responses(
        (status = 200, description = "The lease as it was, released", body = LeaseEnvelope),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: another member's lease, or another team's token", body = ErrorBody),
        (status = 404, description = "LEASE_NOT_FOUND: no live lease has this id", body = ErrorBody),
        (status = 503, description = "UNAVAILABLE", body = ErrorBody),
    ))]
async fn release_lease(
    State(state): State<HttpState>,
    Auth(caller): Auth,
    PathParams((team_id, lease_id)): PathParams<(TeamId, LeaseId)>,
) -> ApiResult<Json<Reply>> {
    let team_id = Some(team_id);
    ok(
        state,
        &caller,
        Operation::Leases(LeaseOp::ReleaseLease { team_id, lease_id }),
    )
    .await
}

/// Renew a lease (its holder): it now ends `ttl_seconds` (default 300) from now.
#[utoipa::path(post, path = "/v1/teams/{team_id}/leases/{lease_id}/extend", tag = "leases", security(("bearer" = [])),
    params(("team_id" = String, Path, description = "The team's id"),
           ("lease_id" = String, Path, description = "The lease's id")),
    request_body = ExtendLease,
    responses(
        (status = 200, description = "The lease with its new end", body = LeaseEnvelope),
        (status = 400, description = "VALIDATION_ERROR: ttl_seconds", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: not the holder", body = ErrorBody),
        (status = 404, description = "LEASE_NOT_FOUND: no live lease has this id", body = ErrorBody),
        (status = 413, description = "PAYLOAD_TOO_LARGE", body = ErrorBody),
        (status = 503, description = "UNAVAILABLE", body = ErrorBody),
    ))]
async fn extend_lease(
    State(state): State<HttpState>,
    Auth(caller): Auth,
    PathParams((team_id, lease_id)): PathParams<(TeamId, LeaseId)>,
    JsonBody(extend): JsonBody<ExtendLease>,
) -> ApiResult<Json<Reply>> {
    let op = LeaseOp::ExtendLease {
        team_id: Some(team_id),
        lease_id,
        extend,
    };
    ok(state, &caller, Operation::Leases(op)).await
}
