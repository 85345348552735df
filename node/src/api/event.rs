//! `/api/event`: event handlers as Conductor's `EventResource` serves them, plus Baton's
//! execution records and the publish endpoint of its own queues (`conductor:{queue}`).

use super::error::ApiResult;
use super::extract::{name, Body, Params, PathArgs};
use crate::Node;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use proto::limits::EXECUTIONS_MAX;
use proto::model::{EventExecution, EventHandler};

/// `POST /api/event`: adds a handler (409 when the name is taken).
pub async fn add(State(node): State<Node>, Body(h): Body<EventHandler>) -> ApiResult<StatusCode> {
    node.events.put_event_handler(h, true).await?;
    Ok(StatusCode::OK)
}

/// `PUT /api/event`: replaces a handler (404 when there is none of that name).
pub async fn update(
    State(node): State<Node>,
    Body(h): Body<EventHandler>,
) -> ApiResult<StatusCode> {
    node.events.put_event_handler(h, false).await?;
    Ok(StatusCode::OK)
}

/// `GET /api/event`: every handler.
pub async fn list(State(node): State<Node>) -> ApiResult<Json<Vec<EventHandler>>> {
    Ok(Json(node.events.event_handlers().await?))
}

/// `GET /api/event/{event}?activeOnly=` (default true): the handlers of one event.
pub async fn for_event(
    State(node): State<Node>,
    PathArgs(event): PathArgs<String>,
    params: Params,
) -> ApiResult<Json<Vec<EventHandler>>> {
    let active_only = params.bool("activeOnly", true)?;
    Ok(Json(
        node.events.event_handlers_for(&event, active_only).await?,
    ))
}

/// `DELETE /api/event/{name}`.
pub async fn remove(
    State(node): State<Node>,
    PathArgs(handler): PathArgs<String>,
) -> ApiResult<StatusCode> {
    node.events
        .delete_event_handler(name("event handler name", &handler)?)
        .await?;
    Ok(StatusCode::OK)
}

/// `GET /api/event/executions?handler=&limit=` (Baton): execution records, at most `limit`
/// (default and maximum 1,000).
pub async fn executions(
    State(node): State<Node>,
    params: Params,
) -> ApiResult<Json<Vec<EventExecution>>> {
    let limit = params.num_or("limit", EXECUTIONS_MAX)?;
    let handler = params.string("handler");
    Ok(Json(
        node.events
            .event_executions(handler.as_deref(), limit)
            .await?,
    ))
}

/// `POST /api/event/publish/{queue}?messageId=` (Baton): queues the body (any JSON) on
/// `conductor:{queue}`; answers the message id as text. A W3C `traceparent` header names the
/// trace its execution records carry.
pub async fn publish(
    State(node): State<Node>,
    PathArgs(queue): PathArgs<String>,
    params: Params,
    headers: HeaderMap,
    Body(payload): Body<serde_json::Value>,
) -> ApiResult<String> {
    let traceparent = headers.get("traceparent").and_then(|v| v.to_str().ok());
    Ok(node
        .events
        .publish_event(&queue, params.string("messageId"), payload, traceparent)
        .await?)
}
