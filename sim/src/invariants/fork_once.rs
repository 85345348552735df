//! Fork: each reference of a workflow (each fork branch's tasks included) is
//! scheduled once per iteration; every further task of that reference is a retry of the previous
//! attempt, never a second copy created by a replay or a failover.

use proto::record::WorkflowRecord;
use std::collections::BTreeMap;

pub fn check(record: &WorkflowRecord) -> Vec<(&'static str, String)> {
    let mut firsts: BTreeMap<(&str, u32), usize> = BTreeMap::new();
    for t in &record.workflow.tasks {
        if t.retried_task_id.is_none() {
            *firsts
                .entry((t.reference_task_name.as_str(), t.iteration))
                .or_default() += 1;
        }
    }
    firsts
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|((reference, iteration), n)| {
            (
                "each task scheduled once",
                format!(
                    "workflow {}: {reference} (iteration {iteration}) was scheduled {n} times",
                    record.workflow.workflow_id
                ),
            )
        })
        .collect()
}
