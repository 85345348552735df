//! `WorkflowActor`: one per live workflow instance on the partition's leader, the single writer of its
//! workflow. It serialises every input (task results, leases, timers, API commands), runs the pure
//! decider on its in-memory state, proposes the resulting record through Raft, and only after the commit
//! updates its state, publishes the workflow's ready tasks and timers, and answers the caller.

use super::machine::stored_version;
use super::PartitionCtx;
use super::SupervisorMsg;
use crate::error::{Error, Result};
use crate::queue::Handoff;
use engine::{Decision, Effect, Input, StartInput, TimerKey};
use proto::check::json_len;
use proto::limits::{RECORD_DEPTH_MAX, WORKFLOW_BYTES_MAX};
use proto::model::{Task, TaskExecLog};
use proto::record::write::{self, WriteHead, WriteKind};
use proto::record::{patch, PartitionCommand, PartitionOutcome, WorkflowRecord};
use proto::{TaskId, WorkflowId};
use ractor::{Actor, ActorProcessingErr, ActorRef};
use rand::SeedableRng;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;

/// An actor that handled no message for this long asks to be passivated (its state is in storage).
const IDLE_MS: u64 = 30_000;

/// A write after this many patches is a full record again, so a read applies at most this many
/// (see [`proto::record::patch`]).
pub const PATCHES_MAX: u32 = 16;

/// Largest write that fails a workflow for its size: [`WORKFLOW_BYTES_MAX`] plus what failing
/// adds (statuses, end times, the reason), within the largest replicated command (4 MiB).
const FAILING_WRITE_BYTES_MAX: usize = WORKFLOW_BYTES_MAX + 512 * 1024;

pub type Reply<T> = oneshot::Sender<Result<T>>;

/// Inputs routed to a workflow's actor, each with its caller's reply port. The supervisor queues
/// an input here and sends [`WorkflowMsg::Inputs`]; the actor decides everything queued by then
/// in one batch with one write, so inputs that arrive while a write is in flight (a fork's
/// branches finishing together) share the next write instead of taking one each.
pub type Inbox = Arc<std::sync::Mutex<Vec<Queued>>>;

/// An input waiting in an [`Inbox`] with its caller's reply port.
pub type Queued = (Box<Input>, Reply<Vec<Effect>>);

/// The inbox's queue (a poisoned lock only means a panic elsewhere mid-push; the queue stays valid).
pub fn queued(inbox: &Inbox) -> std::sync::MutexGuard<'_, Vec<Queued>> {
    inbox.lock().unwrap_or_else(|e| e.into_inner())
}

pub enum WorkflowMsg {
    Start(Box<StartInput>, Reply<Vec<Effect>>),
    Input(Box<Input>, Reply<Vec<Effect>>),
    /// Decide whatever the inbox holds (possibly nothing: an earlier batch took it).
    Inputs,
    /// A timer came due (no one waits for the answer).
    Fire(TimerKey),
    AddLog(TaskId, String, Reply<Vec<Effect>>),
    Remove(Reply<Vec<Effect>>),
    /// Sent to itself: if nothing happened since message `processed`, ask to passivate.
    IdleCheck(u64),
}

pub struct WorkflowActor;

pub struct WorkflowArgs {
    pub ctx: Arc<PartitionCtx>,
    pub id: WorkflowId,
    pub supervisor: ActorRef<SupervisorMsg>,
    pub inbox: Inbox,
}

pub struct WorkflowState {
    ctx: Arc<PartitionCtx>,
    id: WorkflowId,
    supervisor: ActorRef<SupervisorMsg>,
    inbox: Inbox,
    /// The committed record (None: not created yet, or removed).
    record: Option<WorkflowRecord>,
    /// How many patches follow the last full record written (see [`PATCHES_MAX`]).
    patches: u32,
    /// Bytes of the last full record written and of every patch since: an upper bound on the
    /// committed record's size, so that only a workflow near [`WORKFLOW_BYTES_MAX`] has its
    /// record measured before a write.
    chain_bytes: usize,
    /// Messages handled that the supervisor forwarded (for passivation handshakes).
    processed: u64,
    /// Whether an idle check is scheduled: at most one per actor, not one per message.
    idle_check_armed: bool,
}

