//! Join (Conductor's JOIN semantics, conformance fixtures): a JOIN completes only
//! after every task in its joinOn is terminal, its output holds each joinOn task's output, and a
//! JOIN reference completes once. End times come from the clocks of possibly different leaders, so
//! comparing them allows twice the run's clock skew; the output and status checks need no clock.

use proto::model::TaskStatus;
use proto::record::WorkflowRecord;

pub fn check(record: &WorkflowRecord, skew_ms: u64) -> Vec<(&'static str, String)> {
    let slack = super::ms(2 * skew_ms);
    let mut out = Vec::new();
    let wf = &record.workflow;
    for join in wf
        .tasks
        .iter()
        .filter(|t| t.task_type == proto::model::task_type::JOIN)
    {
        let same = wf
            .tasks
            .iter()
            .filter(|t| {
                t.reference_task_name == join.reference_task_name && t.iteration == join.iteration
            })
            .count();
        if same > 1 {
            out.push((
                "a join completes once",
                format!(
                    "workflow {}: {same} tasks for join {}",
                    wf.workflow_id, join.reference_task_name
                ),
            ));
        }
        if !matches!(
            join.status,
            TaskStatus::Completed | TaskStatus::CompletedWithErrors
        ) {
            continue;
        }
        for on in &join.workflow_task.join_on {
            if !join.output_data.contains_key(on) {
                out.push((
                    "a join waits for all of its joinOn",
                    format!(
                        "workflow {}: join {} completed without the output of {on}",
                        wf.workflow_id, join.reference_task_name
                    ),
                ));
            }
            // The last attempt of each joined reference in the same iteration.
            let last = wf
                .tasks
                .iter()
                .rfind(|t| &t.reference_task_name == on && t.iteration == join.iteration);
            match last {
                Some(t) if t.status.is_terminal() && t.end_time <= join.end_time + slack => {}
                Some(t) => out.push((
                    "a join waits for all of its joinOn",
                    format!(
                        "workflow {}: join {} completed at {} while {on} was {} (ended {})",
                        wf.workflow_id,
                        join.reference_task_name,
                        join.end_time,
                        t.status.as_str(),
                        t.end_time
                    ),
                )),
                None => out.push((
                    "a join waits for all of its joinOn",
                    format!(
                        "workflow {}: join {} completed but {on} was never scheduled",
                        wf.workflow_id, join.reference_task_name
                    ),
                )),
            }
        }
    }
    out
}
