//! Performing a task's work (`engine::Work`) on the leader after the commit that left it
//! pending, and reporting the outcome to the workflow (`Input::Performed`). Scripts and jq
//! queries run in the node's script hosts under [`Limits::task`]; a START_WORKFLOW's workflow
//! is started under the id the engine derived from the task, so a repeat finds it started; an
//! HTTP task's call is made by the node's `HttpCaller` (`events::http`): any answer is
//! reported for the engine to judge, and no answer (refused, timed out, a host not allowed) as
//! the reason, so the attempt fails and is retried as the task's definition says. A call is
//! not pure: a leader that dies after the call and before its report committed has it made
//! again by the next leader, unless the task asks for at most one call
//! (`HttpRequest::at_most_once`): then the task's claim (`Input::Claim`) commits first, and the
//! call is made only if it did; a repeat's claim is refused, and so is its call. A DSL `run`
//! task's process (`Work::Process`) is run by the node's `ProcessRunner` (`events::process`)
//! and reported the same way, its result for the engine to judge; like a call, it runs again
//! when its report is lost (at least once). Work waits for its time first
//! (`PendingWork::not_before`: a retry's backoff).
//!
//! A SUB_WORKFLOW task resumed by a retry with `resumeSubworkflowTasks` has its child retried
//! the same way on the child's partition (`Work::RetryChild`), the cross-partition step of that
//! retry: derived from the parent's committed state, so a leader that dies before it has the next
//! leader do it.
//!
//! An outcome that says something about the work (a value, a script error, an unknown
//! workflow) is reported; a failure of the node's own means (no script host, no leader for the
//! new workflow's partition) is not: the task's `Perform` timer has the work done again.

use super::Events;
use crate::error::Error;
use crate::events::script::{Limits, ScriptError};
use engine::{Input, NowMs, PendingWork, StartRequest, Work};
use proto::input::WorkflowOp;
use proto::WorkflowId;
use serde_json::Value;
use std::time::Duration;

/// How long an input for another workflow is tried again while that workflow's partition has
/// no leader.
const NOTIFY_RETRY_MS: u64 = 20_000;

/// What performing work came to: `None` when it should be tried again later.
type Outcome = Option<Result<Value, String>>;

/// The longest work waits here for its time (a retry's backoff); work due later is left to
/// its task's `Perform` timer, which fires shortly after that time and has it performed then.
const WAIT_MS_MAX: NowMs = 60_000;

impl Events {
    /// Performs `pending` for the workflow `workflow_id` and reports the outcome.
    pub(super) async fn perform(&self, workflow_id: &WorkflowId, pending: PendingWork) {
        let (task_id, iteration) = (pending.task_id, pending.iteration);
        if !self.wait_until(pending.not_before).await {
            tracing::debug!(workflow = %workflow_id, task = %task_id, "task work not due yet; its timer repeats it");
            return;
        }
        let once = matches!(&pending.work, Work::Http(request) if request.at_most_once);
        let outcome = match pending.work {
            Work::CheckChild(child) => return self.check_child(workflow_id, task_id, &child).await,
            Work::Start(request) => self.start_for_task(request).await,
            Work::RetryChild(child) => self.retry_child(&child).await,
            Work::Script { script, root } => {
                script_outcome(self.scripts.evaluate(&script, &root, &Limits::task()).await)
            }
            Work::Jq { query, input } => {
                script_outcome(self.scripts.query(&query, &input, &Limits::task()).await)
            }
            Work::Http(request) => {
                if once && !self.claim(workflow_id, &task_id, iteration).await {
                    return;
                }
                Some(self.call(request).await)
            }
            Work::Process(request) => Some(
                self.processes
                    .run(&request)
                    .await
                    .map_err(|e| e.to_string()),
            ),
        };
        let Some(outcome) = outcome else {
            tracing::debug!(workflow = %workflow_id, task = %task_id, "task work not done; its timer repeats it");
            return;
        };
        let input = Input::Performed {
            task_id: task_id.clone(),
            iteration,
            outcome,
        };
        if once {
            // Not repeated if lost: the report is tried again while the partition has no leader.
            self.notify(workflow_id, input).await;
            crate::failpoint::hit("http-once-reported");
            return;
        }
        let op = WorkflowOp::Input(Box::new(input));
        if let Err(e) = self.host.route_op(workflow_id, op).await {
            tracing::warn!(workflow = %workflow_id, task = %task_id, error = %e, "could not report a task's work; its timer repeats it");
        }
    }

    /// Makes an HTTP task's call, with the secrets it names filled in here and nowhere else:
    /// the answer, or why there is none.
    async fn call(&self, mut request: engine::HttpRequest) -> Result<Value, String> {
        self.secrets
            .reveal(&mut request)
            .map_err(|e| e.to_string())?;
        self.http.call(&request).await.map_err(|e| e.to_string())
    }

