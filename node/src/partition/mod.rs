//! A workflow partition on this node: its Raft group (from `cluster`), its state machine, and the
//! actors that run on its leader — the supervisor, one actor per live workflow, and the timer wheel.
//! Ready tasks go to the node-wide [`TaskQueues`](crate::queue::TaskQueues).

pub mod keys;
pub mod machine;
pub mod supervisor;
pub mod timer;
pub mod workflow;

use crate::clock::Clock;
use crate::engine::{self, Effect};
use crate::error::{Error, Result};
use crate::queue::TaskQueues;
use proto::record::{self, PartitionCommand, PartitionOutcome, WorkflowRecord};
use proto::{PartitionId, WorkflowId};
use ractor::{Actor, ActorRef};
use std::sync::{Arc, OnceLock};
use supervisor::{PartitionSupervisor, SupervisorMsg};
use timer::{TimerActor, TimerArgs, TimerMsg};
use tokio::sync::{mpsc, oneshot};
use workflow::WorkflowMsg;

/// Longest a caller waits for a workflow actor's answer.
const CALL_TIMEOUT_MS: u64 = 30_000;

/// What the actors of one partition share.
pub struct PartitionCtx {
    pub id: PartitionId,
    pub group: cluster::Group,
    pub clock: Arc<dyn Clock>,
    pub queues: Arc<TaskQueues>,
    /// Effects addressed to other workflows (failure workflows), performed by the node.
    pub outbox: mpsc::Sender<Effect>,
    timers: OnceLock<ActorRef<TimerMsg>>,
}

impl PartitionCtx {
    pub async fn propose(&self, cmd: &PartitionCommand) -> Result<PartitionOutcome> {
        let bytes = self
            .group
            .propose(record::encode(cmd))
            .await
            .map_err(|e| match e {
                cluster::Error::NotLeader { .. } => {
                    Error::Unavailable(format!("partition {} has no leader here; retry", self.id))
                }
                other => Error::Unavailable(format!("partition {}: {other}", self.id)),
            })?;
        record::decode(&bytes)
            .map_err(|e| Error::Internal(format!("partition {}: bad apply outcome: {e}", self.id)))
    }

    pub fn read(&self, id: &WorkflowId) -> Result<Option<WorkflowRecord>> {
        workflow::read_record(self.group.state(), id)
    }

    pub async fn outbox(&self, effect: Effect) {
        if self.outbox.send(effect).await.is_err() {
            tracing::warn!(partition = %self.id, "node outbox closed; effect dropped");
        }
    }

    /// Publishes a workflow's derived ready tasks and timers (nothing when finished or removed).
    pub fn publish(&self, id: &WorkflowId, record: Option<&WorkflowRecord>) {
        let (ready, timers) = match record {
            Some(r) if !r.workflow.status.is_terminal() => (
                engine::ready_tasks(&r.workflow),
                engine::timers(&r.workflow),
            ),
            _ => (Vec::new(), Vec::new()),
        };
        self.queues.publish(id, ready);
        if let Some(t) = self.timers.get() {
            let _ = t.send_message(TimerMsg::Arm {
                workflow: id.clone(),
                timers,
            });
        }
    }
}

/// A partition led by this node.
pub struct Partition {
    pub ctx: Arc<PartitionCtx>,
    supervisor: ActorRef<SupervisorMsg>,
    timers: ActorRef<TimerMsg>,
}

impl Partition {
    /// Starts the partition's actors on an opened group and re-publishes every running workflow's ready
    /// tasks and timers from committed state.
    pub async fn start(
        id: PartitionId,
        group: cluster::Group,
        clock: Arc<dyn Clock>,
        queues: Arc<TaskQueues>,
        outbox: mpsc::Sender<Effect>,
    ) -> Result<Self> {
        let ctx = Arc::new(PartitionCtx {
            id,
            group,
            clock: clock.clone(),
            queues,
            outbox,
            timers: OnceLock::new(),
        });
        let (supervisor, _) = Actor::spawn(None, PartitionSupervisor, ctx.clone())
            .await
            .map_err(|e| Error::Internal(format!("partition {id}: supervisor: {e}")))?;
        let (timers, _) = Actor::spawn(
            None,
            TimerActor,
            TimerArgs {
                clock,
                supervisor: supervisor.clone(),
            },
        )
        .await
        .map_err(|e| Error::Internal(format!("partition {id}: timers: {e}")))?;
        let _ = ctx.timers.set(timers.clone());
        let partition = Self {
            ctx,
            supervisor,
            timers,
        };
        partition.recover()?;
        Ok(partition)
    }

    fn recover(&self) -> Result<()> {
        let mut count = 0usize;
        for kv in self.ctx.group.state().scan_prefix(keys::RUNNING_PREFIX) {
            let (key, _) =
                kv.map_err(|e| Error::Internal(format!("partition {}: scan: {e}", self.ctx.id)))?;
            let Some(id) = keys::id_after_nul(&key) else {
                continue;
            };
            let record = self.ctx.read(&id)?;
            self.ctx.publish(&id, record.as_ref());
            count += 1;
        }
        tracing::info!(partition = %self.ctx.id, running = count, "partition recovered");
        Ok(())
    }

    /// Sends a message to a workflow's actor and waits for its answer.
    pub async fn call<T>(
        &self,
        id: &WorkflowId,
        make: impl FnOnce(workflow::Reply<T>) -> WorkflowMsg,
    ) -> Result<T> {
        let (tx, rx) = oneshot::channel();
        self.supervisor
            .send_message(SupervisorMsg::Route(id.clone(), make(tx)))
            .map_err(|_| {
                Error::Unavailable(format!("partition {} is stopping; retry", self.ctx.id))
            })?;
        match tokio::time::timeout(std::time::Duration::from_millis(CALL_TIMEOUT_MS), rx).await {
            Ok(Ok(r)) => r,
            Ok(Err(_)) => Err(Error::Unavailable(format!(
                "workflow {id}: its actor stopped before answering; retry"
            ))),
            Err(_) => Err(Error::Unavailable(format!(
                "workflow {id}: no answer within {CALL_TIMEOUT_MS} ms; retry"
            ))),
        }
    }

    pub fn read(&self, id: &WorkflowId) -> Result<Option<WorkflowRecord>> {
        self.ctx.read(id)
    }

    pub fn state(&self) -> &sled::Tree {
        self.ctx.group.state()
    }

    pub async fn stop(&self) {
        self.timers.stop(None);
        self.supervisor.stop(None);
        if let Err(e) = self.ctx.group.shutdown().await {
            tracing::warn!(partition = %self.ctx.id, error = %e, "raft shutdown");
        }
    }
}
