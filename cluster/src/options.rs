//! `GroupOptions`: how one Raft group is named, who runs it and how it behaves — timing, snapshot
//! policy and the limits that turn overload into back-pressure instead of memory growth — and,
//! for a multi-node group, [`ClusterOptions`]: the node's Raft router (its transport) and the
//! voters a fresh group starts with. Without cluster options a group is the single-node default:
//! one voter, no network.

use crate::error::Error;
use crate::network::RaftRouter;
use proto::NodeId;
use std::collections::BTreeMap;
use std::net::SocketAddr;

/// Longest group name: names travel in every Raft message.
pub const GROUP_NAME_BYTES_MAX: usize = 128;

/// How a group reaches its peers and how a fresh cluster forms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterOptions {
    /// The node's Raft router, on the node's transport; shared by every group of the node.
    pub router: RaftRouter,
    /// The voters of the group when it is created on a fresh store, with their peer addresses.
    /// Exactly one node forms the membership: the smallest id here (when it is the local node);
    /// the others wait to be contacted. Ignored once the store holds a membership. Empty on a
    /// node that joins later (it waits to be added with `Group::add_learner`).
    pub initial_voters: BTreeMap<NodeId, SocketAddr>,
    /// The initial voter that forms the membership (and so most likely leads first); the smallest
    /// initial voter when `None`. Every node must pass the same value. Lets a node spread its
    /// groups' first leaders over the cluster.
    pub former: Option<NodeId>,
}

/// Options of one group. Build with [`GroupOptions::new`] (or a struct literal with
/// `..Default::default()`) and adjust the knobs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupOptions {
    /// Group name, also the prefix of its trees: `"meta"`, `"p0"`..`"p7"`. Non-empty, no `/`.
    pub name: String,
    /// The local node (the single voter of the group without `cluster`).
    pub node: NodeId,
    /// Peers and initial voters of a multi-node group; `None` = single voter, no network.
    pub cluster: Option<ClusterOptions>,
    /// Leader heartbeat interval.
    pub heartbeat_ms: u64,
    /// Lower bound of the randomized election timeout; must exceed `heartbeat_ms`.
    pub election_timeout_min_ms: u64,
    /// Upper bound of the randomized election timeout; must exceed `election_timeout_min_ms`.
    pub election_timeout_max_ms: u64,
    /// Build a snapshot once this many entries were applied since the last one (0 = never).
    pub snapshot_logs_since_last: u64,
    /// Entries kept in the log after a snapshot covers them (lets lagging followers catch up from
    /// the log instead of a full snapshot).
    pub logs_to_keep_after_snapshot: u64,
    /// Maximum entries in one replication message to a follower.
    pub append_entries_max: u64,
    /// How long [`crate::Group::open`] waits for the local node to lead its group (single node:
    /// an error after it), or for any node to lead it (cluster: `open` returns after it anyway).
    pub leader_wait_ms: u64,
    /// Largest chunk of a snapshot sent to a follower in one message (below the transport's
    /// `frame_bytes_max`).
    pub snapshot_chunk_bytes_max: u64,
    /// How long sending and installing one snapshot chunk on a follower may take.
    pub install_snapshot_timeout_ms: u64,
    /// Maximum proposals queued for batching on one group; further proposals wait (back-pressure).
    pub proposals_in_flight_max: usize,
    /// Maximum size of one command; larger ones are rejected before anything is proposed.
    pub command_bytes_max: usize,
    /// Maximum commands packed into one log entry (group commit).
    pub batch_commands_max: usize,
    /// Maximum total command bytes packed into one log entry (a single larger command still goes
    /// alone, bounded by `command_bytes_max`).
    pub batch_bytes_max: usize,
    /// Maximum batches submitted to Raft and not yet applied; while they are in flight, new
    /// proposals gather into the next batch. One (the default) makes a loaded group's entries
    /// the largest: most of a write's cost is per entry (an append, a round to each follower,
    /// an apply on every replica), and at W2's edge at RF 3 one batch in flight took 0.26-0.39
    /// entries per step against 0.40-0.51 with two, and 628-739 CPU-ms per 1,000 steps against
    /// 734-867. An idle group still proposes a lone command at once.
    pub batches_in_flight_max: usize,
    /// Applied entries buffered in memory before the state tree's backend is written (see
    /// [`crate::storage::buffered`]); 0 writes it after every apply. Between checkpoints the
    /// state is durable in the log, which a restart replays.
    pub state_checkpoint_entries: u64,
}

impl GroupOptions {
    /// Options with defaults for group `name` on `node`.
    pub fn new(name: impl Into<String>, node: NodeId) -> Self {
        GroupOptions {
            name: name.into(),
            node,
            ..Default::default()
        }
    }

    /// The same options for a multi-node group: `router` is the node's Raft router and
    /// `initial_voters` the voters of a freshly created group (see [`ClusterOptions`]).
    pub fn with_cluster(
        mut self,
        router: RaftRouter,
        initial_voters: BTreeMap<NodeId, SocketAddr>,
    ) -> Self {
        self.cluster = Some(ClusterOptions {
            router,
            initial_voters,
            former: None,
        });
        self
    }

