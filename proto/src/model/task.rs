//! `Task`: one attempt of one workflow task, as Conductor reports it.

use super::{EpochMs, Json, TaskStatus, WorkflowTask};
use crate::ids::{TaskId, WorkflowId};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    /// For SIMPLE tasks the task definition's name (what workers poll for); else the system type.
    pub task_type: String,
    pub status: TaskStatus,
    pub input_data: Json,
    pub reference_task_name: String,
    /// Which attempt this is: 0 for the first, 1 for the first retry, ...
    pub retry_count: u32,
    /// Position of this task in the workflow's task list, from 1.
    pub seq: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
    pub poll_count: u32,
    pub task_def_name: String,
    /// When the attempt became (or becomes) eligible to run; a retry's is its failure time plus delay.
    pub scheduled_time: EpochMs,
    /// When the first worker polled it; 0 until then.
    pub start_time: EpochMs,
    pub end_time: EpochMs,
    pub update_time: EpochMs,
    pub start_delay_in_seconds: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retried_task_id: Option<TaskId>,
    /// True once a retry of this attempt was scheduled.
    pub retried: bool,
    /// True once the decider acted on this task's terminal status (scheduled what follows).
    pub executed: bool,
    pub callback_from_worker: bool,
    pub response_timeout_seconds: u64,
    pub workflow_instance_id: WorkflowId,
    pub workflow_type: String,
    pub task_id: TaskId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason_for_incompletion: Option<String>,
    pub callback_after_seconds: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_id: Option<String>,
    pub output_data: Json,
    /// Left out of a stored record when its workflow definition holds it (see
    /// `record::compact`); always present over the API.
    #[serde(
        default,
        skip_serializing_if = "crate::model::omit::omit_workflow_task"
    )]
    pub workflow_task: WorkflowTask,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    pub workflow_priority: i32,
    /// DO_WHILE iteration this task belongs to (0 outside loops).
    pub iteration: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_workflow_id: Option<String>,
    /// A SUB_WORKFLOW task put back IN_PROGRESS by a retry with `resumeSubworkflowTasks`: true
    /// until its child, the same workflow, is reported retried (Conductor's field).
    #[serde(default)]
    pub subworkflow_changed: bool,
    /// Baton: scheduled time of the first attempt, carried across retries for totalTimeoutSeconds.
    pub first_scheduled_time: EpochMs,
    /// WAIT with `duration` or `until`: when it completes by itself (epoch ms; 0 = waits for an
    /// outside completion). Fixed when the task is scheduled.
    #[serde(default)]
    pub wait_timeout: EpochMs,
    /// The task definition's rate limit when the task was scheduled (Conductor copies both onto
    /// the task); `None` when it sets none, or while the cluster is below
    /// [`crate::version::TASK_RATE_LIMITS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit_per_frequency: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit_frequency_in_seconds: Option<u32>,
}

impl Task {
    /// The task definition in force for this attempt (inlined at workflow start).
    pub fn task_def(&self) -> Option<&super::TaskDef> {
        self.workflow_task.task_definition.as_ref()
    }
}

/// What a worker reports about a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct TaskResult {
    pub workflow_instance_id: String,
    pub task_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason_for_incompletion: Option<String>,
    pub callback_after_seconds: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker_id: Option<String>,
    pub status: TaskResultStatus,
    pub output_data: Json,
    pub logs: Vec<TaskExecLog>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sub_workflow_id: Option<String>,
    pub extend_lease: bool,
}

/// The statuses a worker may report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TaskResultStatus {
    #[default]
    InProgress,
    Failed,
    FailedWithTerminalError,
    Completed,
}

impl From<TaskResultStatus> for TaskStatus {
    fn from(s: TaskResultStatus) -> Self {
        match s {
            TaskResultStatus::InProgress => TaskStatus::InProgress,
            TaskResultStatus::Failed => TaskStatus::Failed,
            TaskResultStatus::FailedWithTerminalError => TaskStatus::FailedWithTerminalError,
            TaskResultStatus::Completed => TaskStatus::Completed,
        }
    }
}

/// One log line a worker attached to a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct TaskExecLog {
    pub log: String,
    pub task_id: String,
    pub created_time: EpochMs,
}
