//! Routing: every operation on a workflow runs on its partition's leader. A node that leads the
//! partition calls the workflow's actor; any other node forwards the request over the peer
//! transport (`proto::peer`). Reads that must see the latest committed state go to the leader
//! too; definition writes go to the meta group's leader, and definition reads first catch the local
//! replica up with the leader's applied index.

use super::Host;
use crate::error::{Error, Result};
use crate::partition::WorkflowOp;
use engine::Effect;
use proto::model::Task;
use proto::peer::{self, Reply, Request, FORWARD_TIMEOUT_MS, HOPS_MAX};
use proto::record::{
    self, MetaCommand, MetaOutcome, PartitionCommand, PartitionOutcome, WorkflowRecord,
};
use proto::{NodeId, PartitionId, TaskId, WorkflowId};
use std::time::Duration;

/// Longest a request waits for a partition to have a leader (an election in progress).
const LEADER_WAIT_MS: u64 = 5_000;
/// How often the wait re-checks.
const LEADER_POLL_MS: u64 = 20;
/// Longest an operation keeps trying to reach its partition's leader (through failovers).
const ROUTE_DEADLINE_MS: u64 = 15_000;
/// How long a peer that failed to answer is skipped.
const PEER_DOWN_MS: u64 = 1_000;
/// Longest a peer may take to say where a partition is led.
const LOCATE_TIMEOUT_MS: u64 = 1_000;
/// Longest a definition read waits for the local meta replica to catch up.
const META_CATCH_UP_MS: u64 = 5_000;

pub(crate) enum Target {
    Local,
    Peer(NodeId),
}

impl Host {
    /// Where `partition`'s leader is, waiting a little through an election.
    pub(crate) async fn target(&self, partition: PartitionId) -> Result<Target> {
        let deadline = tokio::time::Instant::now() + Duration::from_millis(LEADER_WAIT_MS);
        loop {
            match self.member_replica(partition) {
                Some(p) => match p.group.leader() {
                    Some(n) if n == self.node && p.is_local_leader().await => {
                        return Ok(Target::Local);
                    }
                    // Leads, but its actors are still starting: wait for them.
                    Some(n) if n == self.node => {}
                    // A leader that just failed to answer is probably gone: wait for the election.
                    Some(n) if self.peer_is_down(n) => {}
                    Some(n) => return Ok(Target::Peer(n)),
                    None => {}
                },
                None => {
                    // Not hosted here, or by a replica out of the membership: ask where it is led
                    // (remembered until a request fails).
                    if let Some(l) = self.locate(partition).await {
                        return Ok(Target::Peer(l));
                    }
                }
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(Error::Unavailable(format!(
                    "partition {partition} has no leader (an election is in progress); retry"
                )));
            }
            tokio::time::sleep(Duration::from_millis(LEADER_POLL_MS)).await;
        }
    }

    /// The leader of a partition this node does not host (or hosts out of its membership):
    /// remembered, else asked of every peer.
    pub(crate) async fn locate(&self, partition: PartitionId) -> Option<NodeId> {
        let hint = lock(&self.leader_hints).get(&partition.0).copied();
        if let Some(l) = hint.filter(|l| !self.peer_is_down(*l)) {
            return Some(l);
        }
        let within = Duration::from_millis(LOCATE_TIMEOUT_MS);
        let asks = self.peers().into_iter().map(|peer| async move {
            match self
                .forward_within(peer, HOPS_MAX - 1, Request::Locate { partition }, within)
                .await
            {
                Ok(Reply::Leader(l)) => l,
                _ => None,
            }
        });
        let found = futures::future::join_all(asks)
            .await
            .into_iter()
            .flatten()
            .find(|l| !self.peer_is_down(*l))?;
        lock(&self.leader_hints).insert(partition.0, found);
        Some(found)
    }

    /// Forgets where a partition not hosted here (or hosted out of its membership) was led (a
    /// request there failed).
    pub(crate) fn forget_leader(&self, partition: PartitionId) {
        lock(&self.leader_hints).remove(&partition.0);
    }

