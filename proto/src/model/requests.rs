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
    /// Baton: at most one run per (workflow name, key); a second start with the key (a client's retry
    /// after a lost answer, on any node) creates nothing and returns the first run's id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
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
