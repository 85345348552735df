//! `/api/metadata`: task and workflow definitions, as Conductor's `MetadataResource` serves them.
//!
//! Writes answer 200 with an empty body, except `PUT /api/metadata/workflow`, which answers
//! Conductor's `BulkResponse` (which names were stored, which failed and why).

use super::bulk::BulkResponse;
use super::error::ApiResult;
use super::extract::{name, Body, OneOrMany, Params, PathArgs};
use super::guard::{allow, sees, Caller};
use super::ApiError;
use crate::access::Ask;
use crate::Node;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing;
use axum::Json;
use proto::model::access::TargetType::{TaskDef as TASK, WorkflowDef as WORKFLOW};
use proto::model::{self, TaskDef, WorkflowDef};
use serde::Serialize;
use std::collections::BTreeMap;

// ---- task definitions ----

/// `POST /api/metadata/taskdefs`: creates or replaces task definitions (a JSON list).
pub async fn register_task_defs(
    State(node): State<Node>,
    caller: Caller,
    OneOrMany(defs): OneOrMany<TaskDef>,
) -> ApiResult<StatusCode> {
    may_put_task_defs(&node, &caller, &defs)?;
    node.definitions.put_task_defs(defs).await?;
    Ok(StatusCode::OK)
}

/// `PUT /api/metadata/taskdefs`: replaces one task definition.
pub async fn update_task_def(
    State(node): State<Node>,
    caller: Caller,
    Body(def): Body<TaskDef>,
) -> ApiResult<StatusCode> {
    let defs = vec![def];
    may_put_task_defs(&node, &caller, &defs)?;
    node.definitions.put_task_defs(defs).await?;
    Ok(StatusCode::OK)
}

/// 403 unless the caller may create each of `defs` that is new and update each that exists.
fn may_put_task_defs(node: &Node, caller: &Caller, defs: &[TaskDef]) -> ApiResult<()> {
    for def in defs {
        let exists = node.definitions.task_def(&def.name).is_ok();
        allow(caller.as_deref(), Ask::put(TASK, exists), &def.name)?;
    }
    Ok(())
}

/// `GET /api/metadata/taskdefs`: those the caller may read.
pub async fn task_defs(State(node): State<Node>, caller: Caller) -> Json<Vec<TaskDef>> {
    let mut defs = node.definitions.task_defs();
    defs.retain(|d| sees(caller.as_deref(), TASK, &d.name));
    Json(defs)
}

/// `GET /api/metadata/taskdefs/{name}`.
pub async fn task_def(
    State(node): State<Node>,
    caller: Caller,
    PathArgs(task_type): PathArgs<String>,
) -> ApiResult<Json<TaskDef>> {
    let task_type = name("task type", &task_type)?;
    allow(caller.as_deref(), Ask::read(TASK), task_type)?;
    Ok(Json(node.definitions.task_def(task_type)?))
}

/// `DELETE /api/metadata/taskdefs/{name}`.
pub async fn delete_task_def(
    State(node): State<Node>,
    caller: Caller,
    PathArgs(task_type): PathArgs<String>,
) -> ApiResult<StatusCode> {
    let task_type = name("task type", &task_type)?;
    allow(caller.as_deref(), Ask::delete(TASK), task_type)?;
    node.definitions.delete_task_def(task_type).await?;
    Ok(StatusCode::OK)
}

// ---- workflow definitions ----

/// `POST /api/metadata/workflow?overwrite=`: registers one definition; an existing (name, version)
/// is a 409 unless `overwrite` is true.
pub async fn create_workflow_def(
    State(node): State<Node>,
    caller: Caller,
    params: Params,
    Body(def): Body<WorkflowDef>,
) -> ApiResult<StatusCode> {
    let overwrite = params.bool("overwrite", false)?;
    may_put_workflow_defs(&node, &caller, std::slice::from_ref(&def), overwrite)?;
    node.definitions.put_workflow_def(def, overwrite).await?;
    Ok(StatusCode::OK)
}