impl WorkflowState {
    /// Proposes `next` (the record after a decision) and adopts it once committed: what changed
    /// since the committed record as a patch, or the full record (the first write, the last,
    /// one after [`PATCHES_MAX`] patches, and one a patch cannot express).
    async fn commit(&mut self, next: WorkflowRecord) -> Result<()> {
        self.commit_within(next, WORKFLOW_BYTES_MAX).await
    }

    /// [`Self::commit`] of a record that may hold at most `bytes_max` bytes of JSON: a larger one
    /// is refused with [`Error::TooLarge`] before anything is proposed.
    async fn commit_within(&mut self, next: WorkflowRecord, bytes_max: usize) -> Result<()> {
        let expected = self.record.as_ref().map_or(0, |r| r.version);
        // The write that ends a workflow is whole, so what stays stored is one compact record.
        let patch = match &self.record {
            Some(prev) if self.patches < PATCHES_MAX && !next.workflow.status.is_terminal() => {
                patch::diff(prev, &next)
            }
            _ => None,
        };
        let patched = patch.is_some();
        let head = |kind| WriteHead::of(kind, expected, &next);
        let (command, depth) = match patch {
            Some(patch) => write::encode_json_measured(&head(WriteKind::Patch), &patch),
            None => write::encode_json_measured(&head(WriteKind::Put), &next),
        };
        let written = command.len();
        if depth > RECORD_DEPTH_MAX {
            return Err(Error::TooLarge(format!(
                "workflow {} would nest {depth} levels deep, over the limit of {RECORD_DEPTH_MAX} a stored workflow may hold",
                self.id
            )));
        }
        let chain_bytes = if patched {
            self.chain_bytes + written
        } else {
            written
        };
        if chain_bytes > bytes_max {
            let bytes = if patched { json_len(&next) } else { written };
            if bytes > bytes_max {
                return Err(Error::TooLarge(format!(
                    "workflow {} would grow to {bytes} bytes, over the limit of {bytes_max} bytes a workflow may hold; store large payloads elsewhere and pass references",
                    self.id
                )));
            }
        }
        let outcome = self.ctx.propose_write(command).await?;
        match outcome {
            PartitionOutcome::Applied => {
                let prev = self.record.as_ref().map(|r| &r.workflow);
                crate::metrics::workflow_written(prev, &next.workflow);
                self.record = Some(next);
                self.patches = if patched { self.patches + 1 } else { 0 };
                self.chain_bytes = chain_bytes;
                Ok(())
            }
            PartitionOutcome::VersionConflict { stored } => {
                // The single-writer rule was broken (or a start raced an existing id): reload the truth.
                self.load()?;
                if expected == 0 && stored > 0 {
                    Err(Error::Conflict(format!(
                        "workflow {} already exists",
                        self.id
                    )))
                } else {
                    Err(Error::Unavailable(format!(
                        "workflow {} changed concurrently (stored version {stored}); retry",
                        self.id
                    )))
                }
            }
            other => Err(Error::Internal(format!(
                "unexpected outcome of a write: {other:?}"
            ))),
        }
    }

    /// Runs a decision through Raft and performs its effects. Returns the effects for the caller.
    async fn adopt(&mut self, decision: Decision) -> Result<Vec<Effect>> {
        self.adopt_all(decision.record, std::slice::from_ref(&decision.effects))
            .await?;
        Ok(decision.effects)
    }

    /// [`Self::adopt`] for a batch: one write of the last record, then every decision's effects.
    async fn adopt_all(
        &mut self,
        record: Option<WorkflowRecord>,
        effects: &[Vec<Effect>],
    ) -> Result<()> {
        let committed = record.is_some();
        match record {
            Some(mut next) => {
                let handoffs = self.hand_off(&mut next);
                let written = self.commit(next).await;
                let ok = written.is_ok();
                for (handoff, tasks) in handoffs {
                    handoff.answer(if ok { tasks } else { Vec::new() });
                }
                if let Err(Error::TooLarge(why)) = written {
                    return self.fail_oversized(why).await;
                }
                written?
            }
            // Nothing to write (a late result, a no-op command): the answer still claims to reflect
            // the latest state, so confirm that this node still leads — a deposed leader's state
            // may be stale, and "ignored" from it would acknowledge a result that was not recorded.
            None => self.ctx.confirm_leadership().await?,
        }
        self.send_out(effects.iter().flatten()).await;
        if let Some(r) = self.record.as_ref().filter(|_| committed) {
            for effect in engine::outbound(r) {
                self.ctx.outbox(effect).await;
            }
        }
        Ok(())
    }

