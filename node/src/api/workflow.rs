//! `/api/workflow`: starting, reading, steering and searching workflow instances, as Conductor's
//! `WorkflowResource` serves them.
//!
//! Starts and reruns answer the workflow id as `text/plain`; `retry` and `restart` answer 204 (as
//! Conductor does for its 2.x clients); other commands answer 200 with an empty body. Path ids are
//! checked to be Baton ids before the node is asked (400 if not); an unknown id is the node's 404.

use super::error::ApiResult;
use super::extract::{name, workflow_id, Body, BodyOrDefault, Params, PathArgs};
use super::guard::{allow, Caller};
use super::{search, ApiError};
use crate::access::Ask;
use crate::service::SearchQuery;
use crate::Node;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing;
use axum::Json;
use proto::limits::SEARCH_RESULTS_MAX;
use proto::model::access::TargetType;
use proto::model::{
    self, RerunWorkflowRequest, SearchResult, SkipTaskRequest, StartWorkflowRequest, Task,
    Workflow, WorkflowSummary,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Most correlation ids one `POST /api/workflow/{name}/correlated` may ask about.
pub const CORRELATION_IDS_MAX: usize = 100;
/// Most running workflows `GET /api/workflow/running/{name}` reads to filter by start time.
pub const RUNNING_FILTER_MAX: usize = 1_000;
/// Page size of `GET /api/workflow/{id}/tasks` when none is given (Conductor's).
const TASK_PAGE_DEFAULT: usize = 15;

/// 403 unless the caller may operate on (`run`) or read the workflow `id`; its name is read
/// only for a caller whose roles do not reach the route (one whose grants name workflows).
async fn may_touch(node: &Node, caller: &Caller, id: &str, run: bool) -> ApiResult<()> {
    let Some(p) = caller.as_deref() else {
        return Ok(());
    };
    let ask = match run {
        true => Ask::RUN_WORKFLOWS,
        false => Ask::read(TargetType::WorkflowDef),
    };
    if p.reaches(ask.family) {
        return Ok(());
    }
    let workflow = node.workflows.workflow(id, false).await?.workflow_name;
    allow(Some(p), ask, &workflow)
}

// ---- start ----

/// `POST /api/workflow`: starts a workflow from a `StartWorkflowRequest`; answers its id.
pub async fn start(
    State(node): State<Node>,
    caller: Caller,
    Body(request): Body<StartWorkflowRequest>,
) -> ApiResult<String> {
    allow(caller.as_deref(), Ask::RUN_WORKFLOWS, &request.name)?;
    // The node checks every field (proto::check::start_request) before anything is stored.
    Ok(node.workflows.start_workflow(request).await?)
}

/// `POST /api/workflow/{name}?version=&correlationId=&priority=`: starts a workflow with the body
/// as its input; answers its id.
pub async fn start_by_name(
    State(node): State<Node>,
    caller: Caller,
    PathArgs(workflow_name): PathArgs<String>,
    params: Params,
    BodyOrDefault(input): BodyOrDefault<model::Json>,
) -> ApiResult<String> {
    allow(caller.as_deref(), Ask::RUN_WORKFLOWS, &workflow_name)?;
    let request = StartWorkflowRequest {
        name: name("workflow name", &workflow_name)?.to_owned(),
        version: params.num("version")?,
        correlation_id: params.string("correlationId"),
        priority: params.num_or("priority", 0)?,
        input,
        ..StartWorkflowRequest::default()
    };
    Ok(node.workflows.start_workflow(request).await?)
}

/// Conductor's `WorkflowRun`: what `POST /api/workflow/execute/{name}/{version}` answers.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowRun {
    pub workflow_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
    pub status: model::WorkflowStatus,
    pub input: model::Json,
    pub output: model::Json,
    pub variables: model::Json,
    pub tasks: Vec<Task>,
    pub priority: i32,
    pub create_time: model::EpochMs,
    pub update_time: model::EpochMs,
}

