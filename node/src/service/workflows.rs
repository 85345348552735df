//! Workflow operations: start, read, commands routed to the workflow's actor, and the read-side
//! queries (running, search, correlated) that scan the partitions' committed state.

use super::Definitions;
use crate::error::{Error, Result};
use crate::host::{read, through_failover, Host};
use crate::partition::Partition;
use crate::partition::{keys, WorkflowOp};
use engine::{Input, StartInput};
use proto::limits::SEARCH_RESULTS_MAX;
use proto::model::{
    IdempotencyStrategy, RerunWorkflowRequest, SearchResult, SkipTaskRequest, StartWorkflowRequest,
    Task, TaskStatus, Workflow, WorkflowStatus, WorkflowSummary,
};
use proto::peer::{Hit, Reply, Request};
use proto::record::WorkflowRecord;
use proto::{PartitionId, TaskId, WorkflowId};
use rand::SeedableRng;
use serde::Serialize;
use std::sync::{Arc, Mutex};

pub use proto::peer::SearchQuery;

pub(crate) fn parse_workflow_id(id: &str) -> Result<WorkflowId> {
    WorkflowId::parse(id).map_err(|e| Error::Invalid(e.to_string()))
}

/// Workflows a task search or `search-v2` reads at once.
const READ_CONCURRENCY: usize = 16;

/// Filters of a task search (`GET /api/tasks/search`); each one set narrows it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TaskSearchQuery {
    /// Any of these workflow names; empty means any.
    pub workflow_names: Vec<String>,
    pub workflow_id: Option<String>,
    pub correlation_id: Option<String>,
    pub task_id: Option<String>,
    /// Any of these task types; empty means any.
    pub task_types: Vec<String>,
    /// Any of these statuses; empty means any.
    pub statuses: Vec<TaskStatus>,
    /// Text matched against the task's id, type and reference name and its workflow's id.
    pub free_text: Option<String>,
    pub start: usize,
    pub size: usize,
}

/// Longest idempotency key accepted.
const IDEMPOTENCY_KEY_BYTES_MAX: usize = 256;

/// Highest workflow priority (Conductor's range is 0 to 99).
const PRIORITY_MAX: i32 = 99;

fn check_priority(priority: i32) -> Result<()> {
    if !(0..=PRIORITY_MAX).contains(&priority) {
        return Err(Error::Invalid(format!(
            "priority must be between 0 and {PRIORITY_MAX}, got {priority}"
        )));
    }
    Ok(())
}

/// Most runs one idempotency key can start under `FAIL_ON_RUNNING` (each after the one
/// before ended); a start past it is refused.
const IDEMPOTENT_RUNS_MAX: u32 = 1 << 20;
/// How often a `FAIL_ON_RUNNING` start tries the next run's id when racing starts take it.
const IDEMPOTENT_RACES_MAX: usize = 8;

/// What the id of run `run` of idempotency key `key` of workflow `name` hashes: run 0's is
/// the key's historic material, and a later run's spells its number first, so no two
/// (run, key) pairs of one workflow name share it.
fn run_material(name: &str, key: &str, run: u32) -> String {
    match run {
        0 => format!("idempotency:{name}:{key}"),
        n => format!("idempotency-run:{n}:{name}:{key}"),
    }
}

/// A keyed start's run that vanished while it was looked at (removed meanwhile).
fn gone(key: &KeyedStart) -> Error {
    Error::Unavailable(format!(
        "the runs of idempotencyKey '{}' changed while they were read; retry",
        key.key
    ))
}

/// A checked start request ([`Workflows::prepare_start`]), not submitted yet.
pub(crate) struct PreparedStart {
    /// The new workflow's id.
    pub(super) id: WorkflowId,
    /// The idempotency key the id comes from, if any (a run under it may exist already).
    key: Option<KeyedStart>,
    start: StartInput,
}

impl PreparedStart {
    /// Whether the id comes from an idempotency key.
    pub(super) fn keyed(&self) -> bool {
        self.key.is_some()
    }
}

/// A start's idempotency key, the workflow name it is scoped to, and its strategy (none: the
/// key's first run is answered).
#[derive(Debug, Clone)]
struct KeyedStart {
    name: String,
    key: String,
    strategy: Option<IdempotencyStrategy>,
}

/// The workflows service.
pub struct Workflows {
    pub(crate) host: Arc<Host>,
    pub(super) definitions: Arc<Definitions>,
    /// Randomness for new workflow ids (at the edge: it picks the partition and the id).
    rng: Mutex<rand_chacha::ChaCha8Rng>,
}

