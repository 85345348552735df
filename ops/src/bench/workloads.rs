//! The workloads. Each registers nothing itself (see [`definitions`] and [`w8_document`]),
//! drives workflows against the target, and answers a [`Outcome`]: counts, latency histogram and
//! the time it measured.
//!
//! How the bench learns that a workflow finished ([`Completion`]): by default each workflow is one
//! `POST /api/workflow/execute` that answers once the workflow finished, as a client that wants
//! the result asks (and as the peers' clients wait for theirs). W4 and W7 start workflows and
//! poll `GET /api/workflow/{id}/status` (Conductor's short answer) instead, with a pause that
//! grows with the workflow's age (a tenth of its age, 1 ms to 250 ms), so a latency is
//! overstated by at most about 10% (1 ms for fast workflows): W7 must know every acknowledged
//! start to count what was lost. Either way the server's CPU for it is included in the CPU-ms
//! per 1,000 steps.

use super::client::{AsyncClient, Client, Status};
use super::stats::Latency;
use anyhow::bail;
use clap::ValueEnum;
use serde_json::{json, Value};
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The one task type every workload uses.
pub const TASK_TYPE: &str = "baton_bench_task";
pub const W1: &str = "baton_bench_w1_one_task";
pub const W2: &str = "baton_bench_w2_fork3_join";
pub const W3: &str = "baton_bench_w3_chain10";
pub const W4: &str = "baton_bench_w4_wait_1s";
pub const W5: &str = "baton_bench_w5_three_children";
/// W8's DSL document: W2's fork of three worker tasks, written in the Serverless Workflow DSL.
pub const W8: Flow = Flow::Dsl {
    namespace: W8_NAMESPACE,
    name: W8_NAME,
    version: W8_VERSION,
};
const W8_NAMESPACE: &str = "baton-bench";
const W8_NAME: &str = "w8-fork3";
const W8_VERSION: &str = "1.0.0";
/// The DSL version W8's document declares.
const W8_DSL_VERSION: &str = "1.0.3";
/// How long W4's WAIT waits.
pub const W4_WAIT: Duration = Duration::from_secs(1);
/// SIMPLE tasks per workflow of each workload.
pub const W1_STEPS: u64 = 1;
pub const W2_STEPS: u64 = 3;
pub const W3_STEPS: u64 = 10;
/// W4's step is its timer firing.
pub const W4_STEPS: u64 = 1;
/// W5's steps are its three children's tasks (each child is a W1 workflow).
pub const W5_STEPS: u64 = 3;
/// W8's steps are its three calls, each a task of [`TASK_TYPE`] as in W2.
pub const W8_STEPS: u64 = 3;
/// Threads that start W2's workflows (each takes every n-th arrival slot).
const W2_STARTERS: usize = 4;
/// Threads that watch W2's running workflows for completion.
const W2_CHECKERS: usize = 2;
/// Longest a closed-loop driver waits for one workflow before counting it lost.
const WORKFLOW_DEADLINE: Duration = Duration::from_secs(60);
/// W2's workflows executing at once at most (an arrival beyond waits for one to finish), as many
/// as the peers' load generators keep in flight.
const W2_EXECUTORS: usize = 512;
/// Longest one execute request waits (the server's maximum).
const EXECUTE_WAIT_MAX_S: u64 = 300;
/// What a client adds to an execute's wait for its request timeout.
const EXECUTE_SLACK: Duration = Duration::from_secs(10);

/// How the bench sees a workflow finish.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Completion {
    /// One `POST /api/workflow/execute` per workflow, answered once it finished.
    Execute,
    /// `POST /api/workflow/{name}`, then `GET /api/workflow/{id}/status` until it finished.
    StatusPolls,
}

impl Completion {
    pub fn describe(self) -> &'static str {
        match self {
            Completion::Execute => {
                "one POST /api/workflow/execute per workflow, answered when it finished"
            }
            Completion::StatusPolls => {
                "start, then status polls a tenth of the workflow's age apart (1-250 ms)"
            }
        }
    }
}