/// `POST /api/workflow/execute/{name}/{version}?requestId=&waitUntilTaskRef=&waitForSeconds=`:
/// starts a workflow from a `StartWorkflowRequest` (the path names the workflow and its version)
/// and answers once it finished, or holds a task named in `waitUntilTaskRef` (comma-separated
/// reference names), or `waitForSeconds` passed (default 10, at most 300): then it answers the
/// workflow as it stands, still RUNNING.
pub async fn execute(
    State(node): State<Node>,
    caller: Caller,
    PathArgs((workflow_name, version)): PathArgs<(String, String)>,
    params: Params,
    BodyOrDefault(mut request): BodyOrDefault<StartWorkflowRequest>,
) -> ApiResult<Json<WorkflowRun>> {
    allow(caller.as_deref(), Ask::RUN_WORKFLOWS, &workflow_name)?;
    use crate::service::wait::{Until, EXECUTE_WAIT_DEFAULT_S, EXECUTE_WAIT_MAX_S, WAIT_REFS_MAX};
    request.name = name("workflow name", &workflow_name)?.to_owned();
    request.version = Some(version.parse().map_err(|_| {
        ApiError::bad_request(format!(
            "workflow version must be a non-negative integer, got '{version}'"
        ))
    })?);
    let wait_s = params.num_or("waitForSeconds", EXECUTE_WAIT_DEFAULT_S)?;
    if wait_s > EXECUTE_WAIT_MAX_S {
        return Err(ApiError::bad_request(format!(
            "waitForSeconds must be at most {EXECUTE_WAIT_MAX_S}, got {wait_s}"
        )));
    }
    let until = Until {
        task_refs: params.list("waitUntilTaskRef"),
        listening: false,
    };
    if until.task_refs.len() > WAIT_REFS_MAX {
        return Err(ApiError::bad_request(format!(
            "waitUntilTaskRef names {} tasks; the maximum is {WAIT_REFS_MAX}",
            until.task_refs.len()
        )));
    }
    let wf = node
        .workflows
        .execute_workflow(request, &until, std::time::Duration::from_secs(wait_s))
        .await?;
    Ok(Json(WorkflowRun {
        workflow_id: wf.workflow_id.to_string(),
        request_id: params.string("requestId"),
        correlation_id: wf.correlation_id.filter(|c| !c.is_empty()),
        status: wf.status,
        input: wf.input,
        output: wf.output,
        variables: wf.variables,
        tasks: wf.tasks,
        priority: wf.priority,
        create_time: wf.create_time,
        update_time: wf.update_time,
    }))
}

// ---- read ----

/// `GET /api/workflow/{id}?includeTasks=` (default true).
pub async fn get(
    State(node): State<Node>,
    caller: Caller,
    PathArgs(id): PathArgs<String>,
    params: Params,
) -> ApiResult<Json<Workflow>> {
    let id = workflow_id(&id)?;
    may_touch(&node, &caller, id.as_str(), false).await?;
    let include_tasks = params.bool("includeTasks", true)?;
    Ok(Json(
        node.workflows.workflow(id.as_str(), include_tasks).await?,
    ))
}

/// Conductor's `WorkflowStatus`: the short answer of `GET /api/workflow/{id}/status`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowStatusSummary {
    pub workflow_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<model::Json>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variables: Option<model::Json>,
    pub status: model::WorkflowStatus,
}

impl WorkflowStatusSummary {
    pub fn new(workflow: Workflow, include_output: bool, include_variables: bool) -> Self {
        Self {
            workflow_id: workflow.workflow_id.to_string(),
            correlation_id: workflow.correlation_id.filter(|c| !c.is_empty()),
            output: include_output.then_some(workflow.output),
            variables: include_variables.then_some(workflow.variables),
            status: workflow.status,
        }
    }
}

/// `GET /api/workflow/{id}/status?includeOutput=&includeVariables=` (both default false).
pub async fn status(
    State(node): State<Node>,
    caller: Caller,
    PathArgs(id): PathArgs<String>,
    params: Params,
) -> ApiResult<Json<WorkflowStatusSummary>> {
    let id = workflow_id(&id)?;
    may_touch(&node, &caller, id.as_str(), false).await?;
    let include_output = params.bool("includeOutput", false)?;
    let include_variables = params.bool("includeVariables", false)?;
    let workflow = node.workflows.workflow(id.as_str(), false).await?;
    Ok(Json(WorkflowStatusSummary::new(
        workflow,
        include_output,
        include_variables,
    )))
}

