//! The workflow status listener: a workflow whose definition sets
//! `workflowStatusListenerEnabled` and names a `workflowStatusListenerSink` (Orkes) publishes
//! its end there — when it becomes COMPLETED, FAILED, TERMINATED or TIMED_OUT — as Conductor's
//! status publishers do: a message holding the workflow's summary (`WorkflowSummary`, as a
//! search answers it), whose id names the workflow and this end.
//!
//! Like an EVENT task's message, the publication is derived from the committed state, never
//! queued: the leader publishes after the commit that ended the workflow and again at
//! recovery, and reports it with [`crate::Input::StatusPublished`], which records it done in the
//! record's [`StatusNotice`]. Until then a `StatusPublish` timer, armed on the terminal
//! workflow, records another attempt (backing off from 5 s to a minute), whose commit
//! publishes again; after [`STATUS_NOTICE_ATTEMPTS_MAX`] attempts it gives up and says so in
//! the notice. A publication whose report was lost (a leader that died between the two) is
//! repeated: at least once, deduplicated downstream by the message id on Baton's own queues.
//!
//! Not here: where the message goes (the runtime's sinks), anything while the workflow runs.

use super::state::Ctx;
use super::{NowMs, Timer, TimerKey, TimerKind};
use proto::model::{Json, WorkflowSummary};
use proto::record::{owes_status_notice, StatusNotice, WorkflowRecord, STATUS_NOTICE_ATTEMPTS_MAX};

/// How long a workflow's end may go unreported published before it is published again.
pub(crate) const REPUBLISH_FIRST_MS: NowMs = 5_000;
/// The longest wait between two publications of one end (the backoff doubles up to it).
pub(crate) const REPUBLISH_MAX_MS: NowMs = 60_000;

/// A terminal workflow's end, as its status listener sink receives it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StatusPublication {
    /// `provider:queue`, as the definition names it.
    pub sink: String,
    /// The message id: the workflow's id and its `endTime`, stable across repeats of one end
    /// and new for the end after a retry.
    pub message_id: String,
    /// The workflow's `endTime`: which end this is (see [`crate::Input::StatusPublished`]).
    pub end_time: NowMs,
    /// The workflow's summary.
    pub payload: Json,
}

/// The publication a committed record owes its status listener sink, if any.
pub fn status_publication(record: &WorkflowRecord) -> Option<StatusPublication> {
    if !record.owes_status_notice() {
        return None;
    }
    let wf = &record.workflow;
    let sink = wf
        .workflow_definition
        .workflow_status_listener_sink
        .as_deref()?;
    let payload = match serde_json::to_value(WorkflowSummary::of(wf)) {
        Ok(serde_json::Value::Object(map)) => map,
        _ => Json::new(),
    };
    Some(StatusPublication {
        sink: sink.trim().to_owned(),
        message_id: format!("{}-{}", wf.workflow_id, wf.end_time),
        end_time: wf.end_time,
        payload,
    })
}

/// When the owed publication is tried again: the last attempt (the workflow's end for the
/// first) plus a backoff doubling with the attempts.
fn due(wf: &proto::model::Workflow, notice: Option<&StatusNotice>) -> Option<NowMs> {
    if !owes_status_notice(wf, notice) {
        return None;
    }
    let attempts = notice.map_or(0, |n| n.attempts);
    let last = notice.map_or(0, |n| n.last_attempt_ms).max(wf.end_time);
    let wait = REPUBLISH_FIRST_MS.saturating_mul(1 << attempts.min(16));
    Some(last.saturating_add(wait.min(REPUBLISH_MAX_MS)))
}

/// The `StatusPublish` timer a committed record needs armed (terminal workflows included).
pub fn status_timer(record: &WorkflowRecord) -> Option<Timer> {
    let due_ms = due(&record.workflow, record.status_notice.as_ref())?;
    Some(Timer {
        due_ms,
        key: TimerKey {
            kind: TimerKind::StatusPublish,
            task_id: None,
        },
    })
}

/// The `StatusPublish` timer fired: records another attempt, whose commit publishes the end
/// again, or, past the last attempt, gives up.
pub(crate) fn attempt_again(ctx: &mut Ctx<'_>) {
    let Some(due) = due(&ctx.wf, ctx.notice.as_ref()) else {
        return;
    };
    if due > ctx.now {
        return;
    }
    let now = ctx.now;
    let notice = ctx.notice.get_or_insert_with(StatusNotice::default);
    notice.attempts += 1;
    notice.last_attempt_ms = now;
    if notice.attempts >= STATUS_NOTICE_ATTEMPTS_MAX {
        notice.done = true;
        notice.error = Some(format!(
            "no publication to the status listener sink was reported after {} attempts",
            notice.attempts
        ));
    }
    ctx.changed = true;
}

/// The end that ended at `end_time` was published: nothing more is owed for it.
pub(crate) fn published(ctx: &mut Ctx<'_>, end_time: NowMs) {
    if !owes_status_notice(&ctx.wf, ctx.notice.as_ref()) || ctx.wf.end_time != end_time {
        return;
    }
    let notice = ctx.notice.get_or_insert_with(StatusNotice::default);
    notice.done = true;
    notice.error = None;
    ctx.changed = true;
}
