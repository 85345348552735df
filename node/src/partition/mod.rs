//! A workflow partition hosted on this node: its Raft group (from `cluster`), its state machine, and
//! the actors that run while this node leads it — the supervisor, one actor per live workflow, and
//! the timer wheel. Leadership changes start and stop the actors (`follow_leadership`).
//! Ready tasks go to the node-wide [`TaskQueues`](crate::queue::TaskQueues).

mod fence;
pub mod keys;
pub mod machine;
pub mod stored;
pub mod supervisor;
pub mod timer;
pub mod workflow;

#[cfg(test)]
mod tests;

use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::queue::TaskQueues;
use crate::watch::Watches;
use engine::Effect;
use proto::limits::PARTITION_CALLS_MAX;
use proto::record::{self, PartitionCommand, PartitionOutcome, WorkflowRecord};
use proto::{PartitionId, WorkflowId};
use ractor::{Actor, ActorRef};
use std::sync::{Arc, OnceLock};
use supervisor::PartitionSupervisor;
use timer::{TimerActor, TimerArgs, TimerMsg};
use tokio::sync::{mpsc, oneshot};
use workflow::WorkflowMsg;

/// Longest a caller waits for a workflow actor's answer.
const CALL_TIMEOUT_MS: u64 = 30_000;
/// Longest a leader waits for a quorum to confirm its leadership before answering a no-op.
const CONFIRM_TIMEOUT_MS: u64 = 2_000;

/// What a partition's supervisor is told: by callers and timers, for a workflow's actor, and by
/// the workflow actors themselves.
pub enum SupervisorMsg {
    /// Deliver a message to a workflow's actor.
    Route(WorkflowId, WorkflowMsg),
    /// A workflow actor has handled `processed` messages and has nothing to do.
    Idle(WorkflowId, u64),
}

/// What the actors of one partition share.
pub struct PartitionCtx {
    pub id: PartitionId,
    pub group: cluster::Group,
    pub clock: Arc<dyn Clock>,
    pub queues: Arc<TaskQueues>,
    /// Requests on this node waiting for a workflow to change, woken by every publication.
    pub watches: Arc<Watches>,
    /// Effects addressed to other workflows (failure workflows), performed by the node.
    pub outbox: mpsc::Sender<Effect>,
    /// The cluster's partition count.
    pub partitions: u16,
    /// The registered task definitions, for the dynamic tasks a decision creates.
    pub catalog: Arc<dyn engine::Catalog + Send + Sync>,
    timers: OnceLock<ActorRef<TimerMsg>>,
    /// This spell of leadership's proposals (closed when it ends, drained before the next).
    fence: fence::Fence,
}

/// Proposes an encoded [`PartitionCommand`] or workflow write to a partition's group.
async fn propose(
    id: PartitionId,
    group: &cluster::Group,
    command: Vec<u8>,
) -> Result<PartitionOutcome> {
    let bytes = group.propose(command).await.map_err(|e| match e {
        cluster::Error::NotLeader { .. } => {
            Error::Unavailable(format!("partition {id} has no leader here; retry"))
        }
        // The same command would be refused again: not a reason to retry.
        e @ cluster::Error::CommandTooLarge { .. } => {
            Error::TooLarge(format!("partition {id}: {e}"))
        }
        other => Error::Unavailable(format!("partition {id}: {other}")),
    })?;
    let outcome = record::decode(&bytes)
        .map_err(|e| Error::Internal(format!("partition {id}: bad apply outcome: {e}")))?;
    match outcome {
        PartitionOutcome::Undecodable => Err(Error::Undecodable(format!(
            "partition {id}: the replicas could not decode the command; nothing was written"
        ))),
        outcome => Ok(outcome),
    }
}