impl Workflows {
    /// The service; `seed` fixes its randomness (the simulator's), else it comes from the OS.
    pub(crate) fn new(
        host: Arc<Host>,
        definitions: Arc<Definitions>,
        seed: Option<u64>,
    ) -> Arc<Self> {
        let rng = seed.map_or_else(
            rand_chacha::ChaCha8Rng::from_entropy,
            rand_chacha::ChaCha8Rng::seed_from_u64,
        );
        Arc::new(Self {
            host,
            definitions,
            rng: Mutex::new(rng),
        })
    }

    /// A fresh workflow id on one of the partitions this node leads, picked at random, so that
    /// the start and the workflow's later steps need no forwarding; on any partition when this
    /// node leads none. Clients spread over the nodes spread the workflows over the leaders.
    pub(crate) fn new_workflow_id(&self) -> WorkflowId {
        use rand::RngCore;
        let led: Vec<u16> = read(&self.host.partitions)
            .iter()
            .filter(|(_, p)| p.group.is_leader())
            .map(|(id, _)| *id)
            .collect();
        let mut rng = self.rng.lock().unwrap_or_else(|e| e.into_inner());
        let random = (u128::from(rng.next_u64()) << 64) | u128::from(rng.next_u64());
        let partition = if led.is_empty() {
            u16::try_from(random % u128::from(self.host.partition_count())).unwrap_or(0)
        } else {
            led[usize::try_from(random % led.len() as u128).unwrap_or(0)]
        };
        WorkflowId::new(PartitionId(partition), random)
    }

    /// The id of the run that a start with idempotency key `key` of workflow `name` creates: bits
    /// from a hash of both, so every retry of that start (on any node, after any failover) names
    /// the same workflow and the partition's version check lets only the first one create it.
    pub(crate) fn keyed_workflow_id(&self, name: &str, key: &str) -> WorkflowId {
        self.keyed_run_id(name, key, 0)
    }

    /// The id of run `run` of an idempotency key: run 0 is [`Workflows::keyed_workflow_id`]'s;
    /// a later one (`FAIL_ON_RUNNING` starts it once the one before ended) hashes the run's
    /// number too, spelled so that no (run, key) pair hashes what another pair hashes.
    fn keyed_run_id(&self, name: &str, key: &str, run: u32) -> WorkflowId {
        let material = run_material(name, key, run);
        let hi = proto::hash::fnv1a(proto::hash::FNV_OFFSET, material.as_bytes());
        let lo = proto::hash::fnv1a(hi ^ 0x9e37_79b9_7f4a_7c15, material.as_bytes());
        let bits = (u128::from(hi) << 64) | u128::from(lo);
        let partition =
            PartitionId(u16::try_from(bits % u128::from(self.host.partition_count())).unwrap_or(0));
        WorkflowId::new(partition, bits)
    }

    pub async fn start_workflow(&self, request: StartWorkflowRequest) -> Result<String> {
        self.start_workflow_from(request, None).await
    }

    /// Starts a workflow; `event` names the event that started it (Conductor's `event` field).
    pub(crate) async fn start_workflow_from(
        &self,
        request: StartWorkflowRequest,
        event: Option<&str>,
    ) -> Result<String> {
        let start = self.prepare_start(request, event).await?;
        self.submit_start(start).await
    }

    /// Checks a start request and fixes the new workflow's id and definition; nothing is stored.
    pub(crate) async fn prepare_start(
        &self,
        mut request: StartWorkflowRequest,
        event: Option<&str>,
    ) -> Result<PreparedStart> {
        proto::check::start_request(&request)?;
        let def = match request.workflow_def.take() {
            Some(def) => {
                self.definitions.check_workflow_def(&def)?;
                def
            }
            None => {
                self.host.catch_up_meta().await?;
                if request.name.trim().is_empty() {
                    return Err(Error::Invalid("workflow name cannot be empty".into()));
                }
                self.definitions
                    .workflow_def(&request.name, request.version)?
            }
        };
        self.prepare_with(request, def, event)
    }