/// What an open loop starts: a Conductor workflow, or an instance of a DSL document.
#[derive(Clone, Copy, Debug)]
pub enum Flow {
    /// Version 1 of the Conductor workflow definition of this name.
    Conductor(&'static str),
    /// A registered DSL document, by its header.
    Dsl {
        namespace: &'static str,
        name: &'static str,
        version: &'static str,
    },
}

impl Flow {
    /// The request that starts one: `POST /api/workflow/{name}` or `POST
    /// /api/dsl/workflows/{namespace}/{name}/{version}/instances`.
    fn start_path(self) -> String {
        match self {
            Flow::Conductor(name) => format!("/api/workflow/{name}"),
            Flow::Dsl {
                namespace,
                name,
                version,
            } => format!("/api/dsl/workflows/{namespace}/{name}/{version}/instances"),
        }
    }

    /// The Conductor workflow `POST /api/workflow/execute` can run; a DSL instance has none.
    fn executable(self) -> Option<&'static str> {
        match self {
            Flow::Conductor(name) => Some(name),
            Flow::Dsl { .. } => None,
        }
    }
}

/// W8's document: a `fork` of three branches, each one `call` of the worker function
/// [`TASK_TYPE`] (W2's task type, so W2's workers serve it), and nothing else.
pub fn w8_document() -> Value {
    let branches: Vec<Value> = ["branch_a", "branch_b", "branch_c"]
        .iter()
        .map(|b| json!({ *b: { "call": TASK_TYPE } }))
        .collect();
    json!({
        "document": { "dsl": W8_DSL_VERSION, "namespace": W8_NAMESPACE, "name": W8_NAME,
                      "version": W8_VERSION },
        "do": [ { "fork3": { "fork": { "branches": branches } } } ],
    })
}

/// A FORK of three one-task branches (`{prefix}_a`, `_b`, `_c`, each task made by `branch` from
/// its reference) and the JOIN on all three.
fn fork3(prefix: &str, branch: &dyn Fn(&str) -> Value) -> Vec<Value> {
    let refs: Vec<String> = ["a", "b", "c"]
        .iter()
        .map(|b| format!("{prefix}_{b}"))
        .collect();
    let branches: Vec<Value> = refs.iter().map(|r| json!([branch(r)])).collect();
    vec![
        json!({ "name": "fork", "taskReferenceName": "fork", "type": "FORK_JOIN",
                "forkTasks": branches }),
        json!({ "name": "join", "taskReferenceName": "join", "type": "JOIN", "joinOn": refs }),
    ]
}

/// Runs one workflow of `name` until it finished or `deadline` passed, counting its start and
/// request errors in `out`; answers how it ended (`None`: unfinished, or a request failed).
fn run_to_end(
    client: &Client,
    name: &str,
    input: &Value,
    completion: Completion,
    deadline: Instant,
    out: &mut Outcome,
) -> Option<Status> {
    let started = Instant::now();
    let (id, status) = match completion {
        Completion::Execute => {
            let wait_s = deadline
                .saturating_duration_since(started)
                .as_secs()
                .min(EXECUTE_WAIT_MAX_S);
            client.execute(name, input, wait_s)
        }
        Completion::StatusPolls => client.start(name, input).map(|id| (id, Status::Running)),
    }
    .map_err(|_| out.errors += 1)
    .ok()?;
    out.started += 1;
    if status != Status::Running {
        return Some(status);
    }
    wait_done(client, &id, started, deadline)
        .map_err(|_| out.errors += 1)
        .ok()
        .flatten()
}