/// Confirms with a quorum that this node still leads partition `id` (a read index round).
async fn confirm_leadership(id: PartitionId, group: &cluster::Group) -> Result<()> {
    match tokio::time::timeout(
        std::time::Duration::from_millis(CONFIRM_TIMEOUT_MS),
        group.raft().ensure_linearizable(),
    )
    .await
    {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(Error::Unavailable(format!(
            "partition {} is not led here any more ({e}); retry",
            id
        ))),
        Err(_) => Err(Error::Unavailable(format!(
            "partition {}: leadership could not be confirmed; retry",
            id
        ))),
    }
}

impl PartitionCtx {
    /// Proposes a [`PartitionCommand`].
    pub async fn propose(&self, cmd: &PartitionCommand) -> Result<PartitionOutcome> {
        self.propose_write(record::encode(cmd)).await
    }

    /// Proposes a workflow's write (see [`record::write`]), unless this spell of leadership has
    /// ended: an actor still running after its spell must not change state the next spell has
    /// already recovered from (nothing would publish the change).
    pub async fn propose_write(&self, write: Vec<u8>) -> Result<PartitionOutcome> {
        let Some(_pass) = self.fence.enter().await else {
            stale_proposal(self.id, "refused");
            return Err(Error::Unavailable(format!(
                "partition {}: this leadership has ended; retry",
                self.id
            )));
        };
        propose(self.id, &self.group, write).await
    }

    /// The committed record of `id` and how many patches follow its last full record.
    pub fn read_stored(&self, id: &WorkflowId) -> Result<Option<stored::Stored>> {
        stored::read(self.group.state(), id)
    }

    /// Confirms with a quorum that this node still leads the partition (a read index round).
    pub async fn confirm_leadership(&self) -> Result<()> {
        confirm_leadership(self.id, &self.group).await
    }

    /// Sets a workflow whose row does not decode aside (see [`keys::quarantined`]), with the
    /// running row's `name` when it is known; logged, never fatal.
    pub async fn quarantine(&self, id: &WorkflowId, name: Option<String>, reason: String) {
        tracing::error!(partition = %self.id, workflow = %id, %reason, "undecodable workflow record: quarantined");
        let name = name.or_else(|| self.running_name_of(id));
        let command = PartitionCommand::Quarantine {
            workflow_id: id.clone(),
            name,
            reason,
            time: self.clock.now_ms(),
        };
        if let Err(e) = self.propose(&command).await {
            tracing::warn!(partition = %self.id, workflow = %id, error = %e, "quarantine not written; retried at the next leadership");
        }
    }

    /// The workflow name of `id`'s running row, found by scanning them (only for a workflow
    /// whose record cannot say).
    fn running_name_of(&self, id: &WorkflowId) -> Option<String> {
        let suffix = [b"\0".as_slice(), id.as_str().as_bytes()].concat();
        self.group
            .state()
            .scan_prefix(keys::RUNNING_PREFIX)
            .filter_map(|kv| kv.ok())
            .find(|(key, _)| key.ends_with(&suffix))
            .and_then(|(key, _)| keys::running_name(&key))
    }

    pub async fn outbox(&self, effect: Effect) {
        if self.outbox.send(effect).await.is_err() {
            tracing::warn!(partition = %self.id, "node outbox closed; effect dropped");
        }
    }

    /// Publishes a workflow's derived ready tasks, tasks in progress and timers (nothing when
    /// removed). A terminal workflow has no ready task, and a timer only while it owes its
    /// status listener the publication of its end.
    pub fn publish(&self, id: &WorkflowId, record: Option<&WorkflowRecord>) {
        // An actor of an ended spell (its last write returning late) queues nothing: the
        // queues forgot the partition when the spell ended, and the next spell recovers what
        // that write left from state. Watchers still hear of the write.
        if !self.fence.is_open() {
            self.watches.changed(id, record);
            return;
        }
        let (ready, timers) = match record {
            Some(r) if !r.workflow.status.is_terminal() => (
                engine::ready_tasks(&r.workflow),
                engine::timers(&r.workflow),
            ),
            Some(r) => (Vec::new(), engine::status_timer(r).into_iter().collect()),
            None => (Vec::new(), Vec::new()),
        };
        let in_progress = record.map_or_else(Vec::new, |r| engine::in_progress_tasks(&r.workflow));
        self.queues.publish(id, ready, in_progress);
        if let Some(t) = self.timers.get() {
            let _ = t.send_message(TimerMsg::Arm {
                workflow: id.clone(),
                timers,
            });
        }
        self.watches.changed(id, record);
    }
}

