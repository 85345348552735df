//! Webhooks (`/api/metadata/webhook` for their definitions, `POST /api/webhook/{name}` for
//! deliveries) and cron schedules (`/api/scheduler/schedules`, Orkes's paths).

use super::error::ApiResult;
use super::extract::{name, Body, Params, PathArgs};
use super::guard::{allow, allow_put, sees, Caller};
use super::ApiError;
use crate::access::Ask;
use crate::service::triggers::{DELIVERY_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER};
use crate::Node;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing;
use axum::Json;
use proto::model::access::TargetType::{Webhook as WEBHOOK, WorkflowSchedule as SCHEDULE};
use proto::model::{EpochMs, Webhook, WorkflowSchedule};
use serde_json::{json, Value};

/// `POST /api/metadata/webhook`: creates or replaces a webhook.
pub async fn put_webhook(
    State(node): State<Node>,
    caller: Caller,
    Body(w): Body<Webhook>,
) -> ApiResult<StatusCode> {
    let exists = node.triggers.webhook_exists(&w.name);
    allow_put(caller.as_deref(), WEBHOOK, &w.name, exists).await?;
    node.triggers.put_webhook(w).await?;
    Ok(StatusCode::OK)
}

/// `GET /api/metadata/webhook`: every webhook the caller may read, secrets hidden.
pub async fn webhooks(State(node): State<Node>, caller: Caller) -> ApiResult<Json<Vec<Webhook>>> {
    let mut webhooks = node.triggers.webhooks().await?;
    webhooks.retain(|w| sees(caller.as_deref(), WEBHOOK, &w.name));
    Ok(Json(webhooks))
}

/// `DELETE /api/metadata/webhook/{name}`.
pub async fn delete_webhook(
    State(node): State<Node>,
    caller: Caller,
    PathArgs(webhook): PathArgs<String>,
) -> ApiResult<StatusCode> {
    let webhook = name("webhook name", &webhook)?;
    allow(caller.as_deref(), Ask::delete(WEBHOOK), webhook)?;
    node.triggers.delete_webhook(webhook).await?;
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
    caller: Caller,
    Body(s): Body<WorkflowSchedule>,
) -> ApiResult<StatusCode> {
    let exists = node.triggers.schedule_exists(&s.name);
    let ask = allow_put(caller.as_deref(), SCHEDULE, &s.name, exists).await?;
    if let Some(p) = caller.as_deref().filter(|p| !p.reaches(ask.family)) {
        // By a grant alone, a schedule may start only workflows its writer may start.
        allow(Some(p), Ask::RUN_WORKFLOWS, &s.start_workflow_request.name)?;
    }
    node.triggers.put_schedule(s).await?;
    Ok(StatusCode::OK)
}

/// `GET /api/scheduler/schedules`: those the caller may read.
pub async fn schedules(
    State(node): State<Node>,
    caller: Caller,
) -> ApiResult<Json<Vec<WorkflowSchedule>>> {
    let mut schedules = node.triggers.schedules().await?;
    schedules.retain(|s| sees(caller.as_deref(), SCHEDULE, &s.name));
    Ok(Json(schedules))
}

/// `GET /api/scheduler/schedules/{name}`.
pub async fn schedule(
    State(node): State<Node>,
    caller: Caller,
    PathArgs(schedule): PathArgs<String>,
) -> ApiResult<Json<WorkflowSchedule>> {
    allow(caller.as_deref(), Ask::read(SCHEDULE), &schedule)?;
    Ok(Json(node.triggers.schedule(&schedule).await?))
}

/// `DELETE /api/scheduler/schedules/{name}`.
pub async fn delete_schedule(
    State(node): State<Node>,
    caller: Caller,
    PathArgs(schedule): PathArgs<String>,
) -> ApiResult<StatusCode> {
    allow(caller.as_deref(), Ask::delete(SCHEDULE), &schedule)?;
    node.triggers.delete_schedule(&schedule).await?;
    Ok(StatusCode::OK)
}

/// `GET|PUT /api/scheduler/schedules/{name}/pause`.
pub async fn pause(
    State(node): State<Node>,
    caller: Caller,
    PathArgs(schedule): PathArgs<String>,
) -> ApiResult<StatusCode> {
    allow(caller.as_deref(), Ask::update(SCHEDULE), &schedule)?;
    node.triggers.set_schedule_paused(&schedule, true).await?;
    Ok(StatusCode::OK)
}

