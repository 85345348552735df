//! Crash-test load shared by `t50_durability` (one server killed with `kill -9`) and `t80_cluster`
//! (the busiest leader of three nodes killed): starter threads start fork/join workflows, worker
//! threads batch-poll and complete their tasks, and a [`Record`] keeps everything the server
//! acknowledged. The checks of [`Load`] then hold the server to every acknowledgement: each
//! acknowledged start exists and completes, each acknowledged update is reflected with the output it
//! sent, no task attempt was handed out twice, and each branch has exactly one COMPLETED attempt.
//!
//! Where requests go is a [`Route`]: one [`Api`] (a single server) or [`Nodes`] (round-robin over the
//! cluster nodes the test considers live). Everything else is one piece of code for both tests, so a
//! stricter check or a better failure message reaches both.
//!
//! The workflow is the one [`fork_join_defs`] registers: a FORK of tasks `a` and `b`, then a JOIN.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::cluster::{partition_of, Cluster};
use crate::{attempts, task_by_ref, task_def, task_result, tasks, Api, Reply, PARTITIONS};

/// Pause after a failed request (server down, leadership change) before trying again; a retry
/// interval, not synchronisation.
pub const BACKOFF: Duration = Duration::from_millis(50);
/// How long [`read_workflow`] retries a 503 (a leadership change) before it fails.
pub const READ_RETRY: Duration = Duration::from_secs(30);

/// Wall-clock milliseconds, comparable with the servers' task timestamps (printed on failure so a
/// lost acknowledgement can be placed against the kill and restart).
pub fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default()
}

/// Whether an HTTP status from a cluster node means "try again" rather than "refused": a node
/// answers 5xx while it cannot reach a leader, and 408/429 when forwarding times out or is shed.
pub fn transient(status: u16) -> bool {
    status >= 500 || status == 408 || status == 429
}

/// `GET /api/workflow/{id}?includeTasks=true`, retrying a 503 (a leadership change) for up to
/// [`READ_RETRY`]; panics on any other non-200 answer.
pub fn read_workflow(api: &Api, id: &str) -> Value {
    let deadline = Instant::now() + READ_RETRY;
    loop {
        let reply = api.get(&format!("/api/workflow/{id}?includeTasks=true"));
        if reply.status == 503 && Instant::now() < deadline {
            thread::sleep(BACKOFF);
            continue;
        }
        return reply
            .expect_status(200, &format!("read {id} through {}", api.base_url()))
            .json();
    }
}

/// The name of the workflow [`fork_join_defs`] registers for `prefix`.
pub fn fork_join_name(prefix: &str) -> String {
    format!("{prefix}_wf")
}

/// Registers `{prefix}_a`, `{prefix}_b` and the workflow `{prefix}_wf` (a FORK of a and b, then a
/// JOIN on both) on `api`; returns the workflow name.
///
/// `response_timeout_s` should outlast the outage a test causes (so a task a worker holds across it
/// is not timed out before its retried update lands, which must then be reflected) and be short
/// enough that a task whose poll answer was lost in the outage is offered again within the test.
pub fn fork_join_defs(api: &Api, prefix: &str, response_timeout_s: u64) -> String {
    let def = |name: &str| {
        task_def(
            name,
            json!({ "retryCount": 3, "retryDelaySeconds": 0, "responseTimeoutSeconds": response_timeout_s }),
        )
    };
    let (a, b, wf) = (
        format!("{prefix}_a"),
        format!("{prefix}_b"),
        fork_join_name(prefix),
    );
    api.register_task_defs(&[def(&a), def(&b)]);
    api.register_workflow_def(&json!({
        "name": wf,
        "version": 1,
        "schemaVersion": 2,
        "ownerEmail": "test@harness.com",
        "tasks": [
            { "name": "fork", "taskReferenceName": "fork", "type": "FORK_JOIN", "forkTasks": [
                [{ "name": a, "taskReferenceName": "a", "type": "SIMPLE", "inputParameters": { "n": "${workflow.input.n}" } }],
                [{ "name": b, "taskReferenceName": "b", "type": "SIMPLE", "inputParameters": { "n": "${workflow.input.n}" } }]
            ]},
            { "name": "join", "taskReferenceName": "join", "type": "JOIN", "joinOn": ["a", "b"] }
        ],
    }));
    wf
}