    /// A decision would have made the record larger than a workflow may grow: the workflow fails
    /// instead, from its committed record (a start stores nothing), and the callers are told
    /// why. The failing write may pass [`WORKFLOW_BYTES_MAX`] by the little it adds (the command
    /// limit still bounds it), so failing always succeeds.
    async fn fail_oversized(&mut self, why: String) -> Result<()> {
        let Some(record) = &self.record else {
            return Err(Error::TooLarge(why));
        };
        let now = self.ctx.clock.now_ms();
        let mut rng = self.rng();
        let catalog = &*self.ctx.catalog;
        let Ok(decision) = engine::fail_oversized(record, why.clone(), now, &mut rng, catalog)
        else {
            return Err(Error::TooLarge(why));
        };
        let Some(failed) = decision.record else {
            return Err(Error::TooLarge(why));
        };
        self.commit_within(failed, FAILING_WRITE_BYTES_MAX).await?;
        tracing::warn!(workflow = %self.id, reason = %why, "workflow failed: its record would pass the size limit");
        self.send_out(&decision.effects).await;
        Err(Error::TooLarge(format!("{why}; the workflow failed")))
    }

    /// Hands a committed decision's effects addressed outside this workflow to the outbox: a
    /// workflow to start, an input for another workflow, a check the decision asked for.
    async fn send_out(&self, effects: impl IntoIterator<Item = &Effect>) {
        for effect in effects {
            let outward = matches!(
                effect,
                Effect::StartWorkflow { .. } | Effect::Notify { .. } | Effect::Perform { .. }
            );
            if outward {
                self.ctx.outbox(effect.clone()).await;
            }
        }
    }

    fn is_limited(&self, task_type: &str) -> bool {
        let def = self.ctx.catalog.task_def(task_type);
        def.and_then(|d| d.limits()).is_some()
    }

    /// Leases the tasks `next` makes ready to polls parked on this node, in `next` itself, so
    /// they cost no write of their own (see [`crate::queue`]): the same lease decision a poll's
    /// claim would ask for, decided on the record about to be written. Answers each handoff with
    /// its tasks, which the caller sends once the write committed.
    fn hand_off(&self, next: &mut WorkflowRecord) -> Vec<(Handoff, Vec<Task>)> {
        let now = self.ctx.clock.now_ms();
        let mut taken: Vec<(String, Handoff, Vec<TaskId>)> = Vec::new();
        for ready in engine::ready_tasks(&next.workflow) {
            if ready.visible_at_ms > now {
                continue;
            }
            let domain = ready.domain.as_deref();
            let open = taken.iter().position(|(ty, h, ids)| {
                *ty == ready.task_type && ids.len() < h.count && h.takes(domain)
            });
            let at = match open {
                Some(at) => at,
                // A type with a concurrency or rate limit is leased only under its permits
                // (`service::permits`), which a poll asks for.
                None if self.is_limited(&ready.task_type) => continue,
                None => match self.ctx.queues.hand_off(&ready.task_type, domain) {
                    Some(handoff) => {
                        taken.push((ready.task_type, handoff, Vec::new()));
                        taken.len() - 1
                    }
                    None => continue,
                },
            };
            taken[at].2.push(ready.task_id);
        }
        let mut out = Vec::with_capacity(taken.len());
        for (_, handoff, task_ids) in taken {
            let input = Input::LeaseAll {
                task_ids,
                worker_id: handoff.worker_id.clone(),
                permit_until: None,
            };
            let mut rng = rng_for(&self.id, next.version);
            match engine::decide(next, input, now, &mut rng) {
                Ok(Decision {
                    record: Some(leased),
                    effects,
                }) => {
                    *next = leased;
                    let tasks = effects
                        .into_iter()
                        .filter_map(|e| match e {
                            Effect::Deliver(task) => Some(*task),
                            _ => None,
                        })
                        .collect();
                    out.push((handoff, tasks));
                }
                _ => handoff.answer(Vec::new()),
            }
        }
        out
    }

    fn rng(&self) -> rand_chacha::ChaCha8Rng {
        rng_for(&self.id, self.record.as_ref().map_or(0, |r| r.version))
    }