/// The task and workflow definitions to register before any workload runs.
pub fn definitions() -> (Value, Vec<Value>) {
    let task_defs = json!([{
        "name": TASK_TYPE,
        "description": "batonctl bench: completed at once by in-process workers",
        "ownerEmail": "bench@baton.local",
        // A task leased by a poll whose answer died with a node (W7) is retried once its
        // response timeout passes; without faults nothing fails and nothing retries.
        "retryCount": 2,
        "retryLogic": "FIXED",
        "retryDelaySeconds": 0,
        "timeoutSeconds": 0,
        "timeoutPolicy": "TIME_OUT_WF",
        "responseTimeoutSeconds": 10,
    }]);
    let simple = |r: String| json!({ "name": TASK_TYPE, "taskReferenceName": r, "type": "SIMPLE" });
    let workflow = |name: &str, tasks: Vec<Value>| {
        json!({
            "name": name,
            "version": 1,
            "schemaVersion": 2,
            "ownerEmail": "bench@baton.local",
            "tasks": tasks,
        })
    };
    let w1 = workflow(W1, vec![simple("t1".into())]);
    let w2 = workflow(W2, fork3("branch", &|r| simple(r.to_owned())));
    let w3 = workflow(
        W3,
        (1..=W3_STEPS)
            .map(|i| simple(format!("step_{i}")))
            .collect(),
    );
    let w4 = workflow(
        W4,
        vec![
            json!({ "name": "wait", "taskReferenceName": "wait", "type": "WAIT",
                     "inputParameters": { "duration": format!("{} seconds", W4_WAIT.as_secs()) } }),
        ],
    );
    let child = |r: &str| {
        json!({ "name": "child", "taskReferenceName": r, "type": "SUB_WORKFLOW",
                "subWorkflowParam": { "name": W1, "version": 1 } })
    };
    let w5 = workflow(W5, fork3("child", &child));
    (task_defs, vec![w1, w2, w3, w4, w5])
}

/// What a workload observed.
#[derive(Default)]
pub struct Outcome {
    pub started: u64,
    pub completed: u64,
    pub failed: u64,
    /// Failed starts and status reads.
    pub errors: u64,
    pub latency: Latency,
    /// From the first start to the last completion observed (the throughput denominator).
    pub elapsed: Duration,
    /// Every acknowledged start (open loop only).
    pub starts: Vec<Start>,
    /// When the open loop's fault was injected, if it had one.
    pub fault_at: Option<Instant>,
}

impl Outcome {
    /// Adds another thread's counts and latencies (not its elapsed time).
    fn add(&mut self, other: &Outcome) {
        self.started += other.started;
        self.completed += other.completed;
        self.failed += other.failed;
        self.errors += other.errors;
        self.latency.add(&other.latency);
    }
}

/// One acknowledged start of the open loop.
#[derive(Debug, Clone)]
pub struct Start {
    pub id: String,
    /// When the start request was sent.
    pub sent: Instant,
    /// When its answer (the id) arrived.
    pub acked: Instant,
}

/// Something the open loop does to the target `at` after its first arrival (W7 kills a node).
pub struct Fault<'a> {
    pub at: Duration,
    pub act: &'a mut dyn FnMut() -> anyhow::Result<()>,
}

/// Polls `id` until it leaves RUNNING or `deadline` passes (then `Ok(None)`).
fn wait_done(
    client: &Client,
    id: &str,
    started: Instant,
    deadline: Instant,
) -> anyhow::Result<Option<Status>> {
    loop {
        let status = client.status(id)?;
        if status != Status::Running {
            return Ok(Some(status));
        }
        if Instant::now() >= deadline {
            return Ok(None);
        }
        std::thread::sleep(poll_pause(started.elapsed()));
    }
}

/// The pause between status polls of a workflow this old: a tenth of its age, so a latency is
/// overstated by at most about 10%, and the polls of long workflows do not load the target.
fn poll_pause(age: Duration) -> Duration {
    (age / 10).clamp(Duration::from_millis(1), Duration::from_millis(250))
}