// ---------------------------------------------------------------------------------------------
// Where requests go
// ---------------------------------------------------------------------------------------------

/// How load clients pick the server for each request.
pub trait Route: Send + Sync {
    /// The client for the next request, and how failure messages name it (`"node 2"`).
    fn next(&self) -> (String, &Api);
    /// Whether a non-2xx status is worth retrying; anything else is a refusal, which fails the test.
    fn retryable(&self, status: u16) -> bool;
}

/// A single server: every request goes to it.
impl Route for Api {
    fn next(&self) -> (String, &Api) {
        ("the server".to_string(), self)
    }

    /// A single node answers 5xx only while it is down, restarting or overloaded; it has no
    /// forwarding to time out, so a 4xx (408 and 429 included) is a refusal.
    fn retryable(&self, status: u16) -> bool {
        status >= 500
    }
}

/// The nodes a cluster load client talks to: one client per node, and whether the test considers
/// the node live (clients skip a node the test killed, and move on to the next one after any
/// failure).
pub struct Nodes {
    ids: Vec<u64>,
    apis: Vec<Api>,
    live: Vec<AtomicBool>,
    next: AtomicUsize,
}

impl Nodes {
    /// Every node of `c`, all live; `timeout` is what a hanging node (or a partition between
    /// leaders) costs a client before it tries again elsewhere.
    pub fn new(c: &Cluster, timeout: Duration) -> Arc<Nodes> {
        let ids = c.ids();
        Arc::new(Nodes {
            apis: ids
                .iter()
                .map(|id| c.api_with_timeout(*id, timeout))
                .collect(),
            live: ids.iter().map(|_| AtomicBool::new(true)).collect(),
            ids,
            next: AtomicUsize::new(0),
        })
    }

    pub fn set_live(&self, id: u64, live: bool) {
        let i = self
            .ids
            .iter()
            .position(|x| *x == id)
            .expect("a node of the cluster");
        self.live[i].store(live, Ordering::SeqCst);
    }

    /// The next live node in round-robin order.
    pub fn pick(&self) -> (u64, &Api) {
        for _ in 0..self.ids.len() {
            let i = self.next.fetch_add(1, Ordering::Relaxed) % self.ids.len();
            if self.live[i].load(Ordering::SeqCst) {
                return (self.ids[i], &self.apis[i]);
            }
        }
        (self.ids[0], &self.apis[0])
    }
}

impl Route for Nodes {
    fn next(&self) -> (String, &Api) {
        let (id, api) = self.pick();
        (format!("node {id}"), api)
    }

    fn retryable(&self, status: u16) -> bool {
        transient(status)
    }
}

/// How the final checks read workflows back.
pub struct Reader {
    api: Api,
    /// Names the reader in failure messages.
    name: String,
    /// Retry a 503: in a cluster it means a leadership change, which is no loss. A single server
    /// has no leaders to change, so there a 503 fails the read.
    retry_unavailable: bool,
}

impl Reader {
    /// Reads through a single server; any non-200 answer fails.
    pub fn server(api: &Api) -> Reader {
        Reader {
            api: api.clone(),
            name: "the server".to_string(),
            retry_unavailable: false,
        }
    }

    /// Reads through cluster node `id`, retrying 503s.
    pub fn node(c: &Cluster, id: u64) -> Reader {
        Reader {
            api: c.api(id),
            name: format!("node {id}"),
            retry_unavailable: true,
        }
    }

    /// The workflow with its tasks.
    pub fn workflow(&self, id: &str) -> Value {
        if self.retry_unavailable {
            read_workflow(&self.api, id)
        } else {
            self.api.workflow(id)
        }
    }

    fn summary(&self, id: &str) -> Reply {
        self.api
            .get(&format!("/api/workflow/{id}?includeTasks=false"))
    }
}