    /// Claims an at-most-once HTTP task's call: whether the claim committed (only then is the
    /// call made; otherwise another attempt claimed it, or the task no longer waits).
    async fn claim(
        &self,
        workflow_id: &WorkflowId,
        task_id: &proto::TaskId,
        iteration: u32,
    ) -> bool {
        let input = Input::Claim {
            task_id: task_id.clone(),
            iteration,
        };
        let op = WorkflowOp::Input(Box::new(input));
        match self.host.route_op(workflow_id, op).await {
            Ok(_) => {
                crate::failpoint::hit("http-once-claimed");
                true
            }
            Err(e) => {
                tracing::debug!(workflow = %workflow_id, task = %task_id, error = %e, "an at-most-once call was not claimed; it is not made");
                false
            }
        }
    }

    /// Delivers `input` to `workflow_id`, trying again while its partition has no leader for up
    /// to [`NOTIFY_RETRY_MS`] (best effort: the parent's timer asks after a child anyway).
    pub(super) async fn notify(&self, workflow_id: &WorkflowId, input: Input) {
        let deadline = tokio::time::Instant::now() + Duration::from_millis(NOTIFY_RETRY_MS);
        let mut pause = Duration::from_millis(100);
        loop {
            let op = WorkflowOp::Input(Box::new(input.clone()));
            match self.host.route_op(workflow_id, op).await {
                Err(Error::Unavailable(_)) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(2));
                }
                Err(e) => {
                    tracing::debug!(workflow = %workflow_id, error = %e, "could not deliver an input from another workflow");
                    return;
                }
                Ok(_) => return,
            }
        }
    }

    /// Reads the child a SUB_WORKFLOW task waits for and, if it ended, tells the parent.
    async fn check_child(&self, parent: &WorkflowId, task_id: proto::TaskId, child: &WorkflowId) {
        let wf = match self.host.record(child).await {
            Ok(record) => record.workflow,
            Err(e) => {
                tracing::debug!(workflow = %parent, %child, error = %e, "could not read a child workflow");
                return;
            }
        };
        if !wf.status.is_terminal() {
            return;
        }
        let input = Input::ChildEnded {
            task_id,
            child: child.clone(),
            status: wf.status,
            output: wf.output,
            reason: wf.reason_for_incompletion,
        };
        self.notify(parent, input).await;
    }

    /// Retries a resumed SUB_WORKFLOW task's child on its partition's leader, resuming its own
    /// failed SUB_WORKFLOW tasks in turn. A child that refuses (`Conflict`: it runs, retried
    /// by an earlier attempt of this work whose report was lost, or it did not fail) counts as
    /// retried: the task waits for its end, and its timer asks after it.
    async fn retry_child(&self, child: &WorkflowId) -> Outcome {
        let retried = serde_json::json!({ "subWorkflowId": child.as_str() });
        let op = WorkflowOp::Input(Box::new(Input::RetryResumingSubworkflows));
        match self.host.route_op(child, op).await {
            Ok(_) | Err(Error::Conflict(_)) => Some(Ok(retried)),
            Err(e @ (Error::NotFound(_) | Error::Invalid(_))) => Some(Err(e.to_string())),
            Err(_) => None,
        }
    }

    /// Waits until `time` unless that is more than [`WAIT_MS_MAX`] away (then `false`).
    async fn wait_until(&self, time: NowMs) -> bool {
        let wait = time.saturating_sub(self.host.clock.now_ms());
        if wait > WAIT_MS_MAX {
            return false;
        }
        if let Ok(ms @ 1..) = u64::try_from(wait) {
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        true
    }

    /// Starts a START_WORKFLOW task's workflow or a SUB_WORKFLOW's child: its id, or why it
    /// cannot be started.
    async fn start_for_task(&self, request: StartRequest) -> Outcome {
        let id = request.workflow_id.clone();
        let started = serde_json::json!({ "workflowId": id.as_str() });
        let child = request.parent.is_some();
        if child {
            crate::failpoint::hit("sub-workflow-start");
        }
        match self.workflows.start_requested(request).await {
            Ok(()) | Err(Error::Conflict(_)) => {
                if child {
                    crate::failpoint::hit("sub-workflow-started");
                }
                Some(Ok(started))
            }
            Err(e @ (Error::NotFound(_) | Error::Invalid(_) | Error::TooLarge(_))) => {
                Some(Err(e.to_string()))
            }
            Err(_) => None,
        }
    }
}

/// A script's or query's answer as an outcome: a host that failed is tried again.
fn script_outcome(answer: Result<Value, ScriptError>) -> Outcome {
    match answer {
        Ok(value) => Some(Ok(value)),
        Err(ScriptError::HostFailed(_)) => None,
        Err(e) => Some(Err(e.to_string())),
    }
}
