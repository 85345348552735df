//! A Serverless Workflow (DSL 1.0) instance's progress through its document, as its workflow
//! record keeps it. The document itself is the instance's definition (`WorkflowDef::dsl`); this
//! is where the run stands: `$context`, the task lists being run, the tasks running in them, and
//! the output or the error the instance ended with. Tasks that wait on the world (a call, a
//! `wait`, a child workflow) and every task that ran are also Conductor tasks of the workflow,
//! so pollers, timers, search and the UI see them as they see any task.
//!
//! Positions are JSON pointers into the document (`/do/0/getPet`), the form the DSL's errors
//! name in their `instance`.

use crate::ids::TaskId;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// What every Conductor task of a DSL task that does not wait on the world is typed (`dsl/set`,
/// `dsl/for`, ...): a `/` cannot be in a registered task type, so no worker polls for these.
pub const TASK_TYPE_PREFIX: &str = "dsl/";

/// Where a DSL instance stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct DslRun {
    /// `$context`: what the tasks' `export.as` made of it so far.
    pub context: Value,
    /// The workflow's top-level `do` while the instance runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<Seq>,
    /// The instance's output once it completed (any JSON; Conductor's view shows an object).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// The error the instance faulted with: RFC 7807 problem details (`type`, `status`,
    /// `instance`, `title`, `detail`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Value>,
}

/// A task list being run, one task after another (`do`, a `for` iteration's body, a `try`'s
/// tasks or its `catch.do`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Seq {
    /// The list's pointer (`/do`, `/do/1/retry/try`).
    pub at: String,
    /// The position of the task running or next to run.
    pub index: usize,
    /// The data flowing through the list: its input, then each task's transformed output.
    pub data: Value,
    /// Variables the list's expressions see besides the standard ones (`$item` and `$index` in
    /// a `for`, the caught error in a `catch.do`), without their `$`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub vars: BTreeMap<String, Value>,
    /// The task running at `index`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current: Option<Box<Frame>>,
}

/// A task being run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Frame {
    /// The task's pointer (`/do/0/getPet`).
    pub at: String,
    pub name: String,
    /// The Conductor task that shows this run of it.
    pub task_id: TaskId,
    /// `$input`: the task's input after `input.from`.
    pub input: Value,
    pub body: Body,
    /// The task's `timeout` as a WAIT task due when it runs out, while the task runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<TaskId>,
}

/// What a running task is doing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum Body {
    /// Waiting on the world: its Conductor task (a worker's function, an HTTP call, a timer, a
    /// child workflow) says when it ends and how.
    External,
    /// `do`: its own list.
    Do { seq: Seq },
    /// `for`: the collection evaluated when it started, the iteration running, and the data
    /// the next iteration starts from.
    For {
        items: Vec<Value>,
        index: usize,
        data: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        seq: Option<Seq>,
    },
    /// `fork`: every branch at once.
    Fork { branches: Vec<Branch> },
    /// `try`: its tasks (attempt 1 and every retry), then its `catch.do` once caught.
    Try {
        attempt: u32,
        seq: Seq,
        /// Running `catch.do`, not the tasks tried.
        #[serde(default)]
        catching: bool,
        /// The retry delay's timer (a WAIT task) while one runs.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        delay: Option<TaskId>,
        /// The error that started the delay, kept for the retry's `when` checks.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<Value>,
        /// When the first attempt started (a retry limit's `duration` counts from it).
        started_ms: i64,
    },
    /// `listen`: waiting for events (see [`Listening`]).
    Listen(Box<Listening>),
    /// `call: a2a`: a call to an A2A agent, one stage at a time (see [`A2aCall`]).
    A2a(Box<A2aCall>),
}

/// A `call: a2a` as it goes: the agent card read, the request sent (at most once), the remote
/// task followed with `tasks/get` until it settles. Each stage is a Conductor task of the
/// workflow (`step`), so a restart resumes the stage it was in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct A2aCall {
    pub stage: A2aStage,
    /// The stage's Conductor task: an HTTP task, or the WAIT between two polls.
    pub step: TaskId,
    /// The JSON-RPC method and its parameters (a `message/send`'s with its `messageId`).
    pub method: String,
    pub params: Value,
    /// The agent's JSON-RPC endpoint, once known (`server`, or the card's).
    #[serde(default)]
    pub url: String,
    /// The `Authorization` header the calls carry, if the endpoint authenticates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization: Option<String>,
    /// The remote task being followed, once the send answered one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_task: Option<String>,
    /// The `tasks/get` polls made so far (the wait between two grows with them).
    #[serde(default)]
    pub polls: u32,
    /// The agent speaks only A2A 1.0 (its card lists a 1.0 JSON-RPC interface and no v0.3
    /// `url`): requests go out in 1.0's method names and message shapes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub v1: bool,
    /// A stream's results so far (`message/stream`, `tasks/resubscribe`), in order: the call's
    /// output once its task settles.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub streamed: Vec<Value>,
}

