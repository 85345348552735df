//! Requests one node forwards to another over the peer transport (`Service::Forward`): operations
//! for a workflow go to its partition's leader, reads that must see the latest committed state go
//! there too, and polls gather tasks from the partitions other nodes lead.
//!
//! A forwarded request carries a hop count and is never forwarded more than once more, so a
//! leadership change in flight cannot bounce a request around the cluster.

use crate::error::{Error, Result};
use crate::partition::WorkflowOp;
use engine::Effect;
use proto::model::{EventExecution, Task};
use proto::record::{
    self, MetaCommand, MetaOutcome, NodeEntry, PartitionCommand, PartitionOutcome, WorkflowRecord,
};
use proto::{NodeId, PartitionId, TaskId, WorkflowId};
use serde::{Deserialize, Serialize};

/// Longest a forwarded request may take (a workflow operation waits for a Raft commit).
pub const FORWARD_TIMEOUT_MS: u64 = 8_000;
/// Longest a peer may take to answer a poll (it leases what it has without waiting).
pub const POLL_PEER_TIMEOUT_MS: u64 = 1_500;
/// Most hops a request travels.
pub const HOPS_MAX: u8 = 1;

/// What one node asks another.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Forward {
    /// An operation for a workflow's actor.
    Workflow { id: WorkflowId, op: WorkflowOp },
    /// A workflow's record as its partition's leader has it.
    Read { id: WorkflowId },
    /// The same, once the workflow finished or holds a task of one of `task_refs`, waiting up to
    /// `wait_ms` for that (`server::wait`).
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
    /// waiting up to `wait_ms` for one (the sender's backlog watcher, `server::backlog`).
    Backlog { wanted: Vec<Wanted>, wait_ms: u64 },
    /// A definition change, for the meta group's leader.
    Meta(MetaCommand),
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
    /// in the background (the leader's status shows its lag) and [`Forward::Promote`] makes it a
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
        query: crate::service::SearchQuery,
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
    /// For the partition's leader: make learner `node`, caught up, a voter.
    Promote {
        partition: PartitionId,
        node: NodeId,
    },
    /// For the partition's leader: propose a command that no workflow actor owns (event
    /// execution records, Baton's own event queues).
    Partition {
        partition: PartitionId,
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
}

/// The answer to a [`Forward`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Reply {
    Effects(Vec<Effect>),
    Record(Option<Box<WorkflowRecord>>),
    Owner(WorkflowId),
    Tasks(Vec<Task>),
    /// The wanted (type, domain) pairs with tasks waiting.
    Backlog(Vec<Wanted>),
    Meta(MetaOutcome),
    Index(u64),
    /// The cluster a joining node joins: its partition count and members.
    Joined {
        partitions: u16,
        members: Vec<NodeEntry>,
    },
    Groups(Vec<cluster::GroupStatus>),
    Leader(Option<NodeId>),
    Found {
        total: u64,
        hits: Vec<crate::server::Hit>,
    },
    Ids(Vec<String>),
    Done,
    Outcome(PartitionOutcome),
    Executions(Vec<EventExecution>),
    DeadLetters(Vec<proto::record::dead_letter::DeadLetter>),
}

/// A task type (and domain) some poll on the asking node wants.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Wanted {
    pub task_type: String,
    pub domain: Option<String>,
}

/// The request as it travels: hops so far, and the request.
#[derive(Debug, Serialize, Deserialize)]
struct Envelope {
    hops: u8,
    request: Forward,
}

pub fn encode_request(hops: u8, request: Forward) -> Vec<u8> {
    record::encode(&Envelope { hops, request })
}

pub fn decode_request(bytes: &[u8]) -> Result<(u8, Forward)> {
    let e: Envelope =
        record::decode(bytes).map_err(|e| Error::Invalid(format!("forwarded request: {e}")))?;
    Ok((e.hops, e.request))
}

pub fn encode_reply(reply: &Result<Reply>) -> Vec<u8> {
    record::encode(reply)
}

pub fn decode_reply(bytes: &[u8]) -> Result<Reply> {
    record::decode::<Result<Reply>>(bytes)
        .map_err(|e| Error::Internal(format!("forwarded reply: {e}")))?
}
