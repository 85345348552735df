//! Webhooks (`/api/metadata/webhook` for their definitions, `POST /api/webhook/{name}` for
//! deliveries) and cron schedules (`/api/scheduler/schedules`, Orkes's paths).

use super::error::ApiResult;
use super::extract::{name, Body, PathArgs};
use crate::service::triggers::{DELIVERY_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER};
use crate::Node;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use proto::model::{Webhook, WorkflowSchedule};
use serde_json::{json, Value};

/// `POST /api/metadata/webhook`: creates or replaces a webhook.
pub async fn put_webhook(
    State(node): State<Node>,
    Body(w): Body<Webhook>,
) -> ApiResult<StatusCode> {
    node.triggers.put_webhook(w).await?;
    Ok(StatusCode::OK)
}

/// `GET /api/metadata/webhook`: every webhook, secrets hidden.
pub async fn webhooks(State(node): State<Node>) -> ApiResult<Json<Vec<Webhook>>> {
    Ok(Json(node.triggers.webhooks().await?))
}

/// `DELETE /api/metadata/webhook/{name}`.
pub async fn delete_webhook(
    State(node): State<Node>,
    PathArgs(webhook): PathArgs<String>,
) -> ApiResult<StatusCode> {
    node.triggers
        .delete_webhook(name("webhook name", &webhook)?)
        .await?;
    Ok(StatusCode::OK)
}

/// `POST /api/webhook/{name}`: a signed delivery. 200 once it is queued durably (or was a
/// replay the gate dropped), 401 for a bad signature or a stale timestamp.
pub async fn deliver(
    State(node): State<Node>,
    PathArgs(webhook): PathArgs<String>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    let header = |h: &str| headers.get(h).and_then(|v| v.to_str().ok());
    let (id, queued) = node
        .triggers
        .receive_webhook(
            name("webhook name", &webhook)?,
            header(TIMESTAMP_HEADER),
            header(SIGNATURE_HEADER),
            header(DELIVERY_HEADER),
            header("traceparent"),
            &body,
        )
        .await?;
    Ok(Json(json!({"messageId": id, "duplicate": !queued})))
}

/// `POST /api/scheduler/schedules`: creates or replaces a schedule.
pub async fn put_schedule(
    State(node): State<Node>,
    Body(s): Body<WorkflowSchedule>,
) -> ApiResult<StatusCode> {
    node.triggers.put_schedule(s).await?;
    Ok(StatusCode::OK)
}

/// `GET /api/scheduler/schedules`.
pub async fn schedules(State(node): State<Node>) -> ApiResult<Json<Vec<WorkflowSchedule>>> {
    Ok(Json(node.triggers.schedules().await?))
}

/// `GET /api/scheduler/schedules/{name}`.
pub async fn schedule(
    State(node): State<Node>,
    PathArgs(schedule): PathArgs<String>,
) -> ApiResult<Json<WorkflowSchedule>> {
    Ok(Json(node.triggers.schedule(&schedule).await?))
}

/// `DELETE /api/scheduler/schedules/{name}`.
pub async fn delete_schedule(
    State(node): State<Node>,
    PathArgs(schedule): PathArgs<String>,
) -> ApiResult<StatusCode> {
    node.triggers.delete_schedule(&schedule).await?;
    Ok(StatusCode::OK)
}

/// `GET|PUT /api/scheduler/schedules/{name}/pause`.
pub async fn pause(
    State(node): State<Node>,
    PathArgs(schedule): PathArgs<String>,
) -> ApiResult<StatusCode> {
    node.triggers.set_schedule_paused(&schedule, true).await?;
    Ok(StatusCode::OK)
}

/// `GET|PUT /api/scheduler/schedules/{name}/resume`.
pub async fn resume(
    State(node): State<Node>,
    PathArgs(schedule): PathArgs<String>,
) -> ApiResult<StatusCode> {
    node.triggers.set_schedule_paused(&schedule, false).await?;
    Ok(StatusCode::OK)
}