// ---------------------------------------------------------------------------------------------
// The load
// ---------------------------------------------------------------------------------------------

/// The shape of a load run.
#[derive(Clone, Debug)]
pub struct Config {
    /// Names the definitions ([`fork_join_defs`] with this prefix must be registered), the
    /// correlation ids (`{prefix}-{n}`) and the workers (`{prefix}-a-worker-0`, ..).
    pub prefix: &'static str,
    /// Logical starts, numbered `0..workflows` (the number is the workflow's input `n`).
    pub workflows: usize,
    pub starters: usize,
    pub workers_per_type: usize,
    /// Tasks per batch poll.
    pub batch: usize,
    /// Server-side wait of a batch poll.
    pub poll_timeout_ms: u64,
    /// Started but not finished workflows at most, if bounded: keeps starts flowing around a kill
    /// instead of all landing before it.
    pub in_flight_max: Option<usize>,
    /// Bound of every wait of the run (a start, a completion target, the final completion).
    pub run_deadline: Duration,
}

/// An acknowledged task update.
#[derive(Clone, Debug)]
pub struct Ack {
    pub workflow_id: String,
    /// The output sent, which the task row must show.
    pub output: Value,
    /// The server that acknowledged it.
    pub via: String,
    pub wall_ms: u64,
}

/// What the server acknowledged and handed out during a run, written by the load threads.
#[derive(Default)]
pub struct Record {
    /// Acknowledged starts: logical start index -> workflow id.
    pub started: Mutex<BTreeMap<usize, String>>,
    /// Acknowledged updates by task id.
    pub acked: Mutex<BTreeMap<String, Ack>>,
    /// How many times each task id was handed out by a poll.
    pub deliveries: Mutex<BTreeMap<String, usize>>,
    /// Task id -> (server that handed it out, wall ms) of its first delivery.
    pub delivered_by: Mutex<BTreeMap<String, (String, u64)>>,
    /// Updates the server refused (none expected).
    pub refused: Mutex<Vec<String>>,
    /// (partition, when) of every acknowledged write (start or update).
    pub writes: Mutex<Vec<(usize, Instant)>>,
    pub completions: AtomicUsize,
    pub stop: AtomicBool,
}

impl Record {
    fn wrote(&self, workflow_id: &str) {
        let p = partition_of(workflow_id, PARTITIONS);
        self.writes.lock().expect("lock").push((p, Instant::now()));
    }

    /// Acknowledged completions so far.
    pub fn completions(&self) -> usize {
        self.completions.load(Ordering::Relaxed)
    }

    /// Where the run stands, for failure messages.
    pub fn progress(&self) -> String {
        format!(
            "{} starts and {} completions acknowledged, {} task deliveries",
            self.started.lock().expect("lock").len(),
            self.completions(),
            self.deliveries.lock().expect("lock").len()
        )
    }
}

/// A running load: its threads and their [`Record`].
pub struct Load {
    pub record: Arc<Record>,
    config: Config,
    starters: Vec<JoinHandle<()>>,
    workers: Vec<JoinHandle<()>>,
}

impl Load {
    /// Spawns `config.starters` starters (start `n` goes to starter `n % starters`) and
    /// `config.workers_per_type` workers per task type, all sending through `route`.
    pub fn start(route: Arc<dyn Route>, config: Config) -> Load {
        let record = Arc::new(Record::default());
        let starters = (0..config.starters)
            .map(|s| {
                let indexes: Vec<usize> = (0..config.workflows)
                    .filter(|n| n % config.starters == s)
                    .collect();
                starter(route.clone(), record.clone(), config.clone(), indexes)
            })
            .collect();
        let mut workers = Vec::new();
        for branch in ["a", "b"] {
            for w in 0..config.workers_per_type {
                workers.push(worker(
                    route.clone(),
                    record.clone(),
                    config.clone(),
                    format!("{}_{branch}", config.prefix),
                    format!("{}-{branch}-worker-{w}", config.prefix),
                ));
            }
        }
        Load {
            record,
            config,
            starters,
            workers,
        }
    }

