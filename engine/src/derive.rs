//! What a workflow's state implies for the runtime: the timers that must be armed and the tasks that
//! workers may poll. Both are derived, never stored, so a restarted or new leader rebuilds them from
//! the state alone. `due` is also how a fired timer is re-checked (a stale timer has no due time).

use super::nav;
use super::schedule::{secs_ms, task_def};
use super::*;
use proto::model::{
    task_type, Task, TaskStatus, TimeoutPolicy, Workflow, WorkflowStatus, WorkflowTimeoutPolicy,
};
use proto::TaskId;

/// True for tasks that workers execute (not system tasks Baton runs itself).
pub(crate) fn is_worker(t: &Task) -> bool {
    nav::is_worker_type(&t.workflow_task.task_type)
}

/// When a worker task may be handed out: SCHEDULED at its scheduledTime, a re-queued IN_PROGRESS
/// task `callbackAfterSeconds` after its last update; `None` when it is not pollable.
pub(crate) fn visible_at(t: &Task) -> Option<NowMs> {
    match t.status {
        TaskStatus::Scheduled => Some(t.scheduled_time),
        TaskStatus::InProgress if t.callback_after_seconds > 0 => Some(
            t.update_time
                .saturating_add(secs_ms(t.callback_after_seconds)),
        ),
        _ => None,
    }
}

/// The due time of a timer in this state, or `None` when the state does not call for it.
pub(crate) fn due(wf: &Workflow, key: &TimerKey) -> Option<NowMs> {
    if key.kind == TimerKind::WorkflowTimeout {
        let def = &wf.workflow_definition;
        let armed = wf.status == WorkflowStatus::Running
            && def.timeout_seconds > 0
            && def.timeout_policy == WorkflowTimeoutPolicy::TimeOutWf;
        return armed.then(|| wf.start_time.saturating_add(secs_ms(def.timeout_seconds)));
    }
    if wf.status.is_terminal() {
        return None;
    }
    let t = wf.task(key.task_id.as_ref()?)?;
    if key.kind == TimerKind::EventPublish {
        return event_publish_due(wf, t);
    }
    if key.kind == TimerKind::Perform {
        return super::work::redo_due(wf, t);
    }
    if key.kind == TimerKind::Wait {
        let armed = t.workflow_task.task_type == task_type::WAIT
            && t.status == TaskStatus::InProgress
            && t.wait_timeout > 0;
        return armed.then_some(t.wait_timeout);
    }
    if !is_worker(t) || t.status.is_terminal() {
        return None;
    }
    let def = task_def(&t.workflow_task);
    match key.kind {
        TimerKind::PollTimeout => {
            let poll = def.poll_timeout_seconds.unwrap_or(0);
            (t.status == TaskStatus::Scheduled
                && poll > 0
                && def.timeout_policy != TimeoutPolicy::AlertOnly)
                .then(|| t.scheduled_time.saturating_add(secs_ms(poll)))
        }
        TimerKind::ResponseTimeout => {
            (t.status == TaskStatus::InProgress && t.response_timeout_seconds > 0).then(|| {
                t.update_time.saturating_add(secs_ms(
                    t.response_timeout_seconds
                        .saturating_add(t.callback_after_seconds),
                ))
            })
        }
        TimerKind::TaskTimeout => (t.status == TaskStatus::InProgress
            && def.timeout_seconds > 0
            && def.timeout_policy != TimeoutPolicy::AlertOnly)
            .then(|| t.start_time.saturating_add(secs_ms(def.timeout_seconds))),
        TimerKind::TotalTimeout => (def.total_timeout_seconds > 0).then(|| {
            t.first_scheduled_time
                .saturating_add(secs_ms(def.total_timeout_seconds))
        }),
        TimerKind::WorkflowTimeout
        | TimerKind::Wait
        | TimerKind::EventPublish
        | TimerKind::Perform
        | TimerKind::StatusPublish => None,
    }
}

