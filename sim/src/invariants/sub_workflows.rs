//! Sub-workflows (Conductor's SUB_WORKFLOW; DESIGN's cross-partition outbox): a parent task
//! attempt has at most one child, however often its leader died or repeated the start, and a
//! parent task that COMPLETED did so because its child COMPLETED.

use proto::model::{task_type, TaskStatus, WorkflowStatus};
use proto::record::WorkflowRecord;
use std::collections::BTreeMap;

pub fn check(records: &BTreeMap<String, WorkflowRecord>) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    let mut children: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for r in records.values() {
        if let Some(task) = r.workflow.parent_workflow_task_id.as_deref() {
            children
                .entry(task)
                .or_default()
                .push(r.workflow.workflow_id.as_str());
        }
    }
    for (task, kids) in children.iter().filter(|(_, kids)| kids.len() > 1) {
        out.push((
            "one child per sub-workflow attempt",
            format!("task {task} has {} children: {kids:?}", kids.len()),
        ));
    }
    for r in records.values() {
        out.extend(completed_with_child(r, records));
    }
    out
}

/// Every COMPLETED SUB_WORKFLOW task of `r` names a child that COMPLETED.
fn completed_with_child(
    r: &WorkflowRecord,
    records: &BTreeMap<String, WorkflowRecord>,
) -> Vec<(&'static str, String)> {
    r.workflow
        .tasks
        .iter()
        .filter(|t| t.task_type == task_type::SUB_WORKFLOW && t.status == TaskStatus::Completed)
        .filter_map(|t| {
            let child = t.sub_workflow_id.as_deref().unwrap_or_default();
            let status = records.get(child).map(|c| c.workflow.status);
            (status != Some(WorkflowStatus::Completed)).then(|| {
                (
                    "parent and child end consistently",
                    format!(
                        "workflow {}: task {} COMPLETED but its child {child} is {status:?}",
                        r.workflow.workflow_id, t.task_id
                    ),
                )
            })
        })
        .collect()
}
