//! `Group`: the handle to one running Raft group (a partition or the meta group). `open` wires the
//! storage-backed stores and the network into openraft, forms the membership on a fresh store (one
//! voter by default; the initial voters of [`crate::ClusterOptions`] in a cluster) and waits for a
//! leader; `propose` replicates one opaque command and returns the state machine's answer after it
//! is committed (flushed) and applied. Membership changes: `add_learner`, `change_voters`.
//!
//! Not here: leadership transfer (openraft 0.9 has none; see [`Group::change_voters`]), or
//! forwarding proposals to the leader (a follower answers `NotLeader { leader }`; the node
//! crate forwards over [`crate::transport::Service::Forward`]).
//!
//! The handle is cheap to clone; the group runs until [`Group::shutdown`]. Dropping the last handle
//! without it stops openraft in the background, so call `shutdown` when the caller needs to know
//! the group (and its hold on the database) is gone, e.g. before reopening the database.

use crate::error::Error;
use crate::log_store::LogStore;
use crate::network::router::Registration;
use crate::network::Network;
use crate::options::{ClusterOptions, GroupOptions};
use crate::proposer::{Limits, Proposer};
use crate::state_machine::StateMachine;
use crate::state_store::StateStore;
use crate::storage::{Db, Tree};
use crate::transport::Transport;
use crate::types::TypeConfig;
use crate::GroupStatus;
use openraft::error::InitializeError;
use openraft::error::RaftError;
use openraft::{BasicNode, LogIdOptionExt, Raft, RaftMetrics, ServerState};
use proto::NodeId;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

/// Ticks of openraft's timer a leader that removed itself waits at most to step down (it steps
/// down at its next tick; more are allowed for a busy core).
const STEP_DOWN_TICKS_MAX: u32 = 4;

/// Added to the lease [`Group::take_over`] waits out: the old leader's last messages, sent just
/// before it stepped down, may reach the other voters (and renew its lease there) a little after
/// its step-down was answered.
const LEASE_MARGIN_MS: u64 = 50;
/// How long [`Group::take_over`] waits to lead before it campaigns again.
const CAMPAIGN_RETRY_MS: u64 = 100;
/// Campaigns of [`Group::take_over`] at most; then the election timer goes on.
const CAMPAIGNS_MAX: u32 = 5;

/// Cheap cloneable handle to one running group.
#[derive(Clone)]
pub struct Group {
    inner: Arc<Inner>,
}

struct Inner {
    /// Group name, prefix of its trees.
    name: String,
    /// The local node.
    node: NodeId,
    /// The running openraft instance.
    raft: Raft<TypeConfig>,
    /// `{name}/state`, read directly by the node.
    state: Tree,
    /// The term while the local node leads in it and has applied every entry of earlier terms.
    leadership: watch::Receiver<Option<u64>>,
    /// Feeds `leadership`; shared with the task that follows openraft's metrics.
    leadership_tx: Arc<watch::Sender<Option<u64>>>,
    /// The task following openraft's metrics; stopped on shutdown.
    follower: tokio::task::AbortHandle,
    /// Packs concurrent proposals into one entry (group commit); bounded queue.
    proposer: Proposer,
    /// Set by shutdown: no new proposals.
    closed: AtomicBool,
    /// Largest command accepted.
    command_bytes_max: usize,
    /// This group's place in the node's Raft router (cluster mode); taken on shutdown.
    registration: Mutex<Option<Registration>>,
    /// The node's transport (cluster mode), to record the addresses of added members.
    transport: Option<Transport>,
    /// Held across each membership change made through this handle, so that the check that
    /// this node still leads and belongs to the membership ([`Group::membership_turn`])
    /// and the change itself are not interleaved with another change of this replica.
    membership: tokio::sync::Mutex<()>,
}

impl Drop for Inner {
    /// Safety net for a group whose handles all dropped without [`Group::shutdown`]: stop openraft
    /// in the background so its tasks release the database. Needs a tokio runtime; without
    /// one the tasks are gone with their runtime anyway.
    fn drop(&mut self) {
        self.follower.abort();
        self.proposer.stop();
        if self.closed.load(Ordering::Acquire) {
            return; // Group::shutdown already stopped openraft.
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let raft = self.raft.clone();
            runtime.spawn(async move {
                let _ = raft.shutdown().await;
            });
        }
    }
}