    /// Decides a batch of inputs in order with one write (see [`Inbox`]) and answers each caller:
    /// its effects once the write committed, or its own refusal. A failed write fails them all;
    /// none of them is then recorded.
    async fn decide_batch(&mut self, batch: Vec<Queued>) {
        let (inputs, ports): (Vec<Input>, Vec<_>) = batch
            .into_iter()
            .map(|(input, port)| (*input, port))
            .unzip();
        let Some(record) = &self.record else {
            for port in ports {
                reply(
                    port,
                    Err(Error::NotFound(format!(
                        "No such workflow found by id: {}",
                        self.id
                    ))),
                );
            }
            return;
        };
        let now = self.ctx.clock.now_ms();
        let id = self.id.clone();
        let mut rng = |version: u64| -> Box<dyn rand::RngCore> { Box::new(rng_for(&id, version)) };
        let catalog = &*self.ctx.catalog;
        let (next, answers) = engine::decide_all_with(record, inputs, now, &mut rng, catalog);
        let accepted: Vec<Vec<Effect>> = answers
            .iter()
            .filter_map(|a| a.as_ref().ok().cloned())
            .collect();
        let written = if accepted.is_empty() {
            Ok(())
        } else {
            self.adopt_all(next, &accepted).await
        };
        for (port, answer) in ports.into_iter().zip(answers) {
            let answer = match (&written, answer) {
                (Ok(()), answer) => answer.map_err(Error::from),
                (Err(e), Ok(_)) => Err(e.clone()),
                (Err(_), Err(refused)) => Err(Error::from(refused)),
            };
            reply(port, answer);
        }
    }

    async fn decide(&mut self, input: Input) -> Result<Vec<Effect>> {
        let Some(record) = &self.record else {
            return Err(Error::NotFound(format!(
                "No such workflow found by id: {}",
                self.id
            )));
        };
        let now = self.ctx.clock.now_ms();
        let mut rng = self.rng();
        let decision = engine::decide_with(record, input, now, &mut rng, &*self.ctx.catalog)?;
        self.adopt(decision).await
    }

    async fn start(&mut self, start: StartInput) -> Result<Vec<Effect>> {
        if self.record.is_some() || stored_version(self.ctx.group.state(), &self.id) > 0 {
            return Err(Error::Conflict(format!(
                "workflow {} already exists",
                self.id
            )));
        }
        let now = self.ctx.clock.now_ms();
        let mut rng = self.rng();
        let decision = engine::start_with(start, now, &mut rng, &*self.ctx.catalog)?;
        self.adopt(decision).await
    }

    async fn add_log(&mut self, task: TaskId, line: String) -> Result<()> {
        let Some(record) = &self.record else {
            return Err(Error::NotFound(format!(
                "No such workflow found by id: {}",
                self.id
            )));
        };
        if record.workflow.task(&task).is_none() {
            return Err(Error::NotFound(format!("No such task found by id: {task}")));
        }
        let mut next = record.clone();
        next.version += 1;
        let logs = next.task_logs.entry(task.to_string()).or_default();
        if logs.len() >= proto::limits::TASK_LOGS_MAX {
            return Err(Error::Invalid(format!(
                "task {task} already has {} log lines (the maximum)",
                logs.len()
            )));
        }
        logs.push(TaskExecLog {
            log: line,
            task_id: task.to_string(),
            created_time: self.ctx.clock.now_ms(),
        });
        self.commit(next).await
    }

    /// [`Self::load`] at the actor's start; a row that does not decode is quarantined first
    /// (the workflow is then unknown here: reads answer that it is quarantined).
    async fn load_or_set_aside(&mut self) -> Result<()> {
        use super::stored::{read_row, Row};
        if let Row::Undecodable(reason) = read_row(self.ctx.group.state(), &self.id)? {
            self.ctx.quarantine(&self.id, None, reason).await;
        }
        self.load()
    }

    /// Reads the committed record back from the partition's state.
    fn load(&mut self) -> Result<()> {
        let stored = self.ctx.read_stored(&self.id)?;
        self.patches = stored.as_ref().map_or(0, |s| s.patches);
        self.chain_bytes = stored.as_ref().map_or(0, |s| s.bytes);
        self.record = stored.map(|s| s.record);
        Ok(())
    }