/// Closed loop (driver `i` talks to node `i` mod the node count): `parallel` drivers each run a
/// workflow of `name` to its end ([`Completion`]) and repeat until `count` workflows have been
/// started in total. Latency is start to completion.
pub fn closed_loop(
    urls: &[String],
    name: &str,
    parallel: usize,
    count: u64,
    completion: Completion,
) -> anyhow::Result<Outcome> {
    let next = Arc::new(AtomicU64::new(0));
    let began = Instant::now();
    let mut drivers = Vec::new();
    for i in 0..parallel {
        let client =
            Client::with_timeout(&urls[i % urls.len()], WORKFLOW_DEADLINE + EXECUTE_SLACK)?;
        let (next, name) = (next.clone(), name.to_owned());
        drivers.push(std::thread::spawn(move || {
            let mut out = Outcome::default();
            while next.fetch_add(1, Ordering::Relaxed) < count {
                let t0 = Instant::now();
                let end = run_to_end(
                    &client,
                    &name,
                    &json!({}),
                    completion,
                    t0 + WORKFLOW_DEADLINE,
                    &mut out,
                );
                match end {
                    Some(Status::Completed) => {
                        out.completed += 1;
                        out.latency.record(t0.elapsed());
                    }
                    Some(_) => out.failed += 1,
                    None => {}
                }
            }
            out
        }));
    }
    let mut total = Outcome::default();
    for d in drivers {
        let out = d
            .join()
            .map_err(|_| anyhow::anyhow!("a driver thread panicked"))?;
        total.add(&out);
    }
    total.elapsed = began.elapsed();
    Ok(total)
}

/// A started workflow W2 is waiting on.
struct Pending {
    /// When its status is read next: [`poll_pause`] after the previous read, so every workflow
    /// is read as a single waiter would read it however many are in flight.
    due: Instant,
    id: String,
    /// The node it was started on (its index in `urls`); its status is read there, as a client
    /// that keeps its connection would.
    node: usize,
    /// When it was due to start (latency counts from here, not from the actual start).
    scheduled: Instant,
}