    /// [`Workflows::prepare_start`] for a definition already checked (a Serverless Workflow
    /// document's, read from the registry that checked it).
    pub(super) fn prepare_with(
        &self,
        request: StartWorkflowRequest,
        mut def: proto::model::WorkflowDef,
        event: Option<&str>,
    ) -> Result<PreparedStart> {
        check_priority(request.priority)?;
        self.host.defs.resolve(&mut def);
        let key = match request.idempotency_key.as_deref().map(str::trim) {
            Some("") | None => None,
            Some(k) if k.len() > IDEMPOTENCY_KEY_BYTES_MAX => {
                return Err(Error::Invalid(format!(
                    "idempotencyKey is {} bytes; the maximum is {IDEMPOTENCY_KEY_BYTES_MAX}",
                    k.len()
                )))
            }
            Some(k) => Some(k.to_owned()),
        };
        let id = match &key {
            Some(k) => self.keyed_workflow_id(&def.name, k),
            None => self.new_workflow_id(),
        };
        let key = key.map(|key| KeyedStart {
            name: def.name.clone(),
            key,
            strategy: request.idempotency_strategy,
        });
        let start = StartInput {
            correlation_id: request.correlation_id,
            priority: request.priority,
            task_to_domain: request.task_to_domain,
            event: event.map(str::to_owned),
            ..StartInput::new(id.clone(), def, request.input)
        };
        Ok(PreparedStart { id, key, start })
    }

    /// Starts a prepared workflow; answers its id. A keyed start that finds its run created
    /// already does what its strategy says ([`Workflows::start_existing`]).
    pub(super) async fn submit_start(&self, prepared: PreparedStart) -> Result<String> {
        let PreparedStart { id, key, start } = prepared;
        let again = key
            .as_ref()
            .filter(|k| k.strategy == Some(IdempotencyStrategy::FailOnRunning))
            .map(|_| start.clone());
        match self
            .host
            .route_op(&id, WorkflowOp::Start(Box::new(start)))
            .await
        {
            Ok(_) => Ok(id.to_string()),
            Err(Error::Conflict(_)) => match key {
                Some(key) => self.start_existing(&id, &key, again).await,
                None => Err(Error::Conflict(format!("workflow {id} exists already"))),
            },
            Err(e) => Err(e),
        }
    }

    /// A keyed start whose first run (`first`) exists: without a strategy its id is answered
    /// (perhaps this very request created it, retried after its answer was lost); `FAIL` is
    /// refused; `RETURN_EXISTING` answers the newest run; `FAIL_ON_RUNNING` starts `again` as
    /// the next run unless the newest one is still running.
    async fn start_existing(
        &self,
        first: &WorkflowId,
        key: &KeyedStart,
        again: Option<StartInput>,
    ) -> Result<String> {
        match (key.strategy, again) {
            (None, _) => Ok(first.to_string()),
            (Some(IdempotencyStrategy::Fail), _) => Err(Error::Conflict(format!(
                "a workflow {} with idempotencyKey '{}' exists already: {first}",
                key.name, key.key
            ))),
            (Some(IdempotencyStrategy::FailOnRunning), Some(start)) => {
                self.start_unless_running(key, start).await
            }
            _ => Ok(self.newest_run(key).await?.1.workflow_id.to_string()),
        }
    }

