//! Timers fire on time once the faults heal (timers are never early, and late by at
//! most a bound after healing): an attempt that started after the cluster settled ends
//! by its response timeout or its per-attempt timeout, whichever is shorter, plus a bound. The
//! bound covers the timer actor's commit of the timeout, not an election: no fault happens any
//! more. A worker that answers after the deadline must find the attempt already TIMED_OUT, so an
//! attempt of any status that ended later than the deadline, or is still open past it, had its
//! timer fire late (or not at all).

use proto::record::WorkflowRecord;

/// How late a timer may fire in a healed cluster, milliseconds.
pub const LATE_BOUND_MS: u64 = 1_000;

pub fn check(
    record: &WorkflowRecord,
    settled_wall_ms: u64,
    now_wall_ms: u64,
) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    let defs = crate::workload::task_defs();
    for t in record
        .workflow
        .tasks
        .iter()
        .filter(|t| t.start_time >= super::ms(settled_wall_ms))
    {
        let Some(def) = defs.iter().find(|d| d.name == t.task_def_name) else {
            continue;
        };
        let mut shortest = def.response_timeout_seconds;
        if def.timeout_seconds > 0 {
            shortest = shortest.min(def.timeout_seconds);
        }
        let deadline = t.start_time + super::ms(shortest * 1_000 + LATE_BOUND_MS);
        let late = if t.status.is_terminal() {
            t.end_time > deadline
        } else {
            super::ms(now_wall_ms) > deadline
        };
        if late {
            out.push((
                "timers fire on time once faults heal",
                format!(
                    "workflow {}: {} started at {} with a {} s timeout is {} at {} (deadline {})",
                    record.workflow.workflow_id,
                    t.reference_task_name,
                    t.start_time,
                    shortest,
                    t.status.as_str(),
                    if t.status.is_terminal() {
                        t.end_time
                    } else {
                        super::ms(now_wall_ms)
                    },
                    deadline
                ),
            ));
        }
    }
    out
}