impl PartialEq for Pending {
    fn eq(&self, other: &Self) -> bool {
        self.due == other.due
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Pending {
    /// The soonest due first (the queue is a max-heap).
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other.due.cmp(&self.due)
    }
}

/// Open loop: workflows of `flow` arrive at `rate_per_s` for `duration`, whatever the server's
/// pace; then up to `drain` for the stragglers. Latency counts from the *scheduled* arrival, so
/// a start that was late because the server (or the starter) was slow is charged for it
/// (coordinated omission corrected). With [`Completion::Execute`] each arrival is one execute
/// request, at most [`W2_EXECUTORS`] at once (an arrival waits for a free one, and that wait is
/// charged too; see [`execute_arrivals`]), and no start is reported in [`Outcome::starts`]: each is
/// acknowledged only with its result. A DSL instance cannot be executed so: its flow needs
/// [`Completion::StatusPolls`].
#[allow(clippy::too_many_arguments)]
pub fn open_loop(
    urls: &[String],
    flow: Flow,
    rate_per_s: f64,
    duration: Duration,
    drain: Duration,
    progress: &dyn Fn(String),
    fault: Option<Fault<'_>>,
    completion: Completion,
) -> anyhow::Result<Outcome> {
    let slots = (rate_per_s * duration.as_secs_f64()).round().max(1.0) as u64;
    let interval = Duration::from_secs_f64(1.0 / rate_per_s.max(0.001));
    let starts: Arc<Mutex<Vec<Start>>> = Arc::default();
    let counts = Counts::new();
    let stop = Arc::new(AtomicBool::new(false));
    let t0 = Instant::now() + Duration::from_millis(20);
    let arrivals = Arrivals {
        slots,
        t0,
        interval,
        deadline: t0 + duration + drain,
    };

    let (mut starters, mut checkers) = (Vec::new(), Vec::new());
    match completion {
        Completion::Execute => {
            let Some(name) = flow.executable() else {
                bail!("{flow:?} cannot be executed in one request: see it finish by status polls");
            };
            let timeout = duration + drain + EXECUTE_SLACK;
            starters.push(spawn_executor(urls, name, arrivals, timeout, &counts)?);
        }
        Completion::StatusPolls => {
            let path = flow.start_path();
            (starters, checkers) = spawn_pollers(urls, &path, arrivals, &counts, &starts, &stop)?;
        }
    }

    // Executors finish only once their workflows did (or their deadline passed).
    let drain = match completion {
        Completion::StatusPolls => drain,
        Completion::Execute => Duration::ZERO,
    };
    let fault_at = watch_open_loop(&starters, &counts, arrivals, drain, progress, fault, &stop)?;
    stop.store(true, Ordering::Relaxed);
    let mut latency = Latency::new();
    join_latencies(starters, "starter", &mut latency)?;
    join_latencies(checkers, "checker", &mut latency)?;
    let last = *counts
        .last_done
        .lock()
        .expect("last_done lock is never poisoned");
    let starts = std::mem::take(&mut *starts.lock().expect("starts lock is never poisoned"));
    Ok(Outcome {
        started: counts.started.load(Ordering::Relaxed),
        completed: counts.completed.load(Ordering::Relaxed),
        failed: counts.failed.load(Ordering::Relaxed),
        errors: counts.errors.load(Ordering::Relaxed),
        latency,
        elapsed: last.saturating_duration_since(t0),
        starts,
        fault_at,
    })
}

/// Threads that answer the latencies they recorded.
type Threads = Vec<JoinHandle<Latency>>;

/// The open loop's threads with status polls: [`W2_STARTERS`] starters that `POST` to `path`
/// and record every acknowledged start in `starts`, and [`W2_CHECKERS`] checkers that poll until
/// `stop`.
fn spawn_pollers(
    urls: &[String],
    path: &str,
    arrivals: Arrivals,
    counts: &Counts,
    starts: &Arc<Mutex<Vec<Start>>>,
    stop: &Arc<AtomicBool>,
) -> anyhow::Result<(Threads, Threads)> {
    let pending: Arc<Mutex<BinaryHeap<Pending>>> = Arc::default();
    let mut starters = Vec::new();
    for k in 0..W2_STARTERS {
        let clients = status_clients(urls)?;
        let (path, counts) = (path.to_owned(), counts.clone());
        let (pending, starts) = (pending.clone(), starts.clone());
        starters.push(std::thread::spawn(move || {
            start_slots(&clients, &path, k, arrivals, &counts, &pending, &starts)
        }));
    }
    let mut checkers = Vec::new();
    for _ in 0..W2_CHECKERS {
        let clients = status_clients(urls)?;
        let (pending, counts, stop) = (pending.clone(), counts.clone(), stop.clone());
        checkers.push(std::thread::spawn(move || {
            check_pending(&clients, &pending, &counts, &stop)
        }));
    }
    Ok((starters, checkers))
}

/// A blocking client per node, in the order of `urls`.
fn status_clients(urls: &[String]) -> anyhow::Result<Vec<Client>> {
    urls.iter().map(|url| Client::new(url)).collect()
}

/// Starts the thread that executes every arrival ([`execute_arrivals`]) on a runtime of its own,
/// with a client per node whose requests wait up to `timeout`.
fn spawn_executor(
    urls: &[String],
    name: &str,
    arrivals: Arrivals,
    timeout: Duration,
    counts: &Counts,
) -> anyhow::Result<JoinHandle<Latency>> {
    let clients = urls
        .iter()
        .map(|url| AsyncClient::with_timeout(url, timeout))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let (name, counts) = (name.to_owned(), counts.clone());
    Ok(std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map(|rt| rt.block_on(execute_arrivals(clients, name, arrivals, counts)))
            .unwrap_or_else(|e| {
                eprintln!("W2: cannot start the load generator's runtime: {e}");
                Latency::new()
            })
    }))
}

/// Starter `k` of [`W2_STARTERS`]: starts a workflow (`POST path`) in every `W2_STARTERS`-th
/// arrival slot from slot `k`, first on node `k` and on the next node after a failed start, and
/// queues each started one for the checkers. Records no latency (the checkers do).
fn start_slots(
    clients: &[Client],
    path: &str,
    k: usize,
    arrivals: Arrivals,
    counts: &Counts,
    pending: &Mutex<BinaryHeap<Pending>>,
    starts: &Mutex<Vec<Start>>,
) -> Latency {
    let mut node = k % clients.len();
    let mut slot = k as u64;
    while slot < arrivals.slots {
        let scheduled = arrivals.t0 + arrivals.interval.mul_f64(slot as f64);
        let now = Instant::now();
        if scheduled > now {
            std::thread::sleep(scheduled - now);
        }
        let sent = Instant::now();
        match clients[node].start_at(path, &json!({ "slot": slot })) {
            Ok(id) => {
                counts.started.fetch_add(1, Ordering::Relaxed);
                starts
                    .lock()
                    .expect("starts lock is never poisoned")
                    .push(Start {
                        id: id.clone(),
                        sent,
                        acked: Instant::now(),
                    });
                pending
                    .lock()
                    .expect("pending lock is never poisoned")
                    .push(Pending {
                        due: Instant::now(),
                        id,
                        node,
                        scheduled,
                    });
            }
            Err(_) => {
                counts.errors.fetch_add(1, Ordering::Relaxed);
                // That node may be gone (W7): start on the next one from now on.
                node = (node + 1) % clients.len();
            }
        }
        slot += W2_STARTERS as u64;
    }
    Latency::new()
}

