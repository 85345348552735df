//! `/api/admin/dead-letters` (Baton): messages set aside after their handling failed too often
//! (see `service::events::dead_letters`).
//!
//! - `GET /api/admin/dead-letters?limit=`: every dead letter, at most `limit` (default and
//!   maximum 1,000).
//! - `DELETE /api/admin/dead-letters?event=&messageId=`: remove one.
//! - `POST /api/admin/dead-letters/requeue?event=&messageId=`: queue its message again (same
//!   id) and remove it.

use super::error::{ApiError, ApiResult};
use super::extract::Params;
use crate::Node;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use proto::limits::DEAD_LETTERS_MAX;
use proto::record::dead_letter::DeadLetter;

pub async fn list(State(node): State<Node>, params: Params) -> ApiResult<Json<Vec<DeadLetter>>> {
    let limit = params.num_or("limit", DEAD_LETTERS_MAX)?;
    Ok(Json(node.events.dead_letters(limit).await?))
}

pub async fn remove(State(node): State<Node>, params: Params) -> ApiResult<StatusCode> {
    let (event, id) = named(&params)?;
    node.events.remove_dead_letter(&event, &id).await?;
    Ok(StatusCode::OK)
}

pub async fn requeue(State(node): State<Node>, params: Params) -> ApiResult<StatusCode> {
    let (event, id) = named(&params)?;
    node.events.requeue_dead_letter(&event, &id).await?;
    Ok(StatusCode::OK)
}

/// The `event` and `messageId` parameters that name a dead letter.
fn named(params: &Params) -> ApiResult<(String, String)> {
    match (params.string("event"), params.string("messageId")) {
        (Some(event), Some(id)) => Ok((event, id)),
        _ => Err(ApiError::bad_request(
            "a dead letter is named by the query parameters event and messageId",
        )),
    }
}