/// `GET /api/workflow/{id}/tasks?start=&count=&status=`: a page of the workflow's tasks, optionally
/// only those in the given statuses.
pub async fn tasks(
    State(node): State<Node>,
    caller: Caller,
    PathArgs(id): PathArgs<String>,
    params: Params,
) -> ApiResult<Json<SearchResult<Task>>> {
    let id = workflow_id(&id)?;
    may_touch(&node, &caller, id.as_str(), false).await?;
    let start = params.num_or("start", 0usize)?;
    let count = params.num_or("count", TASK_PAGE_DEFAULT)?;
    let statuses = params
        .list("status")
        .iter()
        .map(|s| {
            model::TaskStatus::parse(s)
                .ok_or_else(|| ApiError::bad_request(format!("'{s}' is not a task status")))
        })
        .collect::<ApiResult<Vec<_>>>()?;
    let workflow = node.workflows.workflow(id.as_str(), true).await?;
    let matching: Vec<Task> = workflow
        .tasks
        .into_iter()
        .filter(|t| statuses.is_empty() || statuses.contains(&t.status))
        .collect();
    let total_hits = matching.len() as u64;
    let results = matching.into_iter().skip(start).take(count).collect();
    Ok(Json(SearchResult {
        total_hits,
        results,
    }))
}

// ---- commands ----

/// `PUT /api/workflow/{id}/pause`.
pub async fn pause(
    State(node): State<Node>,
    caller: Caller,
    PathArgs(id): PathArgs<String>,
) -> ApiResult<StatusCode> {
    let id = workflow_id(&id)?;
    may_touch(&node, &caller, id.as_str(), true).await?;
    node.workflows.pause(id.as_str()).await?;
    Ok(StatusCode::OK)
}

/// `PUT /api/workflow/{id}/resume`.
pub async fn resume(
    State(node): State<Node>,
    caller: Caller,
    PathArgs(id): PathArgs<String>,
) -> ApiResult<StatusCode> {
    let id = workflow_id(&id)?;
    may_touch(&node, &caller, id.as_str(), true).await?;
    node.workflows.resume(id.as_str()).await?;
    Ok(StatusCode::OK)
}

/// `PUT /api/workflow/decide/{id}`.
pub async fn decide(
    State(node): State<Node>,
    PathArgs(id): PathArgs<String>,
) -> ApiResult<StatusCode> {
    node.workflows.decide(workflow_id(&id)?.as_str()).await?;
    Ok(StatusCode::OK)
}

/// `DELETE /api/workflow/{id}?reason=`: terminates. `triggerFailureWorkflow` (sent by the Python
/// client) is checked but Baton runs the failure workflow by the definition alone.
pub async fn terminate(
    State(node): State<Node>,
    caller: Caller,
    PathArgs(id): PathArgs<String>,
    params: Params,
) -> ApiResult<StatusCode> {
    let id = workflow_id(&id)?;
    may_touch(&node, &caller, id.as_str(), true).await?;
    params.bool("triggerFailureWorkflow", false)?;
    node.workflows
        .terminate(id.as_str(), params.string("reason"))
        .await?;
    Ok(StatusCode::OK)
}

/// `DELETE /api/workflow/{id}/terminate-remove?reason=`: terminates (if still open) and removes.
pub async fn terminate_remove(
    State(node): State<Node>,
    caller: Caller,
    PathArgs(id): PathArgs<String>,
    params: Params,
) -> ApiResult<StatusCode> {
    let id = workflow_id(&id)?;
    may_touch(&node, &caller, id.as_str(), true).await?;
    params.bool("archiveWorkflow", true)?;
    match node
        .workflows
        .terminate(id.as_str(), params.string("reason"))
        .await
    {
        // Already finished: nothing to terminate, remove it all the same.
        Ok(()) | Err(crate::Error::Conflict(_)) => {}
        Err(e) => return Err(e.into()),
    }
    node.workflows.remove(id.as_str()).await?;
    Ok(StatusCode::OK)
}