/// A checker: reads the status of each pending workflow when it is due, until `stop`, counting
/// the finished ones and re-queueing the others; answers the latencies of the completed ones.
fn check_pending(
    clients: &[Client],
    pending: &Mutex<BinaryHeap<Pending>>,
    counts: &Counts,
    stop: &AtomicBool,
) -> Latency {
    let mut latency = Latency::new();
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        let item = {
            let mut q = pending.lock().expect("pending lock is never poisoned");
            match q.peek() {
                Some(first) if first.due <= now => q.pop(),
                _ => None,
            }
        };
        let Some(mut item) = item else {
            std::thread::sleep(Duration::from_millis(1));
            continue;
        };
        match clients[item.node].status(&item.id) {
            Ok(Status::Completed) => {
                let now = Instant::now();
                latency.record(now.saturating_duration_since(item.scheduled));
                counts.completed.fetch_add(1, Ordering::Relaxed);
                *counts
                    .last_done
                    .lock()
                    .expect("last_done lock is never poisoned") = now;
            }
            Ok(Status::Failed) => {
                counts.failed.fetch_add(1, Ordering::Relaxed);
            }
            result => {
                if result.is_err() {
                    counts.errors.fetch_add(1, Ordering::Relaxed);
                    // That node may be gone (W7): read on the next one from now on.
                    item.node = (item.node + 1) % clients.len();
                }
                item.due = Instant::now() + poll_pause(item.scheduled.elapsed());
                pending
                    .lock()
                    .expect("pending lock is never poisoned")
                    .push(item);
            }
        }
    }
    latency
}

/// Waits, looking every 20 ms, until the starters are done and every started workflow finished
/// or `drain` passed after the starters were done; injects the fault when it is due and reports
/// progress every 2 s. Answers when the fault was injected; if it fails, sets `stop` and fails.
fn watch_open_loop(
    starters: &[JoinHandle<Latency>],
    counts: &Counts,
    arrivals: Arrivals,
    drain: Duration,
    progress: &dyn Fn(String),
    mut fault: Option<Fault<'_>>,
    stop: &AtomicBool,
) -> anyhow::Result<Option<Instant>> {
    let mut next_report = Instant::now() + Duration::from_secs(2);
    let mut starters_done = false;
    let mut drain_deadline = None;
    let mut fault_at = None;
    loop {
        std::thread::sleep(Duration::from_millis(20));
        if let Some(f) = fault
            .as_mut()
            .filter(|f| fault_at.is_none() && arrivals.t0 + f.at <= Instant::now())
        {
            fault_at = Some(Instant::now());
            if let Err(e) = (f.act)() {
                stop.store(true, Ordering::Relaxed);
                return Err(e.context("the open loop's fault"));
            }
        }
        if !starters_done && starters.iter().all(|s| s.is_finished()) {
            starters_done = true;
            drain_deadline = Some(Instant::now() + drain);
        }
        let s = counts.started.load(Ordering::Relaxed);
        let done = counts.completed.load(Ordering::Relaxed) + counts.failed.load(Ordering::Relaxed);
        if Instant::now() >= next_report {
            progress(format!(
                "open loop: started {s}/{}, finished {done}, in flight {}",
                arrivals.slots,
                s - done
            ));
            next_report += Duration::from_secs(2);
        }
        if starters_done && (done >= s || drain_deadline.is_some_and(|d| Instant::now() >= d)) {
            return Ok(fault_at);
        }
    }
}

