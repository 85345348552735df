//! Membership: joining a running cluster, hosting and unhosting partition replicas, and the
//! controller that moves replicas and leaders as members join and drain.
//!
//! The members are recorded in the meta group ([`proto::record::NodeEntry`]). Every node keeps its
//! transport's address book in step with that record and registers itself in it. The meta group's
//! leader runs the controller: each round it asks every member for the status of the groups it
//! hosts, builds a [`plan::View`], and performs the one step [`plan::next_action`] names. One step
//! at a time, each committed before the next, keeps every partition available and its quorum
//! intact; no step waits for long (a new replica is added as a learner and promoted in a later
//! round, once its leader reports it caught up), so one slow partition does not hold up the rest.
//!
//! Once the node's shutdown has begun ([`super::Stopping`]) its controller stops and takes no more
//! steps, and the node answers the controllers of others that it is going: it does not report its
//! groups (so it counts as down and no step involves it), host a new replica or campaign for a
//! leadership.

use super::{Loops, Stopping};
use crate::error::{Error, Result};
use crate::host::{read, storage, write, Host, GROUP_TREES};
use crate::partition::Partition;
use crate::placement::plan::{self, Action, GroupView, Member, View};
use proto::peer::{self, Reply, Request};
use proto::record::{MetaCommand, MetaOutcome, NodeEntry};
use proto::{NodeId, PartitionId};
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// How often the members are synced and the controller looks at the cluster.
const ROUND_MS: u64 = 500;
/// Longest a member may take to report its groups before the controller counts it as down.
const GROUPS_TIMEOUT_MS: u64 = 2_000;
/// A learner at most this many entries behind its leader's log has caught up: a few replication
/// messages (300 entries each) under load, and within the log the leader keeps after a snapshot,
/// so promoting it to voter neither stalls commits nor needs a snapshot install.
const CAUGHT_UP_LAG: u64 = 1_000;
/// Longest a transfer's target waits to see the old leader's step-down before it leaves the
/// election to its timer.
const ELECT_WAIT_MS: u64 = 500;
/// How long the voters that should not take over a transferred leadership hold their elections.
const HOLD_ELECTIONS_MS: u64 = 5_000;

/// The membership service.
pub struct Membership {
    pub(crate) host: Arc<Host>,
    pub(crate) loops: Loops,
    /// Activates a newer cluster version in the meta leader's rounds.
    upgrade: Arc<super::Upgrade>,
    /// Whether the node's shutdown has begun.
    stopping: Stopping,
}

impl Membership {
    /// The service; in a cluster it starts the membership loop.
    pub(crate) fn start(
        host: Arc<Host>,
        upgrade: Arc<super::Upgrade>,
        stopping: Stopping,
    ) -> Arc<Self> {
        let membership = Arc::new(Self {
            host,
            loops: Loops::default(),
            upgrade,
            stopping,
        });
        if membership.host.transport.is_some() {
            let weak = Arc::downgrade(&membership);
            membership.loops.add(tokio::spawn(run(weak)));
        }
        membership
    }

    /// Stops the membership loop (the controller with it) and waits until it has ended; a step
    /// it was taking is cut where it waits, as at any failure of a step.
    pub(crate) async fn stop_controller(&self) {
        self.loops.stop_and_wait().await;
    }
}

/// The node's membership loop: keeps the address book in step with the meta group, registers this
/// node there, and runs the controller and activation ([`super::Upgrade`]) while this node leads
/// the meta group.
async fn run(inner: Weak<Membership>) {
    let mut registered = false;
    loop {
        tokio::time::sleep(Duration::from_millis(ROUND_MS)).await;
        let Some(inner) = inner.upgrade() else { return };
        if inner.stopping.begun() {
            return;
        }
        inner.sync_members();
        if !registered {
            registered = inner.register_self().await;
        }
        if inner.host.meta.is_leader() {
            inner.control_round().await;
            inner.upgrade.activate_newest().await;
        }
    }
}

/// Whether `learner` has caught up with the log of the leader whose status this is.
fn caught_up(leader: &cluster::GroupStatus, learner: NodeId) -> bool {
    leader.lag(learner).is_some_and(|lag| lag <= CAUGHT_UP_LAG)
}

