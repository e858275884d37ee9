//! Operations endpoints: liveness, readiness, Prometheus metrics.

use axum::Json;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use serde::{Deserialize, Serialize};
use switchboard_types::ErrorBody;
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::HttpState;
use crate::transport::common::{ApiResult, HasCore};

pub fn router() -> OpenApiRouter<HttpState> {
    OpenApiRouter::new()
        .routes(routes!(healthz))
        .routes(routes!(readyz))
        .routes(routes!(metrics_text))
}

/// Health answer.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Health {
    pub status: String,
    /// The node that answered (`--node-id`): behind a load balancer, which process
    /// this was.
    #[schema(example = "node-3f9a1c2e")]
    pub node_id: String,
}

/// Liveness: the process answers HTTP and its storage answered its last check (checked
/// every second in the background; a node cut off from its database fails this).
#[utoipa::path(get, path = "/healthz", tag = "operations",
    responses(
        (status = 200, description = "The server is alive and reaches its storage", body = Health),
        (status = 503, description = "Storage did not answer its last check", body = ErrorBody),
    ))]
async fn healthz(State(state): State<HttpState>) -> ApiResult<Json<Health>> {
    state.core().node().alive()?;
    Ok(Json(Health {
        status: "ok".to_owned(),
        node_id: state.core().node().node_id().to_string(),
    }))
}

/// Readiness: storage answers.
#[utoipa::path(get, path = "/readyz", tag = "operations",
    responses(
        (status = 200, description = "Storage is reachable", body = Health),
        (status = 503, description = "Storage is not reachable", body = ErrorBody),
    ))]
async fn readyz(State(state): State<HttpState>) -> ApiResult<Json<Health>> {
    state.core().node().ready().await?;
    Ok(Json(Health {
        status: "ready".to_owned(),
        node_id: state.core().node().node_id().to_string(),
    }))
}

/// Prometheus metrics: requests and latency by route and status, open connections,
/// storage write batches.
#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses((status = 200, description = "Prometheus text format", body = String, content_type = "text/plain")))]
async fn metrics_text(State(state): State<HttpState>) -> impl IntoResponse {
    (
        [(CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.0.metrics.render(),
    )
}