    /// Sends a request to `peer`, `partition`'s leader as far as this node knows, within `within`.
    /// Gives up early when this node's replica learns of another leader (a dead leader's connection
    /// would otherwise hold the request until the transport's idle timeout), and forgets a located
    /// leader that failed, so the next attempt looks again. Giving up is a timeout like any other:
    /// the request may have run, and every operation is safe to repeat.
    pub(crate) async fn forward_for(
        &self,
        partition: PartitionId,
        peer: NodeId,
        hops: u8,
        request: Request,
        within: Duration,
    ) -> Result<Reply> {
        let answer = match self.member_replica(partition) {
            Some(p) => {
                self.forward_to_leader(&p.group, peer, hops, request, within)
                    .await
            }
            None => self.forward_within(peer, hops, request, within).await,
        };
        if matches!(answer, Err(Error::Unavailable(_))) {
            self.forget_leader(partition);
        }
        answer
    }

    /// Sends a request to `peer`, the leader of `group` as the local replica knows it, and gives
    /// up as soon as that replica learns of another leader: a killed leader's QUIC connection
    /// would otherwise hold the request until the transport's idle timeout (seconds).
    async fn forward_to_leader(
        &self,
        group: &cluster::Group,
        peer: NodeId,
        hops: u8,
        request: Request,
        within: Duration,
    ) -> Result<Reply> {
        let mut metrics = group.raft().metrics();
        let moved = metrics.wait_for(|m| m.current_leader.is_some_and(|l| l != peer.0));
        tokio::select! {
            answer = self.forward_within(peer, hops, request, within) => answer,
            _ = moved => Err(Error::Unavailable(format!(
                "{}: leadership moved off node {peer}; retry",
                group.name()
            ))),
        }
    }

    /// Sends a request to a peer and decodes its answer.
    pub(crate) async fn forward(&self, peer: NodeId, hops: u8, request: Request) -> Result<Reply> {
        self.forward_within(
            peer,
            hops,
            request,
            Duration::from_millis(FORWARD_TIMEOUT_MS),
        )
        .await
    }

