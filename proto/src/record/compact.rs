//! The stored form of a [`WorkflowRecord`]: a task's `workflowTask` is left out when the record's
//! own workflow definition holds an equal task under the task's reference name, and put back from
//! there when the record is decoded. The copies are most of a record (a fork's copy holds all its
//! branches), and every step writes the record through Raft and into the state tree, so leaving
//! them out shrinks every write. The Conductor view (`Workflow`, `Task` over the API) is unchanged:
//! only a record's encoding omits them.
//!
//! serde offers no context to a field's `skip_serializing_if`, so while a record serialises, the
//! addresses of the task definitions it may omit sit in a thread-local set that
//! [`crate::model::omit::omit_workflow_task`] consults. The addresses only identify fields of the record being
//! written; they never reach the output, which stays a function of the record alone.

use super::WorkflowRecord;
use crate::model::{Task, TaskExecLog, Workflow, WorkflowDef, WorkflowTask};
use serde::{Deserialize, Serialize, Serializer};

use std::collections::{BTreeMap, HashMap, HashSet};

/// The definition's tasks by reference name (the first of a name, depth first): the one lookup
/// both directions use, so what is left out is exactly what comes back.
fn by_reference(def: &WorkflowDef) -> HashMap<&str, &WorkflowTask> {
    let mut map = HashMap::new();
    for task in def.all_tasks() {
        map.entry(task.task_reference_name.as_str()).or_insert(task);
    }
    map
}

/// Puts back the `workflowTask` of each of `tasks` that an encoding left out, from `def`.
pub(super) fn restore(def: &WorkflowDef, tasks: &mut [Task]) {
    let defs = by_reference(def);
    // A definition task always has a reference name, so an empty one was left out.
    for task in tasks {
        if task.workflow_task.task_reference_name.is_empty() {
            if let Some(definition) = defs.get(task.reference_task_name.as_str()) {
                task.workflow_task = (*definition).clone();
            }
        }
    }
}

/// Installs the omitted set of `workflow` for the lifetime of the guard (restoring any set it
/// replaced).
pub(super) struct Omitting(Option<HashSet<usize>>);

impl Omitting {
    pub(super) fn install(workflow: &Workflow) -> Omitting {
        let defs = by_reference(&workflow.workflow_definition);
        let set = workflow
            .tasks
            .iter()
            .filter(|t| {
                defs.get(t.reference_task_name.as_str())
                    .is_some_and(|d| **d == t.workflow_task)
            })
            .map(|t| &t.workflow_task as *const WorkflowTask as usize)
            .collect();
        Omitting(crate::model::omit::set_omitted(Some(set)))
    }
}

impl Drop for Omitting {
    fn drop(&mut self) {
        crate::model::omit::set_omitted(self.0.take());
    }
}

/// The fields of a record as stored (borrowed for writing).
#[derive(Serialize)]
struct Fields<'a> {
    version: u64,
    workflow: &'a Workflow,
    task_logs: &'a BTreeMap<String, Vec<TaskExecLog>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    applied: &'a Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status_notice: &'a Option<super::StatusNotice>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lifecycle: &'a Option<super::LifecycleOutbox>,
}

impl Serialize for WorkflowRecord {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let _omitting = Omitting::install(&self.workflow);
        Fields {
            version: self.version,
            workflow: &self.workflow,
            task_logs: &self.task_logs,
            applied: &self.applied,
            status_notice: &self.status_notice,
            lifecycle: &self.lifecycle,
        }
        .serialize(serializer)
    }
}

/// The fields of a record as stored (owned for reading).
#[derive(Deserialize)]
pub(super) struct Stored {
    version: u64,
    workflow: Workflow,
    #[serde(default)]
    task_logs: BTreeMap<String, Vec<TaskExecLog>>,
    #[serde(default)]
    applied: Vec<String>,
    #[serde(default)]
    status_notice: Option<super::StatusNotice>,
    #[serde(default)]
    lifecycle: Option<super::LifecycleOutbox>,
}

impl From<Stored> for WorkflowRecord {
    fn from(stored: Stored) -> Self {
        let mut workflow = stored.workflow;
        restore(&workflow.workflow_definition, &mut workflow.tasks);
        WorkflowRecord {
            version: stored.version,
            workflow,
            task_logs: stored.task_logs,
            applied: stored.applied,
            status_notice: stored.status_notice,
            lifecycle: stored.lifecycle,
        }
    }
}
