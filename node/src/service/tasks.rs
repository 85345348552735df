//! Task operations for workers: poll (claim from the queue, then lease through the workflow's actor),
//! results, and task reads.

use super::backlog::{self, Backlogs};
use super::permits::{self, Permits, LIMITED_POLL_RECHECK_MS};
use super::workflows::parse_workflow_id;
use super::{Loops, Stopping};
use crate::error::{Error, Result};
use crate::host::{through_failover, Host};
use crate::partition::WorkflowOp;
use crate::queue::{Claim, TaskQueues};
use engine::{Input, NowMs};
use proto::limits::{PARKED_POLLS_MAX, POLL_BATCH_MAX, POLL_WAIT_MS_MAX};
use proto::model::{Json, Task, TaskExecLog, TaskResult, TaskResultStatus, TaskStatus};
use proto::peer::{QueueDomain, Reply, Request, Wanted, POLL_PEER_TIMEOUT_MS};
use proto::{NodeId, PartitionId, TaskId, WorkflowId};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::Duration;

/// Most task types one queue-size request names.
pub const QUEUE_SIZE_TYPES_MAX: usize = 1_000;

fn parse_task_id(id: &str) -> Result<TaskId> {
    TaskId::parse(id).map_err(|e| Error::Invalid(e.to_string()))
}

/// A batch poll.
#[derive(Debug, Clone, PartialEq)]
pub struct PollRequest {
    pub task_type: String,
    pub worker_id: Option<String>,
    pub domain: Option<String>,
    pub count: usize,
    pub wait_ms: u64,
}

/// The tasks service: polls and results, over the ready-task queues of the partitions this node
/// leads and what is known of the peers' (see [`backlog`]).
pub struct Tasks {
    pub(crate) host: Arc<Host>,
    pub(crate) queues: Arc<TaskQueues>,
    /// What is known of ready tasks on the peers.
    pub(crate) backlogs: Backlogs,
    /// Rotates which peers a poll asks first (see `poll_peers`).
    poll_turn: AtomicUsize,
    /// Leases of task types with a concurrency or rate limit take permits.
    pub(crate) permits: Permits,
    pub(crate) loops: Loops,
    /// Once the node's shutdown has begun, no poll waits here.
    stopping: Stopping,
}

impl Tasks {
    /// The service over `queues` (the partitions deliver into them); in a cluster it starts
    /// watching the peers' backlogs.
    pub(crate) fn start(host: Arc<Host>, queues: Arc<TaskQueues>, stopping: Stopping) -> Arc<Self> {
        let tasks = Arc::new(Self {
            permits: Permits::new(host.clone(), queues.clone()),
            host,
            queues,
            backlogs: Backlogs::default(),
            poll_turn: AtomicUsize::new(0),
            loops: Loops::default(),
            stopping,
        });
        if tasks.host.transport.is_some() {
            tasks
                .loops
                .add(tokio::spawn(backlog::run(Arc::downgrade(&tasks))));
        }
        tasks
    }

    /// Ready tasks per type in the whole cluster (every type with some when `types` is empty),
    /// of the domains `domain` covers: this node counts the partitions it leads, and the leader
    /// of each other partition counts its own (one request per leader).
    pub async fn queue_sizes(
        &self,
        types: &[String],
        domain: &QueueDomain,
    ) -> Result<BTreeMap<String, u64>> {
        if types.len() > QUEUE_SIZE_TYPES_MAX {
            return Err(Error::Invalid(format!(
                "{} task types asked for; at most {QUEUE_SIZE_TYPES_MAX} at once",
                types.len()
            )));
        }
        through_failover(|| self.queue_sizes_once(types, domain)).await
    }

    async fn queue_sizes_once(
        &self,
        types: &[String],
        domain: &QueueDomain,
    ) -> Result<BTreeMap<String, u64>> {
        let led = self.host.led_partitions().await;
        let mut total = self.queue_sizes_in(types, domain, &led);
        let asks = self
            .host
            .led_elsewhere(&led)
            .await?
            .into_iter()
            .map(|(peer, partitions)| {
                let ask = Request::QueueSizes {
                    types: types.to_vec(),
                    domain: domain.clone(),
                    partitions: partitions.clone(),
                };
                async move { self.host.ask_leader_of(&partitions, peer, ask).await }
            });
        for answer in futures::future::join_all(asks).await {
            match answer? {
                Reply::Sizes(sizes) => sizes
                    .into_iter()
                    .for_each(|(t, n)| *total.entry(t).or_default() += n),
                other => return Err(Error::Internal(format!("unexpected answer {other:?}"))),
            }
        }
        Ok(total)
    }

