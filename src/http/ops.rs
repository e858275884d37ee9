//! Operations endpoints: liveness, readiness, Prometheus metrics.

use std::sync::OnceLock;

use axum::Json;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::AppState;
use super::error::{ApiError, ApiResult};
use crate::core::CoreError;

/// Renders the process's metrics. The recorder is process-wide (the `metrics` macros
/// use a global one), so several servers in one process (tests) share it.
#[derive(Clone)]
pub struct MetricsHandle(PrometheusHandle);

impl MetricsHandle {
    /// Installs the process-wide recorder on first use.
    pub fn global() -> MetricsHandle {
        static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
        let handle = HANDLE.get_or_init(|| {
            let seconds = [
                0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                1.0, 2.5, 5.0,
            ];
            let sizes = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0];
            let builder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &seconds)
                .and_then(|b| b.set_buckets_for_metric(Matcher::Suffix("_size".into()), &sizes));
            let recorder = match builder {
                Ok(b) => b.build_recorder(),
                Err(_) => PrometheusBuilder::new().build_recorder(),
            };
            let handle = recorder.handle();
            if metrics::set_global_recorder(recorder).is_err() {
                tracing::warn!("a metrics recorder was already installed; /metrics may be empty");
            }
            handle
        });
        MetricsHandle(handle.clone())
    }

    pub fn render(&self) -> String {
        self.0.render()
    }
}

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(healthz))
        .routes(routes!(readyz))
        .routes(routes!(metrics_text))
}

/// Health answer.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Health {
    pub status: String,
}

/// Liveness: the process answers HTTP.
#[utoipa::path(get, path = "/healthz", tag = "operations",
    responses((status = 200, description = "The server is alive", body = Health)))]
async fn healthz() -> Json<Health> {
    Json(Health {
        status: "ok".to_owned(),
    })
}

/// Readiness: storage answers.
#[utoipa::path(get, path = "/readyz", tag = "operations",
    responses(
        (status = 200, description = "Storage is reachable", body = Health),
        (status = 503, description = "Storage is not reachable", body = CoreError),
    ))]
async fn readyz(State(state): State<AppState>) -> ApiResult<Json<Health>> {
    state
        .core
        .store()
        .ping()
        .await
        .map_err(|e| ApiError(CoreError::from(e)))?;
    Ok(Json(Health {
        status: "ready".to_owned(),
    }))
}

/// Prometheus metrics: requests and latency by route and status, open connections,
/// storage write batches.
#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses((status = 200, description = "Prometheus text format", body = String, content_type = "text/plain")))]
async fn metrics_text(State(state): State<AppState>) -> impl IntoResponse {
    (
        [(CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.metrics.render(),
    )
}
