//! An acknowledged task result is never lost: when a worker's result was
//! acknowledged, the task is terminal in the final state, and either with that result or because
//! it had already ended before the result arrived (a late or duplicate result is absorbed, as in
//! Conductor). A task that ended *after* the acknowledgement with another outcome means the
//! acknowledged write was lost.

use super::Ending;
use proto::model::TaskStatus;

pub fn check(end: &Ending<'_>) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    for (task_id, workflow_id, status, acked_ms) in &end.facts.results {
        let Some(record) = end.records.get(workflow_id) else {
            continue; // reported by no_lost_workflow if the start was acknowledged
        };
        let Some(task) = record
            .workflow
            .tasks
            .iter()
            .find(|t| t.task_id.as_str() == task_id)
        else {
            out.push((
                "acknowledged result kept",
                format!("task {task_id} of {workflow_id} had a result acknowledged but is gone"),
            ));
            continue;
        };
        let expected: TaskStatus = (*status).into();
        if task.status == expected {
            continue;
        }
        // Wall times are node clocks: epoch + simulated time + skew.
        let acked_wall = super::ms(crate::EPOCH_MS + acked_ms + end.skew_ms);
        if !task.status.is_terminal() || task.end_time > acked_wall {
            out.push((
                "acknowledged result kept",
                format!(
                    "task {task_id} ({}) of {workflow_id}: {} acknowledged at {acked_ms} ms, but the task is {} (ended at {})",
                    task.reference_task_name,
                    expected.as_str(),
                    task.status.as_str(),
                    task.end_time
                ),
            ));
        }
    }
    out
}
