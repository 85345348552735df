//! `/api/tasks`: what workers call — poll, batch poll, update, update-v2, update by reference name,
//! logs — and queue sizes, as Conductor's `TaskResource` serves them.
//!
//! An empty single poll answers 204 (an empty batch poll answers `[]`); `POST /api/tasks` and the
//! update by reference name answer the task id as `text/plain`; `update-v2` answers the worker's next
//! task or 204. Ids in paths and bodies are checked to be Baton ids before the node is asked.

use super::error::ApiResult;
use super::extract::{name, task_id, workflow_id, Body, BodyOrDefault, Params, PathArgs, Text};
use super::guard::{allow, Caller};
use super::{search, ApiError};
use crate::access::{Ask, Family};
use crate::service::{PollRequest, TaskSearchQuery, TaskSummary};
use crate::Node;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing;
use axum::Json;
use proto::limits::{POLL_BATCH_MAX, POLL_WAIT_MS_MAX};
use proto::model::{self, SearchResult, Task, TaskResult, TaskResultStatus, TaskStatus, Workflow};
use proto::peer::QueueDomain;
use std::collections::BTreeMap;

/// How long a single poll waits for a task (Conductor's).
const SINGLE_POLL_WAIT_MS: u64 = 100;
/// How long a batch poll waits when no `timeout` is given (Conductor's).
const BATCH_POLL_WAIT_MS_DEFAULT: i64 = 100;

/// A task as JSON, or 204 when there is none.
fn task_or_no_content(task: Option<Task>) -> Response {
    match task {
        Some(task) => Json(task).into_response(),
        None => StatusCode::NO_CONTENT.into_response(),
    }
}

/// 403 unless the caller may execute the task `id` (its type is read only for a caller whose
/// grants name types).
async fn may_report(node: &Node, caller: &Caller, id: &str) -> ApiResult<()> {
    match caller.as_deref() {
        Some(p) if !p.reaches(Family::Work) => {
            let task = node.tasks.task(id).await?;
            allow(Some(p), Ask::EXECUTE_TASKS, &task.task_type)
        }
        _ => Ok(()),
    }
}

// ---- polling ----

/// `GET /api/tasks/poll/{tasktype}?workerid=&domain=`: one task, or 204.
pub async fn poll(
    State(node): State<Node>,
    caller: Caller,
    PathArgs(task_type): PathArgs<String>,
    params: Params,
) -> ApiResult<Response> {
    allow(caller.as_deref(), Ask::EXECUTE_TASKS, &task_type)?;
    let request = PollRequest {
        task_type: name("task type", &task_type)?.to_owned(),
        worker_id: params.string("workerid"),
        domain: params.string("domain"),
        count: 1,
        wait_ms: SINGLE_POLL_WAIT_MS,
    };
    let tasks = node.tasks.poll(request).await?;
    Ok(task_or_no_content(tasks.into_iter().next()))
}

/// The lease size and wait of a batch poll: `count` capped at [`POLL_BATCH_MAX`], `timeout` (ms)
/// capped at [`POLL_WAIT_MS_MAX`]; a count below 1 asks for nothing, a negative timeout waits 0.
pub fn batch_bounds(count: i64, timeout_ms: i64) -> (usize, u64) {
    let count = usize::try_from(count.max(0))
        .unwrap_or(usize::MAX)
        .min(POLL_BATCH_MAX);
    let wait_ms = u64::try_from(timeout_ms.max(0))
        .unwrap_or(0)
        .min(POLL_WAIT_MS_MAX);
    (count, wait_ms)
}

