//! Loops (Conductor's DO_WHILE): a loop at iteration N ran iterations 1..=N, each once, in
//! order: no task of an iteration was scheduled before every task of the one before ended.
//! Times come from the clocks of possibly different leaders, so the order allows twice the
//! run's clock skew.

use proto::model::{task_type, Task};
use proto::record::WorkflowRecord;
use std::collections::BTreeSet;

pub fn check(record: &WorkflowRecord, skew_ms: u64) -> Vec<(&'static str, String)> {
    let wf = &record.workflow;
    wf.tasks
        .iter()
        .filter(|t| t.task_type == task_type::DO_WHILE)
        .filter_map(|dw| {
            let body: BTreeSet<&str> = dw
                .workflow_task
                .loop_over
                .iter()
                .map(|t| t.task_reference_name.as_str())
                .collect();
            let tasks: Vec<&Task> = wf
                .tasks
                .iter()
                .filter(|t| {
                    t.iteration > 0 && body.contains(t.workflow_task.task_reference_name.as_str())
                })
                .collect();
            out_of_order(dw, &tasks, super::ms(2 * skew_ms)).map(|why| {
                (
                    "loop iterations run in order",
                    format!(
                        "workflow {}: loop {}: {why}",
                        wf.workflow_id, dw.reference_task_name
                    ),
                )
            })
        })
        .collect()
}

/// Why the loop's `tasks` are not iterations 1..=N in order, if they are not.
fn out_of_order(dw: &Task, tasks: &[&Task], slack: i64) -> Option<String> {
    let seen: BTreeSet<u32> = tasks.iter().map(|t| t.iteration).collect();
    let want: BTreeSet<u32> = (1..=dw.iteration).collect();
    if seen != want {
        return Some(format!(
            "iterations {seen:?}, at iteration {}",
            dw.iteration
        ));
    }
    for n in 1..dw.iteration {
        let ended = tasks
            .iter()
            .filter(|t| t.iteration == n)
            .map(|t| t.end_time)
            .max()?;
        let next = tasks
            .iter()
            .filter(|t| t.iteration == n + 1)
            .map(|t| t.scheduled_time)
            .min()?;
        if next + slack < ended {
            return Some(format!(
                "iteration {} scheduled at {next} before {n} ended at {ended}",
                n + 1
            ));
        }
    }
    None
}