    /// Waits until `target` completions are acknowledged; `what` names the moment in the failure.
    pub fn wait_completions(&self, target: usize, what: &str) {
        let limit = self.config.run_deadline;
        let deadline = Instant::now() + limit;
        while self.record.completions() < target {
            assert!(
                Instant::now() < deadline,
                "{what}: {target} completions not reached within {limit:?}: {}",
                self.record.progress()
            );
            thread::sleep(crate::WAIT_POLL_INTERVAL);
        }
    }

    /// Waits for the starters and returns the acknowledged starts, asserting every logical start
    /// was acknowledged with a distinct id.
    pub fn join_starters(&mut self) -> BTreeMap<usize, String> {
        // A starter that gives up panics; report where the run stood as well.
        for t in self.starters.drain(..) {
            if t.join().is_err() {
                panic!(
                    "a starter gave up (its message is above): {}",
                    self.record.progress()
                );
            }
        }
        let started = self.record.started.lock().expect("lock").clone();
        let workflows = self.config.workflows;
        assert_eq!(started.len(), workflows, "every logical start acknowledged");
        let distinct: BTreeSet<&String> = started.values().collect();
        assert_eq!(
            distinct.len(),
            workflows,
            "acknowledged starts have distinct ids"
        );
        started
    }

    /// Waits until every acknowledged start reads COMPLETED through `reader` (the workers are still
    /// running); a start that is missing or ends otherwise fails. Returns how many reads answered
    /// 503 and were retried (only a cluster reader retries them).
    pub fn wait_all_completed(&self, reader: &Reader, started: &BTreeMap<usize, String>) -> usize {
        let deadline = Instant::now() + self.config.run_deadline;
        let mut unavailable_reads = 0;
        for (n, id) in started {
            loop {
                let reply = reader.summary(id);
                if reply.status == 503 && reader.retry_unavailable && Instant::now() < deadline {
                    // A leadership change: retryable, counted for the caller to print.
                    unavailable_reads += 1;
                    thread::sleep(BACKOFF);
                    continue;
                }
                assert_eq!(
                    reply.status, 200,
                    "acknowledged start {n} ({id}) lost: not readable through {}: {reply:?}",
                    reader.name
                );
                let status = reply.json()["status"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                if status == "COMPLETED" {
                    break;
                }
                assert_eq!(status, "RUNNING", "workflow {id} ended {status}");
                assert!(
                    Instant::now() < deadline,
                    "workflow {n} ({id}) still {status} at the deadline: {}",
                    self.record.progress()
                );
                thread::sleep(crate::WAIT_POLL_INTERVAL);
            }
        }
        unavailable_reads
    }

    /// Stops the workers and waits for them.
    pub fn stop_workers(&mut self) {
        self.record.stop.store(true, Ordering::Relaxed);
        for w in self.workers.drain(..) {
            w.join().expect("worker thread");
        }
    }

    /// The final checks, once every start completed and the workers stopped: no refused update, no
    /// task attempt handed out twice, per workflow one COMPLETED attempt per branch with its own
    /// output (also in the join's output), and every acknowledged update reflected in the attempt
    /// it was for. `events` (when the test killed and restarted what) is printed with a lost update.
    pub fn check(&self, reader: &Reader, started: &BTreeMap<usize, String>, events: &str) {
        let refused = self.record.refused.lock().expect("lock").clone();
        assert!(refused.is_empty(), "updates refused: {refused:#?}");
        let deliveries = self.record.deliveries.lock().expect("lock").clone();
        let twice: Vec<_> = deliveries.iter().filter(|(_, k)| **k > 1).collect();
        assert!(
            twice.is_empty(),
            "task attempts handed out more than once: {twice:?}"
        );

        let mut workflows: BTreeMap<String, Value> = BTreeMap::new();
        let mut timed_out = 0;
        for (n, id) in started {
            let wf = reader.workflow(id);
            timed_out += check_workflow(*n, id, &wf);
            workflows.insert(id.clone(), wf);
        }
        let acked = self.check_acknowledged(reader, &workflows, events);
        eprintln!(
            "{} workflows completed; {} acknowledged updates; {timed_out} attempts timed out (poll \
             answers lost in the outage)",
            started.len(),
            acked
        );
        let tasks_total = 2 * self.config.workflows;
        assert!(
            acked >= tasks_total,
            "{acked} acknowledged updates for {tasks_total} tasks"
        );
    }

    /// Every acknowledged update is reflected in the attempt it was for; how many there were.
    fn check_acknowledged(
        &self,
        reader: &Reader,
        workflows: &BTreeMap<String, Value>,
        events: &str,
    ) -> usize {
        let acked = self.record.acked.lock().expect("lock").clone();
        let delivered_by = self.record.delivered_by.lock().expect("lock").clone();
        for (task_id, ack) in &acked {
            let handed_out = match delivered_by.get(task_id) {
                Some((via, at)) => format!("{via} at {at}"),
                None => "?".to_string(),
            };
            let context = format!(
                "handed out by {handed_out}, acknowledged by {} at {} (wall ms); {events}",
                ack.via, ack.wall_ms
            );
            let wf_id = &ack.workflow_id;
            let wf = match workflows.get(wf_id) {
                Some(wf) => wf.clone(),
                // A workflow whose start was not acknowledged (the answer was lost) may exist.
                None => reader.workflow(wf_id),
            };
            let row = tasks(&wf)
                .iter()
                .find(|t| t["taskId"] == task_id.as_str())
                .unwrap_or_else(|| {
                    panic!("acknowledged task {task_id} missing from {wf_id} ({context})")
                });
            assert_eq!(
                row["status"], "COMPLETED",
                "acknowledged completion of {task_id} lost ({context}): {row:#}"
            );
            assert_eq!(
                &row["outputData"], &ack.output,
                "acknowledged output of {task_id} lost ({context})"
            );
        }
        acked.len()
    }
}

/// One started workflow: COMPLETED with start `n`'s input, distinct task ids, one COMPLETED
/// attempt per branch with its own output (also in the join's output). Answers how many of its
/// attempts timed out.
fn check_workflow(n: usize, id: &str, wf: &Value) -> usize {
    assert_eq!(wf["status"], "COMPLETED");
    assert_eq!(
        wf["input"]["n"],
        json!(n),
        "workflow {id} has the input of start {n}"
    );
    let all_ids: Vec<&str> = tasks(wf)
        .iter()
        .filter_map(|t| t["taskId"].as_str())
        .collect();
    let unique: BTreeSet<&str> = all_ids.iter().copied().collect();
    assert_eq!(
        all_ids.len(),
        unique.len(),
        "a task id appears twice in {id}: {wf:#}"
    );
    let mut timed_out = 0;
    for reference in ["a", "b"] {
        let all = attempts(wf, reference);
        timed_out += all.iter().filter(|t| t["status"] == "TIMED_OUT").count();
        let completed: Vec<&Value> = all
            .into_iter()
            .filter(|t| t["status"] == "COMPLETED")
            .collect();
        assert_eq!(
            completed.len(),
            1,
            "{id}: {reference} must have exactly one COMPLETED attempt: {wf:#}"
        );
        let task = completed[0];
        assert_eq!(
            task["outputData"]["task"], task["taskId"],
            "{id}: output of another attempt: {task:#}"
        );
        assert_eq!(task["outputData"]["n"], json!(n));
        let join = task_by_ref(wf, "join").expect("join");
        assert_eq!(
            join["outputData"][reference], task["outputData"],
            "{id}: join output of {reference}"
        );
    }
    timed_out
}

fn starter(
    route: Arc<dyn Route>,
    record: Arc<Record>,
    config: Config,
    indexes: Vec<usize>,
) -> JoinHandle<()> {
    thread::spawn(move || {
        let deadline = Instant::now() + config.run_deadline;
        let wf = fork_join_name(config.prefix);
        for n in indexes {
            if let Some(in_flight_max) = config.in_flight_max {
                // Pace: keep a bounded number of workflows open so starts continue through a kill.
                while record.started.lock().expect("lock").len()
                    > record.completions() / 2 + in_flight_max
                {
                    assert!(
                        Instant::now() < deadline,
                        "starter stalled: {}",
                        record.progress()
                    );
                    thread::sleep(Duration::from_millis(10));
                }
            }
            let request = json!({
                "name": wf,
                "version": 1,
                "correlationId": format!("{}-{n}", config.prefix),
                "input": { "n": n },
            });
            let mut last_failure = String::from("none");
            loop {
                assert!(
                    Instant::now() < deadline,
                    "start {n} not acknowledged before the deadline; last failure: {last_failure}"
                );
                let (via, api) = route.next();
                match api.try_post_json("/api/workflow", &request) {
                    Ok(reply) if reply.is_success() => {
                        let id = reply.id();
                        assert!(!id.is_empty(), "start {n} via {via}: empty id");
                        record.wrote(&id);
                        record.started.lock().expect("lock").insert(n, id);
                        break;
                    }
                    Ok(reply) if !route.retryable(reply.status) => {
                        panic!("start {n} refused by {via}: {reply:?}")
                    }
                    // Down, restarting, overloaded or without a leader: unacknowledged, try again.
                    Ok(reply) => last_failure = format!("{via}: {reply:?}"),
                    Err(e) => last_failure = format!("{via}: {e:#}"),
                }
                thread::sleep(BACKOFF);
            }
        }
    })
}

fn worker(
    route: Arc<dyn Route>,
    record: Arc<Record>,
    config: Config,
    task_type: String,
    name: String,
) -> JoinHandle<()> {
    thread::spawn(move || {
        while !record.stop.load(Ordering::Relaxed) {
            let (poll_via, api) = route.next();
            let polled =
                match api.try_batch_poll(&task_type, &name, config.batch, config.poll_timeout_ms) {
                    Ok(tasks) => tasks,
                    Err(_) => {
                        thread::sleep(BACKOFF);
                        continue;
                    }
                };
            if polled.is_empty() {
                thread::sleep(Duration::from_millis(10));
                continue;
            }
            for task in polled {
                if !complete(&*route, &record, &name, &poll_via, &task) {
                    return;
                }
            }
        }
    })
}

/// Completes one polled task, sending the update again (through the next server the route picks)
/// until it is acknowledged or refused: a worker whose answer was lost in a crash sends again.
/// False when the workers are stopping.
fn complete(route: &dyn Route, record: &Record, name: &str, poll_via: &str, task: &Value) -> bool {
    let task_id = task["taskId"]
        .as_str()
        .expect("polled task has an id")
        .to_string();
    let wf = task["workflowInstanceId"]
        .as_str()
        .expect("workflowInstanceId")
        .to_string();
    *record
        .deliveries
        .lock()
        .expect("lock")
        .entry(task_id.clone())
        .or_default() += 1;
    record
        .delivered_by
        .lock()
        .expect("lock")
        .entry(task_id.clone())
        .or_insert((poll_via.to_owned(), wall_ms()));
    let output = json!({ "task": task_id, "worker": name, "n": task["inputData"]["n"] });
    let result = task_result(task, "COMPLETED", output.clone(), None, None);
    loop {
        if record.stop.load(Ordering::Relaxed) {
            return false;
        }
        let (via, api) = route.next();
        match api.try_update_task(&result) {
            Ok(reply) if reply.is_success() => {
                record.wrote(&wf);
                let ack = Ack {
                    workflow_id: wf,
                    output,
                    via,
                    wall_ms: wall_ms(),
                };
                record.acked.lock().expect("lock").insert(task_id, ack);
                record.completions.fetch_add(1, Ordering::Relaxed);
                return true;
            }
            Ok(reply) if !route.retryable(reply.status) => {
                let refusal = format!("{task_id} via {via}: {reply:?}");
                record.refused.lock().expect("lock").push(refusal);
                return true;
            }
            _ => thread::sleep(BACKOFF),
        }
    }
}