/// When this node's current spell of leadership began: its term, and its last log index then.
#[derive(Default)]
struct Spell(Option<(u64, Option<u64>)>);

impl Spell {
    /// Whether the metrics show the local node leading *and* caught up, so that every entry of its
    /// log from before this spell of leadership is in the state tree and the node may rebuild its
    /// in-memory view from it.
    ///
    /// A newly elected leader appends a blank entry in its term: once an entry of the current term
    /// is applied, everything before it is. A node that restarts while leading resumes its saved
    /// term without a new entry, and its log may hold entries of that term it had not applied
    /// (their commit was not yet recorded), so everything up to the last log index seen when the
    /// spell began must be applied too.
    fn caught_up(&mut self, m: &RaftMetrics<u64, BasicNode>) -> bool {
        let leading = m.state == ServerState::Leader && m.current_leader == Some(m.id);
        let applied_in_term = m.last_applied.map(|l| l.leader_id.term) == Some(m.current_term);
        let applied = m.last_applied.map(|l| l.index);
        match self.0 {
            Some((term, _)) if leading && term == m.current_term => {}
            _ if leading => {
                self.0 = Some((m.current_term, m.last_log_index));
                if applied_in_term && applied < m.last_log_index {
                    tracing::info!(term = m.current_term, applied = ?applied, last_log = ?m.last_log_index, "resumed leading a term after a restart; caught up once the log so far is applied");
                }
            }
            _ => self.0 = None,
        }
        let entered = self.0.and_then(|(_, index)| index);
        leading && applied_in_term && applied >= entered
    }
}

/// Why a group stopped for good, from its metrics' running state and whether its core task is
/// gone without a shutdown; `None` while it runs or after a normal shutdown.
fn stopped_reason(
    running: &Result<(), openraft::error::Fatal<u64>>,
    core_ended: bool,
) -> Option<String> {
    match running {
        Err(openraft::error::Fatal::Stopped) => None,
        Err(e) => Some(e.to_string()),
        Ok(()) if core_ended => {
            Some("the Raft core task ended without a shutdown (it panicked)".to_owned())
        }
        Ok(()) => None,
    }
}

/// Single node: forms the one-voter membership on a fresh store, and refuses a store formed by
/// another node id (it would never elect this one: say so instead of timing out).
async fn form_single(raft: &Raft<TypeConfig>, options: &GroupOptions) -> Result<(), Error> {
    let node = options.node;
    if !raft.is_initialized().await? {
        let members = BTreeMap::from([(node.0, BasicNode::default())]);
        match raft.initialize(members).await {
            Ok(()) => {}
            // Another initialize won the race: the membership exists, which is all we need.
            Err(RaftError::APIError(InitializeError::NotAllowed(_))) => {}
            Err(e) => return Err(e.into()),
        }
    }
    let voters: Vec<u64> = raft
        .with_raft_state(|st| st.membership_state.effective().voter_ids().collect())
        .await?;
    if !voters.contains(&node.0) {
        return Err(Error::Options(format!(
            "group {} in this database has voters {voters:?}, which do not include node {}; \
             open it with the node id that created it",
            options.name, node.0
        )));
    }
    Ok(())
}

