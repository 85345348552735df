//! `/api/secrets`: the replicated secrets store, on Orkes' paths. Values go in and never come
//! out: a value is written with `PUT /api/secrets/{key}` (its text as the body) and is read only by
//! the node that makes an HTTP call naming it (`${workflow.secrets.NAME}` in a header).

use super::error::ApiResult;
use super::extract::PathArgs;
use super::guard::{allow, allow_put, sees, Caller};
use super::ApiError;
use crate::access::Ask;
use crate::Node;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing;
use axum::Json;
use proto::model::access::TargetType::SecretName as SECRET;
use serde_json::Value;

/// `PUT /api/secrets/{key}`: stores the body, sealed: a JSON string's text, or else the body
/// itself as UTF-8 text (Orkes' clients send the value unquoted).
pub async fn put(
    State(node): State<Node>,
    caller: Caller,
    PathArgs(key): PathArgs<String>,
    body: Bytes,
) -> ApiResult<StatusCode> {
    let text = std::str::from_utf8(&body)
        .map_err(|_| ApiError::bad_request("a secret's value is UTF-8 text".to_owned()))?;
    let value = match serde_json::from_str::<Value>(text) {
        Ok(Value::String(quoted)) => quoted,
        _ => text.to_owned(),
    };
    allow_put(caller.as_deref(), SECRET, &key, node.secrets.exists(&key)).await?;
    node.secrets.put(&key, &value).await?;
    Ok(StatusCode::OK)
}

/// `GET /api/secrets/{key}`: refused; values are never answered.
pub async fn value(PathArgs(key): PathArgs<String>) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("secret values are never answered: name {key:?} as ${{workflow.secrets.{key}}} in an HTTP task's headers"),
    )
}

/// `DELETE /api/secrets/{key}`.
pub async fn delete(
    State(node): State<Node>,
    caller: Caller,
    PathArgs(key): PathArgs<String>,
) -> ApiResult<StatusCode> {
    allow(caller.as_deref(), Ask::delete(SECRET), &key)?;
    node.secrets.delete(&key).await?;
    Ok(StatusCode::OK)
}

/// `GET /api/secrets/{key}/exists`: whether the store holds it.
pub async fn exists(
    State(node): State<Node>,
    caller: Caller,
    PathArgs(key): PathArgs<String>,
) -> ApiResult<Json<bool>> {
    allow(caller.as_deref(), Ask::read(SECRET), &key)?;
    Ok(Json(node.secrets.exists(&key).await?))
}

/// `GET` and `POST /api/secrets`: the names the caller may read, sorted.
pub async fn names(State(node): State<Node>, caller: Caller) -> ApiResult<Json<Vec<String>>> {
    let mut names = node.secrets.names().await?;
    names.retain(|n| sees(caller.as_deref(), SECRET, n));
    Ok(Json(names))
}

/// The routes of this file's handlers (secrets (Orkes): values go in, names come out), merged into the API's router.
pub(super) fn routes() -> axum::Router<Node> {
    axum::Router::new()
        .route("/api/secrets", routing::get(names).post(names))
        .route(
            "/api/secrets/{key}",
            routing::put(put).get(value).delete(delete),
        )
        .route("/api/secrets/{key}/exists", routing::get(exists))
}
