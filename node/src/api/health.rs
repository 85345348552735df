//! `GET /health` and `GET /api/health`: the node's health in the shape of Conductor's
//! `HealthCheckStatus` (`healthy`, `healthResults`, `suppressedHealthResults`), plus Baton's
//! partition counts. Answers 200 when healthy and 503 otherwise, so load balancers can act on the
//! status alone; the body is the same either way. Also `GET /api/admin/status`, the groups' Raft
//! status for operators, and `GET /metrics` (Prometheus).

use crate::service::Health;
use crate::Node;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;

/// The health body: Baton's [`Health`] with Conductor's (always empty) result lists, and
/// `insecure` when the node serves its API beyond loopback without authentication.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HealthBody {
    #[serde(flatten)]
    pub health: Health,
    pub health_results: Vec<serde_json::Value>,
    pub suppressed_health_results: Vec<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub insecure: Option<String>,
}

/// What `/health` says of how the API is exposed (`None`: nothing to say).
#[derive(Debug, Clone, Default)]
pub struct Exposure(pub Option<String>);

impl IntoResponse for HealthBody {
    fn into_response(self) -> Response {
        let status = if self.health.healthy {
            StatusCode::OK
        } else {
            StatusCode::SERVICE_UNAVAILABLE
        };
        (status, Json(self)).into_response()
    }
}

pub async fn health(
    State(node): State<Node>,
    exposure: Option<axum::Extension<Exposure>>,
) -> HealthBody {
    HealthBody {
        health: node.admin.health().await,
        health_results: Vec::new(),
        suppressed_health_results: Vec::new(),
        insecure: exposure.and_then(|e| e.0 .0),
    }
}

/// `GET /api/admin/status`: every Raft group on this node (role, term, leader, log and applied
/// indexes), for `batonctl status`.
pub async fn status(State(node): State<Node>) -> Json<Vec<cluster::GroupStatus>> {
    Json(node.admin.groups())
}

/// `GET /metrics`: the Prometheus exposition text, the storage-backed gauges read now; 404 when
/// the process installed no recorder (a node embedded in a test).
pub async fn metrics(State(node): State<Node>) -> Response {
    node.admin.observe_gauges();
    match crate::metrics::render() {
        Some(text) => (
            [(
                axum::http::header::CONTENT_TYPE,
                "text/plain; version=0.0.4; charset=utf-8",
            )],
            text,
        )
            .into_response(),
        None => super::error::ApiError::not_found("metrics are not enabled in this process")
            .into_response(),
    }
}

/// The node's storage counters (`GET /api/admin/storage`).
#[derive(Debug, Serialize)]
pub struct StorageBody {
    /// Durable flushes of the node's database since the node started (each is a
    /// `sync_file_range`/fsync of sled's log); `batonctl bench` reports them per step.
    pub flushes: u64,
}

pub async fn storage(State(node): State<Node>) -> Json<StorageBody> {
    Json(StorageBody {
        flushes: node.admin.storage_flushes(),
    })
}

/// What waits on this node (`GET /api/admin/waits`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WaitsBody {
    /// Workflows that execute requests here, or waits other nodes forwarded here, wait for.
    pub watched_workflows: usize,
    /// Polls (HTTP, and the pumps of QUIC workers) parked here until a task is ready.
    pub parked_polls: usize,
}

pub async fn waits(State(node): State<Node>) -> Json<WaitsBody> {
    Json(WaitsBody {
        watched_workflows: node.admin.watched_workflows(),
        parked_polls: node.admin.parked_polls(),
    })
}

/// One group's digest, for comparing replicas.
#[derive(Debug, Serialize)]
pub struct DigestBody {
    pub name: String,
    pub applied: Option<u64>,
    pub digest: String,
}

/// `GET /api/admin/digest`: a digest of every hosted group's state and the applied index it was
/// taken at; replicas of a group at the same applied index must show the same digest.
pub async fn digest(State(node): State<Node>) -> Json<Vec<DigestBody>> {
    Json(
        node.admin
            .digests()
            .into_iter()
            .map(|(name, applied, d)| DigestBody {
                name,
                applied,
                digest: format!("{d:016x}"),
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::testing::body_json;

    #[tokio::test]
    async fn body_has_conductor_and_baton_fields() {
        let body = |healthy| HealthBody {
            health: Health {
                healthy,
                partitions: 4,
                partitions_led: 2,
                partitions_stopped: Vec::new(),
                stopping: false,
            },
            health_results: Vec::new(),
            suppressed_health_results: Vec::new(),
            insecure: None,
        };
        let response = body(true).into_response();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(
            body_json(response).await,
            serde_json::json!({"healthy": true, "partitions": 4, "partitionsLed": 2,
                               "healthResults": [], "suppressedHealthResults": []})
        );
        assert_eq!(
            body(false).into_response().status(),
            StatusCode::SERVICE_UNAVAILABLE
        );
    }
}