/// `GET|PUT /api/scheduler/schedules/{name}/resume`.
pub async fn resume(
    State(node): State<Node>,
    caller: Caller,
    PathArgs(schedule): PathArgs<String>,
) -> ApiResult<StatusCode> {
    allow(caller.as_deref(), Ask::update(SCHEDULE), &schedule)?;
    node.triggers.set_schedule_paused(&schedule, false).await?;
    Ok(StatusCode::OK)
}
/// Times `GET /api/scheduler/nextFewSchedules` lists when no `limit` is given (Orkes').
const NEXT_SCHEDULES_DEFAULT: usize = 3;
/// Most times one `GET /api/scheduler/nextFewSchedules` lists.
pub const NEXT_SCHEDULES_MAX: usize = 100;

/// `GET /api/scheduler/nextFewSchedules?cronExpression=&scheduleStartTime=&scheduleEndTime=&limit=`:
/// the next times (epoch ms, UTC) a schedule with that cron expression would fire after
/// `scheduleStartTime` (default now) and up to `scheduleEndTime`, at most `limit` (default 3, at
/// most [`NEXT_SCHEDULES_MAX`]). The expression is read as schedules read theirs.
pub async fn next_few(State(node): State<Node>, params: Params) -> ApiResult<Json<Vec<EpochMs>>> {
    let cron_expression = params
        .string("cronExpression")
        .ok_or_else(|| ApiError::bad_request("query parameter 'cronExpression' is required"))?;
    let limit = params.num_or("limit", NEXT_SCHEDULES_DEFAULT)?;
    if limit > NEXT_SCHEDULES_MAX {
        return Err(ApiError::bad_request(format!(
            "limit must be at most {NEXT_SCHEDULES_MAX}, got {limit}"
        )));
    }
    let from = params.num_or("scheduleStartTime", node.host.clock.now_ms())?;
    let end = params.num_or("scheduleEndTime", EpochMs::MAX)?;
    let schedule = WorkflowSchedule {
        name: "(preview)".to_owned(),
        cron_expression,
        ..WorkflowSchedule::default()
    };
    let cron = crate::service::triggers::Cron::parse(&schedule)?;
    // Searching the pattern is CPU work of the cron library's choosing: off the runtime.
    let times = tokio::task::spawn_blocking(move || {
        let next = |at: &EpochMs| cron.next_after(*at).filter(|t| *t <= end);
        std::iter::successors(next(&from), next)
            .take(limit)
            .collect()
    })
    .await
    .map_err(|e| ApiError::from(crate::Error::Internal(format!("cron search: {e}"))))?;
    Ok(Json(times))
}

/// The routes of this file's handlers (webhooks and schedules), merged into the API's router.
pub(super) fn routes() -> axum::Router<Node> {
    axum::Router::new()
        .route(
            "/api/metadata/webhook",
            routing::post(put_webhook).get(webhooks),
        )
        .route(
            "/api/metadata/webhook/{name}",
            routing::delete(delete_webhook),
        )
        .route("/api/webhook/{name}", routing::post(deliver))
        .route(
            "/api/scheduler/schedules",
            routing::post(put_schedule).get(schedules),
        )
        .route("/api/scheduler/nextFewSchedules", routing::get(next_few))
        .route(
            "/api/scheduler/schedules/{name}",
            routing::get(schedule).delete(delete_schedule),
        )
        .route(
            "/api/scheduler/schedules/{name}/pause",
            routing::get(pause).put(pause),
        )
        .route(
            "/api/scheduler/schedules/{name}/resume",
            routing::get(resume).put(resume),
        )
}

#[cfg(test)]
mod tests {
    use crate::api::testing::TestApi;
    use axum::http::StatusCode;
    use serde_json::json;

    #[tokio::test]
    async fn next_few_schedules_lists_the_coming_times() {
        let api = TestApi::start().await;
        // Every minute, from 2026-01-01T00:00:30Z; to 00:03:00 there are three.
        let from = 1_767_225_630_000_i64;
        let path = |query: &str| {
            format!("/api/scheduler/nextFewSchedules?cronExpression=0%20*%20*%20*%20*%20*&scheduleStartTime={from}{query}")
        };
        let times = api.ok("GET", &path(""), None).await;
        let minute = 60_000;
        let first = from + 30_000;
        assert_eq!(times, json!([first, first + minute, first + 2 * minute]));
        let times = api
            .ok(
                "GET",
                &path("&limit=10&scheduleEndTime=1767225780000"),
                None,
            )
            .await;
        assert_eq!(times, json!([first, first + minute, first + 2 * minute]));
        for query in ["&limit=101", "&limit=-1", "&scheduleEndTime=soon"] {
            let (status, json) = api.send("GET", &path(query), None).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {json}");
        }
        for path in [
            "/api/scheduler/nextFewSchedules",
            "/api/scheduler/nextFewSchedules?cronExpression=not%20a%20cron",
        ] {
            let (status, json) = api.send("GET", path, None).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {json}");
        }
        api.stop().await;
    }
}
