//! The outbox: effects a workflow's decision addresses outside itself, performed after the
//! decision committed. A failure workflow is started under an id derived from the failed
//! workflow, so a repeat finds it already started; an EVENT task's message is published once at a
//! time per task (its message id is the task id, so a repeat is deduplicated downstream).

use super::Events;
use crate::error::Error;
use engine::Effect;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, Weak};
use tokio::sync::mpsc;

/// Performs the partitions' outbound effects until the service is gone.
pub(super) async fn run(events: Weak<Events>, mut rx: mpsc::Receiver<Effect>) {
    let publishing: Arc<Mutex<BTreeSet<proto::TaskId>>> = Arc::default();
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
                let started = events
                    .workflows
                    .start_with_id(workflow_id.clone(), &name, version, input, correlation_id)
                    .await;
                match started {
                    Ok(()) | Err(Error::Conflict(_)) => {}
                    Err(e) => {
                        tracing::warn!(workflow = %workflow_id, %name, error = %e, "could not start failure workflow")
                    }
                }
            }
            Effect::PublishEvent { workflow_id, event } => {
                let task = event.task_id.clone();
                let fresh = lock(&publishing).insert(task.clone());
                if fresh {
                    let publishing = publishing.clone();
                    tokio::spawn(async move {
                        events.publish_task_event(&workflow_id, event).await;
                        lock(&publishing).remove(&task);
                    });
                }
            }
            Effect::Deliver(_) | Effect::Finished => {}
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
