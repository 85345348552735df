//! The peer protocol: what one node asks another over the peer transport, and what it answers.
//! Operations for a workflow go to its partition's leader, reads that must see the latest committed
//! state go there too, polls gather tasks from the partitions other nodes lead, and membership
//! changes reach the node that must make them.
//!
//! Encoding: one byte of format version ([`FORMAT_VERSION`]; a node reads that version only), then
//! bincode's standard encoding of a [`Envelope`] or of a reply (`Result<Reply, Failure>`). Fields
//! that hold Conductor documents (definitions, workflows, tasks: arbitrary JSON inputs and outputs,
//! which bincode cannot carry through serde) travel as JSON bytes inside the bincode frame.
//!
//! A request carries a hop count and is never forwarded more than [`HOPS_MAX`] times, so a
//! leadership change in flight cannot bounce a request around the cluster.

use crate::input::WorkflowOp;
use crate::model::{EventExecution, Task, WorkflowStatus, WorkflowSummary};
use crate::record::dead_letter::DeadLetter;
use crate::record::{
    MetaCommand, MetaOutcome, NodeEntry, PartitionCommand, PartitionOutcome, WorkflowRecord,
};
use crate::status::GroupStatus;
use crate::{ErrorCode, NodeId, PartitionId, TaskId, WorkflowId};
use serde::{Deserialize, Serialize};

/// The format version this build writes and reads.
pub const FORMAT_VERSION: u8 = 1;
/// Largest request or reply a node decodes.
pub const MESSAGE_BYTES_MAX: usize = 64 * 1024 * 1024;
/// Longest a forwarded request may take (a workflow operation waits for a Raft commit).
pub const FORWARD_TIMEOUT_MS: u64 = 8_000;
/// Longest a peer may take to answer a poll (it leases what it has without waiting).
pub const POLL_PEER_TIMEOUT_MS: u64 = 1_500;
/// Most hops a request travels.
pub const HOPS_MAX: u8 = 1;

