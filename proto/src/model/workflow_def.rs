//! `WorkflowDef` and `WorkflowTask`: the blueprint of a workflow.

use super::{EpochMs, Json, TaskDef};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Workflow-level timeout policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum WorkflowTimeoutPolicy {
    #[default]
    TimeOutWf,
    AlertOnly,
}

/// How a JOIN evaluates (Baton and Orkes): `ASYNC` as its children end, `SYNC` at once when reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum JoinMode {
    #[default]
    Async,
    Sync,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WorkflowDef {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub version: u32,
    pub tasks: Vec<WorkflowTask>,
    pub input_parameters: Vec<String>,
    pub output_parameters: Json,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_workflow: Option<String>,
    pub schema_version: u32,
    pub restartable: bool,
    pub workflow_status_listener_enabled: bool,
    /// Orkes: where a workflow with `workflowStatusListenerEnabled` publishes its end,
    /// `provider:queue` as an EVENT task's sink.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workflow_status_listener_sink: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner_email: Option<String>,
    pub timeout_policy: WorkflowTimeoutPolicy,
    pub timeout_seconds: u64,
    pub variables: Json,
    pub input_template: Json,
    /// Orkes: the schema a start's input must match when `enforce_schema` is set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<super::SchemaRef>,
    /// Orkes: the schema a completed workflow's output must match when `enforce_schema` is set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<super::SchemaRef>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub enforce_schema: bool,
    pub create_time: EpochMs,
    pub update_time: EpochMs,
    /// A Serverless Workflow instance's document (its JSON form): such a workflow runs the
    /// document, not `tasks` (see `engine::dsl`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dsl: Option<std::sync::Arc<serde_json::Value>>,
    #[serde(flatten)]
    pub extra: Json,
}

impl Default for WorkflowDef {
    fn default() -> Self {
        Self {
            name: String::new(),
            description: None,
            version: 1,
            tasks: Vec::new(),
            input_parameters: Vec::new(),
            output_parameters: Json::new(),
            failure_workflow: None,
            schema_version: 2,
            restartable: true,
            workflow_status_listener_enabled: false,
            workflow_status_listener_sink: None,
            owner_email: None,
            timeout_policy: WorkflowTimeoutPolicy::TimeOutWf,
            timeout_seconds: 0,
            variables: Json::new(),
            input_template: Json::new(),
            input_schema: None,
            output_schema: None,
            enforce_schema: false,
            create_time: 0,
            update_time: 0,
            dsl: None,
            extra: Json::new(),
        }
    }
}

impl WorkflowDef {
    /// Gives a task definition inlined without a name its task's name, as Conductor does.
    pub fn name_inline_task_defs(&mut self) {
        fn walk(list: &mut [WorkflowTask]) {
            for t in list {
                if let Some(d) = t.task_definition.as_mut().filter(|d| d.name.is_empty()) {
                    d.name = t.name.clone();
                }
                t.fork_tasks.iter_mut().for_each(|b| walk(b));
                t.decision_cases.values_mut().for_each(|c| walk(c));
                walk(&mut t.default_case);
                walk(&mut t.loop_over);
            }
        }
        walk(&mut self.tasks);
    }

    /// Every task of the definition, depth first through forks, switch cases and loops.
    pub fn all_tasks(&self) -> Vec<&WorkflowTask> {
        let mut out = Vec::new();
        fn walk<'a>(list: &'a [WorkflowTask], out: &mut Vec<&'a WorkflowTask>) {
            for t in list {
                out.push(t);
                for branch in &t.fork_tasks {
                    walk(branch, out);
                }
                for case in t.decision_cases.values() {
                    walk(case, out);
                }
                walk(&t.default_case, out);
                walk(&t.loop_over, out);
            }
        }
        walk(&self.tasks, &mut out);
        out
    }
}