/// How long an EVENT task's first publication may go unreported before it is published again.
pub(crate) const EVENT_REPUBLISH_FIRST_MS: NowMs = 5_000;
/// The longest wait between two publications of one EVENT task (the backoff doubles up to it).
pub(crate) const EVENT_REPUBLISH_MAX_MS: NowMs = 30_000;

/// When a SCHEDULED EVENT task of a RUNNING workflow is published again: its last publication
/// (the task's `updateTime`; `pollCount` counts the publications after the first) plus a
/// backoff. A publication is performed after the commit of a write, so one that was lost (the
/// outbox's publish or its report failed, a leadership change came between them, or another
/// leader's write committed the task) is repeated as long as the partition has a leader.
fn event_publish_due(wf: &Workflow, t: &Task) -> Option<NowMs> {
    let pending = wf.status == WorkflowStatus::Running
        && t.status == TaskStatus::Scheduled
        && event_of(wf, t).is_some();
    pending.then(|| {
        t.update_time
            .saturating_add(event_republish_delay(t.poll_count))
    })
}

/// The wait after the `attempts`-th repeated publication: doubling, at most the maximum.
pub(crate) fn event_republish_delay(attempts: u32) -> NowMs {
    let doubled = EVENT_REPUBLISH_FIRST_MS.saturating_mul(1 << attempts.min(16));
    doubled.min(EVENT_REPUBLISH_MAX_MS)
}

/// The timers `workflow` needs armed now, ordered by due time.
pub fn timers(workflow: &Workflow) -> Vec<Timer> {
    let mut out = Vec::new();
    let wf_key = TimerKey {
        kind: TimerKind::WorkflowTimeout,
        task_id: None,
    };
    if let Some(due_ms) = due(workflow, &wf_key) {
        out.push(Timer {
            due_ms,
            key: wf_key,
        });
    }
    if !workflow.status.is_terminal() {
        for t in workflow
            .tasks
            .iter()
            .filter(|t| !t.status.is_terminal() && is_worker(t))
        {
            for kind in [
                TimerKind::PollTimeout,
                TimerKind::ResponseTimeout,
                TimerKind::TaskTimeout,
                TimerKind::TotalTimeout,
            ] {
                let key = TimerKey {
                    kind,
                    task_id: Some(t.task_id.clone()),
                };
                if let Some(due_ms) = due(workflow, &key) {
                    out.push(Timer { due_ms, key });
                }
            }
        }
        for t in workflow
            .tasks
            .iter()
            .filter(|t| t.status == TaskStatus::Scheduled)
        {
            let key = TimerKey {
                kind: TimerKind::EventPublish,
                task_id: Some(t.task_id.clone()),
            };
            if let Some(due_ms) = event_publish_due(workflow, t) {
                out.push(Timer { due_ms, key });
            }
        }
        // Work is pending on SCHEDULED tasks and on an IN_PROGRESS DO_WHILE; a SUB_WORKFLOW
        // in progress asks after its child; a claimed at-most-once call waits for its report.
        for t in workflow.tasks.iter().filter(|t| !t.status.is_terminal()) {
            let key = TimerKey {
                kind: TimerKind::Perform,
                task_id: Some(t.task_id.clone()),
            };
            if let Some(due_ms) = super::work::redo_due(workflow, t) {
                out.push(Timer { due_ms, key });
            }
        }
        for t in workflow.tasks.iter().filter(|t| t.wait_timeout > 0) {
            let key = TimerKey {
                kind: TimerKind::Wait,
                task_id: Some(t.task_id.clone()),
            };
            if let Some(due_ms) = due(workflow, &key) {
                out.push(Timer { due_ms, key });
            }
        }
    }
    out.sort();
    out
}

/// An EVENT task's message: where it goes and what it carries.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PendingEvent {
    /// The message id: the task's id (Conductor's choice too), stable across repeats.
    pub task_id: TaskId,
    /// `provider:queue`; Conductor's bare `conductor` sink is `conductor:{workflow}:{taskRef}`.
    pub sink: String,
    /// The task's input plus the workflow's id, type, version and correlation id.
    pub payload: Json,
}