/// Cluster: on a fresh store, one initial voter (the chosen former, else the smallest) forms the membership (so two nodes never
/// form two different ones); everyone else waits for the leader to reach them.
async fn form_cluster(
    raft: &Raft<TypeConfig>,
    options: &GroupOptions,
    cluster: &ClusterOptions,
) -> Result<(), Error> {
    let transport = cluster.router.transport();
    for (peer, addr) in &cluster.initial_voters {
        if *peer != options.node {
            transport.set_peer(*peer, *addr);
        }
    }
    if raft.is_initialized().await? {
        return Ok(());
    }
    let former = cluster
        .former
        .filter(|f| cluster.initial_voters.contains_key(f))
        .or_else(|| cluster.initial_voters.keys().next().copied());
    if former != Some(options.node) {
        return Ok(());
    }
    let members: BTreeMap<u64, BasicNode> = cluster
        .initial_voters
        .iter()
        .map(|(id, addr)| (id.0, BasicNode::new(addr.to_string())))
        .collect();
    match raft.initialize(members).await {
        Ok(()) => {
            tracing::info!(group = %options.name, node = %options.node, voters = ?cluster.initial_voters.keys().collect::<Vec<_>>(), "formed the group's membership");
            Ok(())
        }
        Err(RaftError::APIError(InitializeError::NotAllowed(_))) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Keeps the leadership watch true exactly while this node leads the group, has applied everything
/// of earlier terms, and has heard from a quorum in its current term. The last condition matters
/// after a restart: openraft resumes leadership of a term saved in its vote before it has heard from
/// anyone, and a node cut off from its peers must not act as leader (start actors, answer reads) on
/// that stale term.
async fn follow_leadership(
    raft: Raft<TypeConfig>,
    tx: Arc<watch::Sender<Option<u64>>>,
    confirm_wait: Duration,
    name: String,
) {
    let mut metrics = raft.metrics();
    let mut confirmed_term: Option<u64> = None;
    let mut spell = Spell::default();
    let mut known_leader = None;
    loop {
        let (caught_up, term) = {
            let m = metrics.borrow_and_update();
            if m.current_leader.is_some() && m.current_leader != known_leader {
                known_leader = m.current_leader;
                crate::metrics::count(crate::metrics::LEADER_CHANGES, &name);
            }
            (spell.caught_up(&m), m.current_term)
        };
        let mut leads = caught_up && confirmed_term == Some(term);
        let mut retry = false;
        if caught_up && !leads {
            // A read index round trip proves a quorum accepts this node as leader of `term`.
            match tokio::time::timeout(confirm_wait, raft.ensure_linearizable()).await {
                Ok(Ok(_)) if raft.metrics().borrow().current_term == term => {
                    confirmed_term = Some(term);
                    leads = true;
                }
                _ => retry = true,
            }
        }
        let spell = leads.then_some(term);
        tx.send_if_modified(|v| std::mem::replace(v, spell) != spell);
        if retry {
            // Not confirmed (cut off, or the quorum moved on): look again soon even if nothing
            // in the metrics changes.
            tokio::select! {
                changed = metrics.changed() => if changed.is_err() { tx.send_replace(None); return; },
                _ = tokio::time::sleep(confirm_wait) => {}
            }
        } else if metrics.changed().await.is_err() {
            tx.send_replace(None);
            return;
        }
    }
}

/// Starts openraft over the group's stores and, on a fresh store, forms its membership. In a
/// cluster the group is routable from the start, as peers may already be electing its leader.
/// On failure openraft is shut down again.
async fn start_raft(
    db: &Db,
    options: &GroupOptions,
    sm: Arc<dyn StateMachine>,
) -> Result<(Raft<TypeConfig>, Tree, Option<Registration>), Error> {
    let config = Arc::new(options.raft_config()?);
    let log_store = LogStore::open(db, &options.name).await?;
    let state_store = StateStore::open(db, &options.name, options.state_checkpoint_entries, sm)?;
    let state = state_store.state().clone();
    let network = match &options.cluster {
        Some(cluster) => Network::over(cluster.router.clone(), options.name.clone()),
        None => Network::unreachable(),
    };
    let raft = Raft::new(options.node.0, config, network, log_store, state_store).await?;
    // Route incoming RPCs at once: peers may already be electing a leader for this group.
    let registration = options
        .cluster
        .as_ref()
        .map(|cluster| cluster.router.register(&options.name, raft.clone()));

    let formed = match &options.cluster {
        None => form_single(&raft, options).await,
        Some(cluster) => form_cluster(&raft, options, cluster).await,
    };
    if let Err(e) = formed {
        drop(registration);
        let _ = raft.shutdown().await;
        return Err(e);
    }
    Ok((raft, state, registration))
}

impl Group {
    /// Opens (or creates) the group's trees in `db` and starts openraft.
    ///
    /// Single node (no `options.cluster`): on a fresh store, forms a single-voter membership with
    /// this node, then waits until this node leads (bounded by `leader_wait_ms`, error after it).
    ///
    /// Cluster: registers the group with the node's router (so peers reach it), and on a fresh
    /// store the smallest id among `initial_voters` forms the membership while the others wait
    /// to be contacted. Returns once any node is known to lead the group, or after
    /// `leader_wait_ms` without one (the group keeps running and elects when enough voters are
    /// up); [`Group::is_leader`] and [`Group::leadership`] then tell whether this node leads.
    pub async fn open(
        db: &Db,
        options: GroupOptions,
        sm: Arc<dyn StateMachine>,
    ) -> Result<Group, Error> {
        let (raft, state, registration) = start_raft(db, &options, sm).await?;
        let group = Group::assemble(&options, raft, state, registration);
        match &options.cluster {
            // A replica placed on this node later: it waits, empty, for the leader to add it.
            Some(cluster) if cluster.initial_voters.is_empty() => Ok(group),
            Some(_) => group.await_known_leader(&options).await,
            None => group.await_local_leadership(options).await,
        }
    }

    /// Wraps a started openraft instance in a handle: spawns the task that follows its
    /// leadership and the proposer that batches commands into entries.
    fn assemble(
        options: &GroupOptions,
        raft: Raft<TypeConfig>,
        state: Tree,
        registration: Option<Registration>,
    ) -> Group {
        let (leadership_tx, leadership) = watch::channel(None);
        let leadership_tx = Arc::new(leadership_tx);
        let follower = {
            let tx = leadership_tx.clone();
            let raft = raft.clone();
            let confirm_wait = Duration::from_millis(options.election_timeout_max_ms);
            let name = options.name.clone();
            tokio::spawn(follow_leadership(raft, tx, confirm_wait, name)).abort_handle()
        };
        let proposer = Proposer::spawn(
            raft.clone(),
            Limits {
                queue_max: options.proposals_in_flight_max,
                batch_commands_max: options.batch_commands_max,
                batch_bytes_max: options.batch_bytes_max,
                batches_in_flight_max: options.batches_in_flight_max,
            },
            options.name.clone(),
        );
        Group {
            inner: Arc::new(Inner {
                name: options.name.clone(),
                node: options.node,
                raft,
                state,
                leadership,
                leadership_tx,
                follower,
                proposer,
                closed: AtomicBool::new(false),
                command_bytes_max: options.command_bytes_max,
                registration: Mutex::new(registration),
                membership: tokio::sync::Mutex::new(()),
                transport: options
                    .cluster
                    .as_ref()
                    .map(|c| c.router.transport().clone()),
            }),
        }
    }

    /// Cluster: waits up to `leader_wait_ms` for any node to be known to lead the group; the
    /// group stays open without one (it elects once enough voters are up) unless it stopped.
    async fn await_known_leader(self, options: &GroupOptions) -> Result<Group, Error> {
        let wait = Duration::from_millis(options.leader_wait_ms);
        let node = options.node;
        let mut metrics = self.inner.raft.metrics();
        let known = tokio::time::timeout(
            wait,
            metrics.wait_for(|m| m.current_leader.is_some() || m.running_state.is_err()),
        )
        .await
        .map(|r| r.is_ok());
        let status = self.status();
        if let Some(stopped) = status.stopped {
            let _ = self.shutdown().await;
            return Err(Error::Raft(stopped));
        }
        match known {
            Ok(_) => {
                tracing::info!(group = %options.name, node = %node, leader = ?status.leader, "group open")
            }
            Err(_) => {
                tracing::warn!(group = %options.name, node = %node, waited_ms = options.leader_wait_ms, "group open without a known leader; it elects once enough voters are up")
            }
        }
        Ok(self)
    }

    /// Single node: waits up to `leader_wait_ms` for this node to lead; shuts the group down and
    /// fails if it does not, or if the group stops meanwhile.
    async fn await_local_leadership(self, options: GroupOptions) -> Result<Group, Error> {
        let wait = Duration::from_millis(options.leader_wait_ms);
        let mut rx = self.leadership();
        let outcome = tokio::time::timeout(wait, rx.wait_for(Option::is_some))
            .await
            .map(|r| r.map(drop));
        match outcome {
            Ok(Ok(_)) => {
                tracing::info!(group = %options.name, node = %options.node, "group open, local node leads");
                Ok(self)
            }
            Ok(Err(_)) => {
                let stopped = self.status().stopped;
                let _ = self.shutdown().await;
                Err(Error::Raft(
                    stopped.unwrap_or_else(|| "group stopped while opening".into()),
                ))
            }
            Err(_) => {
                let _ = self.shutdown().await;
                Err(Error::NoLeader {
                    group: options.name,
                    waited_ms: options.leader_wait_ms,
                })
            }
        }
    }

    /// Proposes a command; resolves after it is committed (log flushed to disk) and applied, with
    /// the state machine's response bytes.
    pub async fn propose(&self, command: Vec<u8>) -> Result<Vec<u8>, Error> {
        self.propose_with_index(command)
            .await
            .map(|(_, response)| response)
    }

    /// Like [`Group::propose`], also returning the log index of the entry that carried the
    /// command. Concurrent proposals may share an entry (group commit), so indexes of concurrent
    /// commands can be equal; a proposal made after another one returned gets a larger index.
    pub async fn propose_with_index(&self, command: Vec<u8>) -> Result<(u64, Vec<u8>), Error> {
        if command.len() > self.inner.command_bytes_max {
            return Err(Error::CommandTooLarge {
                bytes: command.len(),
                max: self.inner.command_bytes_max,
            });
        }
        if crate::pack::looks_packed(&command) {
            return Err(Error::CommandLooksPacked);
        }
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(Error::ShuttingDown);
        }
        self.inner.proposer.propose(command).await
    }

    /// The state tree the state machine writes (readers on the node read it directly). Keys
    /// starting with byte `0x00` are the cluster's bookkeeping.
    pub fn state(&self) -> &Tree {
        &self.inner.state
    }

    /// Whether the local node leads this group and has applied everything of earlier terms.
    pub fn is_leader(&self) -> bool {
        self.inner.leadership.borrow().is_some()
    }

    /// A watch that changes whenever leadership of this node for this group changes: the term
    /// while this node leads, caught up as in [`Group::is_leader`], `None` otherwise. Two spells
    /// of leadership never share a term, so a reader that missed the change in between still
    /// tells them apart.
    pub fn leadership(&self) -> watch::Receiver<Option<u64>> {
        self.inner.leadership.clone()
    }

    /// Group name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The local node.
    pub fn node(&self) -> NodeId {
        self.inner.node
    }

    /// The node that leads the group as far as this node knows (`None` during an election).
    pub fn leader(&self) -> Option<NodeId> {
        self.inner
            .raft
            .metrics()
            .borrow()
            .current_leader
            .map(NodeId)
    }

    /// Adds `node`, reachable at `addr`, as a learner: it receives the log (or a snapshot) but
    /// does not vote. Returns once the membership change is committed; the learner catches up in
    /// the background (watch its `status()`). Must run on the leader (else `NotLeader`).
    pub async fn add_learner(&self, node: NodeId, addr: SocketAddr) -> Result<(), Error> {
        let _turn = self.membership_turn().await?;
        if let Some(transport) = &self.inner.transport {
            transport.set_peer(node, addr);
        }
        self.inner
            .raft
            .add_learner(node.0, BasicNode::new(addr.to_string()), false)
            .await?;
        Ok(())
    }

    /// Removes `nodes` from the membership; they must not be voters (demote them first with
    /// [`Group::change_voters`]). Must run on the leader.
    pub async fn remove_learners(&self, nodes: BTreeSet<NodeId>) -> Result<(), Error> {
        let ids: BTreeSet<u64> = nodes.iter().map(|n| n.0).collect();
        let _turn = self.membership_turn().await?;
        self.inner
            .raft
            .change_membership(openraft::ChangeMembers::RemoveNodes(ids), false)
            .await?;
        Ok(())
    }

    /// Removes voter `node` from the membership altogether (committed before it returns). When
    /// `node` is the leader itself, it has stepped down when this returns (see
    /// [`Group::await_step_down`]) and the remaining voters elect a new leader; in openraft a
    /// leader that stays a learner would keep leading. The removed node keeps its copy of the
    /// log, so adding it back later is a short catch-up. Must run on the leader.
    pub async fn remove_voter(&self, node: NodeId) -> Result<(), Error> {
        let ids = BTreeSet::from([node.0]);
        let _turn = self.membership_turn().await?;
        self.inner
            .raft
            .change_membership(openraft::ChangeMembers::RemoveVoters(ids), false)
            .await?;
        if node == self.inner.node {
            self.await_step_down().await;
        }
        Ok(())
    }

    /// Campaigns for the leadership `leaving` gave up by removing itself (a leadership transfer's
    /// target, once its replica has the membership without `leaving`). The other voters refuse
    /// any candidate while the lease they gave `leaving` runs (openraft's leader lease: the
    /// election timeout's maximum since they last heard from it, which was before its
    /// step-down was answered), so this waits it out first. Then it campaigns again every
    /// [`CAMPAIGN_RETRY_MS`] until a node other than `leaving` leads, at most
    /// [`CAMPAIGNS_MAX`] times, after which the election timer goes on: a voter whose lease had
    /// not quite run out refuses, and openraft's candidate would wait a whole election timeout
    /// before it asked again. A leader that steps down without waiting for its last tick
    /// (releases up to 0.2.0) renews its lease after its step-down was answered. Each campaign
    /// raises the term by one.
    pub async fn take_over(&self, leaving: NodeId) -> Result<(), Error> {
        let raft = &self.inner.raft;
        let lease = raft.config().election_timeout_max + LEASE_MARGIN_MS;
        tokio::time::sleep(Duration::from_millis(lease)).await;
        let mut metrics = raft.metrics();
        let retry = Duration::from_millis(CAMPAIGN_RETRY_MS);
        for _ in 0..CAMPAIGNS_MAX {
            raft.trigger().elect().await?;
            let led = metrics.wait_for(|m| m.current_leader.is_some_and(|l| l != leaving.0));
            if matches!(tokio::time::timeout(retry, led).await, Ok(Ok(_))) {
                break;
            }
        }
        Ok(())
    }

    /// Waits until this replica, just removed from the membership it led, stops leading, for at
    /// most [`STEP_DOWN_TICKS_MAX`] of openraft's ticks. openraft 0.9 keeps such a leader
    /// leading until its next tick (1.5 heartbeat intervals), replicating meanwhile; every
    /// message it sends renews its lease on the voters that receive it, and they refuse any
    /// candidate until the lease has run out. Whoever campaigns next counts the lease from
    /// when this returns.
    async fn await_step_down(&self) {
        let tick = Duration::from_millis(self.inner.raft.config().heartbeat_interval * 3 / 2);
        let mut metrics = self.inner.raft.metrics();
        let stepped = metrics.wait_for(|m| m.state != ServerState::Leader);
        if tokio::time::timeout(tick * STEP_DOWN_TICKS_MAX, stepped)
            .await
            .is_err()
        {
            tracing::debug!(group = %self.inner.name, "still leading after its removal; it steps down at a later tick");
        }
    }

    /// Makes `voters` the group's voters (joint consensus, committed before it returns). New
    /// voters must have been added as learners first; removed voters are dropped from the
    /// membership (not kept as learners). Must run on the leader (else `NotLeader`).
    ///
    /// This is also how leadership moves in openraft 0.9, which has no leadership transfer:
    /// removing the leader from the voters makes it step down once the change commits, and the
    /// remaining voters elect a new leader; shutting the leader down does the same after an
    /// election timeout.
    pub async fn change_voters(&self, voters: BTreeSet<NodeId>) -> Result<(), Error> {
        let ids: BTreeSet<u64> = voters.iter().map(|n| n.0).collect();
        let _turn = self.membership_turn().await?;
        self.inner.raft.change_membership(ids, false).await?;
        Ok(())
    }

    /// Takes this replica's turn to change the membership, once openraft's core confirms that
    /// this node leads the group and is still in its latest membership (`NotLeader` otherwise).
    ///
    /// openraft 0.9 keeps a leader that a committed membership removed leading until its next
    /// tick (so that the commit reaches the followers before it steps down), and accepts writes
    /// meanwhile. A membership change appended in that window trips openraft's assertion that
    /// only a leader changes the membership, a panic that stops the group's core task. The
    /// check runs inside the core after every message sent to it before, so it sees the outcome
    /// of any earlier change of this replica (also one whose caller gave up waiting); the turn,
    /// held until the change returns, keeps another change of this replica from coming between
    /// the check and the change. Whatever else can reach the core in between (a higher vote)
    /// ends the leadership, and openraft then refuses the change with `ForwardToLeader`.
    async fn membership_turn(&self) -> Result<tokio::sync::MutexGuard<'_, ()>, Error> {
        let turn = self.inner.membership.lock().await;
        let id = self.inner.node.0;
        let leads = self
            .inner
            .raft
            .with_raft_state(move |st| {
                let vote = st.vote_ref();
                st.server_state == ServerState::Leader
                    && vote.is_committed()
                    && vote.leader_id().voted_for() == Some(id)
                    && st
                        .membership_state
                        .effective()
                        .membership()
                        .get_node(&id)
                        .is_some()
            })
            .await?;
        if !leads {
            let leader = self.leader().filter(|l| *l != self.inner.node);
            return Err(Error::NotLeader { leader });
        }
        Ok(turn)
    }

    /// Why the group stopped for good, if its storage failed or its core task panicked: openraft
    /// turns a storage error into a fatal stop, and this replica serves nothing after it. `None`
    /// while it runs or after a normal shutdown.
    pub fn failure(&self) -> Option<String> {
        let metrics = self.inner.raft.metrics();
        let stopped = self.core_ended(&metrics);
        let m = metrics.borrow();
        stopped_reason(&m.running_state, stopped)
    }

    /// Whether openraft's core task is gone without [`Group::shutdown`]. A panic in the core
    /// (one of openraft's assertions) ends the task without recording a fatal state in the
    /// metrics: their sender is dropped with it, and nothing else tells.
    fn core_ended(&self, metrics: &watch::Receiver<RaftMetrics<u64, BasicNode>>) -> bool {
        metrics.has_changed().is_err() && !self.inner.closed.load(Ordering::Acquire)
    }

    /// A point-in-time view of the group, from openraft's metrics. Metrics follow the state machine
    /// asynchronously: right after `propose` returns, `last_applied_index` may still lag by a few
    /// entries.
    pub fn status(&self) -> GroupStatus {
        let metrics = self.inner.raft.metrics();
        let core_ended = self.core_ended(&metrics);
        let m = metrics.borrow();
        GroupStatus {
            name: self.inner.name.clone(),
            node: self.inner.node,
            role: format!("{:?}", m.state),
            term: m.current_term,
            leader: m.current_leader.map(NodeId),
            last_log_index: m.last_log_index,
            last_applied_index: m.last_applied.index(),
            snapshot_index: m.snapshot.index(),
            purged_index: m.purged.index(),
            voters: m.membership_config.voter_ids().map(NodeId).collect(),
            learners: m
                .membership_config
                .membership()
                .learner_ids()
                .map(NodeId)
                .collect(),
            matched: m
                .replication
                .iter()
                .flatten()
                .filter(|(id, _)| **id != m.id)
                .map(|(id, log)| (NodeId(*id), log.index()))
                .collect(),
            stopped: stopped_reason(&m.running_state, core_ended)
                .or_else(|| m.running_state.as_ref().err().map(|e| e.to_string())),
        }
    }

    /// Builds a snapshot now and waits (up to `wait`) until it covers everything applied when it
    /// was asked for; returns the snapshot's last index. The log is then purged per the options.
    pub async fn snapshot(&self, wait: Duration) -> Result<Option<u64>, Error> {
        let mut metrics = self.inner.raft.metrics();
        let target = metrics.borrow().last_applied.index();
        self.inner.raft.trigger().snapshot().await?;
        let covered =
            tokio::time::timeout(wait, metrics.wait_for(|m| m.snapshot.index() >= target)).await;
        match covered {
            Ok(Ok(m)) => Ok(m.snapshot.index()),
            Ok(Err(_)) => Err(Error::ShuttingDown),
            Err(_) => Err(Error::Raft(format!(
                "snapshot of group {} did not reach index {target:?} within {} ms",
                self.inner.name,
                wait.as_millis()
            ))),
        }
    }

    /// The underlying openraft instance, for tests and administration (triggers, metrics).
    pub fn raft(&self) -> &Raft<TypeConfig> {
        &self.inner.raft
    }

    /// A digest of the state machine's keys and values (bookkeeping excluded) with the applied
    /// index it was taken at, read from the state itself (the applied log id is written in the
    /// same atomic batch as each command's writes, so the two match). Replicas at the same applied
    /// index must have equal digests; a concurrent apply may land between the reads of the index
    /// and of the keys, so compare them while the group is quiet (or single-threaded, as in the
    /// simulator).
    pub fn state_digest(&self) -> Result<(Option<u64>, u64), Error> {
        let applied = self
            .inner
            .state
            .get(crate::codec::KEY_APPLIED)?
            .map(|v| crate::codec::decode_log_id(&v).map(|id| id.index))
            .transpose()
            .map_err(|e| Error::Storage(format!("applied log id: {e}")))?;
        let mut h = proto::hash::FNV_OFFSET;
        for kv in self.inner.state.iter() {
            let (k, v) = kv?;
            if k.first() == Some(&0) {
                continue;
            }
            h = proto::hash::fnv1a(h, &(k.len() as u64).to_le_bytes());
            h = proto::hash::fnv1a(h, &k);
            h = proto::hash::fnv1a(h, &(v.len() as u64).to_le_bytes());
            h = proto::hash::fnv1a(h, &v);
        }
        Ok((applied, h))
    }

    /// Stops the group: no new proposals are accepted, openraft stops, leadership turns false.
    /// Safe to call more than once and from any clone.
    pub async fn shutdown(&self) -> Result<(), Error> {
        self.inner.closed.store(true, Ordering::Release);
        // Leave the router first, so peers get "no such group" rather than a stopped instance.
        drop(
            self.inner
                .registration
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take(),
        );
        let result = self.inner.raft.shutdown().await;
        self.inner.proposer.stop();
        self.inner.follower.abort();
        self.inner.leadership_tx.send_replace(None);
        result.map_err(|e| Error::Raft(format!("openraft did not stop cleanly: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::{CommittedLeaderId, LogId};

    fn metrics(
        state: ServerState,
        term: u64,
        applied: (u64, u64),
        last_log: u64,
    ) -> RaftMetrics<u64, BasicNode> {
        let mut m = RaftMetrics::new_initial(1);
        m.state = state;
        m.current_leader = (state == ServerState::Leader).then_some(1);
        m.current_term = term;
        m.last_applied = Some(LogId::new(CommittedLeaderId::new(applied.0, 1), applied.1));
        m.last_log_index = Some(last_log);
        m
    }

    #[test]
    fn a_new_leader_is_caught_up_once_an_entry_of_its_term_is_applied() {
        let mut spell = Spell::default();
        // Elected in term 3: its blank entry (index 11) is not applied yet.
        assert!(!spell.caught_up(&metrics(ServerState::Leader, 3, (2, 10), 11)));
        assert!(spell.caught_up(&metrics(ServerState::Leader, 3, (3, 11), 12)));
    }

    #[test]
    fn a_leader_resuming_its_term_after_a_restart_waits_for_its_whole_log() {
        let mut spell = Spell::default();
        // Restarted while leading term 3: entries 8-20 of term 3 are in the log, 8 applied.
        assert!(!spell.caught_up(&metrics(ServerState::Leader, 3, (3, 8), 20)));
        assert!(!spell.caught_up(&metrics(ServerState::Leader, 3, (3, 19), 25)));
        assert!(spell.caught_up(&metrics(ServerState::Leader, 3, (3, 20), 25)));
        // Stepping down ends the spell; a later term starts another.
        assert!(!spell.caught_up(&metrics(ServerState::Follower, 4, (3, 20), 25)));
        assert!(!spell.caught_up(&metrics(ServerState::Leader, 5, (4, 26), 30)));
        assert!(spell.caught_up(&metrics(ServerState::Leader, 5, (5, 30), 31)));
    }

    #[test]
    fn a_core_that_ended_without_a_shutdown_is_a_failure() {
        use openraft::error::Fatal;
        assert_eq!(stopped_reason(&Ok(()), false), None);
        assert_eq!(stopped_reason(&Err(Fatal::Stopped), true), None);
        let panicked = stopped_reason(&Ok(()), true).expect("a core gone is a failure");
        assert!(panicked.contains("panicked"), "{panicked}");
        let storage = Fatal::StorageError(openraft::StorageError::from_io_error(
            openraft::ErrorSubject::Store,
            openraft::ErrorVerb::Write,
            std::io::Error::other("disk gone"),
        ));
        assert!(stopped_reason(&Err(storage), false).is_some());
    }
}