/// What one node asks another.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Request {
    /// An operation for a workflow's actor.
    Workflow {
        id: WorkflowId,
        #[serde(with = "json")]
        op: WorkflowOp,
    },
    /// A workflow's record as its partition's leader has it.
    Read { id: WorkflowId },
    /// The same, once the workflow finished or holds a task of one of `task_refs`, waiting up to
    /// `wait_ms` for that.
    Wait {
        id: WorkflowId,
        task_refs: Vec<String>,
        wait_ms: u64,
    },
    /// The workflow a task belongs to.
    TaskOwner { task: TaskId },
    /// Lease up to `count` ready tasks from the partitions the receiver leads, without waiting.
    Poll {
        task_type: String,
        worker_id: Option<String>,
        domain: Option<String>,
        count: usize,
    },
    /// Which of `wanted` have tasks ready on the receiver that its own polls left unclaimed,
    /// waiting up to `wait_ms` for one (the sender's backlog watcher).
    Backlog { wanted: Vec<Wanted>, wait_ms: u64 },
    /// A definition change, for the meta group's leader.
    Meta(#[serde(with = "json")] MetaCommand),
    /// The meta group's applied index on its leader: a reader waits until its replica has applied
    /// as much, so definitions written through any node are visible to the next request anywhere.
    MetaReadIndex,
    /// A node asks to join the cluster (sent to any member; carried on to the meta leader).
    Join(NodeEntry),
    /// The Raft status of every group the receiver hosts.
    Groups,
    /// The leader of a partition, as a node hosting a replica of it knows it.
    Locate { partition: PartitionId },
    /// Start hosting an empty replica of a partition, to be added to its membership.
    Host { partition: PartitionId },
    /// Stop hosting a partition's replica (it left the membership) and delete it.
    Unhost { partition: PartitionId },
    /// For the partition's leader: add `node` (peer address `addr`) as a learner; it catches up
    /// in the background (the leader's status shows its lag) and [`Request::Promote`] makes it a
    /// voter.
    AddReplica {
        partition: PartitionId,
        node: NodeId,
        addr: String,
    },
    /// For the partition's leader: remove `node` (not the leader) from the membership.
    RemoveReplica {
        partition: PartitionId,
        node: NodeId,
    },
    /// For the partition's leader: become a learner, so the other voters elect a new leader.
    StepDown { partition: PartitionId },
    /// The workflows of these partitions (hosted by the receiver) that match a search: how many,
    /// and the first `query.start + query.size` of them in search order, without their tasks.
    Search {
        query: SearchQuery,
        partitions: Vec<PartitionId>,
    },
    /// Ids of RUNNING workflows of a name (and version) in these partitions.
    Running {
        name: String,
        version: Option<u32>,
        partitions: Vec<PartitionId>,
    },
    /// Do not start elections for the partition for `ms` (so that another voter is elected).
    HoldElections { partition: PartitionId, ms: u64 },
    /// Start an election for the partition now, once this replica's membership no longer has
    /// `leaving` as a voter and its log reaches `last_log` (the voter a leadership transfer
    /// chose, after the leader `leaving` stepped down with `last_log` as its last entry: Raft's
    /// "timeout now").
    Elect {
        partition: PartitionId,
        leaving: NodeId,
        last_log: u64,
    },
    /// For the partition's leader: make learner `node`, caught up, a voter.
    Promote {
        partition: PartitionId,
        node: NodeId,
    },
    /// For the partition's leader: propose a command that no workflow actor owns (event
    /// execution records, Baton's own event queues).
    Partition {
        partition: PartitionId,
        #[serde(with = "json")]
        command: PartitionCommand,
    },
    /// Event execution records of these partitions (hosted by the receiver), at most `limit`.
    Executions {
        partitions: Vec<PartitionId>,
        handler: Option<String>,
        limit: usize,
    },
    /// Dead letters of these partitions (hosted by the receiver), at most `limit`.
    DeadLetters {
        partitions: Vec<PartitionId>,
        limit: usize,
    },
    /// Ready tasks in the queues of these partitions (led by the receiver) per task type (every
    /// type when `types` is empty), counting the tasks of `domain`.
    QueueSizes {
        types: Vec<String>,
        domain: QueueDomain,
        partitions: Vec<PartitionId>,
    },
    /// Permits to lease these claimed tasks of a type with a concurrency or rate limit, from the
    /// type's keeper: the leader of the partition the type's name hashes to.
    Permits {
        task_type: String,
        task_ids: Vec<TaskId>,
    },
    /// The tasks of `task_type` IN_PROGRESS on these partitions, with their start times; the
    /// receiver answers only for partitions it leads (confirmed), else fails.
    InProgress {
        task_type: String,
        partitions: Vec<PartitionId>,
        /// Tasks the keeper granted permits for and no count showed yet: the answer says which
        /// of them the receiver saw end.
        pending: Vec<TaskId>,
    },
    /// Ids of the workflows of these partitions whose running Serverless Workflow `listen`
    /// tasks wait for events of `event_type`.
    Listening {
        event_type: String,
        partitions: Vec<PartitionId>,
    },
    /// [`Request::Wait`] that also ends once the workflow waits in a Serverless Workflow
    /// `listen` (an A2A task asking for input).
    WaitSettled {
        id: WorkflowId,
        task_refs: Vec<String>,
        wait_ms: u64,
    },
}

/// Tasks of a type IN_PROGRESS on some partitions, with their start times, and those of the
/// asked ones that were seen ending there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct InProgressTasks {
    pub running: Vec<(TaskId, crate::model::EpochMs)>,
    pub ended: Vec<TaskId>,
}

/// A keeper's answer to [`Request::Permits`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct PermitGrant {
    /// The tasks that may be leased, in the order asked.
    pub granted: Vec<TaskId>,
    /// How long, from the ask, the permits hold: a lease decided later is refused.
    pub valid_ms: u64,
    /// When some were refused: how long until asking again may be worth it.
    pub retry_in_ms: u64,
}

/// Which tasks a queue count covers, by domain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum QueueDomain {
    /// Tasks of every domain and tasks without one.
    Every,
    /// Tasks of exactly this domain (none: tasks without a domain).
    Only(Option<String>),
}

impl QueueDomain {
    /// Whether a task of `domain` is counted.
    pub fn covers(&self, domain: Option<&str>) -> bool {
        match self {
            QueueDomain::Every => true,
            QueueDomain::Only(d) => d.as_deref() == domain,
        }
    }
}