/// The message an EVENT task sends (`None` for other tasks or without a sink).
pub(crate) fn event_of(workflow: &Workflow, t: &Task) -> Option<PendingEvent> {
    if t.workflow_task.task_type != task_type::EVENT {
        return None;
    }
    let sink = t.workflow_task.sink.as_deref()?.trim();
    let sink = if sink == "conductor" {
        format!(
            "conductor:{}:{}",
            workflow.workflow_name, t.reference_task_name
        )
    } else {
        sink.to_owned()
    };
    let mut payload = t.input_data.clone();
    if workflow.workflow_definition.dsl.is_some() {
        // A Serverless Workflow `emit`: the message is the CloudEvent, as it is.
        return Some(PendingEvent {
            task_id: t.task_id.clone(),
            sink,
            payload,
        });
    }
    payload.insert(
        "workflowInstanceId".into(),
        workflow.workflow_id.as_str().into(),
    );
    payload.insert("workflowType".into(), workflow.workflow_name.clone().into());
    payload.insert("workflowVersion".into(), workflow.workflow_version.into());
    payload.insert(
        "correlationId".into(),
        workflow.correlation_id.clone().into(),
    );
    Some(PendingEvent {
        task_id: t.task_id.clone(),
        sink,
        payload,
    })
}

/// The EVENT tasks of a RUNNING workflow whose message has not been reported published.
pub fn pending_events(workflow: &Workflow) -> Vec<PendingEvent> {
    if workflow.status != WorkflowStatus::Running {
        return Vec::new();
    }
    workflow
        .tasks
        .iter()
        .filter(|t| t.status == TaskStatus::Scheduled)
        .filter_map(|t| event_of(workflow, t))
        .collect()
}

/// What a committed state asks its leader to do outside the workflow: publish every EVENT
/// task's message not reported published, perform every task's pending work, publish a
/// terminal workflow's end to its status listener sink until that is reported done, and a
/// DSL instance's pending lifecycle events. Derived
/// after every commit and at recovery, so nothing of it is lost with a leader.
pub fn outbound(record: &WorkflowRecord) -> Vec<Effect> {
    let workflow = &record.workflow;
    let workflow_id = &workflow.workflow_id;
    let events = pending_events(workflow)
        .into_iter()
        .map(|event| Effect::PublishEvent {
            workflow_id: workflow_id.clone(),
            event,
        });
    let work = super::work::pending_work(workflow)
        .into_iter()
        .map(|work| Effect::Perform {
            workflow_id: workflow_id.clone(),
            work,
        });
    let status =
        super::listener::status_publication(record).map(|publication| Effect::PublishStatus {
            workflow_id: workflow_id.clone(),
            publication,
        });
    let lifecycle = record
        .lifecycle
        .as_ref()
        .filter(|l| !l.pending.is_empty())
        .map(|l| Effect::PublishLifecycle {
            workflow_id: workflow_id.clone(),
            events: l.pending.clone(),
        });
    events.chain(work).chain(status).chain(lifecycle).collect()
}

/// The worker tasks of `workflow` a worker holds now (IN_PROGRESS), as (task type, id, start
/// time): what a task type's concurrency limit counts.
pub fn in_progress_tasks(workflow: &Workflow) -> Vec<(String, TaskId, NowMs)> {
    workflow
        .tasks
        .iter()
        .filter(|t| t.status == TaskStatus::InProgress && is_worker(t))
        .map(|t| (t.task_def_name.clone(), t.task_id.clone(), t.start_time))
        .collect()
}

/// The tasks of `workflow` that workers may poll (only while it is RUNNING).
pub fn ready_tasks(workflow: &Workflow) -> Vec<Ready> {
    if workflow.status != WorkflowStatus::Running {
        return Vec::new();
    }
    workflow
        .tasks
        .iter()
        .filter(|t| is_worker(t))
        .filter_map(|t| {
            visible_at(t).map(|visible_at_ms| Ready {
                task_id: t.task_id.clone(),
                task_type: t.task_def_name.clone(),
                domain: t.domain.clone(),
                priority: t.workflow_priority,
                visible_at_ms,
            })
        })
        .collect()
}
