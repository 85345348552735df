//! Event actions happen once: every `sim_event` run that was acknowledged sends
//! one message from its EVENT task, and the event handler starts exactly one `sim_sequential`
//! for it, correlated to the run, across redelivery, crashes and failover. (More than one is
//! also caught by "one run per idempotency key"; this checks that there is one at all, and that
//! it finished.)

use super::Ending;
use crate::workload::{event_child_key, EVENT_WORKFLOW};
use std::collections::BTreeMap;

pub fn check(end: &Ending<'_>) -> Vec<(&'static str, String)> {
    let mut children: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (id, r) in end.records {
        if let Some(c) = r.workflow.correlation_id.as_deref() {
            children.entry(c).or_default().push(id);
        }
    }
    let mut out = Vec::new();
    for id in end.facts.started.values() {
        let Some(r) = end.records.get(id) else {
            continue; // no_lost_workflow reports it
        };
        if r.workflow.workflow_name != EVENT_WORKFLOW {
            continue;
        }
        let key = event_child_key(id);
        match children.get(key.as_str()).map(Vec::as_slice) {
            None | Some([]) => out.push((
                "an event's action happens once",
                format!(
                    "{EVENT_WORKFLOW} run {id} is {} but its message started nothing",
                    r.workflow.status.as_str()
                ),
            )),
            Some([child]) => match end.records.get(*child) {
                Some(c) if !c.workflow.status.is_terminal() => out.push((
                    "every workflow finishes once faults heal",
                    format!(
                        "event-started workflow {child} (for {id}) is still {}",
                        c.workflow.status.as_str()
                    ),
                )),
                _ => {}
            },
            Some(_) => {} // "one run per idempotency key" reports it
        }
    }
    out
}