/// Peer address of a member record.
fn parse_addr(entry: &NodeEntry) -> Result<SocketAddr> {
    entry.addr.parse().map_err(|_| {
        Error::Invalid(format!(
            "node {}: peer address {:?} is not ip:port",
            entry.id.0, entry.addr
        ))
    })
}

impl Membership {
    /// Copies the meta group's member record into the address book and the transport.
    fn sync_members(&self) {
        let recorded = self.host.defs.nodes();
        if recorded.is_empty() {
            return;
        }
        let mut members = write(&self.host.members);
        members.retain(|id, _| *id == self.host.node || recorded.iter().any(|e| e.id == *id));
        for entry in recorded {
            if let Ok(addr) = entry.addr.parse::<SocketAddr>() {
                if members.insert(entry.id, addr) != Some(addr) && entry.id != self.host.node {
                    if let Some(t) = &self.host.transport {
                        t.set_peer(entry.id, addr);
                    }
                }
            }
        }
    }

    /// Records this node (its peer address and binary) in the meta group unless it is there as
    /// it is.
    async fn register_self(&self) -> bool {
        let Some(listen) = self.host.listen else {
            return true;
        };
        let entry = NodeEntry {
            id: self.host.node,
            addr: listen.to_string(),
            draining: false,
            binary: Some(self.host.binary.clone()),
        };
        let recorded = self.host.defs.node(self.host.node);
        if recorded.is_some_and(|r| r.addr == entry.addr && r.binary == entry.binary) {
            return true;
        }
        match self.put_node(entry).await {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(error = %e, "could not register this node yet");
                false
            }
        }
    }

    /// Records `entry` in the meta group; refused when its binary does not serve the cluster's
    /// active version.
    pub(crate) async fn put_node(&self, entry: NodeEntry) -> Result<()> {
        match self.host.propose_meta(MetaCommand::PutNode(entry)).await? {
            MetaOutcome::Applied => Ok(()),
            refused => Err(super::upgrade::refusal(refused)),
        }
    }

    /// On the meta leader: records a joining node, adds it to the meta group as a learner and
    /// answers what it needs to start.
    pub(crate) async fn accept_join(&self, entry: NodeEntry) -> Result<Reply> {
        let addr = parse_addr(&entry)?;
        if let Some(known) = self.host.defs.node(entry.id) {
            if known.addr != entry.addr && self.host.meta.status().voters.contains(&entry.id) {
                return Err(Error::Conflict(format!(
                    "node {} is already a member at {}",
                    entry.id.0, known.addr
                )));
            }
        }
        self.put_node(entry.clone()).await?;
        let status = self.host.meta.status();
        if !status.voters.contains(&entry.id) && !status.learners.contains(&entry.id) {
            self.host
                .meta
                .add_learner(entry.id, addr)
                .await
                .map_err(|e| {
                    Error::Unavailable(format!("adding node {}: {e}; retry", entry.id.0))
                })?;
        }
        write(&self.host.members).insert(entry.id, addr);
        Ok(Reply::Joined {
            partitions: self.host.partition_count(),
            members: self.host.defs.nodes(),
        })
    }

    /// Starts hosting an empty replica of `partition` (idempotent); its leader then adds it.
    pub(crate) async fn host_replica(&self, partition: PartitionId) -> Result<()> {
        if self.host.partition(partition).is_none() {
            self.host.start_replica(partition).await?;
            tracing::info!(%partition, "hosting a new replica");
        }
        Ok(())
    }

    /// Stops hosting `partition` and deletes its replica. Only for a replica that has left the
    /// partition's membership (the controller checks with the leader first).
    pub(crate) async fn unhost_replica(&self, partition: PartitionId) -> Result<()> {
        let _serial = self.host.hosting.lock().await;
        let running = write(&self.host.partitions).remove(&partition.0);
        let stopped = self.host.forget_recovery(partition);
        if let Some(p) = &running {
            p.stop().await;
        } else if !stopped {
            return Ok(());
        }
        self.host
            .db
            .raft_log()
            .drop_group(&format!("p{}", partition.0))
            .await
            .map_err(storage)?;
        for tree in GROUP_TREES {
            self.host
                .db
                .drop_tree(format!("p{}/{tree}", partition.0))
                .map_err(storage)?;
        }
        self.host.db.flush().await.map_err(storage)?;
        tracing::info!(%partition, "replica removed from this node");
        Ok(())
    }

    /// A hosted partition this node leads, for a membership change.
    fn led(&self, partition: PartitionId) -> Result<Arc<Partition>> {
        match self.host.partition(partition) {
            Some(p) if p.group.is_leader() => Ok(p),
            _ => Err(Error::Unavailable(format!(
                "partition {partition} is not led here; retry"
            ))),
        }
    }

    /// On the partition's leader: adds `node` as a learner (once committed; it catches up in the
    /// background). Nothing to do if it is in the membership already.
    pub(crate) async fn add_replica(
        &self,
        partition: PartitionId,
        node: NodeId,
        addr: &str,
    ) -> Result<()> {
        let p = self.led(partition)?;
        let addr: SocketAddr = addr
            .parse()
            .map_err(|_| Error::Invalid(format!("peer address {addr:?} is not ip:port")))?;
        let status = p.group.status();
        if status.voters.contains(&node) || status.learners.contains(&node) {
            return Ok(());
        }
        p.group
            .add_learner(node, addr)
            .await
            .map_err(|e| Error::Unavailable(format!("partition {partition}: {e}")))?;
        tracing::info!(%partition, %node, "learner added");
        Ok(())
    }

    /// On the partition's leader: makes learner `node` a voter, once it has caught up.
    pub(crate) async fn promote(&self, partition: PartitionId, node: NodeId) -> Result<()> {
        let p = self.led(partition)?;
        let status = p.group.status();
        if status.voters.contains(&node) {
            return Ok(());
        }
        if !status.learners.contains(&node) {
            return Err(Error::Conflict(format!(
                "node {} is not a learner of partition {partition}",
                node.0
            )));
        }
        if !caught_up(&status, node) {
            return Err(Error::Unavailable(format!(
                "node {} is still catching up with partition {partition}; retry",
                node.0
            )));
        }
        let mut voters: BTreeSet<NodeId> = status.voters.into_iter().collect();
        voters.insert(node);
        p.group
            .change_voters(voters)
            .await
            .map_err(|e| Error::Unavailable(format!("partition {partition}: {e}")))?;
        tracing::info!(%partition, %node, "replica promoted to voter");
        Ok(())
    }

    /// On the partition's leader: removes `node` (voter or learner, never the leader itself).
    pub(crate) async fn remove_replica(&self, partition: PartitionId, node: NodeId) -> Result<()> {
        if node == self.host.node {
            return Err(Error::Conflict(format!(
                "partition {partition}: the leader cannot remove itself; step down first"
            )));
        }
        let p = self.led(partition)?;
        let unavailable =
            |e: cluster::Error| Error::Unavailable(format!("partition {partition}: {e}"));
        let status = p.group.status();
        if status.voters.contains(&node) {
            let voters: BTreeSet<NodeId> = status
                .voters
                .iter()
                .copied()
                .filter(|v| *v != node)
                .collect();
            p.group.change_voters(voters).await.map_err(unavailable)?;
        }
        let status = p.group.status();
        if status.learners.contains(&node) {
            p.group
                .remove_learners(BTreeSet::from([node]))
                .await
                .map_err(unavailable)?;
        }
        tracing::info!(%partition, %node, "replica removed from the membership");
        Ok(())
    }

    /// On the partition's leader: leaves the membership, so the other voters elect a new leader
    /// (the controller adds a replica back afterwards).
    pub(crate) async fn step_down(&self, partition: PartitionId) -> Result<u64> {
        let p = self.led(partition)?;
        if p.group.status().voters.len() < 2 {
            return Err(Error::Conflict(format!(
                "partition {partition} has no other voter to lead it"
            )));
        }
        p.group
            .remove_voter(self.host.node)
            .await
            .map_err(|e| Error::Unavailable(format!("partition {partition}: {e}")))?;
        tracing::info!(%partition, "stepped down as leader");
        Ok(p.group.status().last_log_index.unwrap_or(0))
    }

    /// Starts no election for `partition` for `ms` (openraft's election timer is off meanwhile;
    /// 0 lifts a hold):
    /// during a leadership transfer, the voters other than the chosen one hold theirs. A voter
    /// that refuses the chosen one's vote because its log is behind starts its elections again
    /// at once (`cluster`'s router), since that transfer cannot complete.
    pub(crate) fn hold_elections(&self, partition: PartitionId, ms: u64) -> Result<()> {
        let p = self
            .host
            .partition(partition)
            .ok_or_else(|| Error::NotFound(format!("partition {partition} is not hosted here")))?;
        let raft = p.group.raft().clone();
        if ms == 0 {
            // A hold lifted: the transfer it was for cannot complete.
            raft.runtime_config().elect(true);
            return Ok(());
        }
        raft.runtime_config().elect(false);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(ms.min(HOLD_ELECTIONS_MS))).await;
            raft.runtime_config().elect(true);
        });
        Ok(())
    }

    /// Takes over `partition`'s leadership on this node (a leadership transfer's target; see
    /// [`cluster::Group::take_over`]) as soon as its replica has the membership without
    /// `leaving`, the leader that stepped down, and its log reaches `last_log`, that leader's
    /// last entry: a replica behind it would be refused, so it answers `Unavailable` after
    /// [`ELECT_WAIT_MS`] instead.
    pub(crate) async fn elect(
        &self,
        partition: PartitionId,
        leaving: NodeId,
        last_log: u64,
    ) -> Result<()> {
        let p = self
            .host
            .partition(partition)
            .ok_or_else(|| Error::NotFound(format!("partition {partition} is not hosted here")))?;
        let mut metrics = p.group.raft().metrics();
        let caught_up = metrics.wait_for(|m| {
            !m.membership_config.voter_ids().any(|v| v == leaving.0)
                && m.last_log_index.unwrap_or(0) >= last_log
        });
        let wait = Duration::from_millis(ELECT_WAIT_MS);
        if !matches!(tokio::time::timeout(wait, caught_up).await, Ok(Ok(_))) {
            return Err(Error::Unavailable(format!(
                "partition {partition}: this replica has not caught up with node {leaving}'s step-down (entry {last_log})"
            )));
        }
        p.group
            .take_over(leaving)
            .await
            .map_err(|e| Error::Unavailable(format!("partition {partition}: {e}")))
    }

    /// Hands `partition`'s leadership to voter `to`: the other voters hold their elections, the
    /// leader steps down, and `to` starts its election at once (its election timer also runs).
    async fn transfer_to(&self, view: &View, partition: PartitionId, to: NodeId) -> Result<()> {
        let g = view
            .partitions
            .get(&partition)
            .ok_or_else(|| Error::NotFound(format!("no partition {partition}")))?;
        let leader = g
            .leader
            .ok_or_else(|| Error::Unavailable(format!("partition {partition} has no leader")))?;
        if !g.voters.contains(&to) || to == leader {
            return Err(Error::Conflict(format!(
                "node {} is not a follower voter of partition {partition}",
                to.0
            )));
        }
        let short = Duration::from_millis(peer::FORWARD_TIMEOUT_MS);
        for v in g.voters.iter().filter(|v| **v != leader && **v != to) {
            let hold = Request::HoldElections {
                partition,
                ms: HOLD_ELECTIONS_MS,
            };
            self.on(*v, hold, short).await?;
        }
        let last_log = match self
            .on(leader, Request::StepDown { partition }, short)
            .await?
        {
            Reply::Index(i) => i,
            other => return Err(Error::Internal(format!("a step-down answered {other:?}"))),
        };
        // The chosen voter campaigns at once rather than after its election timeout. If it
        // cannot (it missed the leader's last entries, so it would lose), the others' holds are
        // lifted and their timers elect one of them.
        let elect = Request::Elect {
            partition,
            leaving: leader,
            last_log,
        };
        if let Err(e) = self.on(to, elect, short).await {
            tracing::info!(%partition, %to, error = %e, "the transfer's target cannot be elected; the other voters elect");
            for v in g.voters.iter().filter(|v| **v != leader && **v != to) {
                let lift = Request::HoldElections { partition, ms: 0 };
                if let Err(e) = self.on(*v, lift, short).await {
                    tracing::debug!(%partition, voter = %v, error = %e, "could not lift a hold");
                }
            }
        }
        Ok(())
    }

    /// The leader of a partition this node hosts, as it knows it; none where its replica is out
    /// of the membership, which hears from no leader.
    pub(crate) fn local_leader(&self, partition: PartitionId) -> Option<NodeId> {
        self.host
            .member_replica(partition)
            .and_then(|p| p.group.leader())
    }

    /// Runs a request on `node`: here, or forwarded.
    async fn on(&self, node: NodeId, request: Request, within: Duration) -> Result<Reply> {
        if node == self.host.node {
            // The same deadline as a forwarded request: a step this node performs itself can
            // wait forever (a leader that removed itself never learns that the change
            // committed), and the controller must go on to its next round.
            return match tokio::time::timeout(within, Box::pin(self.answer(request))).await {
                Ok(reply) => reply,
                Err(_) => Err(Error::Unavailable(format!(
                    "{node} did not finish the request within {} ms",
                    within.as_millis()
                ))),
            };
        }
        self.host
            .forward_within(node, peer::HOPS_MAX - 1, request, within)
            .await
    }

    /// Every member's view of the groups it hosts (members that do not answer are left out).
    pub(crate) async fn gather(&self) -> BTreeMap<NodeId, Vec<cluster::GroupStatus>> {
        let mut nodes: Vec<NodeId> = read(&self.host.members).keys().copied().collect();
        nodes.sort();
        let within = Duration::from_millis(GROUPS_TIMEOUT_MS);
        let asks = nodes
            .into_iter()
            .map(|n| async move { (n, self.on(n, Request::Groups, within).await) });
        futures::future::join_all(asks)
            .await
            .into_iter()
            .filter_map(|(n, r)| match r {
                Ok(Reply::Groups(g)) => Some((n, g)),
                _ => None,
            })
            .collect()
    }

    /// The controller's view of the cluster now.
    async fn view(&self) -> View {
        let reports = self.gather().await;
        let members = self
            .host
            .defs
            .nodes()
            .into_iter()
            .map(|e| {
                let member = Member {
                    draining: e.draining,
                    live: reports.contains_key(&e.id),
                };
                (e.id, member)
            })
            .collect();
        let mut groups: BTreeMap<String, GroupView> = BTreeMap::new();
        let mut leaders: BTreeMap<String, u64> = BTreeMap::new();
        for (node, statuses) in &reports {
            for s in statuses {
                let g = groups.entry(s.name.clone()).or_default();
                g.hosts.insert(*node);
                let leads = s.role == "Leader" && s.leader == Some(*node);
                if leads && leaders.get(&s.name).is_none_or(|t| *t < s.term) {
                    leaders.insert(s.name.clone(), s.term);
                    g.leader = Some(*node);
                    g.voters = s.voters.iter().copied().collect();
                    g.learners = s.learners.iter().copied().collect();
                    g.caught_up = s
                        .learners
                        .iter()
                        .copied()
                        .filter(|l| caught_up(s, *l))
                        .collect();
                }
            }
        }
        let meta = groups.remove("meta").unwrap_or_default();
        let partitions = (0..self.host.partition_count())
            .map(|p| {
                let g = groups.remove(&format!("p{p}")).unwrap_or_default();
                (PartitionId(p), g)
            })
            .collect();
        View {
            members,
            meta,
            partitions,
        }
    }

    /// One controller round on the meta leader: look, then take at most one step. A leader cut
    /// off from its quorum still believes it leads until it hears of a newer term; the read-index
    /// round trip first keeps such a stale leader from running a second controller. A node whose
    /// shutdown has begun takes no step.
    async fn control_round(&self) {
        if self.stopping.begun() {
            return;
        }
        let confirm = self.host.meta.raft().ensure_linearizable();
        let wait = Duration::from_millis(GROUPS_TIMEOUT_MS);
        if !matches!(tokio::time::timeout(wait, confirm).await, Ok(Ok(_))) {
            return;
        }
        let view = self.view().await;
        let Some(action) = plan::next_action(&view) else {
            return;
        };
        // Looked at again: the shutdown may have begun while the view was gathered.
        if self.stopping.begun() {
            return;
        }
        tracing::info!(?action, "membership step");
        if let Err(e) = self.perform(&view, &action).await {
            tracing::warn!(?action, error = %e, "membership step failed; the next round retries");
        }
    }

    async fn perform(&self, view: &View, action: &Action) -> Result<()> {
        let short = Duration::from_millis(peer::FORWARD_TIMEOUT_MS);
        let leader_of = |p: &PartitionId| {
            view.partitions
                .get(p)
                .and_then(|g| g.leader)
                .ok_or_else(|| Error::Unavailable(format!("partition {p} has no leader")))
        };
        let meta_err = |e: cluster::Error| Error::Unavailable(format!("meta group: {e}"));
        match action {
            Action::MetaAddLearner(node) => {
                let addr = self.member_addr(*node)?;
                self.host
                    .meta
                    .add_learner(*node, addr)
                    .await
                    .map_err(meta_err)
            }
            Action::MetaSetVoters(voters) => self
                .host
                .meta
                .change_voters(voters.clone())
                .await
                .map_err(meta_err),
            Action::MetaRemoveLearner(node) => self
                .host
                .meta
                .remove_learners(BTreeSet::from([*node]))
                .await
                .map_err(meta_err),
            Action::AddReplica { partition, node } => {
                let addr = self.member_addr(*node)?.to_string();
                self.on(
                    *node,
                    Request::Host {
                        partition: *partition,
                    },
                    short,
                )
                .await?;
                let request = Request::AddReplica {
                    partition: *partition,
                    node: *node,
                    addr,
                };
                self.on(leader_of(partition)?, request, short)
                    .await
                    .map(drop)
            }
            Action::Promote { partition, node } => {
                let request = Request::Promote {
                    partition: *partition,
                    node: *node,
                };
                self.on(leader_of(partition)?, request, short)
                    .await
                    .map(drop)
            }
            Action::RemoveReplica { partition, node } => {
                let request = Request::RemoveReplica {
                    partition: *partition,
                    node: *node,
                };
                self.on(leader_of(partition)?, request, short)
                    .await
                    .map(drop)
            }
            Action::Transfer { partition, to } => self.transfer_to(view, *partition, *to).await,
            Action::Unhost { partition, node } => self
                .on(
                    *node,
                    Request::Unhost {
                        partition: *partition,
                    },
                    short,
                )
                .await
                .map(drop),
        }
    }

    fn member_addr(&self, node: NodeId) -> Result<SocketAddr> {
        read(&self.host.members)
            .get(&node)
            .copied()
            .ok_or_else(|| Error::NotFound(format!("node {} is not a member", node.0)))
    }

    // ---- administration (the admin API and `batonctl`) ----

    /// Adds a node to the cluster (what `--join` does, for an operator).
    pub(crate) async fn add_node(&self, id: NodeId, addr: SocketAddr) -> Result<()> {
        let entry = NodeEntry {
            id,
            addr: addr.to_string(),
            draining: false,
            binary: None,
        };
        self.route_join(entry).await.map(drop)
    }

    /// Runs a join on the meta leader.
    pub(crate) async fn route_join(&self, entry: NodeEntry) -> Result<Reply> {
        if self.host.transport.is_none() {
            return Err(Error::Invalid(
                "this node runs alone (no --cluster); it cannot take members".into(),
            ));
        }
        if self.host.meta.is_leader() {
            return self.accept_join(entry).await;
        }
        match self.host.meta.leader() {
            Some(l) if l != self.host.node => {
                self.host
                    .forward(l, peer::HOPS_MAX - 1, Request::Join(entry))
                    .await
            }
            _ => Err(Error::Unavailable(
                "the meta group has no leader now; retry".into(),
            )),
        }
    }

    /// Marks a member as draining (or active again): the controller moves its replicas and
    /// leaderships to the other members.
    pub(crate) async fn set_draining(&self, id: NodeId, draining: bool) -> Result<()> {
        match self
            .host
            .propose_meta(MetaCommand::SetDraining { id, draining })
            .await?
        {
            MetaOutcome::Applied => Ok(()),
            _ => Err(Error::NotFound(format!("node {} is not a member", id.0))),
        }
    }

    /// Forgets a drained member. Refused while it still holds a replica or votes in the meta group.
    pub(crate) async fn remove_node(&self, id: NodeId) -> Result<()> {
        let Some(entry) = self.host.defs.node(id) else {
            return Err(Error::NotFound(format!("node {} is not a member", id.0)));
        };
        if !entry.draining {
            return Err(Error::Conflict(format!(
                "node {} is not drained; drain it first (batonctl drain {})",
                id.0, id.0
            )));
        }
        let view = self.view().await;
        let held: Vec<String> = view
            .partitions
            .iter()
            .filter(|(_, g)| {
                g.voters.contains(&id) || g.learners.contains(&id) || g.hosts.contains(&id)
            })
            .map(|(p, _)| p.to_string())
            .collect();
        if !held.is_empty() || view.meta.voters.contains(&id) {
            return Err(Error::Conflict(format!(
                "node {} still holds replicas ({}{}); wait for the drain to finish",
                id.0,
                held.join(", "),
                if view.meta.voters.contains(&id) {
                    " and a meta vote"
                } else {
                    ""
                }
            )));
        }
        // The controller then drops it from the meta group's learners.
        self.host
            .propose_meta(MetaCommand::RemoveNode { id })
            .await?;
        write(&self.host.members).remove(&id);
        Ok(())
    }

    /// Moves a partition's leadership to voter `to`, or to the voter that leads the fewest
    /// partitions; answers the new leader.
    pub(crate) async fn transfer(
        &self,
        partition: PartitionId,
        to: Option<NodeId>,
    ) -> Result<NodeId> {
        if partition.0 >= self.host.partition_count() {
            return Err(Error::NotFound(format!("no partition {partition}")));
        }
        let view = self.view().await;
        let g = view
            .partitions
            .get(&partition)
            .filter(|g| g.leader.is_some())
            .ok_or_else(|| {
                Error::Unavailable(format!("partition {partition} has no leader now; retry"))
            })?;
        let to = match to {
            Some(t) => t,
            None => plan::successor(&view, g).ok_or_else(|| {
                Error::Conflict(format!(
                    "partition {partition} has no other voter to lead it"
                ))
            })?,
        };
        self.transfer_to(&view, partition, to).await?;
        Ok(to)
    }
}