/// Joins the `what` threads, adding their latencies to `into`.
fn join_latencies(
    threads: Vec<JoinHandle<Latency>>,
    what: &str,
    into: &mut Latency,
) -> anyhow::Result<()> {
    for t in threads {
        let h = t
            .join()
            .map_err(|_| anyhow::anyhow!("a {what} thread panicked"))?;
        into.add(&h);
    }
    Ok(())
}

/// When the open loop's arrivals are due.
#[derive(Clone, Copy)]
struct Arrivals {
    slots: u64,
    t0: Instant,
    interval: Duration,
    /// Past this an execute stops waiting and its workflow counts as unfinished.
    deadline: Instant,
}

/// The open loop's shared counters.
#[derive(Clone)]
struct Counts {
    started: Arc<AtomicU64>,
    completed: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
    errors: Arc<AtomicU64>,
    last_done: Arc<Mutex<Instant>>,
}

impl Counts {
    /// All zero, the last completion now.
    fn new() -> Counts {
        Counts {
            started: Arc::new(AtomicU64::new(0)),
            completed: Arc::new(AtomicU64::new(0)),
            failed: Arc::new(AtomicU64::new(0)),
            errors: Arc::new(AtomicU64::new(0)),
            last_done: Arc::new(Mutex::new(Instant::now())),
        }
    }
}

/// Executes one workflow per arrival slot, each as a task of its own, at most [`W2_EXECUTORS`] at
/// once: an arrival that finds them all busy waits for one to finish (in arrival order), and its
/// latency still counts from its scheduled time. Answers once every workflow finished.
async fn execute_arrivals(
    clients: Vec<AsyncClient>,
    name: String,
    arrivals: Arrivals,
    counts: Counts,
) -> Latency {
    let permits = Arc::new(tokio::sync::Semaphore::new(W2_EXECUTORS));
    let latency = Arc::new(Mutex::new(Latency::new()));
    let (name, counts) = (Arc::new(name), Arc::new(counts));
    for slot in 0..arrivals.slots {
        let scheduled = arrivals.t0 + arrivals.interval.mul_f64(slot as f64);
        tokio::time::sleep_until(scheduled.into()).await;
        let Ok(permit) = permits.clone().acquire_owned().await else {
            break;
        };
        let client = clients[slot as usize % clients.len()].clone();
        let (name, counts, latency) = (name.clone(), counts.clone(), latency.clone());
        let deadline = arrivals.deadline;
        tokio::spawn(async move {
            let _permit = permit;
            let wait_s = deadline
                .saturating_duration_since(Instant::now())
                .as_secs()
                .min(EXECUTE_WAIT_MAX_S);
            match client
                .execute(&name, &json!({ "slot": slot }), wait_s)
                .await
            {
                Err(_) => {
                    counts.errors.fetch_add(1, Ordering::Relaxed);
                }
                Ok((_, status)) => {
                    counts.started.fetch_add(1, Ordering::Relaxed);
                    match status {
                        Status::Completed => {
                            let now = Instant::now();
                            latency
                                .lock()
                                .expect("latency lock is never poisoned")
                                .record(now.saturating_duration_since(scheduled));
                            counts.completed.fetch_add(1, Ordering::Relaxed);
                            let mut last = counts
                                .last_done
                                .lock()
                                .expect("last_done lock is never poisoned");
                            *last = (*last).max(now);
                        }
                        Status::Failed => {
                            counts.failed.fetch_add(1, Ordering::Relaxed);
                        }
                        // The deadline passed first: unfinished.
                        Status::Running => {}
                    }
                }
            }
        });
    }
    // Every permit back: every workflow finished.
    let _ = permits.acquire_many(W2_EXECUTORS as u32).await;
    let latency = latency.lock().expect("latency lock is never poisoned");
    latency.clone()
}