pub use proto::input::WorkflowOp;

/// Spells of leadership started in this process, so that no two `Actors` share an epoch, not even
/// those of a partition whose replica left this node and came back (a new `Partition`).
static LEADER_EPOCHS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The actors of a partition while this node leads it.
struct Actors {
    /// Which spell of leadership these actors serve: unique in the process, a new one each time
    /// the node leads the partition again.
    epoch: u64,
    /// The Raft term of this spell.
    term: u64,
    ctx: Arc<PartitionCtx>,
    supervisor: ActorRef<SupervisorMsg>,
    timers: ActorRef<TimerMsg>,
}

impl Actors {
    async fn start(ctx: Arc<PartitionCtx>, epoch: u64, term: u64) -> Result<Self> {
        let id = ctx.id;
        let (supervisor, _) = Actor::spawn(None, PartitionSupervisor, ctx.clone())
            .await
            .map_err(|e| Error::Internal(format!("partition {id}: supervisor: {e}")))?;
        let args = TimerArgs {
            clock: ctx.clock.clone(),
            supervisor: supervisor.clone(),
        };
        let (timers, _) = Actor::spawn(None, TimerActor, args)
            .await
            .map_err(|e| Error::Internal(format!("partition {id}: timers: {e}")))?;
        let _ = ctx.timers.set(timers.clone());
        let actors = Self {
            epoch,
            term,
            ctx,
            supervisor,
            timers,
        };
        if let Err(e) = actors.recover() {
            actors.stop();
            return Err(e);
        }
        Ok(actors)
    }

    /// Re-publishes every running workflow's ready tasks and timers from committed state, and
    /// the outbound effects of those and of the terminal workflows that still owe their status
    /// listener a publication. A workflow whose row does not decode is set aside (quarantined)
    /// rather than stopping the partition: every other workflow runs on.
    fn recover(&self) -> Result<()> {
        // What an earlier spell left in the queues (a publication that raced its end) is stale.
        self.ctx
            .queues
            .forget_partition(self.ctx.id, self.ctx.partitions);
        let mut found = Found::default();
        let state = self.ctx.group.state();
        for kv in state.scan_prefix(keys::RUNNING_PREFIX) {
            let (key, _) = kv.map_err(|e| self.scan_error(e))?;
            if let Some(id) = keys::id_after_nul(&key) {
                self.recover_one(&mut found, id, keys::running_name(&key))?;
            }
        }
        let mut owing = 0usize;
        for kv in state.scan_prefix(keys::STATUS_NOTICE_PREFIX) {
            let (key, _) = kv.map_err(|e| self.scan_error(e))?;
            // A workflow retried while it owed one keeps the row until its next end: it was
            // recovered as a running workflow already.
            let id = keys::id_after_status_notice(&key).filter(|id| !found.seen.contains(id));
            if let Some(id) = id {
                self.recover_one(&mut found, id, None)?;
                owing += 1;
            }
        }
        // EVENT tasks whose message was not reported published: publish again (deduplicated
        // downstream by the task id); work not reported performed: perform it again; a
        // workflow's end not reported published to its status listener: publish it again.
        let ctx = self.ctx.clone();
        let Found {
            count,
            effects,
            undecodable,
            ..
        } = found;
        tokio::spawn(async move {
            for effect in effects {
                ctx.outbox(effect).await;
            }
            for (id, name, reason) in undecodable {
                ctx.quarantine(&id, name, reason).await;
            }
        });
        tracing::info!(partition = %self.ctx.id, running = count - owing, owing_status_notice = owing, "partition led here: actors started");
        Ok(())
    }

