//! The outbox: effects a workflow's decision addresses outside itself, performed after the
//! decision committed. A failure workflow is started under an id derived from the failed
//! workflow, so a repeat finds it already started; an EVENT task's message is published, and a
//! task's work performed, once at a time per task (a message's id is the task id, so a repeat is
//! deduplicated downstream; work is pure or keyed by the task, except an HTTP task's call,
//! which is made again when its report is lost: a new leader, a report that did not commit);
//! an input for another workflow (a child's end, a parent's terminate) is delivered, best effort;
//! a terminal workflow's end is published to its status listener sink, and a DSL instance's
//! lifecycle events to the operator's sink, once at a time per workflow.

use super::Events;
use crate::error::Error;
use engine::{Effect, StartRequest};
use proto::record::LifecycleEvent;
use proto::{TaskId, WorkflowId};
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::{Arc, Mutex, Weak};
use tokio::sync::mpsc;

/// The tasks (or workflows, for their ends) whose message or work is being handled now.
type InFlight<K> = Arc<Mutex<BTreeSet<K>>>;

/// Performs the partitions' outbound effects until the service is gone.
pub(super) async fn run(events: Weak<Events>, mut rx: mpsc::Receiver<Effect>) {
    let in_flight: InFlight<TaskId> = Arc::default();
    let ends_in_flight: InFlight<WorkflowId> = Arc::default();
    let lifecycles: Latest<WorkflowId, Vec<LifecycleEvent>> = Arc::default();
    while let Some(effect) = rx.recv().await {
        let Some(events) = events.upgrade() else {
            return;
        };
        match effect {
            Effect::StartWorkflow {
                workflow_id,
                name,
                version,
                input,
                correlation_id,
            } => {
                let request = StartRequest {
                    workflow_id: workflow_id.clone(),
                    name: name.clone(),
                    version,
                    input,
                    correlation_id,
                    task_to_domain: Default::default(),
                    parent: None,
                    definition: None,
                };
                match events.workflows.start_requested(request).await {
                    Ok(()) | Err(Error::Conflict(_)) => {}
                    Err(e) => {
                        tracing::warn!(workflow = %workflow_id, %name, error = %e, "could not start failure workflow")
                    }
                }
            }
            Effect::PublishEvent { workflow_id, event } => {
                let task = event.task_id.clone();
                once_per(&in_flight, task, async move {
                    events.publish_task_event(&workflow_id, event).await;
                });
            }
            Effect::Perform { workflow_id, work } => {
                let task = work.task_id.clone();
                once_per(&in_flight, task, async move {
                    events.perform(&workflow_id, work).await;
                });
            }
            Effect::PublishStatus {
                workflow_id,
                publication,
            } => {
                once_per(&ends_in_flight, workflow_id.clone(), async move {
                    events.publish_status(&workflow_id, publication).await;
                });
            }
            Effect::PublishLifecycle {
                workflow_id,
                events: pending,
            } => {
                let events = Arc::downgrade(&events);
                latest_per(&lifecycles, workflow_id.clone(), pending, move |pending| {
                    let (events, workflow_id) = (events.clone(), workflow_id.clone());
                    async move {
                        match events.upgrade() {
                            Some(e) => e.publish_lifecycle(&workflow_id, pending).await,
                            None => None,
                        }
                    }
                });
            }
            Effect::Notify { workflow_id, input } => {
                tokio::spawn(async move { events.notify(&workflow_id, *input).await });
            }
            Effect::Deliver(_) | Effect::Finished => {}
        }
    }
}

/// The value last asked for per key while a job for that key runs.
type Latest<K, V> = Arc<Mutex<BTreeMap<K, Option<V>>>>;

/// Runs `job(value)` in its own task unless one for `key` is running already; then the
/// running one, once done, runs again with the latest value asked for meanwhile, from the
/// sequence number its last run answered done (lifecycle events: what the commits since then
/// derived, less what it published).
fn latest_per<K, F, Fut>(
    latest: &Latest<K, Vec<LifecycleEvent>>,
    key: K,
    value: Vec<LifecycleEvent>,
    job: F,
) where
    K: Ord + Clone + Send + 'static,
    F: Fn(Vec<LifecycleEvent>) -> Fut + Send + 'static,
    Fut: Future<Output = Option<u64>> + Send,
{
    {
        let mut map = lock(latest);
        if let Some(waiting) = map.get_mut(&key) {
            *waiting = Some(value);
            return;
        }
        map.insert(key.clone(), None);
    }
    let latest = latest.clone();
    tokio::spawn(async move {
        let mut value = value;
        loop {
            let done = job(value).await;
            let mut map = lock(&latest);
            match map.get_mut(&key).and_then(Option::take) {
                Some(next) => {
                    value = next
                        .into_iter()
                        .filter(|e| done.is_none_or(|d| e.seq >= d))
                        .collect();
                }
                None => {
                    map.remove(&key);
                    return;
                }
            }
        }
    });
}

/// Runs `job` in its own task unless one for `key` is running already.
fn once_per<K: Ord + Clone + Send + 'static>(
    in_flight: &InFlight<K>,
    key: K,
    job: impl Future<Output = ()> + Send + 'static,
) {
    if !lock(in_flight).insert(key.clone()) {
        return;
    }
    let in_flight = in_flight.clone();
    tokio::spawn(async move {
        job.await;
        lock(&in_flight).remove(&key);
    });
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