    /// `FAIL_ON_RUNNING`: refused while the key's newest run is RUNNING or PAUSED; otherwise
    /// `start` becomes the next run, under the next run's id (a racing start that takes that id
    /// first makes this one look again).
    async fn start_unless_running(
        &self,
        key: &KeyedStart,
        mut start: StartInput,
    ) -> Result<String> {
        for _ in 0..IDEMPOTENT_RACES_MAX {
            let (run, newest) = self.newest_run(key).await?;
            if matches!(
                newest.status,
                WorkflowStatus::Running | WorkflowStatus::Paused
            ) {
                return Err(Error::Conflict(format!(
                    "workflow {} with idempotencyKey '{}' is {}: {}",
                    key.name,
                    key.key,
                    newest.status.as_str(),
                    newest.workflow_id
                )));
            }
            if run >= IDEMPOTENT_RUNS_MAX {
                return Err(Error::Conflict(format!(
                    "idempotencyKey '{}' started {IDEMPOTENT_RUNS_MAX} runs, its limit",
                    key.key
                )));
            }
            let id = self.keyed_run_id(&key.name, &key.key, run + 1);
            start.workflow_id = id.clone();
            let op = WorkflowOp::Start(Box::new(start.clone()));
            match self.host.route_op(&id, op).await {
                Ok(_) => return Ok(id.to_string()),
                Err(Error::Conflict(_)) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(Error::Unavailable(format!(
            "starts with idempotencyKey '{}' keep racing; retry",
            key.key
        )))
    }

    /// The newest run of a key whose first run exists, with its number. A key's runs are
    /// numbered without gaps (each is started only once the one before exists), so doubling
    /// then halving finds the newest in a few reads however many runs there were.
    async fn newest_run(&self, key: &KeyedStart) -> Result<(u32, Workflow)> {
        let first = self.keyed_run(key, 0).await?.ok_or_else(|| gone(key))?;
        let mut found = (0u32, first);
        let mut step = 1u32;
        // Doubling: the first missing run past the newest found.
        let mut missing = loop {
            if found.0 >= IDEMPOTENT_RUNS_MAX {
                return Ok(found);
            }
            let run = found.0.saturating_add(step).min(IDEMPOTENT_RUNS_MAX);
            match self.keyed_run(key, run).await? {
                Some(wf) => found = (run, wf),
                None => break run,
            }
            step = step.saturating_mul(2);
        };
        // Halving between the newest found and the first missing.
        while missing - found.0 > 1 {
            let mid = found.0 + (missing - found.0) / 2;
            match self.keyed_run(key, mid).await? {
                Some(wf) => found = (mid, wf),
                None => missing = mid,
            }
        }
        Ok(found)
    }

    /// Run `run` of a key, if it exists.
    async fn keyed_run(&self, key: &KeyedStart, run: u32) -> Result<Option<Workflow>> {
        let id = self.keyed_run_id(&key.name, &key.key, run);
        match self.host.record(&id).await {
            Ok(record) => Ok(Some(record.workflow)),
            Err(Error::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Starts a workflow under a given id (failure workflows); a Conflict means it already exists.
    /// Starts the workflow an engine effect asks for (a failure workflow, a START_WORKFLOW
    /// task's, a SUB_WORKFLOW's child), under the id the effect derived: a repeat answers
    /// `Conflict`.
    pub(crate) async fn start_requested(&self, request: engine::StartRequest) -> Result<()> {
        self.host.catch_up_meta().await?;
        let mut def = match request.definition {
            Some(def) => *def,
            None => self
                .definitions
                .workflow_def(&request.name, request.version)?,
        };
        self.host.defs.resolve(&mut def);
        let id = request.workflow_id;
        let (parent, parent_task) = request.parent.unzip();
        let start = StartInput {
            correlation_id: request.correlation_id,
            task_to_domain: request.task_to_domain,
            parent_workflow_id: parent.map(|p| p.to_string()),
            parent_workflow_task_id: parent_task.map(|t| t.to_string()),
            ..StartInput::new(id.clone(), def, request.input)
        };
        self.host
            .route_op(&id, WorkflowOp::Start(Box::new(start)))
            .await
            .map(|_| ())
    }

    pub async fn workflow(&self, id: &str, include_tasks: bool) -> Result<Workflow> {
        let id = parse_workflow_id(id)?;
        let mut wf = self.host.record(&id).await?.workflow;
        if !include_tasks {
            wf.tasks.clear();
        }
        Ok(wf)
    }

    pub async fn command(&self, id: &str, input: Input) -> Result<()> {
        let id = parse_workflow_id(id)?;
        self.host
            .route_op(&id, WorkflowOp::Input(Box::new(input)))
            .await
            .map(|_| ())
    }

    pub async fn restart(&self, id: &str, use_latest: bool) -> Result<()> {
        let wid = parse_workflow_id(id)?;
        let def = if use_latest {
            let current = self.host.record(&wid).await?.workflow;
            self.host.catch_up_meta().await?;
            let mut def = self
                .definitions
                .workflow_def(&current.workflow_name, None)?;
            self.host.defs.resolve(&mut def);
            Some(def)
        } else {
            None
        };
        self.command(id, Input::Restart { def }).await
    }

    pub async fn pause(&self, id: &str) -> Result<()> {
        self.command(id, Input::Pause).await
    }

    pub async fn resume(&self, id: &str) -> Result<()> {
        self.command(id, Input::Resume).await
    }

    pub async fn terminate(&self, id: &str, reason: Option<String>) -> Result<()> {
        if let Some(r) = &reason {
            proto::check::text("reason", r, proto::limits::REASON_LEN_MAX)?;
        }
        self.command(id, Input::Terminate { reason }).await
    }

    /// Retries a FAILED, TIMED_OUT or TERMINATED workflow; with `resume_subworkflow_tasks`,
    /// its failed SUB_WORKFLOW tasks wait for their children retried in place instead of
    /// starting new ones.
    pub async fn retry(&self, id: &str, resume_subworkflow_tasks: bool) -> Result<()> {
        let input = if resume_subworkflow_tasks {
            Input::RetryResumingSubworkflows
        } else {
            Input::Retry
        };
        self.command(id, input).await
    }

    /// Reruns in place; answers the workflow id.
    pub async fn rerun(&self, id: &str, request: RerunWorkflowRequest) -> Result<String> {
        self.command(id, Input::Rerun(request)).await?;
        Ok(id.to_owned())
    }

    pub async fn skip_task(
        &self,
        id: &str,
        reference: &str,
        request: SkipTaskRequest,
    ) -> Result<()> {
        let input = Input::SkipTask {
            reference: reference.to_owned(),
            request,
        };
        self.command(id, input).await
    }

    /// Runs the workflow's decider now (`PUT /api/workflow/decide/{id}`).
    pub async fn decide(&self, id: &str) -> Result<()> {
        self.command(id, Input::Decide).await
    }

    /// Removes a workflow and its history (`DELETE /api/workflow/{id}/remove`).
    pub async fn remove(&self, id: &str) -> Result<()> {
        let id = parse_workflow_id(id)?;
        self.host
            .route_op(&id, WorkflowOp::Remove)
            .await
            .map(|_| ())
    }

    /// Ids of RUNNING workflows of a name (and version), from every partition: the local replicas,
    /// and the partitions hosted elsewhere through their leaders.
    pub async fn running(&self, name: &str, version: Option<u32>) -> Result<Vec<String>> {
        through_failover(|| self.running_once(name, version)).await
    }

    async fn running_once(&self, name: &str, version: Option<u32>) -> Result<Vec<String>> {
        self.host
            .list_every_partition(
                |hosted| running_in(hosted, name, version),
                |partitions| Request::Running {
                    name: name.to_owned(),
                    version,
                    partitions,
                },
                |reply| match reply {
                    Reply::Ids(ids) => Ok(ids),
                    other => Err(other),
                },
            )
            .await
    }

    /// Ids of the workflows, on every partition, whose running Serverless Workflow `listen`
    /// tasks wait for events of `event_type`, as each partition's leader has them (a follower's
    /// replica may not have applied a listen that just began).
    pub async fn listening(&self, event_type: &str) -> Result<Vec<String>> {
        through_failover(|| self.listening_once(event_type)).await
    }

    async fn listening_once(&self, event_type: &str) -> Result<Vec<String>> {
        let (led, elsewhere) = self.host.every_leader().await?;
        let mut out = listening_in(&self.host.replicas_of(&led)?, event_type)?;
        for (leader, partitions) in elsewhere {
            let ask = Request::Listening {
                event_type: event_type.to_owned(),
                partitions: partitions.clone(),
            };
            match self.host.ask_leader_of(&partitions, leader, ask).await? {
                Reply::Ids(ids) => out.extend(ids),
                other => return Err(Error::Internal(format!("unexpected answer {other:?}"))),
            }
        }
        Ok(out)
    }

    /// Every workflow matching `query`, newest first, from every partition (as [`Workflows::running`]).
    /// Scans committed state: indexes for search are deliberately kept off the commit path,
    /// so searching costs the writes nothing.
    pub async fn search(&self, query: SearchQuery) -> Result<SearchResult<WorkflowSummary>> {
        let size = if query.size == 0 {
            100
        } else {
            query.size.min(SEARCH_RESULTS_MAX)
        };
        let query = SearchQuery { size, ..query };
        through_failover(|| self.search_once(&query)).await
    }

    async fn search_once(&self, query: &SearchQuery) -> Result<SearchResult<WorkflowSummary>> {
        let (total, mut hits) = self
            .host
            .ask_every_partition(
                |hosted| search_in(hosted, query),
                |partitions| Request::Search {
                    query: query.clone(),
                    partitions,
                },
                |(total, hits), reply| match reply {
                    Reply::Found { total: t, hits: h } => {
                        *total += t;
                        hits.extend(h);
                        Ok(())
                    }
                    other => Err(other),
                },
            )
            .await?;
        sort_hits(&mut hits);
        let results = hits
            .into_iter()
            .skip(query.start)
            .take(query.size)
            .map(|(_, s)| s)
            .collect();
        Ok(SearchResult {
            total_hits: total,
            results,
        })
    }

    /// The workflows of a search's page, read in full (without their tasks unless asked), in the
    /// search's order; one removed since the search is left out.
    pub async fn read_all(&self, ids: Vec<String>, include_tasks: bool) -> Result<Vec<Workflow>> {
        use futures::TryStreamExt;
        self.read_each(ids, include_tasks).try_collect().await
    }

    /// As [`Workflows::read_all`], one workflow at a time, [`READ_CONCURRENCY`] read at once.
    fn read_each(
        &self,
        ids: Vec<String>,
        include_tasks: bool,
    ) -> impl futures::Stream<Item = Result<Workflow>> + '_ {
        use futures::StreamExt;
        futures::stream::iter(ids)
            .map(move |id| async move { self.workflow(&id, include_tasks).await })
            .buffered(READ_CONCURRENCY)
            .filter(|read| std::future::ready(!matches!(read, Err(Error::NotFound(_)))))
    }

    /// The tasks matching `query`, latest scheduled first. They are looked for in the workflow the
    /// query names (by `workflowId`, or as the owner of `taskId`), else in the newest
    /// [`SEARCH_RESULTS_MAX`] workflows that match its workflow filters (a workflow search over
    /// every partition per workflow name, then a read of each). Only the hits up to the page's
    /// end are kept.
    pub async fn search_tasks(&self, query: &TaskSearchQuery) -> Result<SearchResult<Task>> {
        use futures::TryStreamExt;
        let size = if query.size == 0 {
            100
        } else {
            query.size.min(SEARCH_RESULTS_MAX)
        };
        let window = query.start.saturating_add(size);
        let (mut total, mut hits) = (0u64, Vec::new());
        let reads = self.read_each(self.task_search_scope(query).await?, true);
        let mut reads = std::pin::pin!(reads);
        while let Some(wf) = reads.try_next().await? {
            if !workflow_in_task_search(query, &wf) {
                continue;
            }
            for task in wf.tasks.into_iter().filter(|t| task_matches(query, t)) {
                total += 1;
                hits.push(task);
            }
            if hits.len() > window.saturating_mul(2).max(READ_CONCURRENCY) {
                keep_first_tasks(&mut hits, window);
            }
        }
        keep_first_tasks(&mut hits, window);
        Ok(SearchResult {
            total_hits: total,
            results: hits.into_iter().skip(query.start).collect(),
        })
    }

    /// The summary of workflow `id` when it passes `query`'s filters (its paging aside); `None`
    /// when it does not, or does not exist.
    pub async fn search_id(
        &self,
        id: &str,
        query: &SearchQuery,
    ) -> Result<Option<WorkflowSummary>> {
        match self.workflow(id, false).await {
            Ok(wf) => Ok(matches(query, &wf).then(|| WorkflowSummary::of(&wf))),
            Err(Error::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The ids of the workflows whose tasks a task search looks at.
    async fn task_search_scope(&self, query: &TaskSearchQuery) -> Result<Vec<String>> {
        let named = match (&query.workflow_id, &query.task_id) {
            (Some(w), _) => Some(parse_workflow_id(w)?),
            (None, Some(t)) => {
                let task = TaskId::parse(t).map_err(|e| Error::Invalid(e.to_string()))?;
                match self.host.task_owner(&task).await {
                    Ok(owner) => Some(owner),
                    Err(Error::NotFound(_)) => return Ok(Vec::new()),
                    Err(e) => return Err(e),
                }
            }
            (None, None) => None,
        };
        if let Some(id) = named {
            return Ok(vec![id.to_string()]);
        }
        let names: Vec<Option<String>> = match query.workflow_names.as_slice() {
            [] => vec![None],
            names => names.iter().cloned().map(Some).collect(),
        };
        let mut found = Vec::new();
        for workflow_name in names {
            let search = SearchQuery {
                workflow_name,
                correlation_id: query.correlation_id.clone(),
                size: SEARCH_RESULTS_MAX,
                ..Default::default()
            };
            found.extend(self.search(search).await?.results);
        }
        // Newest first across the names (ISO-8601 times sort as text).
        found.sort_by(|a, b| b.start_time.cmp(&a.start_time));
        let ids = found.into_iter().map(|s| s.workflow_id);
        Ok(ids.take(SEARCH_RESULTS_MAX).collect())
    }

    pub async fn correlated(
        &self,
        name: &str,
        correlation_id: &str,
        include_closed: bool,
        include_tasks: bool,
    ) -> Result<Vec<Workflow>> {
        let query = SearchQuery {
            workflow_name: Some(name.to_owned()),
            correlation_id: Some(correlation_id.to_owned()),
            size: SEARCH_RESULTS_MAX,
            ..Default::default()
        };
        let mut out = Vec::new();
        for s in self.search(query).await?.results {
            let mut wf = self.workflow(&s.workflow_id, include_tasks).await?;
            if !include_closed && wf.status.is_terminal() {
                continue;
            }
            if !include_tasks {
                wf.tasks.clear();
            }
            out.push(wf);
        }
        Ok(out)
    }
}

/// Newest first, then by id.
fn sort_hits(hits: &mut [Hit]) {
    hits.sort_by(|a, b| {
        b.0.cmp(&a.0)
            .then_with(|| a.1.workflow_id.cmp(&b.1.workflow_id))
    });
}

/// Ids of RUNNING workflows of a name (and version) in these replicas.
pub(crate) fn running_in(
    partitions: &[Arc<Partition>],
    name: &str,
    version: Option<u32>,
) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for p in partitions {
        for kv in p.state().scan_prefix(keys::running_prefix(name)) {
            let (k, v) = kv.map_err(crate::host::storage)?;
            let wf_version = (v.len() == 4).then(|| u32::from_be_bytes([v[0], v[1], v[2], v[3]]));
            if version.is_some() && wf_version != version {
                continue;
            }
            if let Some(id) = keys::id_after_nul(&k) {
                out.push(id.to_string());
            }
        }
    }
    Ok(out)
}

/// Ids of the workflows in these replicas that listen for events of `event_type` (their
/// listening rows name it, or every type).
pub(crate) fn listening_in(partitions: &[Arc<Partition>], event_type: &str) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for p in partitions {
        for kv in p.state().scan_prefix(keys::LISTENING_PREFIX) {
            let (k, v) = kv.map_err(crate::host::storage)?;
            let types: Vec<String> = serde_json::from_slice(&v).unwrap_or_default();
            if !types
                .iter()
                .any(|t| t == event_type || t == engine::dsl::ANY_TYPE)
            {
                continue;
            }
            if let Some(id) = keys::id_after_listening(&k) {
                out.push(id.to_string());
            }
        }
    }
    Ok(out)
}

/// How many workflows in these replicas match `query`, and the first `start + size` hits in
/// search order (enough for any node merging several sources to cut its page).
pub(crate) fn search_in(
    partitions: &[Arc<Partition>],
    query: &SearchQuery,
) -> Result<(u64, Vec<Hit>)> {
    let mut hits: Vec<Hit> = Vec::new();
    for p in partitions {
        let records: Box<dyn Iterator<Item = WorkflowRecord>> = match &query.correlation_id {
            Some(c) => Box::new(
                p.state()
                    .scan_prefix(keys::correlated_prefix(c))
                    .filter_map(|kv| kv.ok())
                    .filter_map(|(k, _)| keys::id_after_nul(&k))
                    .filter_map(|id| p.read(&id).ok().flatten()),
            ),
            None => Box::new(crate::partition::stored::records(p.state())),
        };
        hits.extend(
            records
                .map(|r| r.workflow)
                .filter(|wf| matches(query, wf))
                .map(|wf| (wf.create_time, WorkflowSummary::of(&wf))),
        );
    }
    sort_hits(&mut hits);
    let total = hits.len() as u64;
    hits.truncate(query.start.saturating_add(query.size));
    Ok((total, hits))
}

/// Whether a workflow passes a search's filters.
fn matches(query: &SearchQuery, wf: &Workflow) -> bool {
    if query
        .workflow_name
        .as_ref()
        .is_some_and(|n| n != &wf.workflow_name)
        || query.status.is_some_and(|s| s != wf.status)
        || query
            .correlation_id
            .as_ref()
            .is_some_and(|c| Some(c) != wf.correlation_id.as_ref())
    {
        return false;
    }
    match query
        .free_text
        .as_deref()
        .filter(|t| !t.is_empty() && *t != "*")
    {
        Some(text) => {
            wf.workflow_id.as_str().contains(text)
                || wf.workflow_name.contains(text)
                || wf
                    .correlation_id
                    .as_deref()
                    .is_some_and(|c| c.contains(text))
        }
        None => true,
    }
}

/// Sorts task hits latest scheduled first (then by id) and keeps the first `count`.
fn keep_first_tasks(hits: &mut Vec<Task>, count: usize) {
    hits.sort_by(|a, b| {
        (b.scheduled_time.cmp(&a.scheduled_time)).then_with(|| a.task_id.cmp(&b.task_id))
    });
    hits.truncate(count);
}

/// Whether a workflow passes a task search's workflow filters.
fn workflow_in_task_search(query: &TaskSearchQuery, wf: &Workflow) -> bool {
    (query.workflow_names.is_empty() || query.workflow_names.contains(&wf.workflow_name))
        && query
            .correlation_id
            .as_ref()
            .is_none_or(|c| Some(c) == wf.correlation_id.as_ref())
}

/// Whether a task passes a task search's task filters.
fn task_matches(query: &TaskSearchQuery, t: &Task) -> bool {
    let same_id = |want: &Option<String>, have: &str| {
        want.as_ref().is_none_or(|w| w.eq_ignore_ascii_case(have))
    };
    let of_type = |types: &[String]| {
        types.is_empty()
            || types
                .iter()
                .any(|ty| ty == &t.task_type || ty == &t.task_def_name)
    };
    same_id(&query.workflow_id, t.workflow_instance_id.as_str())
        && same_id(&query.task_id, t.task_id.as_str())
        && of_type(&query.task_types)
        && (query.statuses.is_empty() || query.statuses.contains(&t.status))
        && match query
            .free_text
            .as_deref()
            .filter(|f| !f.is_empty() && *f != "*")
        {
            Some(text) => {
                t.task_id.as_str().contains(text)
                    || t.task_type.contains(text)
                    || t.reference_task_name.contains(text)
                    || t.workflow_instance_id.as_str().contains(text)
            }
            None => true,
        }
}

/// Conductor's `TaskSummary`: a row of `GET /api/tasks/search`, times as ISO-8601 UTC and
/// payloads as JSON text, as in Conductor.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskSummary {
    pub workflow_id: String,
    pub workflow_type: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
    pub scheduled_time: String,
    pub start_time: String,
    pub update_time: String,
    pub end_time: String,
    pub status: TaskStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason_for_incompletion: Option<String>,
    pub execution_time: i64,
    pub queue_wait_time: i64,
    pub task_def_name: String,
    pub task_type: String,
    pub input: String,
    pub output: String,
    pub task_id: String,
    pub workflow_priority: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
}

impl TaskSummary {
    /// The row of task `t`.
    pub fn of(t: &Task) -> Self {
        let since = |from: i64, to: i64| if from > 0 && to > 0 { to - from } else { 0 };
        Self {
            workflow_id: t.workflow_instance_id.to_string(),
            workflow_type: t.workflow_type.clone(),
            correlation_id: t.correlation_id.clone(),
            scheduled_time: proto::model::iso8601(t.scheduled_time),
            start_time: proto::model::iso8601(t.start_time),
            update_time: proto::model::iso8601(t.update_time),
            end_time: proto::model::iso8601(t.end_time),
            status: t.status,
            reason_for_incompletion: t.reason_for_incompletion.clone(),
            execution_time: since(t.start_time, t.end_time),
            queue_wait_time: since(t.scheduled_time, t.start_time),
            task_def_name: t.task_def_name.clone(),
            task_type: t.task_type.clone(),
            input: serde_json::to_string(&t.input_data).unwrap_or_default(),
            output: serde_json::to_string(&t.output_data).unwrap_or_default(),
            task_id: t.task_id.to_string(),
            workflow_priority: t.workflow_priority,
            domain: t.domain.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn iso8601_formats_utc() {
        assert_eq!(proto::model::iso8601(0), "");
        assert_eq!(
            proto::model::iso8601(1_700_000_000_123),
            "2023-11-14T22:13:20.123Z"
        );
        assert_eq!(
            proto::model::iso8601(951_782_400_000),
            "2000-02-29T00:00:00.000Z"
        );
    }

    #[test]
    fn every_run_of_every_key_hashes_its_own_material() {
        let mut seen = std::collections::BTreeSet::new();
        for key in ["k", "k:1", "1:k", "idempotency-run:1", ":", ""] {
            for run in [0, 1, 2, 10, 11] {
                let material = super::run_material("w", key, run);
                assert!(seen.insert(material.clone()), "{material} twice");
            }
        }
        assert_eq!(
            super::run_material("w", "k", 0),
            "idempotency:w:k",
            "run 0 as before"
        );
    }
}