/// The cluster as `GET /api/admin/cluster` shows it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ClusterStatus {
    pub nodes: Vec<NodeStatus>,
    /// The meta group, then the partitions in order.
    pub groups: Vec<GroupSummary>,
}

/// One member.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct NodeStatus {
    pub id: NodeId,
    pub addr: String,
    pub draining: bool,
    /// Answered just now.
    pub live: bool,
    /// Partition replicas it hosts.
    pub replicas: usize,
    /// Partitions it leads.
    pub leads: usize,
}

/// One group across its replicas.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GroupSummary {
    pub name: String,
    pub leader: Option<NodeId>,
    pub term: u64,
    pub voters: Vec<NodeId>,
    pub learners: Vec<NodeId>,
    pub replicas: Vec<ReplicaStatus>,
}

/// One replica of a group.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ReplicaStatus {
    pub node: NodeId,
    pub role: String,
    pub applied: Option<u64>,
    pub snapshot: Option<u64>,
    /// Entries behind the leader's log (`None` where the leader does not say).
    pub lag: Option<u64>,
}

impl Membership {
    /// Members, and every group's leader, term, membership and replicas with their lag.
    pub(crate) async fn cluster_status(&self) -> ClusterStatus {
        let reports = self.gather().await;
        let mut by_group: BTreeMap<String, Vec<(NodeId, cluster::GroupStatus)>> = BTreeMap::new();
        for (node, statuses) in reports.iter() {
            for s in statuses {
                by_group
                    .entry(s.name.clone())
                    .or_default()
                    .push((*node, s.clone()));
            }
        }
        let order = |name: &str| name.strip_prefix('p').and_then(|n| n.parse::<u32>().ok());
        let mut names: Vec<String> = by_group.keys().cloned().collect();
        names.sort_by_key(|n| (order(n), n.clone()));
        let mut groups = Vec::new();
        for name in names {
            let replicas = by_group.remove(&name).unwrap_or_default();
            let leading = replicas
                .iter()
                .filter(|(n, s)| s.role == "Leader" && s.leader == Some(*n))
                .max_by_key(|(_, s)| s.term)
                .map(|(_, s)| s.clone());
            let summary = GroupSummary {
                name,
                leader: leading.as_ref().map(|s| s.node),
                term: replicas.iter().map(|(_, s)| s.term).max().unwrap_or(0),
                voters: leading
                    .as_ref()
                    .map(|s| s.voters.clone())
                    .unwrap_or_default(),
                learners: leading
                    .as_ref()
                    .map(|s| s.learners.clone())
                    .unwrap_or_default(),
                replicas: replicas
                    .iter()
                    .map(|(n, s)| ReplicaStatus {
                        node: *n,
                        role: s.role.clone(),
                        applied: s.last_applied_index,
                        snapshot: s.snapshot_index,
                        lag: leading.as_ref().and_then(|l| l.lag(*n)),
                    })
                    .collect(),
            };
            groups.push(summary);
        }
        let nodes = self
            .host
            .defs
            .nodes()
            .into_iter()
            .map(|e| {
                let partitions = groups.iter().filter(|g| g.name != "meta");
                let (replicas, leads) = partitions.fold((0, 0), |(r, l), g| {
                    (
                        r + usize::from(g.replicas.iter().any(|x| x.node == e.id)),
                        l + usize::from(g.leader == Some(e.id)),
                    )
                });
                NodeStatus {
                    id: e.id,
                    live: reports.contains_key(&e.id),
                    addr: e.addr,
                    draining: e.draining,
                    replicas,
                    leads,
                }
            })
            .collect();
        ClusterStatus { nodes, groups }
    }