/// W4: `count` workflows that each wait on a WAIT of [`W4_WAIT`], started by `parallel` threads as
/// fast as the target takes them (so many timers are armed at once). Latency is the timer's
/// *lateness* on the target's own clock: the WAIT task's `endTime` minus its `waitTimeout` (when
/// it was due), read from each finished workflow. Completion is first seen by status polls.
pub fn timers(
    urls: &[String],
    count: u64,
    parallel: usize,
    progress: &dyn Fn(String),
) -> anyhow::Result<Outcome> {
    let began = Instant::now();
    let (ids, errors) = start_timers(urls, count, parallel)?;
    progress(format!(
        "W4: {} workflows started in {:.1} s; waiting for their timers",
        ids.len(),
        began.elapsed().as_secs_f64()
    ));
    let deadline = Instant::now() + W4_WAIT + WORKFLOW_DEADLINE;
    let chunks: Vec<Vec<String>> = ids
        .chunks(ids.len().div_ceil(parallel.max(1)).max(1))
        .map(<[String]>::to_vec)
        .collect();
    let mut checkers = Vec::new();
    for (i, chunk) in chunks.into_iter().enumerate() {
        let client = Client::new(&urls[i % urls.len()])?;
        checkers.push(std::thread::spawn(move || {
            check_timers(&client, chunk, began, deadline)
        }));
    }
    let mut total = Outcome {
        errors,
        ..Outcome::default()
    };
    for c in checkers {
        let out = c
            .join()
            .map_err(|_| anyhow::anyhow!("a checker thread panicked"))?;
        total.add(&out);
        total.elapsed = total.elapsed.max(out.elapsed);
    }
    Ok(total)
}

/// Starts `count` W4 workflows from `parallel` threads (thread `i` on node `i` mod the node
/// count); answers their ids and the number of failed starts.
fn start_timers(
    urls: &[String],
    count: u64,
    parallel: usize,
) -> anyhow::Result<(Vec<String>, u64)> {
    let next = Arc::new(AtomicU64::new(0));
    let ids: Arc<Mutex<Vec<String>>> = Arc::default();
    let errors = Arc::new(AtomicU64::new(0));
    let mut starters = Vec::new();
    for i in 0..parallel {
        let client = Client::new(&urls[i % urls.len()])?;
        let (next, ids, errors) = (next.clone(), ids.clone(), errors.clone());
        starters.push(std::thread::spawn(move || {
            while next.fetch_add(1, Ordering::Relaxed) < count {
                match client.start(W4, &json!({})) {
                    Ok(id) => ids.lock().expect("ids lock is never poisoned").push(id),
                    Err(_) => {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }));
    }
    for s in starters {
        s.join()
            .map_err(|_| anyhow::anyhow!("a starter thread panicked"))?;
    }
    let ids = std::mem::take(&mut *ids.lock().expect("ids lock is never poisoned"));
    Ok((ids, errors.load(Ordering::Relaxed)))
}

/// Waits for each W4 workflow of `ids` to finish (until `deadline`) and records its timer's
/// lateness; `elapsed` runs from `began` to the last completion seen.
fn check_timers(client: &Client, ids: Vec<String>, began: Instant, deadline: Instant) -> Outcome {
    let mut out = Outcome::default();
    let mut last = began;
    for id in ids {
        out.started += 1;
        match wait_done(client, &id, began, deadline) {
            Ok(Some(Status::Completed)) => {}
            Ok(Some(_)) => {
                out.failed += 1;
                continue;
            }
            Ok(None) => continue,
            Err(_) => {
                out.errors += 1;
                continue;
            }
        }
        last = last.max(Instant::now());
        match client.workflow(&id).map(|wf| lateness_ms(&wf)) {
            Ok(Some(ms)) => {
                out.completed += 1;
                out.latency.record(Duration::from_millis(ms));
            }
            Ok(None) => out.failed += 1,
            Err(_) => out.errors += 1,
        }
    }
    out.elapsed = last.saturating_duration_since(began);
    out
}

/// A finished W4 workflow's timer lateness: its WAIT's `endTime - waitTimeout` (never negative),
/// or `None` when the WAIT did not complete by its timer.
fn lateness_ms(wf: &Value) -> Option<u64> {
    let wait = wf["tasks"]
        .as_array()?
        .iter()
        .find(|t| t["taskType"] == "WAIT")?;
    let (end, due) = (wait["endTime"].as_i64()?, wait["waitTimeout"].as_i64()?);
    (wait["status"] == "COMPLETED" && due > 0).then(|| u64::try_from(end - due).unwrap_or(0))
}