/// `GET /api/tasks/poll/batch/{tasktype}?count=&timeout=&workerid=&domain=`: up to `count` tasks,
/// waiting up to `timeout` ms for the first; `[]` when none.
pub async fn batch_poll(
    State(node): State<Node>,
    caller: Caller,
    PathArgs(task_type): PathArgs<String>,
    params: Params,
) -> ApiResult<Json<Vec<Task>>> {
    let task_type = name("task type", &task_type)?.to_owned();
    allow(caller.as_deref(), Ask::EXECUTE_TASKS, &task_type)?;
    let (count, wait_ms) = batch_bounds(
        params.num_or("count", 1i64)?,
        params.num_or("timeout", BATCH_POLL_WAIT_MS_DEFAULT)?,
    );
    if count == 0 {
        return Ok(Json(Vec::new()));
    }
    let request = PollRequest {
        task_type,
        worker_id: params.string("workerid"),
        domain: params.string("domain"),
        count,
        wait_ms,
    };
    Ok(Json(node.tasks.poll(request).await?))
}

// ---- updates ----

/// Checks a worker's result's ids before it reaches the node: both are Baton ids (the node checks
/// the rest, [`proto::check::task_result`]).
fn check_result(result: &TaskResult) -> ApiResult<()> {
    if result.workflow_instance_id.is_empty() {
        return Err(ApiError::bad_request(
            "workflowInstanceId is required in a task result",
        ));
    }
    if result.task_id.is_empty() {
        return Err(ApiError::bad_request("taskId is required in a task result"));
    }
    workflow_id(&result.workflow_instance_id)?;
    task_id(&result.task_id)?;
    Ok(())
}

/// `POST /api/tasks` with a `TaskResult`: answers the task id.
pub async fn update(
    State(node): State<Node>,
    caller: Caller,
    Body(result): Body<TaskResult>,
) -> ApiResult<String> {
    check_result(&result)?;
    may_report(&node, &caller, &result.task_id).await?;
    Ok(node.tasks.update_task(result).await?)
}

/// `POST /api/tasks/update-v2` with a `TaskResult`: answers the worker's next task of the same type,
/// or 204 when there is none.
pub async fn update_v2(
    State(node): State<Node>,
    caller: Caller,
    Body(result): Body<TaskResult>,
) -> ApiResult<Response> {
    check_result(&result)?;
    may_report(&node, &caller, &result.task_id).await?;
    Ok(task_or_no_content(node.tasks.update_task_v2(result).await?))
}

/// Parses the status of `POST /api/tasks/{workflowId}/{taskRefName}/{status}`: one a worker may report.
pub fn result_status(s: &str) -> ApiResult<TaskStatus> {
    serde_json::from_value::<TaskResultStatus>(serde_json::Value::String(s.to_ascii_uppercase()))
        .map(TaskStatus::from)
        .map_err(|_| {
            ApiError::bad_request(format!(
                "'{s}' is not a status a task can be updated to (IN_PROGRESS, COMPLETED, FAILED, FAILED_WITH_TERMINAL_ERROR)"
            ))
        })
}

/// `POST /api/tasks/{workflowId}/{taskRefName}/{status}?workerid=` with the output map as body:
/// updates the latest attempt of that reference name; answers its task id.
pub async fn update_by_ref(
    State(node): State<Node>,
    PathArgs((workflow, reference, status)): PathArgs<(String, String, String)>,
    params: Params,
    BodyOrDefault(output): BodyOrDefault<model::Json>,
) -> ApiResult<String> {
    let update = ByRef::check(&workflow, &reference, &status, &params, output)?;
    Ok(update.send(&node).await?)
}

/// `POST /api/tasks/{workflowId}/{taskRefName}/{status}/sync?workerid=`: as the update by
/// reference name, answering the workflow (with its tasks) as the update left it.
pub async fn update_by_ref_sync(
    State(node): State<Node>,
    PathArgs((workflow, reference, status)): PathArgs<(String, String, String)>,
    params: Params,
    BodyOrDefault(output): BodyOrDefault<model::Json>,
) -> ApiResult<Json<Workflow>> {
    let update = ByRef::check(&workflow, &reference, &status, &params, output)?;
    update.send(&node).await?;
    Ok(Json(node.workflows.workflow(&update.workflow, true).await?))
}

