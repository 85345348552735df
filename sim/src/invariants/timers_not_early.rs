//! Timers never fire early: a TIMED_OUT attempt had been running for at least
//! its response timeout or its per-attempt timeout, whichever is shorter, minus the clock skew the
//! run allows between two leaders (the attempt may start on one leader and time out on another).

use proto::model::TaskStatus;
use proto::record::WorkflowRecord;

pub fn check(record: &WorkflowRecord, skew_ms: u64) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    for t in record
        .workflow
        .tasks
        .iter()
        .filter(|t| t.status == TaskStatus::TimedOut && t.start_time > 0)
    {
        let def = crate::workload::task_defs()
            .into_iter()
            .find(|d| d.name == t.task_def_name);
        let Some(def) = def else { continue };
        let mut shortest = def.response_timeout_seconds;
        if def.timeout_seconds > 0 {
            shortest = shortest.min(def.timeout_seconds);
        }
        let earliest = t.start_time + super::ms(shortest * 1_000);
        if t.end_time + super::ms(2 * skew_ms) < earliest {
            out.push((
                "timers never fire early",
                format!(
                    "workflow {}: {} timed out at {}, before {} (started {}, timeout {} s)",
                    record.workflow.workflow_id,
                    t.reference_task_name,
                    t.end_time,
                    earliest,
                    t.start_time,
                    shortest
                ),
            ));
        }
    }
    out
}
