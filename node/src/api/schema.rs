//! `/api/schema`: Orkes' schema registry, as its `SchemaResource` serves it and conductor-python's
//! `OrkesSchemaClient` calls it. Writes answer 200 with an empty body.

use super::error::ApiResult;
use super::extract::{name, OneOrMany, Params, PathArgs};
use super::ApiError;
use crate::Node;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing;
use axum::Json;
use proto::model::SchemaDef;

/// `POST /api/schema?newVersion=`: registers one schema or a list of them.
pub async fn save(
    State(node): State<Node>,
    params: Params,
    OneOrMany(defs): OneOrMany<SchemaDef>,
) -> ApiResult<StatusCode> {
    let new_version = params.bool("newVersion", false)?;
    node.definitions.put_schemas(defs, new_version).await?;
    Ok(StatusCode::OK)
}

/// `GET /api/schema`: every version of every schema.
pub async fn all(State(node): State<Node>) -> Json<Vec<SchemaDef>> {
    Json(node.definitions.schemas())
}

/// `GET /api/schema/{name}`: the latest version.
pub async fn latest(
    State(node): State<Node>,
    PathArgs(schema): PathArgs<String>,
) -> ApiResult<Json<SchemaDef>> {
    let schema = name("schema name", &schema)?;
    Ok(Json(node.definitions.schema(schema, None)?))
}

/// `GET /api/schema/{name}/{version}`.
pub async fn version(
    State(node): State<Node>,
    PathArgs((schema, version)): PathArgs<(String, String)>,
) -> ApiResult<Json<SchemaDef>> {
    let schema = name("schema name", &schema)?;
    let version = parse_version(&version)?;
    Ok(Json(node.definitions.schema(schema, Some(version))?))
}

/// `DELETE /api/schema/{name}`: every version.
pub async fn delete_all(
    State(node): State<Node>,
    PathArgs(schema): PathArgs<String>,
) -> ApiResult<StatusCode> {
    let schema = name("schema name", &schema)?;
    node.definitions.delete_schema(schema, None).await?;
    Ok(StatusCode::OK)
}

/// `DELETE /api/schema/{name}/{version}`.
pub async fn delete_version(
    State(node): State<Node>,
    PathArgs((schema, version)): PathArgs<(String, String)>,
) -> ApiResult<StatusCode> {
    let schema = name("schema name", &schema)?;
    let version = parse_version(&version)?;
    node.definitions
        .delete_schema(schema, Some(version))
        .await?;
    Ok(StatusCode::OK)
}

fn parse_version(version: &str) -> ApiResult<u32> {
    version.parse().map_err(|_| {
        ApiError::bad_request(format!(
            "schema version must be a non-negative integer, got '{version}'"
        ))
    })
}

/// The routes of this file's handlers (schemas (Orkes)), merged into the API's router.
pub(super) fn routes() -> axum::Router<Node> {
    axum::Router::new()
        .route("/api/schema", routing::post(save).get(all))
        .route(
            "/api/schema/{name}",
            routing::get(latest).delete(delete_all),
        )
        .route(
            "/api/schema/{name}/{version}",
            routing::get(version).delete(delete_version),
        )
}