    /// Ready tasks per type in the queues of `partitions` that this node leads (see
    /// [`Tasks::queue_sizes`]); each of `types` is answered, 0 when none is queued.
    pub(crate) fn queue_sizes_in(
        &self,
        types: &[String],
        domain: &QueueDomain,
        partitions: &BTreeSet<PartitionId>,
    ) -> BTreeMap<String, u64> {
        let n = self.host.partition_count();
        let mut all = self
            .queues
            .sizes_where(domain, |task| partitions.contains(&task.partition(n)));
        if types.is_empty() {
            return all;
        }
        types
            .iter()
            .map(|t| (t.clone(), all.remove(t).unwrap_or(0)))
            .collect()
    }

    /// Polls parked on this node, waiting for tasks.
    pub fn parked_polls(&self) -> usize {
        self.queues.parked()
    }

    /// Leases up to `count` ready tasks of a type, waiting up to `wait_ms` for the first one.
    /// Once the node's shutdown has begun a poll that found nothing waits no longer: it answers
    /// `Unavailable`, so its worker polls another node rather than a node about to close.
    pub async fn poll(&self, request: PollRequest) -> Result<Vec<Task>> {
        proto::check::name("task type", &request.task_type)?;
        if let Some(worker) = request.worker_id.as_deref().filter(|w| !w.is_empty()) {
            proto::check::name("workerid", worker)?;
        }
        if let Some(domain) = request.domain.as_deref().filter(|d| !d.is_empty()) {
            proto::check::name("domain", domain)?;
        }
        let count = request.count.clamp(1, POLL_BATCH_MAX);
        let wait = Duration::from_millis(request.wait_ms.min(POLL_WAIT_MS_MAX));
        let deadline = tokio::time::Instant::now() + wait;
        let domain = request.domain.as_deref().filter(|d| !d.is_empty());
        let notifier = self.queues.notifier(&request.task_type);
        let want = Wanted {
            task_type: request.task_type.clone(),
            domain: domain.map(str::to_owned),
        };
        let limited = self.permits.limits_of(&request.task_type).is_some();
        loop {
            // Registered before looking, so a publication in between wakes us.
            let published = notifier.notified();
            tokio::pin!(published);
            published.as_mut().enable();
            let (mut out, retry_in_ms) = self
                .lease_here(&request.task_type, request.worker_id.clone(), domain, count)
                .await?;
            // In a cluster, tasks of partitions led elsewhere are leased there.
            if out.len() < count {
                let missing = count - out.len();
                let got = self
                    .poll_peers(&request, domain, &want, missing, limited)
                    .await;
                out.extend(got);
            }
            let now_i = tokio::time::Instant::now();
            if !out.is_empty() || now_i >= deadline {
                return Ok(out);
            }
            if self.stopping.begun() {
                return Err(Error::Unavailable(format!(
                    "node {} is shutting down; poll another node",
                    self.host.node.0
                )));
            }
            let mut until = deadline;
            // A limited type's tasks may be held back by its permits, which no publication
            // announces: look again when the keeper said, or soon.
            if limited {
                let recheck = retry_in_ms.unwrap_or(LIMITED_POLL_RECHECK_MS).max(1);
                until = until.min(now_i + Duration::from_millis(recheck));
            }
            if let Some(next) = self.queues.next_visible(&request.task_type, domain) {
                let in_ms =
                    u64::try_from(next.saturating_sub(self.host.clock.now_ms())).unwrap_or(0);
                until = until.min(now_i + Duration::from_millis(in_ms.max(1)));
            }
            // Parked, a workflow actor that makes a task ready leases it to this poll in its own
            // write (see `queue`).
            let parking =
                self.queues
                    .park(&request.task_type, domain, request.worker_id.clone(), count);
            let Some(mut parked) = parking else {
                crate::metrics::bound_full("parked_polls");
                return Err(Error::Unavailable(format!(
                    "{PARKED_POLLS_MAX} polls are parked on this node, its limit; retry"
                )));
            };
            let handed = tokio::select! {
                handed = &mut parked.answer => Some(handed.unwrap_or_default()),
                _ = &mut published => None,
                _ = tokio::time::sleep_until(until) => None,
                () = self.stopping.wait() => None,
            };
            let handed = match handed {
                Some(tasks) => tasks,
                // An actor took the poll as it woke: its answer follows that actor's write.
                None if !parked.unpark() => (&mut parked.answer).await.unwrap_or_default(),
                None => Vec::new(),
            };
            if !handed.is_empty() {
                return Ok(handed);
            }
        }
    }