    fn scan_error(&self, e: impl std::fmt::Display) -> Error {
        Error::Internal(format!("partition {}: scan: {e}", self.ctx.id))
    }

    /// Re-publishes one workflow found at recovery and gathers its outbound effects.
    fn recover_one(&self, found: &mut Found, id: WorkflowId, name: Option<String>) -> Result<()> {
        found.seen.insert(id.clone());
        let record = match stored::read_row(self.ctx.group.state(), &id)? {
            stored::Row::Found(s) => Some(s.record),
            stored::Row::Missing => None,
            stored::Row::Undecodable(reason) => {
                found.undecodable.push((id, name, reason));
                return Ok(());
            }
        };
        self.ctx.publish(&id, record.as_ref());
        if let Some(r) = &record {
            found.effects.extend(engine::outbound(r));
        }
        found.count += 1;
        Ok(())
    }

    fn stop(&self) {
        // Stopping the supervisor stops its linked workflow actors; a proposal one of them still
        // has in flight fails (this node no longer leads) or is awaited by the next spell
        // (`fence::Fence::drain`); later ones are refused.
        self.ctx.fence.close();
        self.timers.stop(None);
        self.supervisor.stop(None);
        self.ctx
            .queues
            .forget_partition(self.ctx.id, self.ctx.partitions);
        tracing::info!(partition = %self.ctx.id, "partition no longer led here: actors stopped");
    }
}

/// What a recovery found: how many workflows (which ones), their outbound effects, and the rows
/// that did not decode (id, workflow name when known, reason).
#[derive(Default)]
struct Found {
    count: usize,
    seen: std::collections::BTreeSet<WorkflowId>,
    effects: Vec<Effect>,
    undecodable: Vec<(WorkflowId, Option<String>, String)>,
}

/// What every leadership term of a partition is started with.
#[derive(Clone)]
pub struct PartitionEnv {
    pub clock: Arc<dyn Clock>,
    pub queues: Arc<TaskQueues>,
    pub watches: Arc<Watches>,
    pub outbox: mpsc::Sender<Effect>,
    /// The cluster's partition count (to recognise this partition's workflow ids).
    pub partitions: u16,
    /// The registered task definitions (the meta group's local replica), for dynamic tasks.
    pub catalog: Arc<dyn engine::Catalog + Send + Sync>,
}

/// A partition hosted on this node: its Raft group always, and its actors while this node leads it.
pub struct Partition {
    pub id: PartitionId,
    pub group: cluster::Group,
    actors: Arc<tokio::sync::RwLock<Option<Actors>>>,
    /// Why this node leads the partition but its actors could not start (retried every
    /// [`RESTART_ACTORS_MS`]); `None` while they run or another node leads.
    stopped: Arc<std::sync::Mutex<Option<String>>>,
    watcher: tokio::task::JoinHandle<()>,
    /// Operations sent to the actors and not answered yet, at most [`PARTITION_CALLS_MAX`]: the
    /// bound of the actors' mailboxes.
    calls: Arc<std::sync::atomic::AtomicUsize>,
}

/// One operation's place among a partition's [`Partition::calls`], given back when dropped.
struct CallSlot(Arc<std::sync::atomic::AtomicUsize>);

impl CallSlot {
    fn take(calls: &Arc<std::sync::atomic::AtomicUsize>) -> Option<Self> {
        use std::sync::atomic::Ordering;
        let taken = calls.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < PARTITION_CALLS_MAX).then_some(n + 1)
        });
        taken.ok().map(|_| Self(calls.clone()))
    }
}

impl Drop for CallSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