/// One task of a workflow definition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WorkflowTask {
    pub name: String,
    pub task_reference_name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub input_parameters: Json,
    /// The task type: SIMPLE (a worker task), FORK_JOIN, JOIN, SWITCH, DECISION, ... Stored as
    /// Conductor spells it so unknown types are reported by name.
    #[serde(rename = "type")]
    pub task_type: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub case_value_param: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub case_expression: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evaluator_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expression: Option<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub decision_cases: BTreeMap<String, Vec<WorkflowTask>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub default_case: Vec<WorkflowTask>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fork_tasks: Vec<Vec<WorkflowTask>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub join_on: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub join_mode: Option<JoinMode>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loop_condition: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub loop_over: Vec<WorkflowTask>,
    pub start_delay: u64,
    pub optional: bool,
    pub permissive: bool,
    pub async_complete: bool,
    /// Overrides the task definition's retryCount when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_count: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sink: Option<String>,
    /// DYNAMIC: the input parameter that names the task to run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dynamic_task_name_param: Option<String>,
    /// FORK_JOIN_DYNAMIC: the input parameter holding the list of tasks to fork.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dynamic_fork_tasks_param: Option<String>,
    /// FORK_JOIN_DYNAMIC: the input parameter holding each forked task's input, by reference.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dynamic_fork_tasks_input_param_name: Option<String>,
    /// FORK_JOIN_DYNAMIC, Conductor's oldest form: the input parameter holding
    /// `{"dynamicTasks": [{taskName, taskReferenceName, type, input}]}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dynamic_fork_join_tasks_param: Option<String>,
    /// SUB_WORKFLOW: the workflow to start as the child.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sub_workflow_param: Option<SubWorkflowParams>,
    /// EXCLUSIVE_JOIN: the references whose output it takes when none of `joinOn` ran.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub default_exclusive_join_task: Vec<String>,
    /// The task definition, inlined in the workflow definition or filled in at workflow start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_definition: Option<TaskDef>,
    #[serde(flatten)]
    pub extra: Json,
}

impl Default for WorkflowTask {
    fn default() -> Self {
        Self {
            name: String::new(),
            task_reference_name: String::new(),
            description: None,
            input_parameters: Json::new(),
            task_type: task_type::SIMPLE.to_owned(),
            case_value_param: None,
            case_expression: None,
            evaluator_type: None,
            expression: None,
            decision_cases: BTreeMap::new(),
            default_case: Vec::new(),
            fork_tasks: Vec::new(),
            join_on: Vec::new(),
            join_mode: None,
            loop_condition: None,
            loop_over: Vec::new(),
            start_delay: 0,
            optional: false,
            permissive: false,
            async_complete: false,
            retry_count: None,
            sink: None,
            dynamic_task_name_param: None,
            dynamic_fork_tasks_param: None,
            dynamic_fork_tasks_input_param_name: None,
            dynamic_fork_join_tasks_param: None,
            sub_workflow_param: None,
            default_exclusive_join_task: Vec::new(),
            task_definition: None,
            extra: Json::new(),
        }
    }
}

/// A SUB_WORKFLOW's child: a registered workflow by name (its latest version unless `version`
/// is given), or a whole definition inline. `name`, `version` and `workflowDefinition` may be
/// `${…}` expressions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct SubWorkflowParams {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub task_to_domain: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workflow_definition: Option<serde_json::Value>,
    #[serde(flatten)]
    pub extra: Json,
}

/// The key of an HTTP task's input that asks for an at-most-once call (`true`): a Baton
/// extension (see `engine::work`).
pub const HTTP_AT_MOST_ONCE: &str = "atMostOnce";

/// The key of an HTTP task's `http_request` that, with `oauth2`, asks for the access token the
/// call sent in the task's output (`true`): a Baton extension (see `engine::work`).
pub const HTTP_SHOW_TOKEN: &str = "showToken";

/// Conductor's task type names.
pub mod task_type {
    pub const SIMPLE: &str = "SIMPLE";
    pub const FORK_JOIN: &str = "FORK_JOIN";
    pub const JOIN: &str = "JOIN";
    pub const SWITCH: &str = "SWITCH";
    pub const DECISION: &str = "DECISION";
    pub const DO_WHILE: &str = "DO_WHILE";
    pub const TERMINATE: &str = "TERMINATE";
    pub const SET_VARIABLE: &str = "SET_VARIABLE";
    pub const WAIT: &str = "WAIT";
    pub const SUB_WORKFLOW: &str = "SUB_WORKFLOW";
    pub const FORK_JOIN_DYNAMIC: &str = "FORK_JOIN_DYNAMIC";
    pub const INLINE: &str = "INLINE";
    pub const JSON_JQ_TRANSFORM: &str = "JSON_JQ_TRANSFORM";
    pub const EVENT: &str = "EVENT";
    pub const HTTP: &str = "HTTP";
    pub const HUMAN: &str = "HUMAN";
    pub const EXCLUSIVE_JOIN: &str = "EXCLUSIVE_JOIN";
    pub const LAMBDA: &str = "LAMBDA";
    pub const DYNAMIC: &str = "DYNAMIC";
    pub const START_WORKFLOW: &str = "START_WORKFLOW";
}