    /// Asks every live peer that may have tasks waiting (see `backlog`) at once for a share of
    /// the `missing` tasks (the shares add up to it, so a poll never hands out more than its
    /// count); a frozen or dead peer costs at most the poll timeout and is then skipped for a
    /// moment. A `limited` type's tasks may wait on its permits, not for workers, so backlog
    /// hints say nothing of them: every live peer is asked.
    async fn poll_peers(
        &self,
        request: &PollRequest,
        domain: Option<&str>,
        want: &Wanted,
        missing: usize,
        limited: bool,
    ) -> Vec<Task> {
        let now_ms = self.host.clock.now_ms();
        let live: Vec<NodeId> = self
            .host
            .peers()
            .into_iter()
            .filter(|p| {
                !self.host.peer_is_down(*p)
                    && (limited || self.backlogs.worth_asking(*p, want, now_ms))
            })
            .collect();
        if live.is_empty() {
            return Vec::new();
        }
        // The remainder goes to different peers on successive polls, so a one-task poll
        // reaches every peer in turn.
        let turn = self
            .poll_turn
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let asks = live.iter().enumerate().filter_map(|(i, peer)| {
            let n = live.len();
            let share = missing / n + usize::from((i + turn) % n < missing % n);
            (share > 0).then(|| {
                let ask = Request::Poll {
                    task_type: request.task_type.clone(),
                    worker_id: request.worker_id.clone(),
                    domain: domain.map(str::to_owned),
                    count: share,
                };
                async move {
                    let within = Duration::from_millis(POLL_PEER_TIMEOUT_MS);
                    (
                        *peer,
                        share,
                        self.host.forward_within(*peer, 0, ask, within).await,
                    )
                }
            })
        });
        let mut out = Vec::new();
        for (peer, share, answer) in futures::future::join_all(asks).await {
            match answer {
                Ok(Reply::Tasks(tasks)) => {
                    if tasks.len() < share && !limited {
                        self.backlogs.drained(peer, want);
                    }
                    out.extend(tasks)
                }
                Ok(_) => tracing::warn!(%peer, "unexpected answer to a poll"),
                Err(e) => tracing::debug!(%peer, error = %e, "peer poll failed"),
            }
        }
        out
    }

    /// Leases up to `count` ready tasks from the partitions this node leads, without waiting.
    pub(crate) async fn lease_local(
        &self,
        task_type: &str,
        worker_id: Option<String>,
        domain: Option<&str>,
        count: usize,
    ) -> Result<Vec<Task>> {
        Ok(self
            .lease_here(task_type, worker_id, domain, count)
            .await?
            .0)
    }

    /// [`Tasks::lease_local`], and when a limit held tasks back, how long until asking again may
    /// be worth it.
    async fn lease_here(
        &self,
        task_type: &str,
        worker_id: Option<String>,
        domain: Option<&str>,
        count: usize,
    ) -> Result<(Vec<Task>, Option<u64>)> {
        let now = self.host.clock.now_ms();
        let claims = self
            .queues
            .claim(task_type, domain, count.min(POLL_BATCH_MAX), now);
        if claims.is_empty() {
            return Ok((Vec::new(), None));
        }
        let (claims, permit_until, retry_in_ms) = match self.permits.limits_of(task_type) {
            Some(_) => self.permitted(task_type, claims).await,
            None => (claims, None, None),
        };
        let leased = self.lease_claims(claims, worker_id, permit_until).await;
        Ok((leased, retry_in_ms))
    }

