//! A terminal workflow's end published to its `workflowStatusListenerSink` (see
//! `engine::StatusPublication`), on the leader after the commit that owes it and at recovery,
//! then reported with `Input::StatusPublished`, which records it done. A broker that does not
//! answer is retried for a while; a publication that fails (or outlives [`PUBLICATION_MS`]) is
//! not reported, and the workflow's `StatusPublish` timer has it published again, a bounded
//! number of times. At least once: a leader that dies between the publication and the commit
//! of its report leaves it owed, and the next leader publishes it again under the same message
//! id (Baton's own queues hand a repeat to no handler twice; a broker's consumer sees it twice).
//! The failpoint `status-publish` aborts the node before a publication
//! (`tests/t88_status_listener.rs`).

use super::{transient, Events};
use engine::{Input, StatusPublication};
use proto::input::WorkflowOp;
use proto::WorkflowId;
use std::time::Duration;

/// How long one publication keeps retrying a broker that does not answer.
const PUBLISH_RETRY_MS: u64 = 30_000;

/// How long one publication (publish and report) may take in all; one that outlives it is
/// abandoned, so that the outbox takes the next one for this workflow.
const PUBLICATION_MS: u64 = 2 * PUBLISH_RETRY_MS;

impl Events {
    /// Publishes a workflow's end to its status listener sink and reports it, within
    /// [`PUBLICATION_MS`].
    pub(super) async fn publish_status(&self, workflow_id: &WorkflowId, end: StatusPublication) {
        let limit = Duration::from_millis(PUBLICATION_MS);
        if tokio::time::timeout(limit, self.publish_status_and_report(workflow_id, end))
            .await
            .is_err()
        {
            tracing::warn!(workflow = %workflow_id, "a workflow's status publication timed out; its timer repeats it");
        }
    }

    async fn publish_status_and_report(&self, workflow_id: &WorkflowId, end: StatusPublication) {
        let deadline = tokio::time::Instant::now() + Duration::from_millis(PUBLISH_RETRY_MS);
        let id = Some(workflow_id.as_str());
        crate::failpoint::hit("status-publish");
        loop {
            let sent = self
                .publish_message(&end.sink, end.message_id.clone(), &end.payload, id)
                .await;
            match sent {
                Ok(()) => break,
                Err(e) if transient(&e) && tokio::time::Instant::now() < deadline => {
                    tracing::debug!(workflow = %workflow_id, sink = %end.sink, error = %e, "status publication failed; retrying");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(e) => {
                    tracing::warn!(workflow = %workflow_id, sink = %end.sink, error = %e, "could not publish a workflow's status; its timer repeats it");
                    return;
                }
            }
        }
        let input = Input::StatusPublished {
            end_time: end.end_time,
        };
        let op = WorkflowOp::Input(Box::new(input));
        if let Err(e) = self.host.route_op(workflow_id, op).await {
            tracing::warn!(workflow = %workflow_id, error = %e, "could not report a workflow's status publication; its timer repeats it");
        }
    }
}