/// `POST /api/workflow/{id}/retry?resumeSubworkflowTasks=`: answers 204.
pub async fn retry(
    State(node): State<Node>,
    caller: Caller,
    PathArgs(id): PathArgs<String>,
    params: Params,
) -> ApiResult<StatusCode> {
    let id = workflow_id(&id)?;
    may_touch(&node, &caller, id.as_str(), true).await?;
    let resume = params.bool("resumeSubworkflowTasks", false)?;
    // Checked for shape: a child is retried through its parent only with the flag above.
    params.bool("retryIfRetriedByParent", true)?;
    node.workflows.retry(id.as_str(), resume).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /api/workflow/{id}/restart?useLatestDefinitions=`: answers 204.
pub async fn restart(
    State(node): State<Node>,
    caller: Caller,
    PathArgs(id): PathArgs<String>,
    params: Params,
) -> ApiResult<StatusCode> {
    let id = workflow_id(&id)?;
    may_touch(&node, &caller, id.as_str(), true).await?;
    let use_latest = params.bool("useLatestDefinitions", false)?;
    node.workflows.restart(id.as_str(), use_latest).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /api/workflow/{id}/rerun` with a `RerunWorkflowRequest`: answers the workflow id.
pub async fn rerun(
    State(node): State<Node>,
    caller: Caller,
    PathArgs(id): PathArgs<String>,
    BodyOrDefault(request): BodyOrDefault<RerunWorkflowRequest>,
) -> ApiResult<String> {
    let id = workflow_id(&id)?;
    may_touch(&node, &caller, id.as_str(), true).await?;
    if let Some(task) = &request.re_run_from_task_id {
        super::extract::task_id(task)?;
    }
    if let Some(input) = &request.workflow_input {
        proto::check::payload("workflow input", input)?;
    }
    if let Some(input) = &request.task_input {
        proto::check::payload("task input", input)?;
    }
    Ok(node.workflows.rerun(id.as_str(), request).await?)
}

/// `PUT /api/workflow/{id}/skiptask/{taskReferenceName}` with an optional `SkipTaskRequest` body.
///
/// Conductor binds the request from the query string, and the Python client sends it there as a
/// Python dict's text (not JSON) with `{}` as the body; so the body wins, a JSON `skipTaskRequest`
/// query value is used when the body is empty, and anything else there is ignored.
pub async fn skip_task(
    State(node): State<Node>,
    caller: Caller,
    PathArgs((id, reference)): PathArgs<(String, String)>,
    params: Params,
    BodyOrDefault(body): BodyOrDefault<SkipTaskRequest>,
) -> ApiResult<StatusCode> {
    let id = workflow_id(&id)?;
    may_touch(&node, &caller, id.as_str(), true).await?;
    let reference = name("task reference name", &reference)?;
    let request = match params.str("skipTaskRequest") {
        Some(query) if body == SkipTaskRequest::default() => serde_json::from_str(query)
            .unwrap_or_else(|_| {
                tracing::debug!("ignoring a skipTaskRequest query value that is not JSON");
                body
            }),
        _ => body,
    };
    node.workflows
        .skip_task(id.as_str(), reference, request)
        .await?;
    Ok(StatusCode::OK)
}

/// `DELETE /api/workflow/{id}/remove?archiveWorkflow=`: removes the workflow and its history.
pub async fn remove(
    State(node): State<Node>,
    caller: Caller,
    PathArgs(id): PathArgs<String>,
    params: Params,
) -> ApiResult<StatusCode> {
    let id = workflow_id(&id)?;
    may_touch(&node, &caller, id.as_str(), true).await?;
    // Baton keeps no archive; the flag is accepted for compatibility.
    params.bool("archiveWorkflow", true)?;
    node.workflows.remove(id.as_str()).await?;
    Ok(StatusCode::OK)
}

// ---- lists and search ----

/// `GET /api/workflow/running/{name}?version=&startTime=&endTime=`: ids of RUNNING workflows.
///
/// As in Conductor, `version` defaults to 1, and when both `startTime` and `endTime` (epoch ms)
/// are given only workflows created within them are listed.
pub async fn running(
    State(node): State<Node>,
    PathArgs(workflow_name): PathArgs<String>,
    params: Params,
) -> ApiResult<Json<Vec<String>>> {
    let workflow_name = name("workflow name", &workflow_name)?;
    let version = params.num_or("version", 1u32)?;
    let window = match (
        params.num::<i64>("startTime")?,
        params.num::<i64>("endTime")?,
    ) {
        (Some(from), Some(to)) if from != 0 && to != 0 => Some((from, to)),
        _ => None,
    };
    let ids = node.workflows.running(workflow_name, Some(version)).await?;
    let Some((from, to)) = window else {
        return Ok(Json(ids));
    };
    if ids.len() > RUNNING_FILTER_MAX {
        return Err(ApiError::bad_request(format!(
            "{} workflows are running, more than {RUNNING_FILTER_MAX} can be filtered by time; use /api/workflow/search",
            ids.len()
        )));
    }
    let mut within = Vec::new();
    for id in ids {
        match node.workflows.workflow(&id, false).await {
            Ok(w) if (from..=to).contains(&w.create_time) => within.push(id),
            // Removed since it was listed.
            Ok(_) | Err(crate::Error::NotFound(_)) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(Json(within))
}

/// `GET /api/workflow/search?start=&size=&sort=&freeText=&query=`: summaries of the matching
/// workflows, newest first.
///
/// `query` is parsed by [`search::parse`]; paging and `sort` as [`search::paging`] reads them. A
/// query over several workflow names or statuses is answered by one node search per combination,
/// merged newest first; a `workflowId` is read directly.
pub async fn search(
    State(node): State<Node>,
    params: Params,
) -> ApiResult<Json<SearchResult<WorkflowSummary>>> {
    Ok(Json(search_page(&node, &params).await?))
}

/// `GET /api/workflow/search-v2?start=&size=&sort=&freeText=&query=`: as `search`, each hit the
/// workflow itself, without its tasks (as in Conductor).
pub async fn search_v2(
    State(node): State<Node>,
    params: Params,
) -> ApiResult<Json<SearchResult<Workflow>>> {
    let page = search_page(&node, &params).await?;
    let ids = page.results.into_iter().map(|s| s.workflow_id).collect();
    let results = node.workflows.read_all(ids, false).await?;
    Ok(Json(SearchResult {
        total_hits: page.total_hits,
        results,
    }))
}

/// The page of workflow summaries a search's parameters ask for.
async fn search_page(node: &Node, params: &Params) -> ApiResult<SearchResult<WorkflowSummary>> {
    let paging = search::paging(params)?;
    let parsed = search::parse(params.str("query").unwrap_or(""))?;
    let base = SearchQuery {
        workflow_name: None,
        correlation_id: parsed.correlation_id.clone(),
        status: None,
        free_text: paging.free_text.clone(),
        start: paging.start,
        size: paging.size,
    };
    if let Some(id) = &parsed.workflow_id {
        return search_id(node, &parsed, base, id).await;
    }
    let statuses = each_or_any(parsed.statuses);
    let queries: Vec<SearchQuery> = each_or_any(parsed.workflow_types)
        .into_iter()
        .flat_map(|name| statuses.iter().map(move |status| (name.clone(), *status)))
        .map(|(workflow_name, status)| SearchQuery {
            workflow_name,
            status,
            ..base.clone()
        })
        .collect();
    match <[SearchQuery; 1]>::try_from(queries) {
        Ok([one]) => Ok(node.workflows.search(one).await?),
        Err(many) => search_each(node, many, paging.start, paging.size).await,
    }
}

/// Each of `values` as a filter, or one that lets anything pass when there are none.
fn each_or_any<T>(values: Vec<T>) -> Vec<Option<T>> {
    if values.is_empty() {
        vec![None]
    } else {
        values.into_iter().map(Some).collect()
    }
}

/// Whether `one` passes a filter that lets any of `set` pass (anything when it is empty).
fn any_of<T: PartialEq>(set: &[T], one: &T) -> bool {
    set.is_empty() || set.contains(one)
}

/// A search naming one workflow: it, if it passes the other filters.
async fn search_id(
    node: &Node,
    parsed: &search::ParsedQuery,
    base: SearchQuery,
    id: &str,
) -> ApiResult<SearchResult<WorkflowSummary>> {
    let hit = node.workflows.search_id(id, &base).await?.filter(|s| {
        any_of(&parsed.workflow_types, &s.workflow_type) && any_of(&parsed.statuses, &s.status)
    });
    Ok(SearchResult {
        total_hits: u64::from(hit.is_some()),
        results: hit.into_iter().skip(base.start).take(base.size).collect(),
    })
}

/// One node search per query, merged newest first, then paged; only within the first
/// [`SEARCH_RESULTS_MAX`] results.
async fn search_each(
    node: &Node,
    queries: Vec<SearchQuery>,
    start: usize,
    size: usize,
) -> ApiResult<SearchResult<WorkflowSummary>> {
    let window = start.saturating_add(size);
    if window > SEARCH_RESULTS_MAX {
        return Err(ApiError::bad_request(format!(
            "a search over several workflow names or statuses pages only through the first {SEARCH_RESULTS_MAX} results; search one at a time"
        )));
    }
    let mut merged = SearchResult::default();
    for query in queries {
        let page = node
            .workflows
            .search(SearchQuery {
                start: 0,
                size: window,
                ..query
            })
            .await?;
        merged.total_hits += page.total_hits;
        merged.results.extend(page.results);
    }
    // ISO-8601 times sort as text.
    merged.results.sort_by(|a, b| {
        (b.start_time.cmp(&a.start_time)).then_with(|| a.workflow_id.cmp(&b.workflow_id))
    });
    merged.results = merged.results.into_iter().skip(start).take(size).collect();
    Ok(merged)
}

/// `GET /api/workflow/{name}/correlated/{correlationId}?includeClosed=&includeTasks=` (both default
/// false).
pub async fn correlated(
    State(node): State<Node>,
    PathArgs((workflow_name, correlation_id)): PathArgs<(String, String)>,
    params: Params,
) -> ApiResult<Json<Vec<Workflow>>> {
    let workflow_name = name("workflow name", &workflow_name)?;
    let include_closed = params.bool("includeClosed", false)?;
    let include_tasks = params.bool("includeTasks", false)?;
    Ok(Json(
        node.workflows
            .correlated(
                workflow_name,
                &correlation_id,
                include_closed,
                include_tasks,
            )
            .await?,
    ))
}

/// `POST /api/workflow/{name}/correlated?includeClosed=&includeTasks=` with a JSON list of
/// correlation ids: the workflows of each.
pub async fn correlated_batch(
    State(node): State<Node>,
    PathArgs(workflow_name): PathArgs<String>,
    params: Params,
    Body(correlation_ids): Body<Vec<String>>,
) -> ApiResult<Json<BTreeMap<String, Vec<Workflow>>>> {
    let workflow_name = name("workflow name", &workflow_name)?;
    let include_closed = params.bool("includeClosed", false)?;
    let include_tasks = params.bool("includeTasks", false)?;
    if correlation_ids.len() > CORRELATION_IDS_MAX {
        return Err(ApiError::bad_request(format!(
            "{} correlation ids asked, more than the limit of {CORRELATION_IDS_MAX}; split the request",
            correlation_ids.len()
        )));
    }
    let mut out = BTreeMap::new();
    for correlation_id in correlation_ids {
        let workflows = node
            .workflows
            .correlated(
                workflow_name,
                &correlation_id,
                include_closed,
                include_tasks,
            )
            .await?;
        out.insert(correlation_id, workflows);
    }
    Ok(Json(out))
}

/// Orkes' `CorrelationIdsSearchRequest`: the body of `POST /api/workflow/correlated/batch`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CorrelationIdsSearch {
    #[serde(default)]
    pub correlation_ids: Vec<String>,
    #[serde(default)]
    pub workflow_names: Vec<String>,
}

/// `POST /api/workflow/correlated/batch?includeClosed=&includeTasks=` with a
/// `CorrelationIdsSearchRequest`: correlation id -> the workflows of any of the names it carries.
/// At most [`CORRELATION_IDS_MAX`] (name, correlation id) pairs are asked at once.
pub async fn correlated_by_names(
    State(node): State<Node>,
    params: Params,
    Body(request): Body<CorrelationIdsSearch>,
) -> ApiResult<Json<BTreeMap<String, Vec<Workflow>>>> {
    let include_closed = params.bool("includeClosed", false)?;
    let include_tasks = params.bool("includeTasks", false)?;
    for workflow_name in &request.workflow_names {
        name("workflow name", workflow_name)?;
    }
    let pairs = request.workflow_names.len() * request.correlation_ids.len();
    if pairs > CORRELATION_IDS_MAX {
        return Err(ApiError::bad_request(format!(
            "{pairs} (workflow name, correlation id) pairs asked, more than the limit of {CORRELATION_IDS_MAX}; split the request"
        )));
    }
    let mut out = BTreeMap::new();
    for correlation_id in request.correlation_ids {
        let mut found = Vec::new();
        for workflow_name in &request.workflow_names {
            let workflows = &node.workflows;
            let of_name = workflows.correlated(
                workflow_name,
                &correlation_id,
                include_closed,
                include_tasks,
            );
            found.extend(of_name.await?);
        }
        out.insert(correlation_id, found);
    }
    Ok(Json(out))
}

/// The routes of this file's handlers (workflows), merged into the API's router.
pub(super) fn routes() -> axum::Router<Node> {
    axum::Router::new()
        // Conductor uses the segment after /api/workflow both as a workflow id and as a workflow
        // name (start, correlated); the router needs one parameter name per position, so it is `{id}`.
        .route("/api/workflow", routing::post(start))
        .route("/api/workflow/search", routing::get(search))
        .route("/api/workflow/search-v2", routing::get(search_v2))
        .route(
            "/api/workflow/correlated/batch",
            routing::post(correlated_by_names),
        )
        .route("/api/workflow/bulk/pause", routing::put(super::bulk::pause))
        .route(
            "/api/workflow/bulk/resume",
            routing::put(super::bulk::resume),
        )
        .route(
            "/api/workflow/bulk/restart",
            routing::post(super::bulk::restart),
        )
        .route(
            "/api/workflow/bulk/retry",
            routing::post(super::bulk::retry),
        )
        .route(
            "/api/workflow/bulk/terminate",
            routing::post(super::bulk::terminate),
        )
        .route(
            "/api/workflow/execute/{name}/{version}",
            routing::post(execute),
        )
        .route("/api/workflow/running/{name}", routing::get(running))
        .route("/api/workflow/decide/{id}", routing::put(decide))
        .route(
            "/api/workflow/{id}",
            routing::post(start_by_name).get(get).delete(terminate),
        )
        .route("/api/workflow/{id}/status", routing::get(status))
        .route("/api/workflow/{id}/tasks", routing::get(tasks))
        .route("/api/workflow/{id}/pause", routing::put(pause))
        .route("/api/workflow/{id}/resume", routing::put(resume))
        .route("/api/workflow/{id}/retry", routing::post(retry))
        .route("/api/workflow/{id}/restart", routing::post(restart))
        .route("/api/workflow/{id}/rerun", routing::post(rerun))
        .route(
            "/api/workflow/{id}/skiptask/{reference}",
            routing::put(skip_task),
        )
        .route("/api/workflow/{id}/remove", routing::delete(remove))
        .route(
            "/api/workflow/{id}/terminate-remove",
            routing::delete(terminate_remove),
        )
        .route(
            "/api/workflow/{id}/correlated",
            routing::post(correlated_batch),
        )
        .route(
            "/api/workflow/{id}/correlated/{correlation_id}",
            routing::get(correlated),
        )
}

#[cfg(test)]
mod tests {
    use crate::api::testing::TestApi;
    use axum::http::StatusCode;
    use serde_json::Value;

    fn ids(page: &Value) -> Vec<String> {
        let results = page["results"].as_array().expect("results");
        let id = |w: &Value| w["workflowId"].as_str().expect("an id").to_owned();
        results.iter().map(id).collect()
    }

    #[tokio::test]
    async fn search_v2_answers_whole_workflows() {
        let api = TestApi::start().await;
        api.define("v2_wf", "v2_t").await;
        let first = api.start_workflow("v2_wf", "v2-a").await;
        let second = api.start_workflow("v2_wf", "v2-b").await;
        let path = "/api/workflow/search-v2?start=0&size=10&freeText=*&query=workflowType%20%3D%20%27v2_wf%27";
        let page = api
            .until_get("both workflows", path, |p| p["totalHits"] == 2)
            .await;
        let mut found = ids(&page);
        found.sort();
        let mut started = vec![first.clone(), second];
        started.sort();
        assert_eq!(found, started, "{page}");
        let wf = &page["results"][0];
        assert_eq!(wf["workflowName"], "v2_wf", "{wf}");
        assert_eq!(wf["status"], "RUNNING", "{wf}");
        assert!(wf["input"].is_object() && wf["createTime"].is_i64(), "{wf}");
        assert_eq!(wf["tasks"].as_array().map_or(0, Vec::len), 0, "{wf}");

        let path = "/api/workflow/search-v2?query=correlationId%20%3D%20%27v2-a%27&size=1";
        let page = api.ok("GET", path, None).await;
        assert_eq!(
            (page["totalHits"].as_u64(), ids(&page)),
            (Some(1), vec![first.clone()])
        );

        // As Conductor UI writes queries: several names, or one workflow id.
        api.define("v2_other", "v2_t").await;
        let third = api.start_workflow("v2_other", "v2-c").await;
        let path = "/api/workflow/search?query=workflowType%20IN%20(v2_wf,v2_other)%20AND%20status%20IN%20(RUNNING,FAILED)&size=2";
        let page = api
            .until_get("three workflows", path, |p| p["totalHits"] == 3)
            .await;
        assert_eq!(ids(&page)[0], third, "newest first: {page}");
        assert_eq!(ids(&page).len(), 2, "{page}");
        let by_id = |q: &str| format!("/api/workflow/search?query=workflowId%3D%22{first}%22{q}");
        let page = api.ok("GET", &by_id(""), None).await;
        assert_eq!(
            (page["totalHits"].as_u64(), ids(&page)),
            (Some(1), vec![first.clone()])
        );
        let page = api
            .ok("GET", &by_id("%20AND%20status%3DCOMPLETED"), None)
            .await;
        assert_eq!(page["totalHits"], 0, "{page}");
        let page = api
            .ok("GET", &by_id("%20AND%20workflowType%3Dv2_other"), None)
            .await;
        assert_eq!(page["totalHits"], 0, "{page}");
        for bad in [
            "/api/workflow/search?query=workflowId%3Dnope",
            "/api/workflow/search?query=workflowType%20IN%20(a,b)&start=990&size=20",
            "/api/workflow/search-v2?query=startTime%20%3E%201",
            "/api/workflow/search-v2?size=1001",
            "/api/workflow/search-v2?start=-1",
        ] {
            let (status, json) = api.send("GET", bad, None).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {json}");
        }
        api.stop().await;
    }

    #[tokio::test]
    async fn correlated_batch_answers_each_correlation_id() {
        let api = TestApi::start().await;
        api.define("cb_a", "cb_t").await;
        api.define("cb_b", "cb_t").await;
        let a = api.start_workflow("cb_a", "k1").await;
        let b = api.start_workflow("cb_b", "k1").await;
        api.start_workflow("cb_a", "k2").await;
        let body = serde_json::json!({ "workflowNames": ["cb_a", "cb_b"], "correlationIds": ["k1", "k9"] });
        let path = "/api/workflow/correlated/batch?includeClosed=true";
        let answer = crate::testing::until("both k1 workflows", async || {
            let answer = api.ok("POST", path, Some(&body)).await;
            (answer["k1"].as_array().map(Vec::len) == Some(2)).then_some(answer)
        })
        .await;
        let mut k1 = ids(&serde_json::json!({ "results": answer["k1"] }));
        k1.sort();
        let mut want = vec![a, b];
        want.sort();
        assert_eq!(k1, want, "{answer}");
        assert_eq!(answer["k9"], serde_json::json!([]), "{answer}");
        let names: Vec<String> = (0..11).map(|n| format!("n{n}")).collect();
        let ids: Vec<String> = (0..10).map(|n| format!("c{n}")).collect();
        let body = serde_json::json!({ "workflowNames": names, "correlationIds": ids });
        let (status, json) = api
            .send("POST", "/api/workflow/correlated/batch", Some(&body))
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{json}");
        api.stop().await;
    }
}