/// `PUT /api/metadata/workflow`: creates or replaces each definition of a JSON list.
///
/// As in Conductor, a definition the node refuses (invalid) is reported in the `BulkResponse`
/// and the others are still stored, together (see `Definitions::put_workflow_defs`). A node
/// that cannot serve (503) or fails (500) answers that error; a retry is safe since every write
/// overwrites.
pub async fn update_workflow_defs(
    State(node): State<Node>,
    caller: Caller,
    OneOrMany(defs): OneOrMany<WorkflowDef>,
) -> ApiResult<Json<BulkResponse>> {
    may_put_workflow_defs(&node, &caller, &defs, true)?;
    let mut bulk = BulkResponse::processed();
    let mut ready = Vec::new();
    for def in defs {
        let def_name = def.name.clone();
        match node.definitions.prepare_workflow_def(def, true) {
            Ok(def) => ready.push(def),
            Err(e) => {
                bulk.bulk_error_results.insert(def_name, e.to_string());
            }
        }
    }
    let names = ready.iter().map(|d| d.name.clone()).collect();
    node.definitions.put_workflow_defs(ready).await?;
    bulk.bulk_successful_results = names;
    Ok(Json(bulk))
}

/// 403 unless the caller may create each of `defs` whose (name, version) is new and, when the
/// request may `overwrite`, update each that exists. A refusal refuses the whole request,
/// before anything is stored.
fn may_put_workflow_defs(
    node: &Node,
    caller: &Caller,
    defs: &[WorkflowDef],
    overwrite: bool,
) -> ApiResult<()> {
    for def in defs {
        let held = node.definitions.workflow_def(&def.name, Some(def.version));
        let ask = Ask::put(WORKFLOW, overwrite && held.is_ok());
        allow(caller.as_deref(), ask, &def.name)?;
    }
    Ok(())
}

/// Every version of every definition the caller may read.
fn visible_workflow_defs(node: &Node, caller: &Caller) -> Vec<WorkflowDef> {
    let mut defs = node.definitions.workflow_defs();
    defs.retain(|d| sees(caller.as_deref(), WORKFLOW, &d.name));
    defs
}

/// `GET /api/metadata/workflow`: every version of every definition the caller may read.
pub async fn workflow_defs(State(node): State<Node>, caller: Caller) -> Json<Vec<WorkflowDef>> {
    Json(visible_workflow_defs(&node, &caller))
}