/// The answer to a [`Request`] that succeeded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Reply {
    /// Tasks handed to the asking worker: leased by a poll, or by a workflow operation that leases
    /// (an update that takes the next task in the same step).
    Tasks(#[serde(with = "json")] Vec<Task>),
    Record(#[serde(with = "json")] Option<Box<WorkflowRecord>>),
    Owner(WorkflowId),
    /// The wanted (type, domain) pairs with tasks waiting.
    Backlog(Vec<Wanted>),
    Meta(MetaOutcome),
    Index(u64),
    /// The cluster a joining node joins: its partition count and members.
    Joined {
        partitions: u16,
        members: Vec<NodeEntry>,
    },
    Groups(Vec<GroupStatus>),
    Leader(Option<NodeId>),
    Found {
        total: u64,
        #[serde(with = "json")]
        hits: Vec<Hit>,
    },
    Ids(Vec<String>),
    Done,
    Outcome(#[serde(with = "json")] PartitionOutcome),
    Executions(#[serde(with = "json")] Vec<EventExecution>),
    DeadLetters(#[serde(with = "json")] Vec<DeadLetter>),
    /// Ready tasks per task type (the answer to [`Request::QueueSizes`]).
    Sizes(std::collections::BTreeMap<String, u64>),
    Permits(PermitGrant),
    /// The answer to [`Request::InProgress`].
    InProgress(InProgressTasks),
}

/// Why a request failed: its stable code and a message for people.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    pub code: ErrorCode,
    pub message: String,
}

/// A task type (and domain) some poll on the asking node wants.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Wanted {
    pub task_type: String,
    pub domain: Option<String>,
}

/// Filters of a workflow search (`GET /api/workflow/search`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SearchQuery {
    pub workflow_name: Option<String>,
    pub correlation_id: Option<String>,
    pub status: Option<WorkflowStatus>,
    /// Free text matched against workflow id, name and correlation id.
    pub free_text: Option<String>,
    pub start: usize,
    pub size: usize,
}

/// A search hit: the workflow's create time (the sort key) and its summary.
pub type Hit = (i64, WorkflowSummary);

/// A request as it travels: the hops so far, and the request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    pub hops: u8,
    pub request: Request,
}

/// Why bytes from a peer could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("a peer message is empty")]
    Empty,
    #[error(
        "peer message format version {0} is not readable by this build (reads {FORMAT_VERSION})"
    )]
    Version(u8),
    #[error("peer message is malformed: {0}")]
    Body(String),
}

fn config() -> impl bincode::config::Config {
    bincode::config::standard().with_limit::<MESSAGE_BYTES_MAX>()
}

fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    let mut out = vec![FORMAT_VERSION];
    // Writing plain data into a Vec fails only when a JSON field cannot be written, and every
    // document here serialises (string map keys only).
    bincode::serde::encode_into_std_write(value, &mut out, config())
        .expect("peer messages serialise");
    out
}

fn decode<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, DecodeError> {
    let (&version, body) = bytes.split_first().ok_or(DecodeError::Empty)?;
    if version != FORMAT_VERSION {
        return Err(DecodeError::Version(version));
    }
    let (value, used) = bincode::serde::decode_from_slice(body, config())
        .map_err(|e| DecodeError::Body(e.to_string()))?;
    if used != body.len() {
        return Err(DecodeError::Body(format!(
            "{} bytes left over",
            body.len() - used
        )));
    }
    Ok(value)
}

pub fn encode_request(envelope: &Envelope) -> Vec<u8> {
    encode(envelope)
}

pub fn decode_request(bytes: &[u8]) -> Result<Envelope, DecodeError> {
    decode(bytes)
}

pub fn encode_reply(reply: &Result<Reply, Failure>) -> Vec<u8> {
    encode(reply)
}

pub fn decode_reply(bytes: &[u8]) -> Result<Result<Reply, Failure>, DecodeError> {
    decode(bytes)
}

/// A field carried as JSON bytes inside the bincode frame.
mod json {
    use serde::de::{DeserializeOwned, Error as _};
    use serde::ser::Error as _;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<T: Serialize, S: Serializer>(value: &T, s: S) -> Result<S::Ok, S::Error> {
        let bytes = serde_json::to_vec(value).map_err(S::Error::custom)?;
        s.serialize_bytes(&bytes)
    }

    pub fn deserialize<'de, T: DeserializeOwned, D: Deserializer<'de>>(
        d: D,
    ) -> Result<T, D::Error> {
        let bytes = serde_bytes::ByteBuf::deserialize(d)?;
        serde_json::from_slice(&bytes).map_err(D::Error::custom)
    }
}

#[cfg(test)]
pub(crate) mod tests;
