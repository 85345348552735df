//! No lost workflow: every workflow whose start was acknowledged exists once the
//! faults heal, under the id it was acknowledged with, and has reached a terminal state (the
//! liveness phase gives it the time to).

use super::Ending;

pub fn check(end: &Ending<'_>) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    for (key, id) in &end.facts.started {
        match end.records.get(id) {
            None => out.push((
                "no lost workflow",
                format!("start {key} was acknowledged as {id}, which no leader has"),
            )),
            Some(r) if !r.workflow.status.is_terminal() => out.push((
                "every workflow finishes once faults heal",
                format!(
                    "workflow {id} ({}) is still {} at the end of the liveness phase; tasks: {}",
                    r.workflow.workflow_name,
                    r.workflow.status.as_str(),
                    r.workflow
                        .tasks
                        .iter()
                        .map(|t| format!(
                            "{}#{} {} (scheduled {}, updated {})",
                            t.reference_task_name,
                            t.retry_count,
                            t.status.as_str(),
                            t.scheduled_time,
                            t.update_time
                        ))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )),
            Some(_) => {}
        }
    }
    // At most one run per idempotency key: retried starts never start twice. (A sub-workflow
    // carries its parent's correlation id, as in Conductor: it is counted with its parent's.)
    let mut per_key = std::collections::BTreeMap::<&str, usize>::new();
    for r in end
        .records
        .values()
        .filter(|r| r.workflow.parent_workflow_id.is_none())
    {
        if let Some(c) = r.workflow.correlation_id.as_deref() {
            *per_key.entry(c).or_default() += 1;
        }
    }
    for (key, n) in per_key.into_iter().filter(|(_, n)| *n > 1) {
        out.push((
            "one run per idempotency key",
            format!("{n} workflows were started for key {key}"),
        ));
    }
    out
}
