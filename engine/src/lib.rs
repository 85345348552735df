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

pub use proto::input::{Input, StartInput, TimerKey, TimerKind};
use proto::model::{Json, RerunWorkflowRequest, SkipTaskRequest, Task, TaskResult, WorkflowDef};
use proto::record::WorkflowRecord;
use proto::{TaskId, WorkflowId};
use std::collections::BTreeMap;

/// Milliseconds since the Unix epoch, supplied by the caller.
pub type NowMs = i64;

/// The randomness the decider may use (jitter, task ids). The runtime passes a seeded generator.
pub type Rng<'a> = &'a mut dyn rand::RngCore;

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
    /// A task's work (see [`pending_work`]), to perform and then report with
    /// [`Input::Performed`]; derived after every commit and at recovery like `PublishEvent`.
    Perform {
        workflow_id: WorkflowId,
        work: PendingWork,
    },
    /// Deliver `input` to another workflow after the commit: a child's end to its parent, a
    /// parent's terminate, pause or resume to its children. Best effort: the parent also asks
    /// for a child's state on a timer.
    Notify {
        workflow_id: WorkflowId,
        input: Box<Input>,
    },
    /// A terminal workflow's end, to publish to its `workflowStatusListenerSink` and then
    /// report with [`Input::StatusPublished`]; derived by [`outbound`] after every commit and at
    /// recovery like `PublishEvent`, until the publication is recorded done.
    PublishStatus {
        workflow_id: WorkflowId,
        publication: StatusPublication,
    },
    /// A Serverless Workflow instance's lifecycle CloudEvents, in order, to publish to the
    /// operator's sink and then report with [`Input::LifecyclePublished`]; derived by
    /// [`outbound`] after every commit and at recovery while any are pending.
    PublishLifecycle {
        workflow_id: WorkflowId,
        events: Vec<proto::record::LifecycleEvent>,
    },
}

/// The registered task definitions, as the decider may look them up: a dynamic task (DYNAMIC,
/// a dynamic fork's branch) runs under its name's registered definition, which its workflow's
/// definition could not carry. The runtime reads them from replicated state, so a decision is
/// still a function of state, input, time and randomness. Registered schemas are looked up the
/// same way, compiled (see [`schema`]).
pub trait Catalog {
    fn task_def(&self, name: &str) -> Option<proto::model::TaskDef>;

    /// A registered schema, compiled: `version`, or the latest when `None`.
    fn schema(
        &self,
        _name: &str,
        _version: Option<u32>,
    ) -> Option<std::sync::Arc<schema::Compiled>> {
        None
    }

    /// A registered Serverless Workflow document (its JSON form): a `run: workflow` starts
    /// an instance of it as a child.
    fn dsl_document(
        &self,
        _namespace: &str,
        _name: &str,
        _version: &str,
    ) -> Option<serde_json::Value> {
        None
    }

    /// A secret of the operator's store by name (a document's `use.secrets` makes it
    /// `$secrets.{name}`).
    fn secret(&self, _name: &str) -> Option<serde_json::Value> {
        None
    }

    /// Whether Serverless Workflow instances record their lifecycle CloudEvents (the operator
    /// named a sink for them).
    fn lifecycle_events(&self) -> bool {
        false
    }

    /// The cluster's active version: which formats a decision may write
    /// (`proto::version::FEATURES`).
    fn cluster_version(&self) -> proto::version::ClusterVersion {
        proto::version::ClusterVersion::FIRST
    }
}

/// No registered definitions (the decisions that create no dynamic task, and tests).
pub struct NoCatalog;

impl Catalog for NoCatalog {
    fn task_def(&self, _name: &str) -> Option<proto::model::TaskDef> {
        None
    }
}

/// The outcome of one input.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The next state (version + 1), or `None` when nothing changed.
    pub record: Option<WorkflowRecord>,
    pub effects: Vec<Effect>,
}

/// Why an input was refused. Refusals change nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    Invalid(String),
}

impl Error {
    /// The stable code the node answers this refusal with.
    pub fn code(&self) -> proto::ErrorCode {
        match self {
            Error::NotFound(_) => proto::ErrorCode::NotFound,
            Error::Conflict(_) => proto::ErrorCode::Conflict,
            Error::Invalid(_) => proto::ErrorCode::Invalid,
        }
    }
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
mod child;
mod decide;
mod derive;
mod derived;
pub mod dsl;
mod expr;
pub mod jq;
mod jsonpath;
mod listener;
pub mod mutation;
pub use expr::resolve_in;
mod nav;
mod ops;
mod params;
pub mod process;
mod schedule;
pub mod schema;
mod state;
mod validate;
mod wait;
mod work;

#[cfg(any(test, feature = "testing"))]
pub mod testing;
#[cfg(test)]
mod tests;

pub use decide::{
    decide, decide_all, decide_all_with, decide_with, fail_oversized, start, start_with,
};
pub use derive::{in_progress_tasks, outbound, pending_events, ready_tasks, timers, PendingEvent};
pub use listener::{status_publication, status_timer, StatusPublication};
pub use validate::validate_workflow_def;
pub use work::{
    pending_work, HttpRequest, OAuth2Grant, PendingWork, StartRequest, Work, AT_MOST_ONCE,
    CLAIM_LOST, CLAIM_MARGIN_MS, HTTP_CONNECT_TIMEOUT_MS, HTTP_READ_TIMEOUT_MS,
};
