//! Attempts: for every task reference at most one attempt is not terminal; an
//! attempt that was retried ended unsuccessfully and never comes back to life (a timed-out or
//! failed attempt that later completes is the fencing failure Kleppmann describes for leases,
//! "How to do distributed locking", 2016); a reference has at most retryCount + 1 attempts; and
//! attempt k+1 is never scheduled before attempt k ended, nor offered to a worker before attempt k
//! ended plus its backoff (Conductor's FIXED / LINEAR_BACKOFF / EXPONENTIAL_BACKOFF with
//! maxRetryDelaySeconds, recomputed here from the definition as an independent oracle; poll and end
//! times may come from two leaders' clocks, so twice the run's skew is allowed).

use proto::model::{Task, TaskStatus};
use proto::record::WorkflowRecord;
use std::collections::BTreeMap;

/// Attempts of one (reference, iteration), in order.
fn by_ref(record: &WorkflowRecord) -> BTreeMap<(&str, u32), Vec<&Task>> {
    let mut refs: BTreeMap<(&str, u32), Vec<&Task>> = BTreeMap::new();
    for t in &record.workflow.tasks {
        refs.entry((t.reference_task_name.as_str(), t.iteration))
            .or_default()
            .push(t);
    }
    refs
}

/// Checks that hold at every instant.
pub fn check_live(record: &WorkflowRecord) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    let id = &record.workflow.workflow_id;
    for ((reference, _), attempts) in by_ref(record) {
        let open = attempts.iter().filter(|t| !t.status.is_terminal()).count();
        if open > 1 {
            out.push((
                "at most one open attempt per task",
                format!("workflow {id}: {open} attempts of {reference} are open"),
            ));
        }
        for t in attempts.iter().filter(|t| t.retried) {
            if !matches!(
                t.status,
                TaskStatus::Failed | TaskStatus::TimedOut | TaskStatus::Canceled
            ) {
                out.push((
                    "a retried attempt stays ended",
                    format!(
                        "workflow {id}: attempt {} of {reference} was retried but is {}",
                        t.retry_count,
                        t.status.as_str()
                    ),
                ));
            }
        }
    }
    out
}

/// Conductor's backoff before retry number `retry_count + 1`, milliseconds (before jitter).
fn backoff_ms(def: &proto::model::TaskDef, retry_count: u32) -> u64 {
    use proto::model::RetryLogic;
    let d = def.retry_delay_seconds;
    let s = match def.retry_logic {
        RetryLogic::Fixed => d,
        RetryLogic::LinearBackoff => {
            d * u64::from(def.backoff_scale_factor.max(1)) * (u64::from(retry_count) + 1)
        }
        RetryLogic::ExponentialBackoff => d * 2u64.saturating_pow(retry_count),
    };
    let s = if def.max_retry_delay_seconds > 0 {
        s.min(def.max_retry_delay_seconds)
    } else {
        s
    };
    s * 1_000
}

/// Checks on the final record.
pub fn check_final(record: &WorkflowRecord, skew_ms: u64) -> Vec<(&'static str, String)> {
    let mut out = check_live(record);
    let id = &record.workflow.workflow_id;
    for ((reference, _), attempts) in by_ref(record) {
        let Some(first) = attempts.first() else {
            continue;
        };
        if first.task_type != proto::model::task_type::SIMPLE {
            continue;
        }
        let retries = first
            .workflow_task
            .retry_count
            .or_else(|| {
                first
                    .workflow_task
                    .task_definition
                    .as_ref()
                    .map(|d| d.retry_count)
            })
            .unwrap_or_else(|| crate::workload::retry_count(&first.task_def_name));
        if attempts.len() as u32 > retries + 1 {
            out.push((
                "attempts <= retryCount + 1",
                format!(
                    "workflow {id}: {} attempts of {reference}, retryCount {retries}",
                    attempts.len()
                ),
            ));
        }
        let def = crate::workload::task_defs()
            .into_iter()
            .find(|d| d.name == first.task_def_name);
        for pair in attempts.windows(2) {
            let (prev, next) = (pair[0], pair[1]);
            if let (Some(def), true) = (&def, prev.end_time > 0 && next.start_time > 0) {
                let due = prev.end_time + super::ms(backoff_ms(def, prev.retry_count));
                if next.start_time + super::ms(2 * skew_ms) < due {
                    out.push((
                        "a retry is never offered before its backoff",
                        format!(
                            "workflow {id}: {reference} attempt {} polled at {}, before {due} (attempt {} ended at {})",
                            next.retry_count, next.start_time, prev.retry_count, prev.end_time
                        ),
                    ));
                }
            }
            if prev.end_time > 0 && next.scheduled_time + 1 < prev.end_time {
                out.push((
                    "a retry is never scheduled before its predecessor ended",
                    format!(
                        "workflow {id}: {reference} attempt {} scheduled at {} but attempt {} ended at {}",
                        next.retry_count, next.scheduled_time, prev.retry_count, prev.end_time
                    ),
                ));
            }
        }
    }
    out
}