impl Partition {
    /// Starts following the group's leadership: actors run exactly while this node leads.
    pub fn start(id: PartitionId, group: cluster::Group, env: PartitionEnv) -> Self {
        let actors: Arc<tokio::sync::RwLock<Option<Actors>>> = Arc::default();
        let stopped: Arc<std::sync::Mutex<Option<String>>> = Arc::default();
        let follow = Follow {
            id,
            group: group.clone(),
            env,
            actors: actors.clone(),
            stopped: stopped.clone(),
            previous: None,
        };
        let watcher = tokio::spawn(follow.run());
        Self {
            id,
            group,
            actors,
            stopped,
            watcher,
            calls: Arc::default(),
        }
    }

    /// Why this node leads the partition but cannot run it, if so (see `/health`).
    pub fn stopped(&self) -> Option<String> {
        self.stopped
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Sends an operation to a workflow's actor if this node leads the partition (`None` if not) and
    /// waits for its answer.
    pub async fn try_call(&self, wf: &WorkflowId, op: WorkflowOp) -> Option<Result<Vec<Effect>>> {
        let guard = self.actors.read().await;
        let actors = guard.as_ref()?;
        let Some(_slot) = CallSlot::take(&self.calls) else {
            crate::metrics::bound_full("partition_calls");
            return Some(Err(Error::Unavailable(format!(
                "partition {} has {PARTITION_CALLS_MAX} operations waiting, its limit; retry",
                self.id
            ))));
        };
        let (tx, rx) = oneshot::channel();
        let msg = match op {
            WorkflowOp::Start(s) => WorkflowMsg::Start(s, tx),
            WorkflowOp::Input(i) => WorkflowMsg::Input(i, tx),
            WorkflowOp::AddLog(task, line) => WorkflowMsg::AddLog(task, line, tx),
            WorkflowOp::Remove => WorkflowMsg::Remove(tx),
        };
        if actors
            .supervisor
            .send_message(SupervisorMsg::Route(wf.clone(), msg))
            .is_err()
        {
            return Some(Err(Error::Unavailable(format!(
                "partition {} is stopping; retry",
                self.id
            ))));
        }
        drop(guard);
        Some(
            match tokio::time::timeout(std::time::Duration::from_millis(CALL_TIMEOUT_MS), rx).await
            {
                Ok(Ok(r)) => r,
                Ok(Err(_)) => Err(Error::Unavailable(format!(
                    "workflow {wf}: its actor stopped before answering; retry"
                ))),
                Err(_) => Err(Error::Unavailable(format!(
                    "workflow {wf}: no answer within {CALL_TIMEOUT_MS} ms; retry"
                ))),
            },
        )
    }

    /// Proposes a command no workflow actor owns (event records and queues). The caller checked
    /// that this node leads; a deposed leader's proposal fails in Raft.
    pub async fn propose(&self, cmd: &PartitionCommand) -> Result<PartitionOutcome> {
        propose(self.id, &self.group, record::encode(cmd)).await
    }

    /// Confirms with a quorum that this node still leads the partition (a read index round).
    pub async fn confirm_leadership(&self) -> Result<()> {
        confirm_leadership(self.id, &self.group).await
    }

    /// Whether this node leads the partition and runs its actors.
    pub async fn is_local_leader(&self) -> bool {
        self.actors.read().await.is_some()
    }

    /// While this node leads the partition, which of its spells of leadership this is (it
    /// changes each time the node loses and regains it); `None` when it does not lead. Two equal
    /// answers mean every committed change of a workflow in between was published here.
    pub async fn leader_epoch(&self) -> Option<u64> {
        self.actors.read().await.as_ref().map(|a| a.epoch)
    }

    /// Reads a workflow's record from this replica (the leader's is current; a follower's may lag).
    pub fn read(&self, id: &WorkflowId) -> Result<Option<WorkflowRecord>> {
        Ok(stored::read(self.group.state(), id)?.map(|s| s.record))
    }

    pub fn state(&self) -> &cluster::storage::Tree {
        self.group.state()
    }

    pub async fn stop(&self) {
        self.watcher.abort();
        if let Some(actors) = self.actors.write().await.take() {
            actors.stop();
        }
        if let Err(e) = self.group.shutdown().await {
            tracing::warn!(partition = %self.id, error = %e, "raft shutdown");
        }
    }
}

/// How often a leader whose actors could not start tries again.
const RESTART_ACTORS_MS: u64 = 1_000;

/// What follows a partition's leadership (see [`Follow::run`]).
struct Follow {
    id: PartitionId,
    group: cluster::Group,
    env: PartitionEnv,
    actors: Arc<tokio::sync::RwLock<Option<Actors>>>,
    stopped: Arc<std::sync::Mutex<Option<String>>>,
    /// The last spell's context, drained before the next spell recovers.
    previous: Option<Arc<PartitionCtx>>,
}

impl Follow {
    /// Starts the partition's actors when this node becomes leader and stops them when it stops
    /// being leader. The group reports leadership only once the new leader has applied everything
    /// of earlier terms, so the actors start from complete state. Actors that fail to start are
    /// reported (`Partition::stopped`) and tried again while this node leads.
    async fn run(mut self) {
        let mut leadership = self.group.leadership();
        loop {
            let spell = *leadership.borrow_and_update();
            let failed = self.follow(spell).await;
            let changed = leadership.changed();
            if failed {
                let retry = std::time::Duration::from_millis(RESTART_ACTORS_MS);
                if let Ok(Err(_)) = tokio::time::timeout(retry, changed).await {
                    return;
                }
            } else if changed.await.is_err() {
                return;
            }
        }
    }