    /// Builds a snapshot of every group hosted here and purges the log it covers.
    pub(crate) async fn snapshot_all(&self) -> Result<()> {
        let hosted = self.host.hosted();
        let groups = std::iter::once(&self.host.meta).chain(hosted.iter().map(|p| &p.group));
        for g in groups {
            let failed = |e: String| Error::Unavailable(format!("snapshot of {}: {e}", g.name()));
            let index = g
                .snapshot(Duration::from_secs(30))
                .await
                .map_err(|e| failed(e.to_string()))?;
            if let Some(i) = index {
                // Compact the whole covered log: a replica that needs older entries now gets the
                // snapshot installed.
                g.raft()
                    .trigger()
                    .purge_log(i)
                    .await
                    .map_err(|e| failed(e.to_string()))?;
            }
        }
        Ok(())
    }
}

impl Membership {
    /// Answers a membership request of the controller (a peer's, or this node's own): hosting,
    /// replicas, leadership, the groups' status, joining, and the meta group's read index.
    pub(crate) async fn answer(&self, request: Request) -> Result<Reply> {
        let done = |r: Result<()>| r.map(|()| Reply::Done);
        if self.stopping.begun() && takes_new_work(&request) {
            return Err(Error::Unavailable(format!(
                "node {} is shutting down",
                self.host.node.0
            )));
        }
        match request {
            Request::Join(entry) => self.route_join(entry).await,
            Request::Groups => Ok(Reply::Groups(self.host.group_statuses())),
            Request::Locate { partition } => Ok(Reply::Leader(self.local_leader(partition))),
            Request::Host { partition } => done(self.host_replica(partition).await),
            Request::Unhost { partition } => done(self.unhost_replica(partition).await),
            Request::AddReplica {
                partition,
                node,
                addr,
            } => done(self.add_replica(partition, node, &addr).await),
            Request::Promote { partition, node } => done(self.promote(partition, node).await),
            Request::RemoveReplica { partition, node } => {
                done(self.remove_replica(partition, node).await)
            }
            Request::StepDown { partition } => self.step_down(partition).await.map(Reply::Index),
            Request::HoldElections { partition, ms } => done(self.hold_elections(partition, ms)),
            Request::Elect {
                partition,
                leaving,
                last_log,
            } => done(self.elect(partition, leaving, last_log).await),
            Request::MetaReadIndex => {
                // The leader's committed index covers every acknowledged definition write.
                let read = self
                    .host
                    .meta
                    .raft()
                    .ensure_linearizable()
                    .await
                    .map_err(|e| {
                        Error::Unavailable(format!("not the meta leader any more ({e}); retry"))
                    })?;
                Ok(Reply::Index(read.map_or(0, |l| l.index)))
            }
            other => Err(Error::Internal(format!(
                "a peer asked for {other:?}, which no service here answers"
            ))),
        }
    }
}

/// Whether answering `request` would make this node part of the cluster's future: its groups'
/// report (which makes it a place for replicas and leaderships), a new replica, a leadership.
/// A node whose shutdown has begun refuses these; the controller then counts it as down.
fn takes_new_work(request: &Request) -> bool {
    matches!(
        request,
        Request::Groups | Request::Host { .. } | Request::Elect { .. }
    )
}

#[cfg(test)]
#[path = "membership_tests.rs"]
mod tests;
