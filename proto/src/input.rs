//! What a workflow accepts: the input that creates one ([`StartInput`]), the inputs a running one
//! decides on ([`Input`]), and the operation that carries either to its actor ([`WorkflowOp`]).
//!
//! The engine decides on these; the node routes them to a partition's leader, across nodes when
//! needed (`crate::peer`). They live here so that the engine, the node and the peer protocol share one
//! definition.

use crate::model::{Json, RerunWorkflowRequest, SkipTaskRequest, TaskResult, WorkflowDef};
use crate::{TaskId, WorkflowId};
use std::collections::BTreeMap;

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

impl StartInput {
    /// A start of `def` as `workflow_id` with `input` and nothing else: no correlation id,
    /// priority 0, no domains, no parent, not a rerun, not started by an event.
    pub fn new(workflow_id: WorkflowId, def: WorkflowDef, input: Json) -> StartInput {
        StartInput {
            workflow_id,
            def,
            input,
            correlation_id: None,
            priority: 0,
            task_to_domain: BTreeMap::new(),
            parent_workflow_id: None,
            parent_workflow_task_id: None,
            re_run_from_workflow_id: None,
            event: None,
        }
    }
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
        lease: crate::worker::Lease,
    },
    /// A worker polled: move this SCHEDULED (or re-queued IN_PROGRESS) task to IN_PROGRESS for it.
    Lease {
        task_id: TaskId,
        worker_id: Option<String>,
    },
    /// A timer derived by the engine's `timers` came due.
    Timer(TimerKey),
    Pause,
    Resume,
    Terminate {
        reason: Option<String>,
    },
    /// Retry the last failed task of a FAILED / TIMED_OUT / TERMINATED workflow.
    Retry,
    /// `Retry` with `resumeSubworkflowTasks`: a failed SUB_WORKFLOW task goes back IN_PROGRESS
    /// waiting for the same child, which is retried in its turn (the same way), instead of a new
    /// attempt starting a new child.
    RetryResumingSubworkflows,
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
        /// For a task type with a concurrency or rate limit: the time (the deciding leader's
        /// clock, ms) until which the permits the poll was granted hold. Past it, nothing is
        /// leased: the keeper that granted them no longer counts them.
        permit_until: Option<crate::model::EpochMs>,
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
    /// A SUB_WORKFLOW task's child workflow ended: the task completes with the child's output,
    /// or fails (FAILED, TIMED_OUT; CANCELED when it was terminated) with its reason. A report
    /// for another child, or for a task that no longer waits, changes nothing.
    ChildEnded {
        task_id: TaskId,
        child: WorkflowId,
        status: crate::model::WorkflowStatus,
        output: Json,
        reason: Option<String>,
    },
    /// The work a task waited for was performed (a script evaluated, a workflow
    /// started): the task completes with what it produced or fails with the reason. Anything
    /// else ignores it.
    Performed {
        task_id: TaskId,
        /// The task's iteration when the work was asked for (see `engine::PendingWork`).
        iteration: u32,
        outcome: Result<serde_json::Value, String>,
    },
    /// The end of a terminal workflow (`end_time`: its `endTime`, naming which end) was
    /// published to its `workflowStatusListenerSink`: the publication is recorded done. A
    /// report for another end, or for a workflow that owes none, changes nothing. A failed
    /// publication is not reported: the workflow's `StatusPublish` timer has it tried again.
    StatusPublished {
        end_time: i64,
    },
    /// An event (a CloudEvent) offered to a Serverless Workflow instance's running `listen`
    /// tasks: each whose filters it matches consumes it. `message_id` names the delivery: a
    /// repeat is not consumed again. Anything else ignores it.
    Listened {
        message_id: String,
        event: serde_json::Value,
    },
    /// The leader is about to make the call of an at-most-once HTTP task: the task goes from
    /// SCHEDULED to IN_PROGRESS, committed before the call is made, so no leader makes it
    /// again. Refused (`Conflict`) for a task that is not waiting for such a call (claimed
    /// already, ended, another iteration): the caller then makes no call.
    Claim {
        task_id: TaskId,
        iteration: u32,
    },
    /// A Serverless Workflow instance's lifecycle events numbered below `upto` were published
    /// to the operator's sink: they leave its record. Anything else ignores it.
    LifecyclePublished {
        upto: u64,
    },
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
    /// A task's work (a script, a workflow to start) was not reported performed by its due
    /// time: the decision records another attempt, whose commit performs it again.
    Perform,
    /// A terminal workflow's end was not reported published to its status listener sink by
    /// its due time: the decision records another attempt (or gives up after the last one),
    /// whose commit publishes it again.
    StatusPublish,
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

/// One operation on one workflow, carried to the workflow's actor on its partition's leader.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum WorkflowOp {
    Start(Box<StartInput>),
    Input(Box<Input>),
    /// Appends a line to a task's execution log.
    AddLog(TaskId, String),
    Remove,
}
