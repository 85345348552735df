//! `/api/workflow/bulk`: one command for a list of workflows, as Conductor's `WorkflowBulkResource`
//! serves it: `PUT pause`, `PUT resume`, `POST restart?useLatestDefinitions=`, `POST retry` and
//! `POST terminate?reason=&triggerFailureWorkflow=`, each answering Conductor's `BulkResponse`.
//!
//! The body is a JSON list of workflow ids, at least one and at most [`BULK_WORKFLOWS_MAX`]; a list
//! outside those bounds, or a malformed query parameter, is a 400 and nothing is done. Each id then
//! goes through the same node operation as the single-workflow route: an id that is not a Baton id,
//! unknown, or in the wrong state for the command is reported with the reason in
//! `bulkErrorResults`, and the others are listed in `bulkSuccessfulResults` in request order. A
//! repeated id is done once.
//!
//! Ids are done [`BULK_CONCURRENCY`] at a time, so commands for one partition's workflows can
//! share its writes. Once the node fails to serve one (503, 500), the ids not tried yet are
//! reported as not attempted instead of each waiting out the same failure.

use super::error::ApiResult;
use super::extract::{Body, Params};
use super::ApiError;
use crate::Node;
use axum::extract::State;
use axum::Json;
use proto::limits::{BULK_WORKFLOWS_MAX, REASON_LEN_MAX};
use proto::WorkflowId;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// Workflows of one bulk request commanded at once.
const BULK_CONCURRENCY: usize = 16;

/// Conductor's answer to a bulk request.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BulkResponse {
    /// Item (workflow id, definition name) -> why it was not done.
    pub bulk_error_results: BTreeMap<String, String>,
    /// Items done, in request order.
    pub bulk_successful_results: Vec<String>,
    pub message: &'static str,
}

impl BulkResponse {
    /// An empty answer with Conductor's message.
    pub fn processed() -> Self {
        Self {
            message: "Bulk Request has been processed.",
            ..Self::default()
        }
    }
}

/// The command a bulk request gives every workflow it names.
#[derive(Debug, Clone, PartialEq)]
enum Command {
    Pause,
    Resume,
    Restart { use_latest: bool },
    Retry,
    Terminate { reason: Option<String> },
}

impl Command {
    /// Gives the command to one workflow through the node's single-workflow operation.
    async fn apply(&self, node: &Node, id: &WorkflowId) -> Result<(), crate::Error> {
        let (workflows, id) = (&node.workflows, id.as_str());
        match self {
            Command::Pause => workflows.pause(id).await,
            Command::Resume => workflows.resume(id).await,
            Command::Restart { use_latest } => workflows.restart(id, *use_latest).await,
            Command::Retry => workflows.retry(id, false).await,
            Command::Terminate { reason } => workflows.terminate(id, reason.clone()).await,
        }
    }
}

/// `PUT /api/workflow/bulk/pause`.
pub async fn pause(
    State(node): State<Node>,
    Body(ids): Body<Vec<String>>,
) -> ApiResult<Json<BulkResponse>> {
    run(&node, ids, Command::Pause).await
}

/// `PUT /api/workflow/bulk/resume`.
pub async fn resume(
    State(node): State<Node>,
    Body(ids): Body<Vec<String>>,
) -> ApiResult<Json<BulkResponse>> {
    run(&node, ids, Command::Resume).await
}

/// `POST /api/workflow/bulk/restart?useLatestDefinitions=` (default false).
pub async fn restart(
    State(node): State<Node>,
    params: Params,
    Body(ids): Body<Vec<String>>,
) -> ApiResult<Json<BulkResponse>> {
    let use_latest = params.bool("useLatestDefinitions", false)?;
    run(&node, ids, Command::Restart { use_latest }).await
}

/// `POST /api/workflow/bulk/retry`.
pub async fn retry(
    State(node): State<Node>,
    Body(ids): Body<Vec<String>>,
) -> ApiResult<Json<BulkResponse>> {
    run(&node, ids, Command::Retry).await
}

/// `POST /api/workflow/bulk/terminate?reason=&triggerFailureWorkflow=`. As on the single route,
/// `triggerFailureWorkflow` is checked, and the failure workflow follows from the definition.
pub async fn terminate(
    State(node): State<Node>,
    params: Params,
    Body(ids): Body<Vec<String>>,
) -> ApiResult<Json<BulkResponse>> {
    params.bool("triggerFailureWorkflow", false)?;
    let reason = params.string("reason");
    if let Some(r) = &reason {
        proto::check::text("reason", r, REASON_LEN_MAX)?;
    }
    run(&node, ids, Command::Terminate { reason }).await
}

