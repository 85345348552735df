//! Cluster administration for operators and `batonctl`: the cluster's members and groups, adding,
//! draining and removing members, moving a partition's leadership, and snapshots.
//!
//! - `GET /api/admin/cluster`: members (draining, live, replicas, leaderships) and every group
//!   (leader, term, voters, learners, each replica's applied index, snapshot and lag).
//! - `POST /api/admin/nodes` `{"id": 4, "addr": "127.0.0.1:9084"}`: add a member (as `--join`).
//! - `POST /api/admin/nodes/{id}/drain` (`?undo=true` makes it active again).
//! - `DELETE /api/admin/nodes/{id}`: forget a drained member (409 while it holds replicas).
//! - `POST /api/admin/partitions/{p}/transfer[?to=N]`: hand the leadership to voter N.
//! - `POST /api/admin/snapshot`: snapshot every group hosted on this node and purge the log it
//!   covers (a replica that needs older entries then catches up by snapshot install).
//! - `GET /api/admin/quarantine`: workflows whose stored record could not be decoded, set aside
//!   by their partition (the replicas hosted here); `DELETE /api/admin/quarantine/{id}` deletes
//!   one for good.
//! - `POST /api/admin/access`: sets access control up (`api::access`).
//! - `GET /api/admin/version`: the active cluster version and each member's binary with the
//!   versions it serves; `POST /api/admin/version/activate` `{"version": 2}` (or `{}`: the
//!   newest every member serves) activates one (docs/upgrading.md).
//!
//! They are served beside the rest of the API on a loopback address, on their own listener with
//! `--admin-http`, and not at all on an API listening beyond loopback without it.

use super::error::{ApiError, ApiResult};
use super::extract::{Body, BodyOrDefault, Params, PathArgs};
use crate::service::ClusterStatus;
use crate::Node;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use proto::NodeId;
use serde::Deserialize;

/// The body of `POST /api/admin/nodes`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddNode {
    pub id: u64,
    /// Peer (QUIC) address, `ip:port`.
    pub addr: String,
}

pub async fn cluster(State(node): State<Node>) -> Json<ClusterStatus> {
    Json(node.membership.cluster_status().await)
}

pub async fn add_node(
    State(node): State<Node>,
    Body(body): Body<AddNode>,
) -> ApiResult<StatusCode> {
    let addr = body.addr.parse().map_err(|_| {
        ApiError::bad_request(format!("addr {:?} is not an ip:port address", body.addr))
    })?;
    node.membership.add_node(NodeId(body.id), addr).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub async fn drain(
    State(node): State<Node>,
    PathArgs(id): PathArgs<u64>,
    params: Params,
) -> ApiResult<StatusCode> {
    let undo = params.bool("undo", false)?;
    node.membership.set_draining(NodeId(id), !undo).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub async fn remove_node(
    State(node): State<Node>,
    PathArgs(id): PathArgs<u64>,
) -> ApiResult<StatusCode> {
    node.membership.remove_node(NodeId(id)).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `?to=N` picks the new leader (a voter); answers `{"partition": p, "to": new_leader}`.
pub async fn transfer(
    State(node): State<Node>,
    PathArgs(partition): PathArgs<u16>,
    params: Params,
) -> ApiResult<Json<serde_json::Value>> {
    let to = params.num::<u64>("to")?.map(NodeId);
    let to = node
        .membership
        .transfer(proto::PartitionId(partition), to)
        .await?;
    Ok(Json(serde_json::json!({"partition": partition, "to": to})))
}

pub async fn snapshot(State(node): State<Node>) -> ApiResult<StatusCode> {
    node.membership.snapshot_all().await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /api/admin/quarantine`.
pub async fn quarantine(
    State(node): State<Node>,
) -> ApiResult<Json<Vec<crate::service::QuarantineEntry>>> {
    Ok(Json(node.admin.quarantine()?))
}

/// `DELETE /api/admin/quarantine/{workflowId}`.
pub async fn drop_quarantined(
    State(node): State<Node>,
    PathArgs(id): PathArgs<String>,
) -> ApiResult<StatusCode> {
    let id = super::extract::workflow_id(&id)?;
    node.admin.drop_quarantined(id.as_str()).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /api/admin/version`.
pub async fn version(State(node): State<Node>) -> Json<crate::service::VersionStatus> {
    Json(node.upgrade.status())
}

/// The body of `POST /api/admin/version/activate`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Activate {
    /// The version to activate; absent: the newest every member serves.
    #[serde(default)]
    pub version: Option<u32>,
}

/// `POST /api/admin/version/activate`: answers the versions as they are after it.
pub async fn activate(
    State(node): State<Node>,
    BodyOrDefault(body): BodyOrDefault<Activate>,
) -> ApiResult<Json<crate::service::VersionStatus>> {
    let version = body.version.map(proto::version::ClusterVersion);
    node.upgrade.finalize(version).await?;
    Ok(Json(node.upgrade.status()))
}

/// Any administration route on a listener that does not serve them: 404, saying where they are.
pub async fn elsewhere() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "the administration API (/api/admin, /api/applications) is not served on this address: it listens beyond loopback; serve it with --admin-http 127.0.0.1:PORT",
    )
}