    /// Like [`Host::forward`] with a deadline. A peer that cannot be reached is marked down for a
    /// moment, so requests stop queueing behind it while the cluster elects around it.
    pub(crate) async fn forward_within(
        &self,
        peer: NodeId,
        hops: u8,
        request: Request,
        within: Duration,
    ) -> Result<Reply> {
        let Some(transport) = &self.transport else {
            return Err(Error::Internal(
                "a single node has no peers to forward to".into(),
            ));
        };
        let bytes = encode_request(hops + 1, request);
        match transport
            .call(peer, cluster::Service::Forward, bytes, within)
            .await
        {
            Ok(answer) => {
                self.peers_down
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&peer);
                decode_reply(&answer)
            }
            Err(e) => {
                if matches!(
                    e,
                    cluster::Error::Unreachable { .. } | cluster::Error::Timeout { .. }
                ) {
                    let until = tokio::time::Instant::now() + Duration::from_millis(PEER_DOWN_MS);
                    self.peers_down
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(peer, until);
                }
                Err(Error::Unavailable(format!(
                    "node {peer} could not be reached: {e}; retry"
                )))
            }
        }
    }

    /// Whether `peer` failed to answer a moment ago.
    pub(crate) fn peer_is_down(&self, peer: NodeId) -> bool {
        let down = self.peers_down.lock().unwrap_or_else(|e| e.into_inner());
        down.get(&peer)
            .is_some_and(|until| *until > tokio::time::Instant::now())
    }

    /// Runs an operation on a workflow's actor, wherever its partition is led. Answers the tasks
    /// it leased to the caller (a lease, or an update that takes the next task in the same step).
    pub(crate) async fn route_op(&self, id: &WorkflowId, op: WorkflowOp) -> Result<Vec<Task>> {
        self.route_op_hops(id, op, 0).await
    }

    pub(crate) async fn route_op_hops(
        &self,
        id: &WorkflowId,
        op: WorkflowOp,
        hops: u8,
    ) -> Result<Vec<Task>> {
        let deadline = tokio::time::Instant::now() + Duration::from_millis(ROUTE_DEADLINE_MS);
        let mut forwarded = false;
        loop {
            if let Some(p) = self.partition_of(id) {
                if let Some(answer) = p.try_call(id, op.clone()).await {
                    // Leadership may have moved here after a forwarded start whose answer was lost:
                    // the workflow it finds is the one that attempt created.
                    return match answer {
                        Err(Error::Conflict(_))
                            if forwarded && matches!(op, WorkflowOp::Start(_)) =>
                        {
                            Ok(Vec::new())
                        }
                        other => other.map(delivered),
                    };
                }
            }
            let now = tokio::time::Instant::now();
            let target = self.target(self.partition_id_of(id)).await?;
            match target {
                // Leadership arrived between the two checks: go round again.
                Target::Local if now < deadline => continue,
                Target::Local => {
                    return Err(Error::Unavailable(format!(
                        "workflow {id}: leadership is moving; retry"
                    )))
                }
                Target::Peer(_) if hops >= HOPS_MAX => {
                    return Err(Error::Unavailable(format!(
                        "workflow {id}: its partition's leader moved; retry"
                    )))
                }
                Target::Peer(peer) => {
                    let within = deadline
                        .saturating_duration_since(now)
                        .min(Duration::from_millis(FORWARD_TIMEOUT_MS));
                    let request = Request::Workflow {
                        id: id.clone(),
                        op: op.clone(),
                    };
                    let partition = self.partition_id_of(id);
                    match self
                        .forward_for(partition, peer, hops, request, within)
                        .await
                    {
                        Ok(Reply::Tasks(tasks)) => return Ok(tasks),
                        Ok(other) => return Err(unexpected(&other)),
                        // A repeated start finds the workflow its first attempt created.
                        Err(Error::Conflict(_))
                            if forwarded && matches!(op, WorkflowOp::Start(_)) =>
                        {
                            return Ok(Vec::new())
                        }
                        // The leader died or moved, or is electing: try again where it is now.
                        Err(Error::Unavailable(m)) if tokio::time::Instant::now() < deadline => {
                            tracing::debug!(workflow = %id, %peer, reason = %m, "forward failed; retrying");
                            forwarded = true;
                            tokio::time::sleep(Duration::from_millis(LEADER_POLL_MS)).await;
                        }
                        Err(e) => return Err(e),
                    }
                }
            }
        }
    }

    /// A workflow's record as its partition's leader has it (404 when it does not exist).
    pub(crate) async fn record(&self, id: &WorkflowId) -> Result<WorkflowRecord> {
        through_failover(|| self.record_hops(id, 0))
            .await?
            .ok_or_else(|| Error::NotFound(format!("No such workflow found by id: {id}")))
    }

    pub(crate) async fn record_hops(
        &self,
        id: &WorkflowId,
        hops: u8,
    ) -> Result<Option<WorkflowRecord>> {
        match self.target(self.partition_id_of(id)).await? {
            Target::Local => match self.partition_of(id) {
                Some(p) => p.read(id),
                None => Err(Error::Internal(format!(
                    "partition of {id} is led here but not hosted"
                ))),
            },
            Target::Peer(_) if hops >= HOPS_MAX => Err(Error::Unavailable(format!(
                "workflow {id}: its partition's leader moved; retry"
            ))),
            Target::Peer(peer) => match self
                .forward_for(
                    self.partition_id_of(id),
                    peer,
                    hops,
                    Request::Read { id: id.clone() },
                    Duration::from_millis(FORWARD_TIMEOUT_MS),
                )
                .await?
            {
                Reply::Record(r) => Ok(r.map(|b| *b)),
                other => Err(unexpected(&other)),
            },
        }
    }

    /// The workflow that owns a task, found in the partition's state on its leader.
    pub(crate) async fn task_owner(&self, task: &TaskId) -> Result<WorkflowId> {
        through_failover(|| self.task_owner_hops(task, 0)).await
    }

    pub(crate) async fn task_owner_hops(&self, task: &TaskId, hops: u8) -> Result<WorkflowId> {
        let partition = task.partition(self.partition_count());
        match self.target(partition).await? {
            Target::Local => {
                let p = self.partition_of_task(task).ok_or_else(|| {
                    Error::Internal(format!(
                        "partition of task {task} is led here but not hosted"
                    ))
                })?;
                crate::partition::stored::owner_of_task(p.state(), task)?
                    .ok_or_else(|| Error::NotFound(format!("No such task found by id: {task}")))
            }
            Target::Peer(_) if hops >= HOPS_MAX => Err(Error::Unavailable(format!(
                "task {task}: leader moved; retry"
            ))),
            Target::Peer(peer) => match self
                .forward_for(
                    partition,
                    peer,
                    hops,
                    Request::TaskOwner { task: task.clone() },
                    Duration::from_millis(FORWARD_TIMEOUT_MS),
                )
                .await?
            {
                Reply::Owner(w) => Ok(w),
                other => Err(unexpected(&other)),
            },
        }
    }

    /// Proposes a command that no workflow actor owns on `partition`'s leader, wherever it is,
    /// through failovers. Every such command is safe to repeat.
    pub(crate) async fn partition_command(
        &self,
        partition: PartitionId,
        command: PartitionCommand,
    ) -> Result<PartitionOutcome> {
        through_failover(|| self.partition_command_hops(partition, command.clone(), 0)).await
    }

    pub(crate) async fn partition_command_hops(
        &self,
        partition: PartitionId,
        command: PartitionCommand,
        hops: u8,
    ) -> Result<PartitionOutcome> {
        match self.target(partition).await? {
            Target::Local => {
                let p = self.partition(partition).ok_or_else(|| {
                    Error::Internal(format!("partition {partition} is led here but not hosted"))
                })?;
                let outcome = p.propose(&command).await?;
                if matches!(command, PartitionCommand::Publish { .. }) {
                    self.queue_waker(partition).notify_one();
                }
                Ok(outcome)
            }
            Target::Peer(_) if hops >= HOPS_MAX => Err(Error::Unavailable(format!(
                "partition {partition}: its leader moved; retry"
            ))),
            Target::Peer(peer) => match self
                .forward_for(
                    partition,
                    peer,
                    hops,
                    Request::Partition { partition, command },
                    Duration::from_millis(FORWARD_TIMEOUT_MS),
                )
                .await?
            {
                Reply::Outcome(o) => Ok(o),
                other => Err(unexpected(&other)),
            },
        }
    }

    /// Writes a definition change through the meta group's leader.
    /// The change is recorded in the audit log with who it is made for
    /// ([`crate::access::caller`]) and when, unless the runtime makes it by itself
    /// ([`MetaCommand::is_audited`]).
    pub(crate) async fn propose_meta(&self, cmd: MetaCommand) -> Result<MetaOutcome> {
        if !cmd.is_audited() {
            return self.propose_meta_hops(cmd, 0).await;
        }
        let audited = MetaCommand::Audited {
            by: crate::access::caller::current(),
            at: self.clock.now_ms(),
            command: Box::new(cmd),
        };
        self.propose_meta_hops(audited, 0).await
    }

    pub(crate) async fn propose_meta_hops(
        &self,
        cmd: MetaCommand,
        hops: u8,
    ) -> Result<MetaOutcome> {
        let deadline = tokio::time::Instant::now() + Duration::from_millis(LEADER_WAIT_MS);
        loop {
            match self.meta.propose(record::encode(&cmd)).await {
                Ok(bytes) => {
                    return match record::decode(&bytes) {
                        Ok(MetaOutcome::Undecodable) => Err(Error::Undecodable(
                            "the meta group could not decode the command; nothing was written"
                                .into(),
                        )),
                        Ok(outcome) => Ok(outcome),
                        Err(e) => Err(Error::Internal(format!("bad meta outcome: {e}"))),
                    }
                }
                Err(cluster::Error::NotLeader { leader: Some(peer) })
                    if peer != self.node && hops < HOPS_MAX =>
                {
                    return match self.forward(peer, hops, Request::Meta(cmd)).await? {
                        Reply::Meta(o) => Ok(o),
                        other => Err(unexpected(&other)),
                    };
                }
                Err(e @ (cluster::Error::NotLeader { .. } | cluster::Error::NoLeader { .. }))
                    if tokio::time::Instant::now() < deadline =>
                {
                    tracing::debug!(error = %e, "meta group has no leader yet; waiting");
                    tokio::time::sleep(Duration::from_millis(LEADER_POLL_MS)).await;
                }
                Err(e) => {
                    return Err(Error::Unavailable(format!(
                        "definitions cannot be written now: {e}; retry"
                    )))
                }
            }
        }
    }

    /// Makes the local meta replica at least as current as the meta leader was when asked, so a
    /// definition written through any node is visible here. Free on the leader and on one node.
    ///
    /// When the meta leader dies, the question moves to the next leader the local replica learns
    /// of (the same failover rule as operations on a partition), so starts pause for an election
    /// instead of for the dead leader's connection to time out.
    pub(crate) async fn catch_up_meta(&self) -> Result<()> {
        if self.transport.is_none() {
            return Ok(());
        }
        let deadline = tokio::time::Instant::now() + Duration::from_millis(META_CATCH_UP_MS);
        let index = loop {
            if self.meta.is_leader() {
                return Ok(());
            }
            let now = tokio::time::Instant::now();
            match self.meta.leader() {
                Some(l) if l == self.node => return Ok(()),
                // Known dead a moment ago, or no leader yet: wait for the election.
                Some(l) if self.peer_is_down(l) => {}
                None => {}
                Some(leader) => {
                    let within = deadline
                        .saturating_duration_since(now)
                        .min(Duration::from_millis(FORWARD_TIMEOUT_MS));
                    // Asked as a request that may not travel further (hops = HOPS_MAX - 1 + 1).
                    match self
                        .forward_to_leader(
                            &self.meta,
                            leader,
                            HOPS_MAX - 1,
                            Request::MetaReadIndex,
                            within,
                        )
                        .await
                    {
                        Ok(Reply::Index(i)) => break i,
                        Ok(other) => return Err(unexpected(&other)),
                        Err(Error::Unavailable(m)) if tokio::time::Instant::now() < deadline => {
                            tracing::debug!(%leader, reason = %m, "meta read index failed; retrying");
                        }
                        Err(e) => return Err(e),
                    }
                }
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(Error::Unavailable(
                    "the meta group has no reachable leader (an election is in progress); retry"
                        .into(),
                ));
            }
            tokio::time::sleep(Duration::from_millis(LEADER_POLL_MS)).await;
        };
        while self.meta.status().last_applied_index.unwrap_or(0) < index {
            if tokio::time::Instant::now() >= deadline {
                return Err(Error::Unavailable(
                    "definitions are still replicating to this node; retry".into(),
                ));
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        Ok(())
    }
}

/// Runs a read on a partition's leader again while it answers "unavailable" (a failover or a
/// leadership transfer in progress), until [`ROUTE_DEADLINE_MS`], as writes do in `route_op`.
pub(crate) async fn through_failover<T, F: std::future::Future<Output = Result<T>>>(
    mut read: impl FnMut() -> F,
) -> Result<T> {
    let deadline = tokio::time::Instant::now() + Duration::from_millis(ROUTE_DEADLINE_MS);
    loop {
        match read().await {
            Err(Error::Unavailable(m)) if tokio::time::Instant::now() < deadline => {
                tracing::debug!(reason = %m, "read failed; retrying");
                tokio::time::sleep(Duration::from_millis(LEADER_POLL_MS)).await;
            }
            other => return other,
        }
    }
}

/// A request as it travels to a peer, `hops` being the hops it will have made on arrival.
pub(crate) fn encode_request(hops: u8, request: Request) -> Vec<u8> {
    peer::encode_request(&peer::Envelope { hops, request })
}

/// A peer's answer: its reply, or the error it failed with.
pub(crate) fn decode_reply(bytes: &[u8]) -> Result<Reply> {
    peer::decode_reply(bytes)?.map_err(Error::from)
}

/// The tasks among a decision's effects that were leased to the caller.
fn delivered(effects: Vec<Effect>) -> Vec<Task> {
    effects
        .into_iter()
        .filter_map(|e| match e {
            Effect::Deliver(task) => Some(*task),
            _ => None,
        })
        .collect()
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn unexpected(reply: &Reply) -> Error {
    Error::Internal(format!(
        "a peer answered with an unexpected reply: {reply:?}"
    ))
}

#[cfg(test)]
#[path = "routing_tests.rs"]
mod tests;
