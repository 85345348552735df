//! `Workflow`: one workflow instance with its tasks, as Conductor reports it.

use super::{EpochMs, Json, Task, WorkflowDef, WorkflowStatus};
use crate::ids::WorkflowId;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Workflow {
    pub workflow_id: WorkflowId,
    pub workflow_name: String,
    pub workflow_version: u32,
    pub status: WorkflowStatus,
    pub create_time: EpochMs,
    pub update_time: EpochMs,
    pub start_time: EpochMs,
    pub end_time: EpochMs,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_workflow_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_workflow_task_id: Option<String>,
    /// Left out of a record patch's head (see `record::patch`); always present
    /// elsewhere.
    #[serde(default, skip_serializing_if = "crate::model::omit::head_only")]
    pub tasks: Vec<Task>,
    pub input: Json,
    pub output: Json,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub re_run_from_workflow_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason_for_incompletion: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<String>,
    pub task_to_domain: BTreeMap<String, String>,
    /// Reference names of tasks whose failure the workflow saw (sorted, no duplicates).
    pub failed_reference_task_names: Vec<String>,
    pub failed_task_names: Vec<String>,
    /// Left out of a record patch's head, like `tasks`. Shared, not copied, by every copy of the
    /// workflow (a decision's working copy, the actor's cached record, a watcher's answer): a
    /// definition does not change while a run uses it.
    #[serde(default, skip_serializing_if = "crate::model::omit::head_only")]
    pub workflow_definition: Arc<WorkflowDef>,
    pub priority: i32,
    pub variables: Json,
    pub last_retried_time: EpochMs,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_task_id: Option<String>,
    /// A Serverless Workflow instance's progress (see [`super::dsl`]); `None` for Conductor's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dsl: Option<Box<super::dsl::DslRun>>,
}

impl Workflow {
    pub fn task(&self, id: &crate::TaskId) -> Option<&Task> {
        self.tasks.iter().find(|t| &t.task_id == id)
    }
    /// The latest attempt of a reference name.
    pub fn task_by_ref(&self, reference: &str) -> Option<&Task> {
        self.tasks
            .iter()
            .rev()
            .find(|t| t.reference_task_name == reference)
    }
}
