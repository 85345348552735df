//! Event handlers and their execution records, in Conductor's JSON shape: a handler listens on
//! `provider:queue`, and for every message whose `condition` holds it runs its `actions`; each action
//! run is recorded as an [`EventExecution`] named `messageId_actionIndex`.

use super::{EpochMs, Json};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Conductor's `EventHandler`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct EventHandler {
    pub name: String,
    /// `provider:queue`, split at the first colon (the queue may contain colons).
    pub event: String,
    /// Evaluated on the payload root; absent or empty = true.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub condition: Option<String>,
    /// How `condition` is evaluated; absent = `javascript`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evaluator_type: Option<String>,
    pub actions: Vec<Action>,
    /// Only active handlers consume; Conductor's default is false.
    pub active: bool,
    #[serde(flatten)]
    pub extra: Json,
}

impl EventHandler {
    /// The provider and queue of `event`, split at the first colon.
    pub fn provider_and_queue(&self) -> Option<(&str, &str)> {
        split_event(&self.event)
    }
}

/// Splits `provider:queue` at the first colon; `None` when either side is empty.
pub fn split_event(event: &str) -> Option<(&str, &str)> {
    let (provider, queue) = event.split_once(':')?;
    (!provider.is_empty() && !queue.is_empty()).then_some((provider, queue))
}

/// What an action does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionType {
    StartWorkflow,
    CompleteTask,
    FailTask,
    TerminateWorkflow,
    UpdateWorkflowVariables,
}

impl ActionType {
    pub fn name(self) -> &'static str {
        match self {
            ActionType::StartWorkflow => "start_workflow",
            ActionType::CompleteTask => "complete_task",
            ActionType::FailTask => "fail_task",
            ActionType::TerminateWorkflow => "terminate_workflow",
            ActionType::UpdateWorkflowVariables => "update_workflow_variables",
        }
    }
}

/// One action of a handler: its type names which of the detail fields applies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Action {
    pub action: ActionType,
    #[serde(
        rename = "start_workflow",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub start_workflow: Option<StartWorkflowAction>,
    #[serde(
        rename = "complete_task",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub complete_task: Option<TaskDetails>,
    #[serde(rename = "fail_task", default, skip_serializing_if = "Option::is_none")]
    pub fail_task: Option<TaskDetails>,
    #[serde(
        rename = "terminate_workflow",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub terminate_workflow: Option<TerminateWorkflowAction>,
    #[serde(
        rename = "update_workflow_variables",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub update_workflow_variables: Option<UpdateVariablesAction>,
    /// Parse string values of the payload that hold JSON objects or arrays before resolving.
    #[serde(rename = "expandInlineJSON", default)]
    pub expand_inline_json: bool,
}

/// `start_workflow`: which workflow, with what. String fields may hold `${path}` placeholders.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct StartWorkflowAction {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
    pub input: Json,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub task_to_domain: BTreeMap<String, String>,
}

/// `complete_task` / `fail_task`: the task, by `taskId` or by `workflowId` + `taskRefName`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct TaskDetails {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workflow_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_ref_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    pub output: Json,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason_for_incompletion: Option<String>,
}

/// `terminate_workflow`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct TerminateWorkflowAction {
    pub workflow_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub termination_reason: Option<String>,
}

/// `update_workflow_variables`: merged into the workflow's variables; with `appendArray`, a
/// variable that holds an array gets the new value appended instead of replaced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct UpdateVariablesAction {
    pub workflow_id: String,
    pub variables: Json,
    pub append_array: bool,
}

/// Where one action run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ExecutionStatus {
    /// Recorded before the action runs; a redelivery finds it and runs the action again with the
    /// same idempotency key.
    InProgress,
    Completed,
    /// Failed for good: a redelivery does not run it again.
    Failed,
    /// The handler's condition was false for the message.
    Skipped,
}

impl ExecutionStatus {
    /// A redelivered message does not run this action again.
    pub fn is_final(self) -> bool {
        !matches!(self, ExecutionStatus::InProgress)
    }
}

/// Conductor's `EventExecution`: one action of one handler for one message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventExecution {
    /// `messageId_actionIndex`.
    pub id: String,
    pub message_id: String,
    /// The handler's name.
    pub name: String,
    pub event: String,
    pub created: EpochMs,
    pub status: ExecutionStatus,
    pub action: ActionType,
    #[serde(default)]
    pub output: Json,
}

/// The record id of action `index` of a handler for a message: `messageId_actionIndex`, as in
/// Conductor. Each handler numbers its own actions, so a record is named by (handler, id).
pub fn execution_id(message_id: &str, index: usize) -> String {
    format!("{message_id}_{index}")
}