/// Checks the list's size, then commands each distinct id.
async fn run(node: &Node, ids: Vec<String>, command: Command) -> ApiResult<Json<BulkResponse>> {
    check_count(ids.len())?;
    let mut seen = BTreeSet::new();
    let ids: Vec<String> = ids
        .into_iter()
        .filter(|id| seen.insert(id.clone()))
        .collect();
    let mut bulk = BulkResponse::processed();
    let mut stopped: Option<String> = None;
    for chunk in ids.chunks(BULK_CONCURRENCY) {
        if let Some(why) = &stopped {
            for id in chunk {
                let message = format!("not attempted: an earlier workflow failed with: {why}");
                bulk.bulk_error_results.insert(id.clone(), message);
            }
            continue;
        }
        let outcomes = futures::future::join_all(chunk.iter().map(|id| one(node, &command, id)));
        for (id, outcome) in chunk.iter().zip(outcomes.await) {
            match outcome {
                Ok(()) => bulk.bulk_successful_results.push(id.clone()),
                Err(e) => {
                    if e.status.is_server_error() {
                        stopped.get_or_insert_with(|| e.message.clone());
                    }
                    bulk.bulk_error_results.insert(id.clone(), e.message);
                }
            }
        }
    }
    Ok(Json(bulk))
}

/// Commands one workflow named by a client-supplied id.
async fn one(node: &Node, command: &Command, id: &str) -> ApiResult<()> {
    let id = WorkflowId::parse(id)
        .map_err(|e| ApiError::bad_request(format!("invalid workflow id: {e}")))?;
    Ok(command.apply(node, &id).await?)
}