/// A checked update by reference name.
struct ByRef {
    workflow: String,
    reference: String,
    status: TaskStatus,
    output: model::Json,
    worker: Option<String>,
}

impl ByRef {
    fn check(
        workflow: &str,
        reference: &str,
        status: &str,
        params: &Params,
        output: model::Json,
    ) -> ApiResult<Self> {
        let workflow = workflow_id(workflow)?.to_string();
        let reference = name("task reference name", reference)?.to_owned();
        let status = result_status(status)?;
        proto::check::payload("task output", &output)?;
        if let Some(worker) = params.str("workerid") {
            name("workerid", worker)?;
        }
        let worker = params.string("workerid");
        Ok(Self {
            workflow,
            reference,
            status,
            output,
            worker,
        })
    }

    async fn send(&self, node: &Node) -> crate::error::Result<String> {
        node.tasks
            .update_task_by_ref(
                &self.workflow,
                &self.reference,
                self.status,
                self.output.clone(),
                self.worker.clone(),
            )
            .await
    }
}

// ---- reads ----

/// `GET /api/tasks/{taskId}`.
pub async fn get(
    State(node): State<Node>,
    PathArgs(id): PathArgs<String>,
) -> ApiResult<Json<Task>> {
    let id = task_id(&id)?;
    Ok(Json(node.tasks.task(id.as_str()).await?))
}

