//! `/api/metadata`: task and workflow definitions, as Conductor's `MetadataResource` serves them.
//!
//! Writes answer 200 with an empty body, except `PUT /api/metadata/workflow`, which answers
//! Conductor's `BulkResponse` (which names were stored, which failed and why).

use super::bulk::BulkResponse;
use super::error::ApiResult;
use super::extract::{name, Body, OneOrMany, Params, PathArgs};
use super::ApiError;
use crate::Node;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use proto::model::{TaskDef, WorkflowDef};
use std::collections::BTreeMap;

// ---- task definitions ----

/// `POST /api/metadata/taskdefs`: creates or replaces task definitions (a JSON list).
pub async fn register_task_defs(
    State(node): State<Node>,
    OneOrMany(defs): OneOrMany<TaskDef>,
) -> ApiResult<StatusCode> {
    node.definitions.put_task_defs(defs).await?;
    Ok(StatusCode::OK)
}

/// `PUT /api/metadata/taskdefs`: replaces one task definition.
pub async fn update_task_def(
    State(node): State<Node>,
    Body(def): Body<TaskDef>,
) -> ApiResult<StatusCode> {
    node.definitions.put_task_defs(vec![def]).await?;
    Ok(StatusCode::OK)
}

/// `GET /api/metadata/taskdefs`.
pub async fn task_defs(State(node): State<Node>) -> Json<Vec<TaskDef>> {
    Json(node.definitions.task_defs())
}

/// `GET /api/metadata/taskdefs/{name}`.
pub async fn task_def(
    State(node): State<Node>,
    PathArgs(task_type): PathArgs<String>,
) -> ApiResult<Json<TaskDef>> {
    Ok(Json(
        node.definitions.task_def(name("task type", &task_type)?)?,
    ))
}

/// `DELETE /api/metadata/taskdefs/{name}`.
pub async fn delete_task_def(
    State(node): State<Node>,
    PathArgs(task_type): PathArgs<String>,
) -> ApiResult<StatusCode> {
    node.definitions
        .delete_task_def(name("task type", &task_type)?)
        .await?;
    Ok(StatusCode::OK)
}

// ---- workflow definitions ----

/// `POST /api/metadata/workflow?overwrite=`: registers one definition; an existing (name, version)
/// is a 409 unless `overwrite` is true.
pub async fn create_workflow_def(
    State(node): State<Node>,
    params: Params,
    Body(def): Body<WorkflowDef>,
) -> ApiResult<StatusCode> {
    let overwrite = params.bool("overwrite", false)?;
    node.definitions.put_workflow_def(def, overwrite).await?;
    Ok(StatusCode::OK)
}

/// `PUT /api/metadata/workflow`: creates or replaces each definition of a JSON list.
///
/// As in Conductor, a definition the node refuses (invalid, conflicting) is reported in the
/// `BulkResponse` and the others are still stored. A node that cannot serve at all (503) or fails
/// (500) stops the batch with that error; a retry is safe since every write overwrites.
pub async fn update_workflow_defs(
    State(node): State<Node>,
    OneOrMany(defs): OneOrMany<WorkflowDef>,
) -> ApiResult<Json<BulkResponse>> {
    let mut bulk = BulkResponse::processed();
    for def in defs {
        let def_name = def.name.clone();
        match node.definitions.put_workflow_def(def, true).await {
            Ok(()) => bulk.bulk_successful_results.push(def_name),
            Err(e @ (crate::Error::Unavailable(_) | crate::Error::Internal(_))) => {
                return Err(e.into())
            }
            Err(e) => {
                bulk.bulk_error_results.insert(def_name, e.to_string());
            }
        }
    }
    Ok(Json(bulk))
}

/// `GET /api/metadata/workflow`: every version of every definition.
pub async fn workflow_defs(State(node): State<Node>) -> Json<Vec<WorkflowDef>> {
    Json(node.definitions.workflow_defs())
}

/// `GET /api/metadata/workflow/latest-versions`: the latest version of each definition.
pub async fn latest_workflow_defs(State(node): State<Node>) -> Json<Vec<WorkflowDef>> {
    let mut latest: BTreeMap<String, WorkflowDef> = BTreeMap::new();
    for def in node.definitions.workflow_defs() {
        match latest.get(&def.name) {
            Some(have) if have.version >= def.version => {}
            _ => {
                latest.insert(def.name.clone(), def);
            }
        }
    }
    Json(latest.into_values().collect())
}

/// `GET /api/metadata/workflow/names`: distinct definition names, sorted.
pub async fn workflow_names(State(node): State<Node>) -> Json<Vec<String>> {
    let mut names: Vec<String> = node
        .definitions
        .workflow_defs()
        .into_iter()
        .map(|d| d.name)
        .collect();
    names.sort();
    names.dedup();
    Json(names)
}

/// `GET /api/metadata/workflow/{name}?version=`: the given version, or the latest.
pub async fn workflow_def(
    State(node): State<Node>,
    PathArgs(workflow_name): PathArgs<String>,
    params: Params,
) -> ApiResult<Json<WorkflowDef>> {
    let version = params.num::<u32>("version")?;
    Ok(Json(node.definitions.workflow_def(
        name("workflow name", &workflow_name)?,
        version,
    )?))
}

/// `DELETE /api/metadata/workflow/{name}/{version}`.
pub async fn delete_workflow_def(
    State(node): State<Node>,
    PathArgs((workflow_name, version)): PathArgs<(String, String)>,
) -> ApiResult<StatusCode> {
    let version: u32 = version.parse().map_err(|_| {
        ApiError::bad_request(format!(
            "workflow version must be a non-negative integer, got '{version}'"
        ))
    })?;
    node.definitions
        .delete_workflow_def(name("workflow name", &workflow_name)?, version)
        .await?;
    Ok(StatusCode::OK)
}
