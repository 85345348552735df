//! Request and response bodies of Conductor's REST API.

use super::{EpochMs, Json, WorkflowDef, WorkflowStatus};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct StartWorkflowRequest {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
    pub input: Json,
    pub task_to_domain: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workflow_def: Option<WorkflowDef>,
    pub priority: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_by: Option<String>,
    /// Orkes: a key naming this start; what a second start with the same key (for the same
    /// workflow name) does is `idempotency_strategy`'s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// Orkes: what a start whose key already started a run does. Without one, the start answers
    /// the key's first run (a client's retry after a lost answer, on any node, creates nothing).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idempotency_strategy: Option<IdempotencyStrategy>,
}

/// What a start does when its idempotency key already started a run (Orkes' strategies).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum IdempotencyStrategy {
    /// Refused (409) whatever state that run is in.
    Fail,
    /// Answers the newest run's id and starts nothing.
    ReturnExisting,
    /// Refused (409) while the newest run is RUNNING or PAUSED; once it ended, a new run starts.
    FailOnRunning,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct RerunWorkflowRequest {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub re_run_from_workflow_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workflow_input: Option<Json>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub re_run_from_task_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_input: Option<Json>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct SkipTaskRequest {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_input: Option<Json>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_output: Option<Json>,
}

/// Conductor's error body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct ErrorResponse {
    pub status: u16,
    pub code: String,
    pub message: String,
    pub instance: String,
    pub retryable: bool,
}

/// The search response shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct SearchResult<T> {
    pub total_hits: u64,
    pub results: Vec<T>,
}

/// A row of a workflow search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowSummary {
    pub workflow_type: String,
    pub version: u32,
    pub workflow_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
    pub start_time: String,
    pub update_time: String,
    pub end_time: String,
    pub status: WorkflowStatus,
    pub input: String,
    pub output: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason_for_incompletion: Option<String>,
    pub execution_time: EpochMs,
    pub failed_reference_task_names: String,
    pub priority: i32,
}

/// Formats epoch milliseconds as ISO-8601 UTC, as Conductor's summaries show times.
pub fn iso8601(ms: i64) -> String {
    if ms <= 0 {
        return String::new();
    }
    let secs = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

impl WorkflowSummary {
    /// The summary of `wf`, as a search answers it and a status listener publishes it.
    pub fn of(wf: &super::Workflow) -> Self {
        WorkflowSummary {
            workflow_type: wf.workflow_name.clone(),
            version: wf.workflow_version,
            workflow_id: wf.workflow_id.to_string(),
            correlation_id: wf.correlation_id.clone(),
            start_time: iso8601(wf.start_time),
            update_time: iso8601(wf.update_time),
            end_time: iso8601(wf.end_time),
            status: wf.status,
            input: serde_json::to_string(&wf.input).unwrap_or_default(),
            output: serde_json::to_string(&wf.output).unwrap_or_default(),
            reason_for_incompletion: wf.reason_for_incompletion.clone(),
            execution_time: if wf.end_time > 0 {
                wf.end_time - wf.start_time
            } else {
                0
            },
            failed_reference_task_names: wf.failed_reference_task_names.join(","),
            priority: wf.priority,
        }
    }
}