    /// The claims of a limited type its keeper grants permits for, with the permits' deadline;
    /// the rest go back to the queue, with how long until asking again may be worth it.
    async fn permitted(
        &self,
        task_type: &str,
        claims: Vec<Claim>,
    ) -> (Vec<Claim>, Option<NowMs>, Option<u64>) {
        let asked_at = self.host.clock.now_ms();
        let ids = claims.iter().map(|c| c.task_id.clone()).collect();
        match self.permits.ask(task_type, ids).await {
            Ok(grant) => {
                let (granted, refused): (Vec<Claim>, Vec<Claim>) = claims
                    .into_iter()
                    .partition(|c| grant.granted.contains(&c.task_id));
                self.queues.restore(refused);
                let retry_in_ms = (grant.retry_in_ms > 0).then_some(grant.retry_in_ms);
                let until = permits::permit_until(asked_at, &grant);
                (granted, Some(until), retry_in_ms)
            }
            Err(e) => {
                tracing::debug!(task_type, error = %e, "no permits now");
                self.queues.restore(claims);
                (Vec::new(), None, Some(LIMITED_POLL_RECHECK_MS))
            }
        }
    }

    /// Leases claimed tasks, one decision per workflow: a fork's branches claimed together cost
    /// one Raft round, not one each (the workflow's actor decides its inputs one after another).
    /// A claim whose lease failed goes back to the queue unless its workflow published since.
    async fn lease_claims(
        &self,
        claims: Vec<Claim>,
        worker_id: Option<String>,
        permit_until: Option<NowMs>,
    ) -> Vec<Task> {
        let mut by_workflow: Vec<(WorkflowId, Vec<Claim>)> = Vec::new();
        for c in claims {
            match by_workflow.iter_mut().find(|(w, _)| *w == c.workflow_id) {
                Some((_, mine)) => mine.push(c),
                None => by_workflow.push((c.workflow_id.clone(), vec![c])),
            }
        }
        let leases = by_workflow.into_iter().map(|(workflow_id, mine)| {
            let mut task_ids: Vec<TaskId> = mine.iter().map(|c| c.task_id.clone()).collect();
            let input = if task_ids.len() == 1 && permit_until.is_none() {
                Input::Lease {
                    task_id: task_ids.remove(0),
                    worker_id: worker_id.clone(),
                }
            } else {
                Input::LeaseAll {
                    task_ids,
                    worker_id: worker_id.clone(),
                    permit_until,
                }
            };
            async move {
                let op = WorkflowOp::Input(Box::new(input));
                (mine, self.host.route_op(&workflow_id, op).await)
            }
        });
        let mut out = Vec::new();
        for (mine, result) in futures::future::join_all(leases).await {
            match result {
                Ok(delivered) => out.extend(delivered),
                // A stale claim (already leased, or no longer ready): not an error for the poller.
                Err(Error::Conflict(_) | Error::NotFound(_)) => self.queues.restore(mine),
                Err(e) => {
                    tracing::warn!(error = %e, "lease failed");
                    self.queues.restore(mine);
                }
            }
        }
        out
    }

    /// Where a result goes: its workflow id, or (when a client leaves it out) the task's index row.
    async fn owner_of(&self, workflow_id: &str, task_id: &TaskId) -> Result<WorkflowId> {
        if !workflow_id.is_empty() {
            return parse_workflow_id(workflow_id);
        }
        self.host.task_owner(task_id).await
    }

    pub async fn update_task(&self, result: TaskResult) -> Result<String> {
        if result.task_id.is_empty() {
            return Err(Error::Invalid("taskId cannot be empty".into()));
        }
        let task_id = parse_task_id(&result.task_id)?;
        proto::check::task_result(&result)?;
        let wf = self
            .owner_of(&result.workflow_instance_id, &task_id)
            .await?;
        self.host
            .route_op(&wf, WorkflowOp::Input(Box::new(Input::TaskResult(result))))
            .await?;
        Ok(task_id.to_string())
    }