/// `GET /api/metadata/workflow/latest-versions`: the latest version of each definition.
pub async fn latest_workflow_defs(
    State(node): State<Node>,
    caller: Caller,
) -> Json<Vec<WorkflowDef>> {
    let mut latest: BTreeMap<String, WorkflowDef> = BTreeMap::new();
    for def in visible_workflow_defs(&node, &caller) {
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
pub async fn workflow_names(State(node): State<Node>, caller: Caller) -> Json<Vec<String>> {
    let mut names: Vec<String> = visible_workflow_defs(&node, &caller)
        .into_iter()
        .map(|d| d.name)
        .collect();
    names.sort();
    names.dedup();
    Json(names)
}

/// Conductor's `WorkflowDefSummary`: one version of a workflow definition, without its body.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowDefSummary {
    pub name: String,
    pub version: u32,
    pub create_time: model::EpochMs,
}

/// Every version of every definition, by name, each name's versions in ascending order.
fn summaries_by_name(defs: Vec<WorkflowDef>) -> BTreeMap<String, Vec<WorkflowDefSummary>> {
    let mut out: BTreeMap<String, Vec<WorkflowDefSummary>> = BTreeMap::new();
    for def in defs {
        out.entry(def.name.clone())
            .or_default()
            .push(WorkflowDefSummary {
                name: def.name,
                version: def.version,
                create_time: def.create_time,
            });
    }
    for versions in out.values_mut() {
        versions.sort_by_key(|v| v.version);
    }
    out
}

/// `GET /api/metadata/workflow/names-and-versions`: name -> its versions (Conductor UI's
/// workflow pickers).
pub async fn workflow_names_and_versions(
    State(node): State<Node>,
    caller: Caller,
) -> Json<BTreeMap<String, Vec<WorkflowDefSummary>>> {
    Json(summaries_by_name(visible_workflow_defs(&node, &caller)))
}

/// `GET /api/metadata/workflow/{name}/versions`: the versions of one definition; 404 when the name
/// has none.
pub async fn workflow_versions(
    State(node): State<Node>,
    caller: Caller,
    PathArgs(workflow_name): PathArgs<String>,
) -> ApiResult<Json<Vec<WorkflowDefSummary>>> {
    let workflow_name = name("workflow name", &workflow_name)?;
    allow(caller.as_deref(), Ask::read(WORKFLOW), workflow_name)?;
    let defs = node.definitions.workflow_defs();
    let same_name = defs
        .into_iter()
        .filter(|d| d.name == workflow_name)
        .collect();
    summaries_by_name(same_name)
        .remove(workflow_name)
        .map(Json)
        .ok_or_else(|| {
            ApiError::not_found(format!(
                "No such workflow definition found by name: {workflow_name}"
            ))
        })
}

/// `GET /api/metadata/workflow/{name}?version=`: the given version, or the latest.
pub async fn workflow_def(
    State(node): State<Node>,
    caller: Caller,
    PathArgs(workflow_name): PathArgs<String>,
    params: Params,
) -> ApiResult<Json<WorkflowDef>> {
    let version = params.num::<u32>("version")?;
    let workflow_name = name("workflow name", &workflow_name)?;
    allow(caller.as_deref(), Ask::read(WORKFLOW), workflow_name)?;
    Ok(Json(node.definitions.workflow_def(workflow_name, version)?))
}

/// `DELETE /api/metadata/workflow/{name}/{version}`.
pub async fn delete_workflow_def(
    State(node): State<Node>,
    caller: Caller,
    PathArgs((workflow_name, version)): PathArgs<(String, String)>,
) -> ApiResult<StatusCode> {
    let workflow_name = name("workflow name", &workflow_name)?;
    allow(caller.as_deref(), Ask::delete(WORKFLOW), workflow_name)?;
    let version: u32 = version.parse().map_err(|_| {
        ApiError::bad_request(format!(
            "workflow version must be a non-negative integer, got '{version}'"
        ))
    })?;
    node.definitions
        .delete_workflow_def(workflow_name, version)
        .await?;
    Ok(StatusCode::OK)
}

/// The routes of this file's handlers (metadata), merged into the API's router.
pub(super) fn routes() -> axum::Router<Node> {
    axum::Router::new()
        .route(
            "/api/metadata/taskdefs",
            routing::post(register_task_defs)
                .put(update_task_def)
                .get(task_defs),
        )
        .route(
            "/api/metadata/taskdefs/{name}",
            routing::get(task_def).delete(delete_task_def),
        )
        .route(
            "/api/metadata/workflow",
            routing::post(create_workflow_def)
                .put(update_workflow_defs)
                .get(workflow_defs),
        )
        .route(
            "/api/metadata/workflow/latest-versions",
            routing::get(latest_workflow_defs),
        )
        .route("/api/metadata/workflow/names", routing::get(workflow_names))
        .route(
            "/api/metadata/workflow/names-and-versions",
            routing::get(workflow_names_and_versions),
        )
        .route("/api/metadata/workflow/{name}", routing::get(workflow_def))
        .route(
            "/api/metadata/workflow/{name}/versions",
            routing::get(workflow_versions),
        )
        .route(
            "/api/metadata/workflow/{name}/{version}",
            routing::delete(delete_workflow_def),
        )
}

#[cfg(test)]
mod tests {
    use crate::api::testing::TestApi;
    use axum::http::StatusCode;
    use serde_json::json;

    #[tokio::test]
    async fn names_and_versions_list_every_version() {
        let api = TestApi::start().await;
        api.define("nv_a", "nv_t").await;
        let v2 = json!({
            "name": "nv_a", "version": 2, "schemaVersion": 2, "ownerEmail": "t@t.io",
            "tasks": [{ "name": "nv_t", "taskReferenceName": "x", "type": "SIMPLE" }],
        });
        api.ok("POST", "/api/metadata/workflow", Some(&v2)).await;
        api.define("nv_b", "nv_t").await;

        let all = api
            .ok("GET", "/api/metadata/workflow/names-and-versions", None)
            .await;
        let versions = |name: &str| -> Vec<u64> {
            let list = all[name].as_array().expect("a list");
            list.iter()
                .map(|v| v["version"].as_u64().expect("version"))
                .collect()
        };
        assert_eq!(versions("nv_a"), [1, 2], "{all}");
        assert_eq!(versions("nv_b"), [1], "{all}");
        assert_eq!(all["nv_a"][1]["name"], "nv_a", "{all}");
        assert!(all["nv_a"][1]["createTime"].is_i64(), "{all}");
        assert!(all["nv_a"][1].get("tasks").is_none(), "{all}");

        let one = api
            .ok("GET", "/api/metadata/workflow/nv_a/versions", None)
            .await;
        assert_eq!(one, all["nv_a"]);
        let (status, json) = api
            .send("GET", "/api/metadata/workflow/none/versions", None)
            .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{json}");
        api.stop().await;
    }
}