/// A bulk request names at least one workflow and at most [`BULK_WORKFLOWS_MAX`].
fn check_count(count: usize) -> ApiResult<()> {
    if count == 0 {
        return Err(ApiError::bad_request(
            "the request body lists no workflow ids: expected a JSON list of at least one",
        ));
    }
    if count > BULK_WORKFLOWS_MAX {
        return Err(ApiError::bad_request(format!(
            "the request body lists {count} workflow ids, more than the limit of {BULK_WORKFLOWS_MAX}; split the request"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_outside_the_bounds_are_refused() {
        assert!(check_count(1).is_ok());
        assert!(check_count(BULK_WORKFLOWS_MAX).is_ok());
        let e = check_count(0).expect_err("empty");
        assert_eq!(e.status, axum::http::StatusCode::BAD_REQUEST);
        assert!(e.message.contains("no workflow ids"), "{}", e.message);
        let e = check_count(BULK_WORKFLOWS_MAX + 1).expect_err("over");
        assert!(
            e.message.contains("more than the limit of 1000"),
            "{}",
            e.message
        );
    }

    #[test]
    fn answer_has_conductor_field_names() {
        let mut bulk = BulkResponse::processed();
        bulk.bulk_successful_results.push("a".into());
        bulk.bulk_error_results.insert("b".into(), "why".into());
        let json = serde_json::to_value(&bulk).expect("json");
        assert_eq!(
            json,
            serde_json::json!({
                "bulkErrorResults": {"b": "why"},
                "bulkSuccessfulResults": ["a"],
                "message": "Bulk Request has been processed.",
            })
        );
    }

    use crate::api::testing::TestApi;
    use axum::http::StatusCode;
    use serde_json::{json, Value};

    /// A well-formed id of no workflow.
    const UNKNOWN: &str = "01234567-89ab-cdef-0123-456789ab0001";

    async fn status_of(api: &TestApi, id: &str) -> String {
        api.workflow(id).await["status"]
            .as_str()
            .expect("a status")
            .to_owned()
    }

    fn errors(answer: &Value) -> Vec<String> {
        let map = answer["bulkErrorResults"].as_object().expect("an object");
        map.keys().cloned().collect()
    }

    #[tokio::test]
    async fn each_id_is_commanded_and_bad_ones_are_reported() {
        let api = TestApi::start().await;
        api.define("bulk_wf", "bulk_t").await;
        let a = api.start_workflow("bulk_wf", "c-a").await;
        let b = api.start_workflow("bulk_wf", "c-b").await;

        let ids = json!([a, b, "not-an-id", UNKNOWN, a]);
        let paused = api.ok("PUT", "/api/workflow/bulk/pause", Some(&ids)).await;
        assert_eq!(paused["bulkSuccessfulResults"], json!([a, b]), "{paused}");
        assert_eq!(
            errors(&paused),
            ["01234567-89ab-cdef-0123-456789ab0001", "not-an-id"]
        );
        let why = paused["bulkErrorResults"]["not-an-id"]
            .as_str()
            .expect("why");
        assert!(why.starts_with("invalid workflow id"), "{why}");
        assert!(paused["bulkErrorResults"][UNKNOWN]
            .as_str()
            .expect("why")
            .contains("found"));
        assert_eq!(status_of(&api, &a).await, "PAUSED");
        assert_eq!(status_of(&api, &b).await, "PAUSED");

        let both = json!([a, b]);
        let resumed = api
            .ok("PUT", "/api/workflow/bulk/resume", Some(&both))
            .await;
        assert_eq!(resumed["bulkSuccessfulResults"], both, "{resumed}");
        assert_eq!(status_of(&api, &a).await, "RUNNING");

        let path = "/api/workflow/bulk/terminate?reason=enough&triggerFailureWorkflow=false";
        let ended = api.ok("POST", path, Some(&json!([a]))).await;
        assert_eq!(ended["bulkSuccessfulResults"], json!([a]), "{ended}");
        let wf = api.workflow(&a).await;
        assert_eq!(
            (wf["status"].as_str(), wf["reasonForIncompletion"].as_str()),
            (Some("TERMINATED"), Some("enough"))
        );

        // b is running: retrying it is refused for b alone; a runs again.
        let retried = api
            .ok("POST", "/api/workflow/bulk/retry", Some(&both))
            .await;
        assert_eq!(retried["bulkSuccessfulResults"], json!([a]), "{retried}");
        assert_eq!(errors(&retried), std::slice::from_ref(&b));
        assert_eq!(status_of(&api, &a).await, "RUNNING");
        let ended = api
            .ok("POST", "/api/workflow/bulk/terminate", Some(&both))
            .await;
        assert_eq!(ended["bulkSuccessfulResults"], both, "{ended}");
        let path = "/api/workflow/bulk/restart?useLatestDefinitions=true";
        let restarted = api.ok("POST", path, Some(&json!([a]))).await;
        assert_eq!(
            restarted["bulkSuccessfulResults"],
            json!([a]),
            "{restarted}"
        );
        assert_eq!(status_of(&api, &a).await, "RUNNING");
        api.stop().await;
    }

    #[tokio::test]
    async fn retry_resumes_failed_workflows() {
        let api = TestApi::start().await;
        api.define("bulk_fail_wf", "bulk_fail_t").await;
        let id = api.start_workflow("bulk_fail_wf", "c").await;
        api.finish_task("bulk_fail_t", "FAILED").await;
        assert_eq!(status_of(&api, &id).await, "FAILED");
        let retried = api
            .ok("POST", "/api/workflow/bulk/retry", Some(&json!([id])))
            .await;
        assert_eq!(retried["bulkSuccessfulResults"], json!([id]), "{retried}");
        assert_eq!(status_of(&api, &id).await, "RUNNING");
        api.stop().await;
    }

    #[tokio::test]
    async fn bad_requests_are_refused_and_change_nothing() {
        let api = TestApi::start().await;
        api.define("bulk_bad_wf", "bulk_bad_t").await;
        let id = api.start_workflow("bulk_bad_wf", "c").await;
        let too_many: Vec<String> = (0..=BULK_WORKFLOWS_MAX).map(|_| id.clone()).collect();
        let long = "r".repeat(REASON_LEN_MAX + 1);
        let cases = [
            ("PUT", "/api/workflow/bulk/pause".to_owned(), json!([])),
            (
                "PUT",
                "/api/workflow/bulk/pause".to_owned(),
                json!(too_many),
            ),
            (
                "PUT",
                "/api/workflow/bulk/pause".to_owned(),
                json!({ "ids": [id] }),
            ),
            ("PUT", "/api/workflow/bulk/pause".to_owned(), json!([id, 5])),
            (
                "POST",
                "/api/workflow/bulk/restart?useLatestDefinitions=maybe".to_owned(),
                json!([id]),
            ),
            (
                "POST",
                format!("/api/workflow/bulk/terminate?reason={long}"),
                json!([id]),
            ),
            (
                "POST",
                "/api/workflow/bulk/terminate?triggerFailureWorkflow=2".to_owned(),
                json!([id]),
            ),
        ];
        for (method, path, body) in &cases {
            let (status, answer) = api.send(method, path, Some(body)).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{method} {path}: {answer}");
            assert_eq!(answer["code"], "BAD_REQUEST", "{answer}");
        }
        let (status, _) = api.send("PUT", "/api/workflow/bulk/pause", None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        let (status, _) = api
            .send("POST", "/api/workflow/bulk/pause", Some(&json!([id])))
            .await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
        let wf = api.workflow(&id).await;
        assert_eq!(wf["status"], "RUNNING", "{wf}");
        api.stop().await;
    }
}
