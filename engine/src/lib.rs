//! The engine: Conductor's semantics as pure functions.
//!
//! `start` and `decide` take the state, one input, the time and seeded randomness, and return the
//! next state and the effects to perform after it commits. They read no clock, no RNG of their own,
//! no socket and no file: the runtime (`crate::partition`) supplies all of that and
//! performs the effects. `timers` and `ready_tasks` derive, from a state, the timers that must be armed
//! and the tasks that workers may poll, so nothing about them is stored twice.
//!
//! Not here: storage, Raft, actors, HTTP. Nothing in this module may depend on them; clippy enforces
//! the clock, randomness, spawning and hash-order rules (clippy.toml).
#![deny(clippy::disallowed_methods, clippy::disallowed_types)]

use proto::model::{Json, RerunWorkflowRequest, SkipTaskRequest, Task, TaskResult, WorkflowDef};
use proto::record::WorkflowRecord;
use proto::{TaskId, WorkflowId};
use std::collections::BTreeMap;

/// Milliseconds since the Unix epoch, supplied by the caller.
pub type NowMs = i64;

/// The randomness the decider may use (jitter, task ids). The runtime passes a seeded generator.
pub type Rng<'a> = &'a mut dyn rand::RngCore;

/// Everything needed to create a workflow instance.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StartInput {
    /// Chosen by the caller (it fixes the partition).
    pub workflow_id: WorkflowId,
    /// The definition to run, with every task's `taskDefinition` filled in from the registered task
    /// definitions (or Conductor's defaults where none is registered).
    pub def: WorkflowDef,
    pub input: Json,
    pub correlation_id: Option<String>,
    pub priority: i32,
    pub task_to_domain: BTreeMap<String, String>,
    pub parent_workflow_id: Option<String>,
    pub parent_workflow_task_id: Option<String>,
    pub re_run_from_workflow_id: Option<String>,
    pub event: Option<String>,
}

/// One input to a running workflow. Every input is decided against the current state; inputs that no
/// longer apply (a result for a terminal task, a stale timer) change nothing.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[allow(clippy::large_enum_variant)] // a TaskResult is the common input; boxing it would not save a copy
pub enum Input {
    /// A worker's update (`POST /api/tasks`).
    TaskResult(TaskResult),
    /// A QUIC worker's update, fenced by the lease it got the task with: refused (`Conflict`) when
    /// that lease has ended — the attempt is terminal, or the task was leased again since.
    LeasedResult {
        result: TaskResult,
        lease: proto::worker::Lease,
    },
    /// A worker polled: move this SCHEDULED (or re-queued IN_PROGRESS) task to IN_PROGRESS for it.
    Lease {
        task_id: TaskId,
        worker_id: Option<String>,
    },
    /// A timer derived by [`timers`] came due.
    Timer(TimerKey),
    Pause,
    Resume,
    Terminate {
        reason: Option<String>,
    },
    /// Retry the last failed task of a FAILED / TIMED_OUT / TERMINATED workflow.
    Retry,
    /// Start the workflow over from the beginning; `def` replaces the definition when given.
    Restart {
        def: Option<WorkflowDef>,
    },
    Rerun(RerunWorkflowRequest),
    SkipTask {
        reference: String,
        request: SkipTaskRequest,
    },
    /// Re-evaluate the workflow (`PUT /api/workflow/decide/{id}`).
    Decide,
    /// One poll claimed several of this workflow's tasks (a fork's branches): lease every one
    /// that can still be leased, in one decision and so one Raft round instead of one each.
    /// Refused only when none can be (with the first one's reason).
    LeaseAll {
        task_ids: Vec<TaskId>,
        worker_id: Option<String>,
    },
    /// `update-v2`: a worker's update, and if the workflow now has a task of the same type and
    /// domain ready, that task leased to the same worker in the same decision (one
    /// Raft write per step; a chain's next step costs no second Raft round).
    TaskResultThenLease(TaskResult),
    /// An event handler's `update_workflow_variables`: merges `variables` into the workflow's
    /// (appending to arrays with `append_array`). `key` names the change: a repeat is a no-op.
    UpdateVariables {
        variables: Json,
        append_array: bool,
        key: String,
    },
    /// The message of a SCHEDULED EVENT task was published (`error`: it could not be). The
    /// task completes (stays IN_PROGRESS with `asyncComplete`) or fails; anything else ignores it.
    EventPublished {
        task_id: TaskId,
        error: Option<String>,
    },
}

/// What the runtime must do after the decision's state is committed. Only the leader performs them.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Effect {
    /// The task was leased by the `Lease` input: hand it to the worker that polled.
    Deliver(Box<Task>),
    /// Start another workflow (the failure workflow). `workflow_id` is derived from the failed
    /// workflow's id, so performing this twice starts it once.
    StartWorkflow {
        workflow_id: WorkflowId,
        name: String,
        version: Option<u32>,
        input: Json,
        correlation_id: Option<String>,
    },
    /// The workflow reached a terminal state.
    Finished,
    /// An EVENT task's message, to publish and then report with [`Input::EventPublished`]
    /// (derived by [`pending_events`] after every commit and at recovery; the message id is the
    /// task id, so a repeat is deduplicated downstream).
    PublishEvent {
        workflow_id: WorkflowId,
        event: PendingEvent,
    },
}

/// The outcome of one input.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The next state (version + 1), or `None` when nothing changed.
    pub record: Option<WorkflowRecord>,
    pub effects: Vec<Effect>,
}

/// Why an input was refused. Refusals change nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
pub enum Error {
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    Invalid(String),
}

/// The kinds of timer a workflow may have armed.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub enum TimerKind {
    /// A task stayed SCHEDULED past `pollTimeoutSeconds`.
    PollTimeout,
    /// An IN_PROGRESS task got no update for `responseTimeoutSeconds` (+ `callbackAfterSeconds`).
    ResponseTimeout,
    /// An attempt ran past its `timeoutSeconds`.
    TaskTimeout,
    /// All attempts together ran past `totalTimeoutSeconds`.
    TotalTimeout,
    /// The workflow ran past its definition's `timeoutSeconds`.
    WorkflowTimeout,
    /// A WAIT task's `duration` or `until` came (its `waitTimeout`): it completes.
    Wait,
    /// A SCHEDULED EVENT task's publication was not reported by its due time: the decision
    /// records another attempt, and the commit of that write publishes the message again
    /// (deduplicated downstream by the task id). Backs off from attempt to attempt.
    EventPublish,
}

/// Identifies a timer within its workflow.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct TimerKey {
    pub kind: TimerKind,
    /// The task the timer watches (`None` for workflow timers).
    pub task_id: Option<TaskId>,
}

/// A timer a workflow needs armed, derived from its state.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Timer {
    pub due_ms: NowMs,
    pub key: TimerKey,
}

/// A task that workers may poll, derived from its workflow's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ready {
    pub task_id: TaskId,
    /// What workers poll for (the task definition's name).
    pub task_type: String,
    pub domain: Option<String>,
    pub priority: i32,
    /// When the task may be handed out (a retry's backoff, a `callbackAfterSeconds`).
    pub visible_at_ms: NowMs,
}

mod advance;
mod decide;
mod derive;
mod expr;
pub mod mutation;
pub use expr::resolve_in;
mod nav;
mod ops;
mod schedule;
mod state;
mod validate;
mod wait;

#[cfg(any(test, feature = "testing"))]
pub mod testing;
#[cfg(test)]
mod tests;

pub use decide::{decide, decide_all, fail_oversized, start};
pub use derive::{pending_events, ready_tasks, timers, PendingEvent};
pub use validate::validate_workflow_def;