    /// Which initial voter forms a fresh group's membership (see [`ClusterOptions::former`]).
    /// Only meaningful after [`GroupOptions::with_cluster`].
    pub fn formed_by(mut self, former: NodeId) -> Self {
        if let Some(cluster) = self.cluster.as_mut() {
            cluster.former = Some(former);
        }
        self
    }

    /// Checks the options and turns them into openraft's configuration.
    pub(crate) fn raft_config(&self) -> Result<openraft::Config, Error> {
        if self.name.is_empty() || self.name.contains('/') || self.name.len() > GROUP_NAME_BYTES_MAX
        {
            return Err(Error::Options(format!(
                "group name {:?} must be non-empty, contain no '/' and have at most \
                 {GROUP_NAME_BYTES_MAX} bytes",
                self.name
            )));
        }
        if let Some(cluster) = &self.cluster {
            if cluster.router.node() != self.node {
                return Err(Error::Options(format!(
                    "the router belongs to node {} but the group runs on node {}",
                    cluster.router.node(),
                    self.node
                )));
            }
        }
        if self.snapshot_chunk_bytes_max == 0 || self.install_snapshot_timeout_ms == 0 {
            return Err(Error::Options(
                "snapshot_chunk_bytes_max and install_snapshot_timeout_ms must be positive".into(),
            ));
        }
        let limits = [
            self.proposals_in_flight_max,
            self.command_bytes_max,
            self.batch_commands_max,
            self.batch_bytes_max,
            self.batches_in_flight_max,
        ];
        if limits.contains(&0) {
            return Err(Error::Options(
                "proposals_in_flight_max, command_bytes_max, batch_commands_max, batch_bytes_max \
                 and batches_in_flight_max must be positive"
                    .into(),
            ));
        }
        if self.batches_in_flight_max > tokio::sync::Semaphore::MAX_PERMITS
            || self.command_bytes_max > u32::MAX as usize
            || self.batch_commands_max > u32::MAX as usize
        {
            return Err(Error::Options("a limit is too large".into()));
        }
        let snapshot_policy = if self.snapshot_logs_since_last == 0 {
            openraft::SnapshotPolicy::Never
        } else {
            openraft::SnapshotPolicy::LogsSinceLast(self.snapshot_logs_since_last)
        };
        let config = openraft::Config {
            cluster_name: self.name.clone(),
            heartbeat_interval: self.heartbeat_ms,
            election_timeout_min: self.election_timeout_min_ms,
            election_timeout_max: self.election_timeout_max_ms,
            snapshot_policy,
            max_in_snapshot_log_to_keep: self.logs_to_keep_after_snapshot,
            max_payload_entries: self.append_entries_max,
            snapshot_max_chunk_size: self.snapshot_chunk_bytes_max,
            install_snapshot_timeout: self.install_snapshot_timeout_ms,
            ..Default::default()
        };
        config.validate().map_err(|e| Error::Options(e.to_string()))
    }
}

impl Default for GroupOptions {
    fn default() -> Self {
        GroupOptions {
            name: String::new(),
            node: NodeId(0),
            cluster: None,
            // openraft bounds an AppendEntries RPC by the heartbeat interval: 150 ms leaves room for a
            // flush on a busy 2-core machine. A follower whose vote is committed starts an election
            // only after the leader lease (openraft sets it to the election timeout's maximum) plus a
            // random election timeout: 400 + 200..400 ms of silence, at least four heartbeats, and
            // a dead leader's partitions take writes again within about 0.8-0.9 s (t80 kill test).
            heartbeat_ms: 150,
            election_timeout_min_ms: 200,
            election_timeout_max_ms: 400,
            snapshot_logs_since_last: 10_000,
            logs_to_keep_after_snapshot: 1_000,
            append_entries_max: 300,
            leader_wait_ms: 10_000,
            snapshot_chunk_bytes_max: 1024 * 1024,
            install_snapshot_timeout_ms: 5_000,
            proposals_in_flight_max: 4_096,
            command_bytes_max: 4 * 1024 * 1024,
            batch_commands_max: 1_024,
            batch_bytes_max: 4 * 1024 * 1024,
            batches_in_flight_max: 1,
            state_checkpoint_entries: 256,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate() {
        assert!(GroupOptions::new("p0", NodeId(1)).raft_config().is_ok());
    }

    #[test]
    fn bad_options_are_rejected() {
        assert!(GroupOptions::new("", NodeId(1)).raft_config().is_err());
        assert!(GroupOptions::new("a/b", NodeId(1)).raft_config().is_err());
        assert!(GroupOptions::new("x".repeat(129), NodeId(1))
            .raft_config()
            .is_err());
        let mut options = GroupOptions::new("p0", NodeId(1));
        options.election_timeout_min_ms = 50;
        assert!(options.raft_config().is_err());
    }
}
