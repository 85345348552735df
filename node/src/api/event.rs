//! `/api/event`: event handlers as Conductor's `EventResource` serves them, plus Baton's
//! execution records and the publish endpoint of its own queues (`conductor:{queue}`).

use super::error::ApiResult;
use super::extract::{name, Body, Params, PathArgs};
use super::guard::{allow, sees, Caller};
use crate::access::Ask;
use crate::Node;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing;
use axum::Json;
use proto::limits::EXECUTIONS_MAX;
use proto::model::access::TargetType::EventHandler as HANDLER;
use proto::model::{ActionType, EventExecution, EventHandler};

/// `POST /api/event`: adds a handler (409 when the name is taken).
pub async fn add(
    State(node): State<Node>,
    caller: Caller,
    Body(h): Body<EventHandler>,
) -> ApiResult<StatusCode> {
    may_put(&caller, &h, false)?;
    node.events.put_event_handler(h, true).await?;
    Ok(StatusCode::OK)
}

/// `PUT /api/event`: replaces a handler (404 when there is none of that name).
pub async fn update(
    State(node): State<Node>,
    caller: Caller,
    Body(h): Body<EventHandler>,
) -> ApiResult<StatusCode> {
    may_put(&caller, &h, true)?;
    node.events.put_event_handler(h, false).await?;
    Ok(StatusCode::OK)
}

/// 403 unless the caller may create (or update, when it `exists`) the handler `h`. A caller
/// writing it by a grant, without a role that defines, may give it only actions that start
/// workflows it may start itself: what the other actions touch is known only when they run.
fn may_put(caller: &Caller, h: &EventHandler, exists: bool) -> ApiResult<()> {
    let ask = Ask::put(HANDLER, exists);
    allow(caller.as_deref(), ask, &h.name)?;
    let Some(p) = caller.as_deref().filter(|p| !p.reaches(ask.family)) else {
        return Ok(());
    };
    for action in &h.actions {
        match (&action.action, &action.start_workflow) {
            (ActionType::StartWorkflow, Some(start)) => {
                allow(Some(p), Ask::RUN_WORKFLOWS, &start.name)?
            }
            _ => {
                return Err(super::ApiError::new(
                    axum::http::StatusCode::FORBIDDEN,
                    format!(
                        "application {:?} defines handlers by a grant: their actions may only start workflows, not {}",
                        p.name,
                        action.action.name()
                    ),
                ))
            }
        }
    }
    Ok(())
}

/// `GET /api/event`: every handler the caller may read.
pub async fn list(State(node): State<Node>, caller: Caller) -> ApiResult<Json<Vec<EventHandler>>> {
    let mut handlers = node.events.event_handlers().await?;
    handlers.retain(|h| sees(caller.as_deref(), HANDLER, &h.name));
    Ok(Json(handlers))
}

/// `GET /api/event/{event}?activeOnly=` (default true): the handlers of one event.
pub async fn for_event(
    State(node): State<Node>,
    caller: Caller,
    PathArgs(event): PathArgs<String>,
    params: Params,
) -> ApiResult<Json<Vec<EventHandler>>> {
    let active_only = params.bool("activeOnly", true)?;
    let mut handlers = node.events.event_handlers_for(&event, active_only).await?;
    handlers.retain(|h| sees(caller.as_deref(), HANDLER, &h.name));
    Ok(Json(handlers))
}

/// `DELETE /api/event/{name}`.
pub async fn remove(
    State(node): State<Node>,
    caller: Caller,
    PathArgs(handler): PathArgs<String>,
) -> ApiResult<StatusCode> {
    let handler = name("event handler name", &handler)?;
    allow(caller.as_deref(), Ask::delete(HANDLER), handler)?;
    node.events.delete_event_handler(handler).await?;
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

/// The routes of this file's handlers (event handlers), merged into the API's router.
pub(super) fn routes() -> axum::Router<Node> {
    axum::Router::new()
        .route("/api/event", routing::post(add).put(update).get(list))
        .route("/api/event/executions", routing::get(executions))
        .route("/api/event/publish/{queue}", routing::post(publish))
        .route("/api/event/{event}", routing::get(for_event).delete(remove))
}