    /// Brings the actors in line with `spell` (the term this node leads the partition in, if it
    /// does); answers whether they should run and could not.
    async fn follow(&mut self, spell: Option<u64>) -> bool {
        let actors = self.actors.clone();
        let mut slot = actors.write().await;
        let running = slot.as_ref().map(|a| a.term);
        if running.is_some() && running != spell {
            // Not leading any more, or leading again in a later term (the end of the spell in
            // between may have been missed): the old actors' state may be stale.
            if let Some(a) = slot.take() {
                a.stop();
                self.previous = Some(a.ctx);
            }
        }
        let Some(term) = spell else {
            self.set_stopped(None);
            return false;
        };
        if slot.is_some() {
            return false;
        }
        match self.start(term).await {
            Ok(a) => {
                *slot = Some(a);
                self.set_stopped(None);
                false
            }
            Err(e) => {
                tracing::error!(partition = %self.id, error = %e, "could not start the partition's actors");
                self.set_stopped(Some(e.to_string()));
                true
            }
        }
    }

    /// Starts a new spell's actors once the last spell's proposals have all returned.
    async fn start(&mut self, term: u64) -> Result<Actors> {
        if let Some(previous) = self.previous.take() {
            if previous.fence.drain().await {
                stale_proposal(self.id, "awaited");
            }
        }
        Actors::start(self.ctx(), next_epoch(), term).await
    }

    fn ctx(&self) -> Arc<PartitionCtx> {
        Arc::new(PartitionCtx {
            id: self.id,
            group: self.group.clone(),
            clock: self.env.clock.clone(),
            queues: self.env.queues.clone(),
            watches: self.env.watches.clone(),
            outbox: self.env.outbox.clone(),
            partitions: self.env.partitions,
            catalog: self.env.catalog.clone(),
            timers: OnceLock::new(),
            fence: fence::Fence::default(),
        })
    }

    fn set_stopped(&self, why: Option<String>) {
        *self.stopped.lock().unwrap_or_else(|e| e.into_inner()) = why;
    }
}

/// Counts a proposal of an ended spell of leadership (see [`fence`]).
fn stale_proposal(id: PartitionId, outcome: &'static str) {
    tracing::info!(partition = %id, outcome, "proposal of an ended leadership");
    metrics::counter!(crate::metrics::STALE_PROPOSALS, "partition" => id.to_string(), "outcome" => outcome)
        .increment(1);
}

fn next_epoch() -> u64 {
    LEADER_EPOCHS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1
}