/// `GET /api/tasks/{taskId}/log`: the task's log lines, or 204 when it has none (as Conductor).
pub async fn logs(State(node): State<Node>, PathArgs(id): PathArgs<String>) -> ApiResult<Response> {
    let id = task_id(&id)?;
    let logs = node.tasks.task_logs(id.as_str()).await?;
    if logs.is_empty() {
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    Ok(Json(logs).into_response())
}

/// The log line of a `POST /api/tasks/{taskId}/log` body.
///
/// Conductor takes the body as a string. Curl users send plain text; JSON clients send a JSON string
/// (`"line"`); the Python client JSON-encodes the line and strips the outer quotes, leaving escapes
/// such as `\"` inside. So with a JSON (or no) content type a JSON string is decoded, and text that
/// decodes as the inside of a JSON string is unescaped; anything else is kept as sent.
pub fn log_line(text: &str, content_type_is_json: bool) -> String {
    if !content_type_is_json {
        return text.to_owned();
    }
    let trimmed = text.trim();
    if trimmed.starts_with('"') {
        if let Ok(line) = serde_json::from_str::<String>(trimmed) {
            return line;
        }
    }
    if text.contains('\\') {
        if let Ok(line) = serde_json::from_str::<String>(&format!("\"{text}\"")) {
            return line;
        }
    }
    text.to_owned()
}

/// `POST /api/tasks/{taskId}/log`: appends one log line.
pub async fn add_log(
    State(node): State<Node>,
    caller: Caller,
    PathArgs(id): PathArgs<String>,
    headers: HeaderMap,
    Text(text): Text,
) -> ApiResult<StatusCode> {
    let id = task_id(&id)?;
    may_report(&node, &caller, id.as_str()).await?;
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_none_or(|v| v.to_ascii_lowercase().contains("json"));
    let line = log_line(&text, is_json);
    if line.trim().is_empty() {
        return Err(ApiError::bad_request(
            "the request body must be the log line; it is empty",
        ));
    }
    proto::check::text("log line", &line, proto::limits::PAYLOAD_BYTES_MAX)?;
    node.tasks.add_task_log(id.as_str(), line).await?;
    Ok(StatusCode::OK)
}

// ---- search ----

/// `GET /api/tasks/search?start=&size=&sort=&freeText=&query=`: rows of the matching tasks,
/// latest scheduled first (query syntax in [`search`], where the tasks are looked for in
/// `Workflows::search_tasks`).
pub async fn search(
    State(node): State<Node>,
    params: Params,
) -> ApiResult<Json<SearchResult<TaskSummary>>> {
    let page = search_tasks(&node, &params).await?;
    Ok(Json(SearchResult {
        total_hits: page.total_hits,
        results: page.results.iter().map(TaskSummary::of).collect(),
    }))
}

/// `GET /api/tasks/search-v2?...`: as `search`, each hit the task itself.
pub async fn search_v2(
    State(node): State<Node>,
    params: Params,
) -> ApiResult<Json<SearchResult<Task>>> {
    Ok(Json(search_tasks(&node, &params).await?))
}

async fn search_tasks(node: &Node, params: &Params) -> ApiResult<SearchResult<Task>> {
    let search::Paging {
        start,
        size,
        free_text,
    } = search::paging(params)?;
    let query = TaskSearchQuery {
        start,
        size,
        free_text,
        ..search::parse_tasks(params.str("query").unwrap_or(""))?
    };
    Ok(node.workflows.search_tasks(&query).await?)
}

// ---- queues ----

/// `GET /api/tasks/queue/sizes?taskType=a&taskType=b`: ready tasks per type in the whole
/// cluster, of every domain.
pub async fn queue_sizes(
    State(node): State<Node>,
    params: Params,
) -> ApiResult<Json<BTreeMap<String, u64>>> {
    let types = params.list("taskType");
    for t in &types {
        name("task type", t)?;
    }
    Ok(Json(
        node.tasks.queue_sizes(&types, &QueueDomain::Every).await?,
    ))
}

/// `GET /api/tasks/queue/size?taskType=&domain=`: ready tasks of one type in the whole cluster;
/// of domain `domain` when it is given, else of every domain. Orkes' isolation parameters are
/// not distinguished.
pub async fn queue_size(State(node): State<Node>, params: Params) -> ApiResult<Json<u64>> {
    let task_type = params
        .string("taskType")
        .ok_or_else(|| ApiError::bad_request("query parameter 'taskType' is required"))?;
    name("task type", &task_type)?;
    let domain = match params.string("domain").filter(|d| !d.is_empty()) {
        Some(d) => {
            name("domain", &d)?;
            QueueDomain::Only(Some(d))
        }
        None => QueueDomain::Every,
    };
    let types = std::slice::from_ref(&task_type);
    let sizes = node.tasks.queue_sizes(types, &domain).await?;
    Ok(Json(sizes.get(&task_type).copied().unwrap_or(0)))
}

/// `GET /api/tasks/queue/all`: ready tasks of every type in the whole cluster.
pub async fn queue_all(State(node): State<Node>) -> ApiResult<Json<BTreeMap<String, u64>>> {
    Ok(Json(
        node.tasks.queue_sizes(&[], &QueueDomain::Every).await?,
    ))
}

/// The routes of this file's handlers (tasks), merged into the API's router.
pub(super) fn routes() -> axum::Router<Node> {
    axum::Router::new()
        // As above, the first segment after /api/tasks is a task id or a workflow id: `{id}`.
        .route("/api/tasks", routing::post(update))
        .route("/api/tasks/update-v2", routing::post(update_v2))
        .route("/api/tasks/poll/{task_type}", routing::get(poll))
        .route(
            "/api/tasks/poll/batch/{task_type}",
            routing::get(batch_poll),
        )
        .route("/api/tasks/queue/sizes", routing::get(queue_sizes))
        .route("/api/tasks/queue/size", routing::get(queue_size))
        .route("/api/tasks/queue/all", routing::get(queue_all))
        .route("/api/tasks/search", routing::get(search))
        .route("/api/tasks/search-v2", routing::get(search_v2))
        .route("/api/tasks/{id}", routing::get(get))
        .route("/api/tasks/{id}/log", routing::get(logs).post(add_log))
        .route(
            "/api/tasks/{id}/{reference}/{status}",
            routing::post(update_by_ref),
        )
        .route(
            "/api/tasks/{id}/{reference}/{status}/sync",
            routing::post(update_by_ref_sync),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_polls_are_capped() {
        assert_eq!(batch_bounds(1, 100), (1, 100));
        assert_eq!(
            batch_bounds(10_000, 10_000_000),
            (POLL_BATCH_MAX, POLL_WAIT_MS_MAX)
        );
        assert_eq!(batch_bounds(0, 100), (0, 100));
        assert_eq!(batch_bounds(-5, -1), (0, 0));
    }

    #[test]
    fn update_statuses_are_the_workers_four() {
        assert_eq!(result_status("COMPLETED"), Ok(TaskStatus::Completed));
        assert_eq!(
            result_status("failed_with_terminal_error"),
            Ok(TaskStatus::FailedWithTerminalError)
        );
        assert_eq!(result_status("In_Progress"), Ok(TaskStatus::InProgress));
        for bad in ["SCHEDULED", "SKIPPED", "DONE", ""] {
            let e = result_status(bad).expect_err(bad);
            assert_eq!(e.status, StatusCode::BAD_REQUEST);
        }
    }

    #[test]
    fn log_lines_from_each_kind_of_client() {
        // curl -H 'Content-Type: text/plain' --data 'a "b" c:\x'
        assert_eq!(log_line(r#"a "b" c:\x"#, false), r#"a "b" c:\x"#);
        // A JSON client.
        assert_eq!(log_line(r#""step \"2\" done""#, true), r#"step "2" done"#);
        // conductor-python: json.dumps(line).strip('"').
        assert_eq!(log_line(r#"step \"2\" done"#, true), r#"step "2" done"#);
        assert_eq!(log_line("plain", true), "plain");
        // Not a JSON string's inside: kept as sent.
        assert_eq!(log_line(r"C:\path", true), r"C:\path");
    }

    #[test]
    fn results_need_baton_ids() {
        let good = "01234567-89ab-cdef-0123-456789ab0005";
        let result = |wf: &str, task: &str| TaskResult {
            workflow_instance_id: wf.to_owned(),
            task_id: task.to_owned(),
            ..TaskResult::default()
        };
        assert!(check_result(&result(good, good)).is_ok());
        for (wf, task, needle) in [
            ("", good, "workflowInstanceId is required"),
            (good, "", "taskId is required"),
            ("nope", good, "invalid workflow id"),
            (good, "nope", "invalid task id"),
        ] {
            let e = check_result(&result(wf, task)).expect_err(needle);
            assert!(e.message.contains(needle), "{}", e.message);
        }
    }
}

#[cfg(test)]
mod search_tests {
    use crate::api::testing::TestApi;
    use axum::http::StatusCode;
    use serde_json::{json, Value};

    fn task_ids(page: &Value) -> Vec<String> {
        let results = page["results"].as_array().expect("results");
        let id = |t: &Value| t["taskId"].as_str().expect("a task id").to_owned();
        results.iter().map(id).collect()
    }

    #[tokio::test]
    async fn tasks_are_searched_by_type_status_and_ids() {
        let api = TestApi::start().await;
        api.define("ts_wf", "ts_t").await;
        api.define("ts_other_wf", "ts_other_t").await;
        let done = api.start_workflow("ts_wf", "ts-1").await;
        let first = api.finish_task("ts_t", "COMPLETED").await;
        assert_eq!(first["workflowInstanceId"], done.as_str());
        let open = api.start_workflow("ts_wf", "ts-2").await;
        api.start_workflow("ts_other_wf", "ts-3").await;

        let path = "/api/tasks/search?query=taskType%20IN%20(ts_t)&freeText=*";
        let page = api
            .until_get("two ts_t tasks", path, |p| p["totalHits"] == 2)
            .await;
        let rows = page["results"].as_array().expect("rows");
        let paged = |start: usize| {
            format!("/api/tasks/search-v2?query=taskType%3Dts_t&start={start}&size=1")
        };
        let (first_page, second_page) = (
            api.ok("GET", &paged(0), None).await,
            api.ok("GET", &paged(1), None).await,
        );
        assert_eq!(
            (&first_page["totalHits"], &second_page["totalHits"]),
            (&json!(2), &json!(2))
        );
        let mut both = [task_ids(&first_page), task_ids(&second_page)].concat();
        both.sort();
        let mut all: Vec<String> = rows
            .iter()
            .map(|r| r["taskId"].as_str().expect("id").to_owned())
            .collect();
        all.sort();
        assert_eq!(both, all, "pages {first_page} {second_page}");
        let row = rows
            .iter()
            .find(|r| r["workflowId"] == open.as_str())
            .expect("open's task");
        assert_eq!(
            (&row["taskType"], &row["status"]),
            (&json!("ts_t"), &json!("SCHEDULED"))
        );
        assert_eq!(row["workflowType"], "ts_wf", "{row}");
        assert!(
            row["scheduledTime"]
                .as_str()
                .is_some_and(|t| t.ends_with('Z')),
            "{row}"
        );
        assert!(row["input"].is_string(), "{row}");

        let path = "/api/tasks/search-v2?query=workflowType%20%3D%20ts_wf%20AND%20status%20%3D%20COMPLETED";
        let page = api.ok("GET", path, None).await;
        assert_eq!(page["totalHits"], 1, "{page}");
        assert_eq!(
            page["results"][0]["workflowInstanceId"],
            done.as_str(),
            "{page}"
        );
        let task_id = page["results"][0]["taskId"]
            .as_str()
            .expect("id")
            .to_owned();
        assert!(page["results"][0]["outputData"].is_object(), "{page}");

        let path = format!("/api/tasks/search-v2?query=taskId%3D%22{task_id}%22");
        assert_eq!(
            task_ids(&api.ok("GET", &path, None).await),
            std::slice::from_ref(&task_id)
        );
        let path = format!("/api/tasks/search?query=workflowId%20%3D%20%27{open}%27");
        assert_eq!(api.ok("GET", &path, None).await["totalHits"], 1);
        let path = format!("/api/tasks/search?freeText={task_id}");
        assert_eq!(api.ok("GET", &path, None).await["totalHits"], 1);
        let unknown = "/api/tasks/search?query=workflowId%3D01234567-89ab-cdef-0123-456789ab0001";
        assert_eq!(api.ok("GET", unknown, None).await["totalHits"], 0);
        let both = "/api/tasks/search?query=workflowType%20IN%20(ts_wf,ts_other_wf)";
        let page = api
            .until_get("three tasks", both, |p| p["totalHits"] == 3)
            .await;
        let rows = page["results"].as_array().expect("rows");
        assert!(rows.iter().any(|r| r["taskType"] == "ts_other_t"), "{page}");

        for bad in [
            "/api/tasks/search?query=status%20%3D%20DONE",
            "/api/tasks/search?query=workflowId%20%3D%20nope",
            "/api/tasks/search-v2?query=taskId%20%3D%20nope",
            "/api/tasks/search?query=startTime%3E1",
            "/api/tasks/search?query=taskType%20%3D%20a%20OR%20taskType%20%3D%20b",
            "/api/tasks/search?size=5000",
        ] {
            let (status, json) = api.send("GET", bad, None).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {json}");
        }
        api.stop().await;
    }

    #[tokio::test]
    async fn sync_update_answers_the_workflow() {
        let api = TestApi::start().await;
        api.define("sync_wf", "sync_t").await;
        let id = api.start_workflow("sync_wf", "s").await;
        let path = format!("/api/tasks/{id}/only/COMPLETED/sync?workerid=w");
        let wf = api.ok("POST", &path, Some(&json!({ "v": 1 }))).await;
        assert_eq!(wf["workflowId"], id.as_str(), "{wf}");
        assert_eq!(wf["status"], "COMPLETED", "{wf}");
        assert_eq!(wf["tasks"][0]["outputData"]["v"], 1, "{wf}");
        let path = format!("/api/tasks/{id}/only/DONE/sync");
        let (status, _) = api.send("POST", &path, Some(&json!({}))).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        api.stop().await;
    }
}