    /// Records a QUIC worker's result under the lease it got the task with (committed before it
    /// returns); `Conflict` when that lease has ended.
    pub async fn update_leased(
        &self,
        result: TaskResult,
        lease: proto::worker::Lease,
    ) -> Result<()> {
        let task_id = parse_task_id(&result.task_id)?;
        proto::check::task_result(&result)?;
        let wf = self
            .owner_of(&result.workflow_instance_id, &task_id)
            .await?;
        let input = Input::LeasedResult { result, lease };
        self.host
            .route_op(&wf, WorkflowOp::Input(Box::new(input)))
            .await
            .map(drop)
    }

    pub async fn update_task_v2(&self, result: TaskResult) -> Result<Option<Task>> {
        let worker_id = result.worker_id.clone();
        let task_id = parse_task_id(&result.task_id)?;
        let wf = self
            .owner_of(&result.workflow_instance_id, &task_id)
            .await?;
        proto::check::task_result(&result)?;
        let input = Input::TaskResultThenLease(result);
        let delivered = self
            .host
            .route_op(&wf, WorkflowOp::Input(Box::new(input)))
            .await?;
        // The workflow's own next task of this type, leased in the same decision.
        if let Some(task) = delivered.into_iter().next() {
            return Ok(Some(task));
        }
        let record = self.host.record(&wf).await?;
        let Some(task) = record.workflow.task(&task_id) else {
            return Ok(None);
        };
        let request = PollRequest {
            task_type: task.task_def_name.clone(),
            worker_id,
            domain: task.domain.clone(),
            count: 1,
            wait_ms: 0,
        };
        Ok(self.poll(request).await?.into_iter().next())
    }

    pub async fn update_task_by_ref(
        &self,
        workflow_id: &str,
        reference: &str,
        status: TaskStatus,
        output: Json,
        worker_id: Option<String>,
    ) -> Result<String> {
        let wf = parse_workflow_id(workflow_id)?;
        let status = match status {
            TaskStatus::Completed => TaskResultStatus::Completed,
            TaskStatus::Failed => TaskResultStatus::Failed,
            TaskStatus::FailedWithTerminalError => TaskResultStatus::FailedWithTerminalError,
            TaskStatus::InProgress => TaskResultStatus::InProgress,
            other => {
                return Err(Error::Invalid(format!(
                    "status {} cannot be reported for a task; use COMPLETED, FAILED, FAILED_WITH_TERMINAL_ERROR or IN_PROGRESS",
                    other.as_str()
                )))
            }
        };
        let record = self.host.record(&wf).await?;
        let task = task_by_ref(&record.workflow, reference)?;
        let result = TaskResult {
            workflow_instance_id: wf.to_string(),
            task_id: task.task_id.to_string(),
            status,
            output_data: output,
            worker_id,
            ..Default::default()
        };
        self.update_task(result).await
    }

    pub async fn task(&self, task_id: &str) -> Result<Task> {
        let id = parse_task_id(task_id)?;
        let wf = self.owner_of("", &id).await?;
        self.host
            .record(&wf)
            .await?
            .workflow
            .task(&id)
            .cloned()
            .ok_or_else(|| Error::NotFound(format!("No such task found by id: {task_id}")))
    }

    pub async fn task_logs(&self, task_id: &str) -> Result<Vec<TaskExecLog>> {
        let id = parse_task_id(task_id)?;
        let wf = self.owner_of("", &id).await?;
        Ok(self
            .host
            .record(&wf)
            .await?
            .task_logs
            .remove(id.as_str())
            .unwrap_or_default())
    }

    pub async fn add_task_log(&self, task_id: &str, line: String) -> Result<()> {
        let id = parse_task_id(task_id)?;
        let wf = self.owner_of("", &id).await?;
        self.host
            .route_op(&wf, WorkflowOp::AddLog(id, line))
            .await
            .map(|_| ())
    }
}

/// The task a reference name means for an outside update: its open attempt, else its last one.
pub(crate) fn task_by_ref<'a>(wf: &'a proto::model::Workflow, reference: &str) -> Result<&'a Task> {
    wf.tasks
        .iter()
        .rev()
        .find(|t| t.reference_task_name == reference && !t.status.is_terminal())
        .or_else(|| wf.task_by_ref(reference))
        .ok_or_else(|| {
            Error::NotFound(format!(
                "No task found with reference name {reference} in workflow {}",
                wf.workflow_id
            ))
        })
}
