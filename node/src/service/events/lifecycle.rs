//! A Serverless Workflow instance's lifecycle CloudEvents published to the operator's sink
//! (`baton server --dsl-lifecycle-sink`), on the leader after the commit that recorded them and
//! at recovery, in order, each under its stable id (`{instance}:{seq}`), then reported with
//! `Input::LifecyclePublished`, which removes them from the record. A sink that does not answer
//! is tried again, backing off up to [`RETRY_MAX_MS`], for as long as this node leads the
//! instance's partition; a new leader starts over from what is still recorded. At least once: a
//! leader that dies between a publication and the commit of its report leaves the events to the
//! next, which publishes them again under the same ids (Baton's own queues hand a repeat to no
//! handler twice). An event the sink refuses for good (too large for the broker) is skipped and
//! logged, so it cannot hold back the ones after it.

use super::{transient, Events};
use engine::Input;
use proto::input::WorkflowOp;
use proto::record::LifecycleEvent;
use proto::WorkflowId;
use std::time::Duration;

/// The first pause before a failed publication is tried again.
const RETRY_FIRST_MS: u64 = 500;
/// The longest pause between two tries (the pause doubles up to it).
pub(super) const RETRY_MAX_MS: u64 = 30_000;

impl Events {
    /// Publishes `pending` (one instance's, in order) to the lifecycle sink and reports them;
    /// answers the sequence number they were reported published up to, if they were.
    pub(super) async fn publish_lifecycle(
        &self,
        workflow_id: &WorkflowId,
        pending: Vec<LifecycleEvent>,
    ) -> Option<u64> {
        let sink = self.providers.lifecycle_sink()?;
        let upto = pending.last().map(|e| e.seq + 1)?;
        for event in &pending {
            if !self.publish_one(workflow_id, sink, event).await {
                return None;
            }
        }
        let op = WorkflowOp::Input(Box::new(Input::LifecyclePublished { upto }));
        match self.host.route_op(workflow_id, op).await {
            Ok(_) => Some(upto),
            Err(e) => {
                tracing::warn!(workflow = %workflow_id, error = %e, "could not report published lifecycle events; the next leader publishes them again");
                None
            }
        }
    }

    /// Publishes one event, trying again while this node leads the instance's partition;
    /// whether to go on with the next (published, or refused for good).
    async fn publish_one(
        &self,
        workflow_id: &WorkflowId,
        sink: &str,
        event: &LifecycleEvent,
    ) -> bool {
        let id = format!("{workflow_id}:{}", event.seq);
        let payload = event.event.as_object().cloned().unwrap_or_default();
        let mut pause = RETRY_FIRST_MS;
        loop {
            let sent = self
                .publish_message(sink, id.clone(), &payload, Some(workflow_id.as_str()))
                .await;
            match sent {
                Ok(()) => return true,
                Err(e) if !transient(&e) => {
                    tracing::warn!(workflow = %workflow_id, event = %id, %sink, error = %e, "the lifecycle sink refused an event; it is skipped");
                    return true;
                }
                Err(e) => {
                    if !self.leads(workflow_id).await {
                        return false;
                    }
                    tracing::debug!(workflow = %workflow_id, event = %id, error = %e, "lifecycle publication failed; retrying");
                    tokio::time::sleep(Duration::from_millis(pause)).await;
                    pause = (pause * 2).min(RETRY_MAX_MS);
                }
            }
        }
    }

    /// Whether this node leads the partition of `workflow_id`.
    async fn leads(&self, workflow_id: &WorkflowId) -> bool {
        match self.host.partition_of(workflow_id) {
            Some(p) => p.is_local_leader().await,
            None => false,
        }
    }
}