/// Where a `call: a2a` stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum A2aStage {
    /// Reading the agent card.
    Card,
    /// The request sent (an at-most-once HTTP task).
    Send,
    /// Waiting before the next poll.
    Wait,
    /// A `tasks/get` poll.
    Poll,
}

/// A `listen` as it waits: the events it consumed and what they settled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Listening {
    /// The event types its filters name, which decide the events offered to it.
    pub types: Vec<String>,
    /// The events consumed so far, as `read` says, in the order they came.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<Value>,
    /// For `all`: which filters an event has matched.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub matched: Vec<bool>,
    /// The correlation keys the consumed events resolved, by key: a key with `expect` has the
    /// expected value, one without takes the first consumed event's value, which later events
    /// must agree with.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub correlations: BTreeMap<String, Value>,
    /// The ids of the latest messages offered (at most [`LISTEN_SEEN_MAX`]), so that a message
    /// delivered again is not consumed again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub seen: Vec<String>,
    /// For an `any` whose `until` is events to wait for: which of its filters an event has
    /// matched (`until.all`), and whether the `until` strategy was met.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub until_matched: Vec<bool>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub until_met: bool,
    /// With `foreach`: the events consumed and not yet processed, oldest first (as read);
    /// `events` then holds the processed ones' outputs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub queued: Vec<Value>,
    /// With `foreach`: its `do` running for the oldest consumed event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iteration: Option<Seq>,
}

impl Listening {
    /// How many events it consumed: processed, queued, and the one being processed.
    pub fn consumed(&self) -> usize {
        self.events.len() + self.queued.len() + usize::from(self.iteration.is_some())
    }
}

/// What a `schedule.on` that gathers events (`all`, `any` with `until`, `correlate`) holds
/// between them: the groups gathering, by the number each opened with, so oldest first (an
/// event joins the first group that its filters and correlation values fit, else it opens a
/// group), and the ids of the latest messages offered, so that a message delivered again joins
/// no group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Gathering {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub groups: BTreeMap<u64, Listening>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub seen: Vec<String>,
    /// How many groups opened, which numbers the next one.
    #[serde(default)]
    pub opened: u64,
    /// How many groups completed, which numbers the next one's start.
    #[serde(default)]
    pub completed: u64,
    /// How many groups were dropped unfinished (past `limits::GATHER_GROUPS_MAX` or
    /// `limits::GATHERING_BYTES_MAX`).
    #[serde(default)]
    pub dropped: u64,
    /// The size of the groups, as JSON: kept as they change, so that bounding it costs no
    /// more than the group an event touched.
    #[serde(default)]
    pub bytes: u64,
}

/// How many offered message ids a `listen` remembers.
pub const LISTEN_SEEN_MAX: usize = 256;

impl DslRun {
    /// The event types the instance's running `listen` tasks wait for.
    pub fn listening(&self) -> Vec<&str> {
        let mut types = Vec::new();
        if let Some(root) = &self.root {
            root.listening(&mut types);
        }
        types.sort_unstable();
        types.dedup();
        types
    }
}

impl Seq {
    fn listening<'a>(&'a self, types: &mut Vec<&'a str>) {
        if let Some(frame) = &self.current {
            frame.listening(types);
        }
    }
}

impl Frame {
    fn listening<'a>(&'a self, types: &mut Vec<&'a str>) {
        match &self.body {
            Body::External | Body::A2a(_) => {}
            Body::Do { seq } | Body::Try { seq, .. } => seq.listening(types),
            Body::For { seq, .. } => {
                if let Some(seq) = seq {
                    seq.listening(types);
                }
            }
            Body::Fork { branches } => {
                for branch in branches {
                    if let Branch::Running { frame } = branch {
                        frame.listening(types);
                    }
                }
            }
            Body::Listen(listening) => {
                types.extend(listening.types.iter().map(String::as_str));
                if let Some(seq) = &listening.iteration {
                    seq.listening(types);
                }
            }
        }
    }
}

/// One branch of a `fork`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "state")]
pub enum Branch {
    Running {
        frame: Box<Frame>,
    },
    /// Ended with this (transformed) output.
    Done {
        output: Value,
    },
    /// Cancelled: another branch won a competing fork.
    Cancelled,
}