    async fn remove(&mut self) -> Result<()> {
        if self.record.is_none() {
            return Err(Error::NotFound(format!(
                "No such workflow found by id: {}",
                self.id
            )));
        }
        let cmd = PartitionCommand::RemoveWorkflow {
            workflow_id: self.id.clone(),
        };
        match self.ctx.propose(&cmd).await? {
            PartitionOutcome::Applied | PartitionOutcome::NotFound => {
                self.record = None;
                Ok(())
            }
            other => Err(Error::Internal(format!(
                "unexpected outcome of a remove: {other:?}"
            ))),
        }
    }

    /// Re-derives what the partition's queue and timer wheel hold for this workflow.
    fn publish(&self) {
        self.ctx.publish(&self.id, self.record.as_ref());
    }

    /// Schedules one idle check: if no message arrives within `IDLE_MS`, ask to be passivated.
    fn arm_idle_check(&mut self, myself: &ActorRef<WorkflowMsg>) {
        let seen = self.processed;
        myself.send_after(Duration::from_millis(IDLE_MS), move || {
            WorkflowMsg::IdleCheck(seen)
        });
        self.idle_check_armed = true;
    }

    fn is_finished(&self) -> bool {
        self.record
            .as_ref()
            .is_none_or(|r| r.workflow.status.is_terminal())
    }
}

/// The randomness of a decision on version `version` of workflow `id`: seeded from both, so a
/// replay of the same inputs draws the same numbers.
fn rng_for(id: &WorkflowId, version: u64) -> rand_chacha::ChaCha8Rng {
    let seed = crate::clock::stable_hash(id.as_str().as_bytes())
        ^ version.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    rand_chacha::ChaCha8Rng::seed_from_u64(seed)
}

fn reply<T>(port: Reply<T>, value: Result<T>) {
    // The caller may have given up (timed out or disconnected); the decision stands regardless.
    let _ = port.send(value);
}

impl Actor for WorkflowActor {
    type Msg = WorkflowMsg;
    type State = WorkflowState;
    type Arguments = WorkflowArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<WorkflowMsg>,
        args: WorkflowArgs,
    ) -> Result<WorkflowState, ActorProcessingErr> {
        let mut state = WorkflowState {
            ctx: args.ctx,
            id: args.id,
            supervisor: args.supervisor,
            inbox: args.inbox,
            record: None,
            patches: 0,
            chain_bytes: 0,
            processed: 0,
            idle_check_armed: false,
        };
        state
            .load_or_set_aside()
            .await
            .map_err(|e| format!("loading workflow {}: {e}", state.id))?;
        Ok(state)
    }

    async fn handle(
        &self,
        myself: ActorRef<WorkflowMsg>,
        msg: WorkflowMsg,
        st: &mut WorkflowState,
    ) -> Result<(), ActorProcessingErr> {
        if let WorkflowMsg::IdleCheck(seen) = msg {
            st.idle_check_armed = false;
            if seen == st.processed {
                let _ = st
                    .supervisor
                    .send_message(SupervisorMsg::Idle(st.id.clone(), st.processed));
            } else if !st.is_finished() {
                st.arm_idle_check(&myself);
            }
            return Ok(());
        }
        st.processed += 1;
        match msg {
            WorkflowMsg::Start(start, port) => {
                let r = st.start(*start).await;
                reply(port, r);
            }
            WorkflowMsg::Input(input, port) => {
                let r = st.decide(*input).await;
                reply(port, r);
            }
            WorkflowMsg::Inputs => {
                let batch = std::mem::take(&mut *queued(&st.inbox));
                if !batch.is_empty() {
                    st.decide_batch(batch).await;
                }
            }
            WorkflowMsg::Fire(key) => {
                if st.record.is_some() {
                    if let Err(e) = st.decide(Input::Timer(key)).await {
                        tracing::warn!(workflow = %st.id, error = %e, "timer input failed");
                    }
                }
            }
            WorkflowMsg::AddLog(task, line, port) => {
                let r = st.add_log(task, line).await.map(|()| Vec::new());
                reply(port, r);
            }
            WorkflowMsg::Remove(port) => {
                let r = st.remove().await.map(|()| Vec::new());
                reply(port, r);
            }
            WorkflowMsg::IdleCheck(_) => {}
        }
        st.publish();
        if st.is_finished() {
            let _ = st
                .supervisor
                .send_message(SupervisorMsg::Idle(st.id.clone(), st.processed));
        } else if !st.idle_check_armed {
            st.arm_idle_check(&myself);
        }
        Ok(())
    }
}
