//! Mixed versions: a rolling upgrade from the previous release (RELEASES.md's newest, built by
//! `tests/previous-release`) to the binary under test, a rollback, the upgrade again and the
//! activation, on a three-node cluster under load (docs/upgrading.md).
//!
//! What is promised: while old and new binaries run side by side (the cluster held at its active
//! version with `--hold-cluster-version`), nodes are replaced one at a time, in both directions,
//! and nothing acknowledged is lost: every acknowledged start exists and completes, every
//! acknowledged task update is reflected, no task attempt is handed out twice, and replicas at
//! equal applied indexes have equal digests after every replacement. HTTP polling workers and QUIC
//! workers (the `worker` crate) carry traffic throughout. Activation raises every node to the
//! newest version the binary under test serves; when that is above the previous release's, it is
//! made while node 3 is down, node 3 comes back on the previous release (its own replica never saw
//! the activation) and its peers refuse its hello, naming both versions, until it runs the binary
//! under test again; then the previous release refuses to start on node 3's data directory, which
//! holds the new version by then, naming both versions.
//!
//! How a node is replaced: it is taken out of the load's rotation (as a load balancer would be
//! told first), its partitions' leaderships are handed to the other nodes one at a time with
//! `POST /api/admin/partitions/{p}/transfer?to=M` while it runs (the meta group's leadership has
//! no transfer: it moves by election when the node stops), it is stopped with SIGTERM and
//! started on the same data directory with the other binary, and the cluster is waited for until
//! the node's replicas are voters again and have caught up with their leaders and the
//! controller has spread the leaderships again. Then the starters and probes pause while the
//! replicas' digests are compared, and the load runs 10 s before the next replacement.
//!
//! Printed, not asserted (beyond generous bounds that turn a hang into a failure): starts
//! acknowledged per second in the 10 s before and during each replacement, and for each
//! leadership move of a partition the longest pause between acknowledged writes on it around the
//! move (the goal: under 1 s), over all moves and split by whether a node on the previous release
//! took part (its leaders step down and route as that release does). The pauses are measured
//! with one write probe per partition: a task of that partition reported IN_PROGRESS every
//! 100 ms through the live nodes.
//!
//! Diagnosis: the test prints each step (which binary each node runs, leaderships moved, which
//! version case ran). `BATON_KEEP_FAILED=1` keeps a failed run's cluster directory (every node's
//! log of every start, and its data); its path is printed. The previous release's sources and
//! build are in `target/previous-release/<version>/`.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use harness::cluster::{partition_group, partition_of, write_worker_cert, Cluster, LaunchConfig};
use harness::load::{fork_join_name, transient, wall_ms, Config, Load, Nodes, Reader, Record};
use harness::release::{previous_release, Release};
use harness::{attempts, task_def, Api, PARTITIONS};
use serde_json::{json, Value};
use worker::{Outcome, Task, Tls, Worker};

const NODES: usize = 3;
/// Names the definitions (`mixed_a`, `mixed_b`, `mixed_c`, `mixed_wf`) and the workers.
const PREFIX: &str = "mixed";
/// Workflows started per second, in total, from the first replacement to the last.
const RATE_PER_S: f64 = 20.0;
const STARTERS: usize = 2;
/// Request timeout of the load's clients: what a hanging node costs before another is tried.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);
/// A task attempt without a result for this long is retried: longer than a leadership move.
const RESPONSE_TIMEOUT_S: u64 = 10;
/// Tasks the QUIC worker runs at once.
const QUIC_CONCURRENCY: u32 = 32;
/// Longest a start may stay unacknowledged (retried through every live node) before the test fails.
const START_DEADLINE: Duration = Duration::from_secs(60);
/// Bound of the final wait for every acknowledged workflow to complete.
const COMPLETION_DEADLINE: Duration = Duration::from_secs(180);
/// Bound of each wait of a replacement: leaderships moved, replicas caught up, digests compared.
const STEP_DEADLINE: Duration = Duration::from_secs(120);
/// Longest a node may take to exit after SIGTERM.
const TERMINATE_WITHIN: Duration = Duration::from_secs(30);
/// Longest a partition may take to show a new leader after a transfer was accepted.
const TRANSFER_SETTLE: Duration = Duration::from_secs(10);
/// Pause before a refused transfer is asked for again.
const TRANSFER_RETRY: Duration = Duration::from_millis(200);
/// Longest the previous release may take to refuse a data directory at a newer version.
const REFUSAL_DEADLINE: Duration = Duration::from_secs(60);
/// How long the load runs before the first replacement (the first "before" window).
const WARM_UP: Duration = Duration::from_secs(10);
/// The window before a replacement its throughput is compared with.
const BEFORE: Duration = Duration::from_secs(10);
/// How often the leadership watch looks at every node's groups.
const WATCH_INTERVAL: Duration = Duration::from_millis(100);
/// A partition pausing writes this long around a leadership move counts as stuck (a hang bound;
/// the goal, printed, is under 1 s).
const PAUSE_BOUND: Duration = Duration::from_secs(20);
/// How often a paused writer looks whether it may go on.
const PACE_POLL: Duration = Duration::from_millis(10);
/// How often the write probe of each partition reports its task IN_PROGRESS (one write each).
const PROBE_INTERVAL: Duration = Duration::from_millis(100);
/// Pause of a probe after a failed write before it tries again (through the next live node).
const PROBE_RETRY: Duration = Duration::from_millis(20);
/// Starts of probe workflows at most while looking for one on every partition.
const PROBE_STARTS_MAX: usize = 400;
/// What the previous release says when it refuses a data directory at a newer version.
const REFUSAL: &str = "serves cluster version 1, but the cluster is at version";

// ---------------------------------------------------------------------------------------------
// The load: rate-paced starters; HTTP workers (the crash-test load's) and a QUIC worker
// ---------------------------------------------------------------------------------------------

/// `mixed_wf`: W2's shape, a FORK of three SIMPLE tasks (`a`, `b` for HTTP workers, `c` for the
/// QUIC worker) and a JOIN on all three.
fn register_definitions(api: &Api) -> String {
    let def = |name: String| {
        task_def(
            &name,
            json!({ "retryCount": 3, "retryDelaySeconds": 0, "responseTimeoutSeconds": RESPONSE_TIMEOUT_S }),
        )
    };
    let names: Vec<String> = ["a", "b", "c"]
        .iter()
        .map(|t| format!("{PREFIX}_{t}"))
        .collect();
    api.register_task_defs(&names.iter().cloned().map(def).collect::<Vec<_>>());
    let branch = |r: &str, name: &String| {
        json!([{ "name": name, "taskReferenceName": r, "type": "SIMPLE",
                 "inputParameters": { "n": "${workflow.input.n}" } }])
    };
    let wf = fork_join_name(PREFIX);
    api.register_workflow_def(&json!({
        "name": wf, "version": 1, "schemaVersion": 2, "ownerEmail": "test@harness.com",
        "tasks": [
            { "name": "fork", "taskReferenceName": "fork", "type": "FORK_JOIN", "forkTasks": [
                branch("a", &names[0]), branch("b", &names[1]), branch("c", &names[2])
            ]},
            { "name": "join", "taskReferenceName": "join", "type": "JOIN", "joinOn": ["a", "b", "c"] }
        ],
    }));
    wf
}

/// Waits until every running node knows workflow `name` (definitions replicate through the meta
/// group: a node may learn one a heartbeat after another acknowledged it).
fn wait_defs_everywhere(c: &Cluster, name: &str) {
    for id in c.live_ids() {
        let api = c.api(id);
        harness::wait_until(STEP_DEADLINE, &format!("node {id} to know {name}"), || {
            api.get(&format!("/api/metadata/workflow/{name}")).status == 200
        });
    }
}

/// Stops or pauses the test's own writers (the starters and the write probes; the workers finish
/// the tasks they are offered). The load is paused while replicas are compared, so that their
/// applied indexes meet.
#[derive(Default)]
struct Pace {
    stop: AtomicBool,
    paused: AtomicBool,
}

impl Pace {
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Waits while paused (not stopped); whether it waited.
    fn hold(&self) -> bool {
        let mut held = false;
        while self.paused.load(Ordering::SeqCst) && !self.stopped() {
            held = true;
            thread::sleep(PACE_POLL);
        }
        held
    }

    fn pause(&self, paused: bool) {
        self.paused.store(paused, Ordering::SeqCst);
    }
}

/// Starter threads that start `mixed_wf` at [`RATE_PER_S`] through any live node, each start
/// retried until acknowledged. Acknowledged starts go into the load's [`Record`] (its `started`
/// and `writes`) and, with their time, into `acked`.
struct Starters {
    shared: Arc<StarterShared>,
    threads: Vec<JoinHandle<()>>,
}

/// What the starter threads share.
struct StarterShared {
    pace: Arc<Pace>,
    nodes: Arc<Nodes>,
    record: Arc<Record>,
    /// The next logical start (the workflow's input `n`).
    next: AtomicUsize,
    /// When each start was acknowledged.
    acked: Mutex<Vec<Instant>>,
    /// Why a starter gave up.
    failure: Mutex<Option<String>>,
}

impl Starters {
    fn start(pace: Arc<Pace>, nodes: Arc<Nodes>, record: Arc<Record>) -> Starters {
        let shared = Arc::new(StarterShared {
            pace,
            nodes,
            record,
            next: AtomicUsize::new(0),
            acked: Mutex::default(),
            failure: Mutex::default(),
        });
        let interval = Duration::from_secs_f64(STARTERS as f64 / RATE_PER_S);
        let threads = (0..STARTERS)
            .map(|s| {
                let first = Instant::now() + interval.mul_f64(s as f64 / STARTERS as f64);
                let shared = shared.clone();
                thread::spawn(move || run_starter(&shared, first, interval))
            })
            .collect();
        Starters { shared, threads }
    }

    /// Panics if a start was not acknowledged within [`START_DEADLINE`].
    fn assert_running(&self) {
        if let Some(failure) = self.shared.failure.lock().expect("lock").clone() {
            panic!("a starter gave up: {failure}");
        }
    }

    /// Acknowledged starts in `[from, to)`.
    fn count(&self, from: Instant, to: Instant) -> usize {
        let acked = self.shared.acked.lock().expect("lock");
        acked.iter().filter(|t| **t >= from && **t < to).count()
    }

    /// Stops the starters (and the probes) and waits for the starters.
    fn stop(&mut self) {
        self.shared.pace.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            t.join().expect("starter thread");
        }
        self.assert_running();
    }
}

/// One starter: a start every `interval` (a slot missed by more than one interval is dropped, so
/// an outage shows as a dip rather than being made up for afterwards).
fn run_starter(shared: &StarterShared, mut slot: Instant, interval: Duration) {
    let wf = fork_join_name(PREFIX);
    while !shared.pace.stopped() {
        if shared.pace.hold() {
            slot = Instant::now();
        }
        let now = Instant::now();
        if slot > now {
            thread::sleep(slot - now);
        } else if now - slot > interval {
            slot = now;
        }
        slot += interval;
        let n = shared.next.fetch_add(1, Ordering::SeqCst);
        let request = json!({ "name": wf, "version": 1, "correlationId": format!("{PREFIX}-{n}"), "input": { "n": n } });
        match start_one(&shared.nodes, &request) {
            Ok(id) => {
                let at = Instant::now();
                let p = partition_of(&id, PARTITIONS);
                shared.record.writes.lock().expect("lock").push((p, at));
                shared.record.started.lock().expect("lock").insert(n, id);
                shared.acked.lock().expect("lock").push(at);
            }
            Err(e) => {
                *shared.failure.lock().expect("lock") = Some(format!("start {n}: {e}"));
                return;
            }
        }
    }
}

/// Posts one start through the live nodes in turn until one acknowledges it: its id, or why not
/// (a refusal, or no acknowledgement within [`START_DEADLINE`]).
fn start_one(nodes: &Nodes, request: &Value) -> Result<String, String> {
    let deadline = Instant::now() + START_DEADLINE;
    let mut last = String::from("none");
    while Instant::now() < deadline {
        let (node, api) = nodes.pick();
        match api.try_post_json("/api/workflow", request) {
            Ok(reply) if reply.is_success() && !reply.id().is_empty() => return Ok(reply.id()),
            Ok(reply) if !transient(reply.status) => {
                return Err(format!("refused by node {node}: {reply:?}"))
            }
            Ok(reply) => last = format!("node {node}: {reply:?}"),
            Err(e) => last = format!("node {node}: {e:#}"),
        }
        thread::sleep(harness::load::BACKOFF);
    }
    Err(format!(
        "not acknowledged within {START_DEADLINE:?}; last failure: {last}"
    ))
}

/// The QUIC worker of task type `mixed_c`, on a runtime of its own, knowing every node.
struct QuicWorker {
    rt: tokio::runtime::Runtime,
    handle: worker::Handle,
}

impl QuicWorker {
    fn start(c: &Cluster) -> QuicWorker {
        let id = format!("{PREFIX}-quic");
        let task_type = format!("{PREFIX}_c");
        write_worker_cert(c.certs_dir(), &id, &task_type);
        let tls = Tls::from_dir(c.certs_dir(), &id).expect("worker tls");
        let nodes: Vec<SocketAddr> = c.ids().into_iter().map(|n| c.worker_addr(n)).collect();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("tokio runtime");
        let handle = rt.block_on(async {
            Worker::builder()
                .nodes(nodes)
                .tls(tls)
                .worker_id(&id)
                .handler(&task_type, QUIC_CONCURRENCY, |task: Task| async move {
                    let output =
                        json!({ "task": task.task_id(), "n": task.input()["n"], "worker": "quic" });
                    Ok(Outcome::completed(output))
                })
                .build()
                .expect("worker builds")
                .start()
        });
        QuicWorker { rt, handle }
    }

    /// Waits until every result is acknowledged, then shuts the worker down; its status.
    fn finish(self) -> worker::Status {
        let deadline = Instant::now() + STEP_DEADLINE;
        loop {
            let s = self.handle.status();
            if s.running == 0 && s.unacked == 0 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "QUIC worker results not settled: {s:?}"
            );
            thread::sleep(harness::WAIT_POLL_INTERVAL);
        }
        self.rt
            .block_on(self.handle.shutdown())
            .expect("graceful shutdown of the QUIC worker");
        self.handle.status()
    }
}

// ---------------------------------------------------------------------------------------------
// Write probes: one task per partition reported IN_PROGRESS every 100 ms
// ---------------------------------------------------------------------------------------------

/// `mixed_probe_wf`: one SIMPLE task that stays IN_PROGRESS as long as its worker reports so.
fn register_probe_definitions(api: &Api) -> (String, String) {
    let (task, wf) = (format!("{PREFIX}_probe"), format!("{PREFIX}_probe_wf"));
    api.register_task_defs(&[task_def(
        &task,
        json!({ "retryCount": 0, "responseTimeoutSeconds": 3600, "timeoutSeconds": 0 }),
    )]);
    api.register_workflow_def(&json!({
        "name": wf, "version": 1, "schemaVersion": 2, "ownerEmail": "test@harness.com",
        "tasks": [{ "name": task, "taskReferenceName": "probe", "type": "SIMPLE" }],
    }));
    (task, wf)
}

/// One write probe per partition: a thread that reports its partition's probe task IN_PROGRESS
/// (a committed write on that partition) every [`PROBE_INTERVAL`], retrying a failed report at
/// once through the next live node, and records when each report was acknowledged. The longest
/// gap between acknowledgements around a leadership move is how long the partition took no
/// writes.
struct Probes {
    pace: Arc<Pace>,
    acked: Arc<Mutex<BTreeMap<String, Vec<Instant>>>>,
    tasks: Vec<Value>,
    threads: Vec<JoinHandle<()>>,
}

impl Probes {
    fn start(c: &Cluster, pace: &Arc<Pace>, nodes: &Arc<Nodes>) -> Probes {
        let tasks = probe_tasks(c);
        let acked: Arc<Mutex<BTreeMap<String, Vec<Instant>>>> = Arc::default();
        let threads = tasks
            .iter()
            .map(|task| {
                let (task, nodes) = (task.clone(), nodes.clone());
                let (pace, acked) = (pace.clone(), acked.clone());
                thread::spawn(move || run_probe(&task, &nodes, &pace, &acked))
            })
            .collect();
        Probes {
            pace: pace.clone(),
            acked,
            tasks,
            threads,
        }
    }

    /// Waits for the probes (stopped with the starters) and completes their tasks (so their
    /// workflows end); answers the acknowledgement times per partition group.
    fn finish(mut self, nodes: &Nodes) -> BTreeMap<String, Vec<Instant>> {
        assert!(self.pace.stopped(), "the starters stop the probes");
        for t in self.threads.drain(..) {
            t.join().expect("probe thread");
        }
        for task in &self.tasks {
            let done =
                harness::task_result(task, "COMPLETED", json!({ "probe": "done" }), None, None);
            report_until_acked(nodes, &done).expect("complete a probe task");
        }
        std::mem::take(&mut *self.acked.lock().expect("lock"))
    }
}

/// Starts probe workflows until one has its task on every partition, and leases those tasks;
/// completes any other probe task it leases. Answers one leased task per partition.
fn probe_tasks(c: &Cluster) -> Vec<Value> {
    let (task_type, wf) = register_probe_definitions(&c.api(1));
    wait_defs_everywhere(c, &wf);
    let mut started = BTreeSet::new();
    let mut covered = BTreeSet::new();
    let ids = c.ids();
    for n in 0..PROBE_STARTS_MAX {
        if covered.len() == PARTITIONS {
            break;
        }
        let id = c.api(ids[n % ids.len()]).start_workflow(&wf, &json!({}));
        covered.insert(partition_of(&id, PARTITIONS));
        started.insert(id);
    }
    assert_eq!(
        covered.len(),
        PARTITIONS,
        "probe workflows on every partition"
    );
    let mut kept: BTreeMap<usize, Value> = BTreeMap::new();
    let mut leased = 0;
    harness::wait_until(STEP_DEADLINE, "every probe task leased", || {
        for task in c.api(1).batch_poll(&task_type, "probe", 50, 200) {
            leased += 1;
            let p = partition_of(
                task["workflowInstanceId"].as_str().unwrap_or_default(),
                PARTITIONS,
            );
            match kept.entry(p) {
                Entry::Occupied(_) => c.api(1).complete(&task, json!({ "probe": "spare" })),
                Entry::Vacant(slot) => {
                    slot.insert(task);
                }
            }
        }
        leased == started.len()
    });
    kept.into_values().collect()
}

/// One partition's probe (see [`Probes`]).
fn run_probe(
    task: &Value,
    nodes: &Nodes,
    pace: &Pace,
    acked: &Mutex<BTreeMap<String, Vec<Instant>>>,
) {
    let workflow = task["workflowInstanceId"].as_str().unwrap_or_default();
    let group = partition_group(partition_of(workflow, PARTITIONS));
    let mut beat = 0u64;
    while !pace.stopped() {
        pace.hold();
        beat += 1;
        let report = harness::task_result(
            task,
            "IN_PROGRESS",
            json!({ "beat": beat }),
            None,
            Some(3600),
        );
        let deadline = Instant::now() + START_DEADLINE;
        while !pace.stopped() && Instant::now() < deadline {
            if report_once(nodes, &report) {
                let mut acked = acked.lock().expect("lock");
                acked.entry(group.clone()).or_default().push(Instant::now());
                break;
            }
            thread::sleep(PROBE_RETRY);
        }
        thread::sleep(PROBE_INTERVAL);
    }
}

/// Sends a task result through the next live node; whether it was acknowledged. A refusal (a
/// 4xx other than a time-out or shedding) panics.
fn report_once(nodes: &Nodes, result: &Value) -> bool {
    let (node, api) = nodes.pick();
    match api.try_update_task(result) {
        Ok(reply) if reply.is_success() => true,
        Ok(reply) if !transient(reply.status) => {
            panic!("node {node} refused a probe report {result}: {reply:?}")
        }
        _ => false,
    }
}

/// Sends a task result until a node acknowledges it, for up to [`START_DEADLINE`].
fn report_until_acked(nodes: &Nodes, result: &Value) -> Result<(), String> {
    let deadline = Instant::now() + START_DEADLINE;
    while Instant::now() < deadline {
        if report_once(nodes, result) {
            return Ok(());
        }
        thread::sleep(PROBE_RETRY);
    }
    Err(format!(
        "{result} not acknowledged within {START_DEADLINE:?}"
    ))
}

// ---------------------------------------------------------------------------------------------
// Leadership watch
// ---------------------------------------------------------------------------------------------

/// A group's leadership moving from one node to another, as the watch saw it.
#[derive(Clone, Debug)]
struct Move {
    group: String,
    from: u64,
    to: u64,
    /// When `from` was last seen leading.
    last_old: Instant,
    /// When `to` was first seen leading.
    first_new: Instant,
}

/// A thread that looks at every node's groups every [`WATCH_INTERVAL`] and records each change
/// of a group's leader (the node reporting the `Leader` role with the highest term).
struct LeaderWatch {
    stop: Arc<AtomicBool>,
    moves: Arc<Mutex<Vec<Move>>>,
    thread: Option<JoinHandle<()>>,
}

impl LeaderWatch {
    fn start(c: &Cluster) -> LeaderWatch {
        let probes: Vec<(u64, Api)> = c
            .ids()
            .into_iter()
            .map(|id| (id, c.api_with_timeout(id, Duration::from_millis(500))))
            .collect();
        let stop = Arc::new(AtomicBool::new(false));
        let moves = Arc::new(Mutex::new(Vec::new()));
        let (s, m) = (stop.clone(), moves.clone());
        let thread = thread::spawn(move || {
            let mut known: BTreeMap<String, (u64, Instant)> = BTreeMap::new();
            while !s.load(Ordering::SeqCst) {
                let now = Instant::now();
                for (group, leader) in observed_leaders(&probes) {
                    match known.get(&group) {
                        Some((old, last_old)) if *old != leader => {
                            let change = Move {
                                group: group.clone(),
                                from: *old,
                                to: leader,
                                last_old: *last_old,
                                first_new: now,
                            };
                            m.lock().expect("lock").push(change);
                        }
                        _ => {}
                    }
                    known.insert(group, (leader, now));
                }
                thread::sleep(WATCH_INTERVAL);
            }
        });
        LeaderWatch {
            stop,
            moves,
            thread: Some(thread),
        }
    }

    fn moves(&self) -> Vec<Move> {
        self.moves.lock().expect("lock").clone()
    }

    fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            t.join().expect("leadership watch");
        }
    }
}

/// Group -> the node that reports leading it with the highest term, among the nodes that answer.
fn observed_leaders(probes: &[(u64, Api)]) -> BTreeMap<String, u64> {
    let mut best: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for (id, api) in probes {
        let Ok(reply) = api.try_get("/api/admin/status") else {
            continue;
        };
        let Ok(Value::Array(groups)) = serde_json::from_str::<Value>(&reply.body) else {
            continue;
        };
        for g in groups.iter().filter(|g| g["role"] == "Leader") {
            let (Some(name), term) = (g["name"].as_str(), g["term"].as_u64().unwrap_or(0)) else {
                continue;
            };
            let entry = best.entry(name.to_string()).or_insert((term, *id));
            if term > entry.0 {
                *entry = (term, *id);
            }
        }
    }
    best.into_iter().map(|(g, (_, id))| (g, id)).collect()
}

// ---------------------------------------------------------------------------------------------
// Replacing a node
// ---------------------------------------------------------------------------------------------

/// The two binaries the nodes run.
struct Binaries {
    old: Release,
    new: PathBuf,
}

impl Binaries {
    fn path(&self, which: Which) -> PathBuf {
        match which {
            Which::Old => self.old.bin.clone(),
            Which::New => self.new.clone(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Which {
    Old,
    New,
}

impl std::fmt::Display for Which {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Which::Old => "the previous release",
            Which::New => "the binary under test",
        })
    }
}

/// A leadership transfer the test asked for.
struct Transfer {
    partition: usize,
    to: u64,
    sent: Instant,
    /// How long the request took to be answered.
    took: Duration,
}

/// One replacement, for the report: from taking the node out of the rotation until the
/// leaderships are spread again (some move back to the replaced node).
struct Replacement {
    label: String,
    begin: Instant,
    /// The node's process exited after SIGTERM.
    stopped: Instant,
    /// The node's replicas are voters again and caught up with their leaders.
    caught_up: Instant,
    end: Instant,
    /// The explicit leadership transfers.
    transfers: Vec<Transfer>,
}

/// Everything the test drives: the cluster, the load's routing and what happened when.
struct Rig {
    c: Cluster,
    nodes: Arc<Nodes>,
    pace: Arc<Pace>,
    binaries: Binaries,
    events: Vec<String>,
    replacements: Vec<Replacement>,
    /// Since when the load has run unpaused.
    steady_since: Instant,
    /// From when on which nodes ran the previous release and took part in the cluster (a node
    /// switches when its process exits; the previous release refused or kept out takes no part).
    old_nodes: Vec<(Instant, BTreeSet<u64>)>,
}

impl Rig {
    fn event(&mut self, what: String) {
        eprintln!("[{}] {what}", wall_ms());
        self.events.push(format!("{what} at {}", wall_ms()));
    }

    /// Replaces node `id` with `which` binary: out of the rotation, leaderships away, SIGTERM,
    /// start on the same data directory, wait until it caught up and the leaderships are spread
    /// again, then compare the replicas' digests.
    fn replace(&mut self, id: u64, which: Which, round: &str) {
        let label = format!("{round}: node {id} -> {which}");
        self.wait_steady();
        let meta = self.c.leaders().get("meta").copied();
        self.event(format!(
            "{label}: begins (the meta group led by node {meta:?})"
        ));
        let begin = Instant::now();
        let transfers = self.stop_node(id);
        let stopped = Instant::now();
        self.c.set_binary(id, Some(self.binaries.path(which)));
        let mut old = self.old_at(stopped).clone();
        match which {
            Which::Old => old.insert(id),
            Which::New => old.remove(&id),
        };
        self.old_nodes.push((stopped, old));
        self.c.spawn(id);
        self.rejoin(id);
        self.close_replacement(label, begin, stopped, transfers);
    }

    /// The nodes that ran the previous release at `t`.
    fn old_at(&self, t: Instant) -> &BTreeSet<u64> {
        let since = self.old_nodes.iter().rev().find(|(since, _)| *since <= t);
        &since.unwrap_or(&self.old_nodes[0]).1
    }

    /// Ends a replacement once the node caught up: waits until the leaderships are spread
    /// again, records the replacement for the report and compares the replicas' digests.
    fn close_replacement(
        &mut self,
        label: String,
        begin: Instant,
        stopped: Instant,
        transfers: Vec<Transfer>,
    ) {
        let caught_up = Instant::now();
        let meta = self.c.leaders().get("meta").copied();
        self.event(format!(
            "{label}: caught up after {:?} (the meta group led by node {meta:?})",
            caught_up - begin
        ));
        wait_leaders_balanced(&self.c);
        self.replacements.push(Replacement {
            label: label.clone(),
            begin,
            stopped,
            caught_up,
            end: Instant::now(),
            transfers,
        });
        self.check_replicas(&label);
    }

    /// Pauses the starters and probes, compares the replicas' digests once their applied indexes
    /// meet, and lets the load go on.
    fn check_replicas(&mut self, what: &str) {
        self.pace.pause(true);
        assert_replicas_agree(&self.c, what);
        self.pace.pause(false);
        self.steady_since = Instant::now();
    }

    /// Waits until the load has run unpaused for [`BEFORE`] (the window each replacement's
    /// throughput is compared with).
    fn wait_steady(&self) {
        harness::wait_until(
            STEP_DEADLINE,
            "a steady window before the replacement",
            || self.steady_since.elapsed() >= BEFORE,
        );
    }

    /// Takes node `id` out of the load's rotation (as a load balancer would be told first), moves
    /// its leaderships away and stops it with SIGTERM (it must exit cleanly); answers the
    /// transfers. Requests still reach its partitions through the other nodes until the
    /// transfers are done.
    fn stop_node(&mut self, id: u64) -> Vec<Transfer> {
        self.nodes.set_live(id, false);
        let transfers = move_leaderships_away(&self.c, id);
        let clean = self.c.terminate(id, TERMINATE_WITHIN);
        assert!(
            clean,
            "node {id} did not exit cleanly within {TERMINATE_WITHIN:?} of SIGTERM:\n{}",
            self.c.log_tail(id)
        );
        transfers
    }

    /// After node `id` was started again: waits until the cluster is ready and the node caught
    /// up, then puts it back into the load's rotation.
    fn rejoin(&mut self, id: u64) {
        self.c.wait_ready_within(STEP_DEADLINE);
        wait_caught_up(&self.c, id);
        self.nodes.set_live(id, true);
    }

    /// Every node, one at a time, onto `which`.
    fn roll(&mut self, which: Which, round: &str) {
        for id in self.c.ids() {
            self.replace(id, which, round);
        }
    }
}

/// Hands every partition node `id` leads to another voter (the one leading fewest), the
/// requests one after another, then waits until those partitions are led elsewhere; repeats
/// until `id` leads none. Answers the transfers that were accepted.
fn move_leaderships_away(c: &Cluster, id: u64) -> Vec<Transfer> {
    let deadline = Instant::now() + STEP_DEADLINE;
    let mut done = Vec::new();
    loop {
        let led = led_by(c, id);
        if led.is_empty() {
            return done;
        }
        assert!(
            Instant::now() < deadline,
            "node {id} still leads {led:?} after {STEP_DEADLINE:?} of transfers"
        );
        let mut moving = Vec::new();
        for p in led {
            let to = least_leading_other(c, id);
            match transfer(c, id, p, to) {
                Ok(t) => {
                    moving.push(p);
                    done.push(t);
                }
                Err(e) => eprintln!("transfer of p{p} to node {to}: {e}; tried again"),
            }
        }
        wait_led_elsewhere(c, id, &moving);
        if moving.is_empty() {
            thread::sleep(TRANSFER_RETRY);
        }
    }
}

/// The partitions node `id` leads.
fn led_by(c: &Cluster, id: u64) -> Vec<usize> {
    let leaders = c.leaders();
    (0..c.partitions())
        .filter(|p| leaders.get(&partition_group(*p)) == Some(&id))
        .collect()
}

/// `POST /api/admin/partitions/{p}/transfer?to={to}`, sent to the leader `from` itself (it sees
/// its own groups without asking a peer).
fn transfer(c: &Cluster, from: u64, p: usize, to: u64) -> Result<Transfer, String> {
    let sent = Instant::now();
    let path = format!("/api/admin/partitions/{p}/transfer?to={to}");
    match c.api(from).try_post_raw(&path, "", "application/json") {
        Ok(reply) if reply.is_success() => Ok(Transfer {
            partition: p,
            to,
            sent,
            took: sent.elapsed(),
        }),
        Ok(reply) => Err(format!("{reply:?}")),
        Err(e) => Err(format!("{e:#}")),
    }
}

/// Waits (up to [`TRANSFER_SETTLE`]) until each of `partitions` has a leader other than `id`;
/// a transfer that did not take is then asked for again by the caller.
fn wait_led_elsewhere(c: &Cluster, id: u64, partitions: &[usize]) {
    let deadline = Instant::now() + TRANSFER_SETTLE;
    while Instant::now() < deadline {
        let leaders = c.leaders();
        let moved = |p: &usize| leaders.get(&partition_group(*p)).is_some_and(|l| *l != id);
        if partitions.iter().all(moved) {
            return;
        }
        thread::sleep(harness::WAIT_POLL_INTERVAL);
    }
}

/// The live node other than `id` that leads the fewest partitions.
fn least_leading_other(c: &Cluster, id: u64) -> u64 {
    let counts = c.leader_counts();
    c.live_ids()
        .into_iter()
        .filter(|n| *n != id)
        .min_by_key(|n| (counts.get(n).copied().unwrap_or(0), *n))
        .expect("another live node")
}

/// Waits until every partition has a voter on every node and no learner (node `id`'s replicas
/// are back in their memberships), then until each of `id`'s replicas applied what its leader had
/// applied when that held.
fn wait_caught_up(c: &Cluster, id: u64) {
    let whole = |s: &Value| {
        s["groups"].as_array().is_some_and(|gs| {
            gs.iter().filter(|g| g["name"] != "meta").all(|g| {
                g["voters"].as_array().map(Vec::len) == Some(NODES)
                    && g["learners"].as_array().is_some_and(Vec::is_empty)
                    && !g["leader"].is_null()
            })
        })
    };
    harness::wait_until(
        STEP_DEADLINE,
        &format!("every partition to have {NODES} voters again after node {id}'s restart"),
        || cluster_status(c).is_some_and(|s| whole(&s)),
    );
    let targets = leaders_applied(c);
    harness::wait_until(
        STEP_DEADLINE,
        &format!("node {id} to apply what the leaders had applied: {targets:?}"),
        || {
            let Ok(own) = c.digest(id) else { return false };
            targets.iter().all(|(group, target)| {
                own.iter()
                    .find(|g| g["name"] == group.as_str())
                    .and_then(|g| g["applied"].as_u64())
                    .is_some_and(|a| a >= *target)
            })
        },
    );
}

/// `GET /api/admin/cluster` through any live node.
fn cluster_status(c: &Cluster) -> Option<Value> {
    c.live_ids().into_iter().find_map(|id| {
        let reply = c.api(id).try_get("/api/admin/cluster").ok()?;
        (reply.status == 200).then(|| reply.json())
    })
}

/// Group -> the applied index its leader reports now.
fn leaders_applied(c: &Cluster) -> BTreeMap<String, u64> {
    harness::wait_for(
        STEP_DEADLINE,
        "every group's leader's applied index",
        || {
            let leaders = c.leaders();
            let mut out = BTreeMap::new();
            for (group, leader) in &leaders {
                let digest = c.digest(*leader).ok()?;
                let applied =
                    digest.iter().find(|g| g["name"] == group.as_str())?["applied"].as_u64()?;
                out.insert(group.clone(), applied);
            }
            (out.len() == PARTITIONS + 1).then_some(out)
        },
    )
}

/// Waits until the controller has spread the partitions' leaderships again (every node leads
/// between 8/3 rounded down and up), so the next replacement starts from a settled cluster.
fn wait_leaders_balanced(c: &Cluster) {
    let low = PARTITIONS / NODES;
    let high = PARTITIONS.div_ceil(NODES);
    harness::wait_until(STEP_DEADLINE, "leaderships spread over the nodes", || {
        let counts = c.leader_counts();
        counts.values().sum::<usize>() == PARTITIONS
            && counts.values().all(|n| (low..=high).contains(n))
    });
}

// ---------------------------------------------------------------------------------------------
// Digests at equal applied indexes, under load
// ---------------------------------------------------------------------------------------------

/// Group -> applied index -> node -> the digest that node reported at that index.
type DigestHistory = BTreeMap<String, BTreeMap<u64, BTreeMap<u64, String>>>;

/// Samples every live node's digests until, for every group, every live node's replica has been
/// seen at an applied index another replica was also seen at, and asserts that replicas seen at
/// the same applied index have the same digest. Under load the indexes move between two nodes'
/// answers, so the digests are kept per applied index across samples: the state after applying
/// entry `i` is the same whenever it is read.
fn assert_replicas_agree(c: &Cluster, what: &str) {
    let live: BTreeSet<u64> = c.live_ids().into_iter().collect();
    let mut groups: Vec<String> = (0..c.partitions()).map(partition_group).collect();
    groups.push("meta".to_string());
    let mut history = DigestHistory::new();
    let mut samples = 0;
    let deadline = Instant::now() + STEP_DEADLINE;
    loop {
        if let Ok(sample) = c.digests() {
            samples += 1;
            record_sample(&sample, &mut history, what);
        }
        let matched = matched_replicas(&history);
        let missing: Vec<&String> = groups
            .iter()
            .filter(|g| matched.get(*g) != Some(&live))
            .collect();
        if missing.is_empty() {
            let indexes: usize = history
                .values()
                .map(|by| by.values().filter(|n| n.len() > 1).count())
                .sum();
            eprintln!("{what}: digests equal at equal applied indexes ({indexes} indexes seen on more than one replica, {samples} samples)");
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: replicas of {missing:?} not all seen at an applied index another replica \
             was seen at within {STEP_DEADLINE:?}; matched so far {matched:?}"
        );
        thread::sleep(harness::WAIT_POLL_INTERVAL);
    }
}

/// Adds one sample to `history`, asserting each digest equals any other replica's at the same
/// applied index.
fn record_sample(
    sample: &BTreeMap<u64, harness::cluster::GroupDigests>,
    history: &mut DigestHistory,
    what: &str,
) {
    for (node, digests) in sample {
        for (group, (applied, digest)) in digests {
            let Some(applied) = applied else { continue };
            let at = history
                .entry(group.clone())
                .or_default()
                .entry(*applied)
                .or_default();
            if let Some((other, theirs)) = at.iter().find(|(_, d)| *d != digest) {
                panic!(
                    "{what}: {group} at applied index {applied}: node {node} has digest {digest}, \
                     node {other} had {theirs}"
                );
            }
            at.insert(*node, digest.clone());
        }
    }
}

/// Group -> the nodes whose replica was seen at an applied index another replica was seen at.
fn matched_replicas(history: &DigestHistory) -> BTreeMap<String, BTreeSet<u64>> {
    history
        .iter()
        .map(|(group, by_index)| {
            let nodes = by_index
                .values()
                .filter(|n| n.len() > 1)
                .flat_map(|n| n.keys().copied())
                .collect();
            (group.clone(), nodes)
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Versions
// ---------------------------------------------------------------------------------------------

/// `GET /api/admin/version` of node `id`.
fn version_status(c: &Cluster, id: u64) -> Value {
    c.api(id)
        .get("/api/admin/version")
        .expect_ok("version status")
        .json()
}

/// The newest version the binary node `id` runs serves (its own member's `supports.max`), and
/// its release.
fn served_max(c: &Cluster, id: u64) -> (u64, String) {
    let status = version_status(c, id);
    let own = status["members"]
        .as_array()
        .and_then(|ms| ms.iter().find(|m| m["id"] == id))
        .unwrap_or_else(|| panic!("node {id} lists no member {id}: {status}"));
    let max = own["binary"]["supports"]["max"]
        .as_u64()
        .unwrap_or_else(|| panic!("node {id}: no binary.supports.max: {status}"));
    let release = own["binary"]["release"].as_str().unwrap_or("?").to_string();
    (max, release)
}

/// Activates the newest version every member serves, then waits until each node of `up` shows it
/// active.
fn activate(rig: &mut Rig, newest: u64, up: &[u64]) {
    // A node that just stopped may still be taken for the meta group's leader: a 503 is retried.
    let mut reply = None;
    harness::wait_until(STEP_DEADLINE, "the activation to be answered", || {
        let answer = rig
            .c
            .api(up[0])
            .post_json("/api/admin/version/activate", &json!({}));
        let answered = answer.status != 503;
        reply = Some(answer);
        answered
    });
    let reply = reply.expect("asked at least once");
    assert!(reply.is_success(), "activation refused: {reply:?}");
    rig.event(format!("activation answered {}", reply.body));
    for id in up {
        harness::wait_until(
            STEP_DEADLINE,
            &format!("node {id} to show version {newest} active"),
            || version_status(&rig.c, *id)["active"] == newest,
        );
    }
}

/// After an activation to a version the previous release does not serve: the previous release
/// refuses node `id`'s data directory, naming both versions, and the binary under test starts
/// on it again.
fn previous_release_is_refused(rig: &mut Rig, id: u64, newest: u64) {
    let label = format!(
        "after activation: node {id} -> the previous release (refused) -> the binary under test"
    );
    rig.wait_steady();
    let begin = Instant::now();
    let transfers = rig.stop_node(id);
    let stopped = Instant::now();
    rig.c.set_binary(id, Some(rig.binaries.old.bin.clone()));
    rig.c.spawn(id);
    let status = rig.c.wait_exit(id, REFUSAL_DEADLINE).unwrap_or_else(|| {
        panic!(
            "the previous release still runs on node {id}'s data directory at version {newest} \
             after {REFUSAL_DEADLINE:?}:\n{}",
            rig.c.log_tail(id)
        )
    });
    let log = rig.c.log_tail(id);
    assert!(
        !status.success(),
        "the previous release exited {status}:\n{log}"
    );
    let expected = format!("{REFUSAL} {newest}");
    assert!(log.contains(&expected), "no {expected:?} in:\n{log}");
    let line = log
        .lines()
        .find(|l| l.contains(REFUSAL))
        .unwrap_or_default();
    rig.event(format!(
        "node {id}: the previous release refused ({status}): {line}"
    ));
    rig.c.set_binary(id, Some(rig.binaries.new.clone()));
    rig.c.spawn(id);
    rig.rejoin(id);
    rig.close_replacement(label, begin, stopped, transfers);
}

/// The line a member logs when it refuses node `id`, whose binary serves version 1 only, in a
/// cluster at `newest`.
fn isolation_line(id: u64, newest: u64) -> String {
    format!("node {id} runs a binary that {REFUSAL} {newest}")
}

/// Node `id` is down while `newest` is activated and comes back on the previous release. Its
/// own replica never saw the activation, so that binary does not refuse the data directory; but
/// the members refuse its hello and their leaders refuse its answers, naming both versions, so it
/// is isolated (no entry it cannot read reaches it) until it runs the binary under test again and
/// catches up.
fn activate_with_node_down(rig: &mut Rig, id: u64, newest: u64) {
    let label = format!(
        "activation with node {id} down: node {id} -> the previous release (isolated) -> the \
         binary under test"
    );
    rig.wait_steady();
    let begin = Instant::now();
    let transfers = rig.stop_node(id);
    let stopped = Instant::now();
    let up: Vec<u64> = rig.c.ids().into_iter().filter(|n| *n != id).collect();
    activate(rig, newest, &up);
    rig.c.set_binary(id, Some(rig.binaries.old.bin.clone()));
    rig.c.spawn(id);
    let line = isolation_line(id, newest);
    harness::wait_until(STEP_DEADLINE, &format!("a member to log {line:?}"), || {
        up.iter().any(|n| rig.c.logs(*n).contains(&line))
    });
    // Its own view, if its API answers yet: its replica never applies the activation.
    let shown = rig
        .c
        .api_with_timeout(id, CLIENT_TIMEOUT)
        .try_get("/api/admin/version");
    if let Some(shown) = shown.ok().filter(|r| r.is_success()) {
        let active = &shown.json()["active"];
        assert_eq!(
            active, 1,
            "node {id} on the previous release is isolated: {shown:?}"
        );
    }
    rig.event(format!(
        "node {id}: the previous release is kept out: {line}"
    ));
    // Kept out, it never finishes starting (it waits for its peers); it is killed.
    rig.c.kill9(id);
    rig.c.set_binary(id, Some(rig.binaries.new.clone()));
    rig.c.spawn(id);
    rig.rejoin(id);
    harness::wait_until(
        STEP_DEADLINE,
        &format!("node {id} to show version {newest} active"),
        || version_status(&rig.c, id)["active"] == newest,
    );
    rig.close_replacement(label, begin, stopped, transfers);
}

// ---------------------------------------------------------------------------------------------
// The report
// ---------------------------------------------------------------------------------------------

/// A pause between two consecutive acknowledged writes of a partition.
#[derive(Clone, Copy, Debug)]
struct Pause {
    from: Instant,
    to: Instant,
}

impl Pause {
    fn length(&self) -> Duration {
        self.to - self.from
    }

    /// `+1.20..+3.40 s`: the pause relative to `origin`.
    fn relative_to(&self, origin: Instant) -> String {
        let offset = |t: Instant| {
            if t >= origin {
                (t - origin).as_secs_f64()
            } else {
                -(origin - t).as_secs_f64()
            }
        };
        format!("{:+.2}..{:+.2} s", offset(self.from), offset(self.to))
    }
}

/// The longest pause between consecutive acknowledged writes (sorted `writes` of the move's
/// partition) that overlaps the move, from the old leader last seen to the new one first seen;
/// None when no write followed.
fn pause_around(writes: &[Instant], m: &Move) -> Option<Pause> {
    let after = writes.iter().position(|t| *t >= m.first_new)?;
    let mut longest: Option<Pause> = None;
    for pair in writes[..=after].windows(2) {
        let pause = Pause {
            from: pair[0],
            to: pair[1],
        };
        if pause.to >= m.last_old && longest.is_none_or(|l| pause.length() > l.length()) {
            longest = Some(pause);
        }
    }
    longest.or(Some(Pause {
        from: writes[after],
        to: writes[after],
    }))
}

/// The times of acknowledged writes per partition group: the probes' (one every 100 ms) and the
/// load's (starts and HTTP updates, bursty).
struct Writes {
    probes: BTreeMap<String, Vec<Instant>>,
    load: BTreeMap<String, Vec<Instant>>,
}

/// Prints, per replacement, the start throughput before and during it and the write pause of
/// each partition leadership move in it, then the pauses' distribution; asserts only that no
/// partition stayed stuck. `load_end`: when the starters stopped.
fn report(rig: &Rig, starters: &Starters, writes: &Writes, moves: &[Move], load_end: Instant) {
    let mut pauses = Vec::new();
    // A move belongs to the replacement it began in (the watch sees a move up to a round late).
    let within = |m: &Move, r: &Replacement| m.first_new >= r.begin && m.last_old <= r.end;
    // Whether a node ran the previous release while the move was under way.
    let mixed =
        |m: &Move| !rig.old_at(m.last_old).is_empty() || !rig.old_at(m.first_new).is_empty();
    for r in &rig.replacements {
        eprintln!(
            "DIP {}: {:.1} starts/s in the {:.0} s before; {:.1} starts/s until caught up \
             ({:.1} s); {:.1} starts/s over the whole replacement ({:.1} s, until leaderships \
             were spread again)",
            r.label,
            starts_per_s(starters, r.begin - BEFORE, r.begin),
            BEFORE.as_secs_f64(),
            starts_per_s(starters, r.begin, r.caught_up),
            (r.caught_up - r.begin).as_secs_f64(),
            starts_per_s(starters, r.begin, r.end),
            (r.end - r.begin).as_secs_f64()
        );
        for t in &r.transfers {
            eprintln!(
                "  transfer p{} -> node {} asked {:+.2} s after the replacement began, answered in {:?}",
                t.partition,
                t.to,
                (t.sent - r.begin).as_secs_f64(),
                t.took
            );
        }
        eprintln!(
            "  the node's process exited {:+.2} s after the replacement began",
            (r.stopped - r.begin).as_secs_f64()
        );
        for m in moves.iter().filter(|m| within(m, r)) {
            pauses.extend(print_move(m, writes, r.begin, load_end).map(|p| (p, mixed(m))));
        }
    }
    eprintln!(
        "leadership moves outside the replacements (times after the end of the replacement \
         before them):"
    );
    for m in moves
        .iter()
        .filter(|m| !rig.replacements.iter().any(|r| within(m, r)))
    {
        let before = rig.replacements.iter().rev().find(|r| r.end <= m.first_new);
        let origin = before.map_or(m.first_new, |r| r.end);
        pauses.extend(print_move(m, writes, origin, load_end).map(|p| (p, mixed(m))));
    }
    summarise(&pauses, writes);
}

/// Partition group -> the times of its acknowledged writes (starts and HTTP updates), sorted.
fn writes_by_partition(record: &Record) -> BTreeMap<String, Vec<Instant>> {
    let mut out: BTreeMap<String, Vec<Instant>> = BTreeMap::new();
    for (p, t) in record.writes.lock().expect("lock").iter() {
        out.entry(partition_group(*p)).or_default().push(*t);
    }
    out.values_mut().for_each(|v| v.sort());
    out
}

/// Prints the probes' pauses around partition leadership moves against the goal, over all moves
/// and split by whether a node on the previous release took part (its leaders step down and
/// route as that release does), with the gaps between consecutive probe writes over the run for
/// scale; asserts none was stuck.
fn summarise(pauses: &[(Duration, bool)], writes: &Writes) {
    let mut gaps: Vec<Duration> = writes
        .probes
        .values()
        .flat_map(|w| w.windows(2).map(|p| p[1] - p[0]))
        .collect();
    gaps.sort();
    let all: Vec<Duration> = pauses.iter().map(|(p, _)| *p).collect();
    let only = |mixed: bool| {
        let of = pauses.iter().filter(|(_, m)| *m == mixed);
        of.map(|(p, _)| *p).collect::<Vec<_>>()
    };
    eprintln!(
        "WRITE PAUSES around {} (probe writes). For scale, gaps between consecutive probe \
         writes of a partition over the whole run: p50 {:?}, p99 {:?}",
        distribution(all.clone(), "partition leadership moves"),
        rank(&gaps, 0.5),
        rank(&gaps, 0.99)
    );
    eprintln!(
        "  {}",
        distribution(
            only(false),
            "moves among nodes all on the binary under test"
        )
    );
    eprintln!(
        "  {}",
        distribution(only(true), "moves with a node on the previous release")
    );
    let worst = all.iter().max().copied().unwrap_or_default();
    assert!(
        worst < PAUSE_BOUND,
        "a partition paused writes for {worst:?} around a leadership move (bound {PAUSE_BOUND:?})"
    );
}

/// `N <what>: p50 …, p90 …, max …; K under the 1 s goal`.
fn distribution(mut pauses: Vec<Duration>, what: &str) -> String {
    pauses.sort();
    let under_goal = pauses
        .iter()
        .filter(|p| **p < Duration::from_secs(1))
        .count();
    format!(
        "{} {what}: p50 {:?}, p90 {:?}, max {:?}; {under_goal} under the 1 s goal",
        pauses.len(),
        rank(&pauses, 0.5),
        rank(&pauses, 0.9),
        pauses.last(),
    )
}

/// The `q` quantile of sorted durations.
fn rank(sorted: &[Duration], q: f64) -> Option<Duration> {
    let i = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len().max(1)) - 1;
    sorted.get(i).copied()
}

fn starts_per_s(starters: &Starters, from: Instant, to: Instant) -> f64 {
    let secs = (to - from).as_secs_f64();
    if secs <= 0.0 {
        return 0.0;
    }
    starters.count(from, to) as f64 / secs
}

/// Prints one move with the longest pause around it between the partition's probe writes (and,
/// for comparison, its load writes), placed relative to `origin`; answers the probe pause of a
/// partition's move (meta has no writes of its own here), [`Duration::MAX`] for a partition
/// without a probe write after the move although the load ran on for [`PAUSE_BOUND`], and
/// nothing when the load ended first.
fn print_move(m: &Move, writes: &Writes, origin: Instant, load_end: Instant) -> Option<Duration> {
    let seen = Pause {
        from: m.last_old,
        to: m.first_new,
    };
    let head = format!(
        "  MOVE {}: node {} -> node {} (seen between {})",
        m.group,
        m.from,
        m.to,
        seen.relative_to(origin)
    );
    if m.group == "meta" {
        eprintln!("{head}");
        return None;
    }
    let pause =
        |w: &BTreeMap<String, Vec<Instant>>| w.get(&m.group).and_then(|w| pause_around(w, m));
    let load = pause(&writes.load).map_or("-".to_string(), |p| format!("{:?}", p.length()));
    match pause(&writes.probes) {
        Some(p) => {
            eprintln!(
                "{head}; write pause around it: {:?} ({}; between load writes: {load})",
                p.length(),
                p.relative_to(origin)
            );
            Some(p.length())
        }
        None if m.first_new + PAUSE_BOUND < load_end => {
            eprintln!("{head}; NO PROBE WRITE after it");
            Some(Duration::MAX)
        }
        None => {
            eprintln!("{head}; the load ended before the next write");
            None
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Final checks
// ---------------------------------------------------------------------------------------------

/// Every workflow's `c` (the QUIC worker's task) has exactly one COMPLETED attempt, with the
/// output the QUIC worker sent for that attempt.
fn check_quic_branch(reader: &Reader, started: &BTreeMap<usize, String>) {
    for (n, id) in started {
        let wf = reader.workflow(id);
        let completed: Vec<&Value> = attempts(&wf, "c")
            .into_iter()
            .filter(|t| t["status"] == "COMPLETED")
            .collect();
        assert_eq!(
            completed.len(),
            1,
            "{id}: c must have exactly one COMPLETED attempt: {wf:#}"
        );
        let out = &completed[0]["outputData"];
        assert_eq!(out["task"], completed[0]["taskId"], "{id}: {out}");
        assert_eq!(out["n"], json!(n), "{id}: {out}");
        assert_eq!(out["worker"], "quic", "{id}: {out}");
    }
}

// ---------------------------------------------------------------------------------------------
// The test
// ---------------------------------------------------------------------------------------------

fn held() -> Vec<String> {
    vec!["--hold-cluster-version".to_string()]
}

#[test]
fn a_rolling_upgrade_a_rollback_and_an_activation_lose_nothing() {
    let old = previous_release();
    let new = harness::baton_bin();
    eprintln!(
        "previous release v{} ({}) at {}; binary under test {}",
        old.version,
        old.commit,
        old.bin.display(),
        new.display()
    );
    let launch = LaunchConfig {
        binary: Some(old.bin.clone()),
        extra_args: held(),
    };
    let c = Cluster::start_with(NODES, launch);
    let wf = register_definitions(&c.api(1));
    wait_defs_everywhere(&c, &wf);
    let nodes = Nodes::new(&c, CLIENT_TIMEOUT);
    let pace = Arc::new(Pace::default());
    let mut rig = Rig {
        c,
        nodes: nodes.clone(),
        pace: pace.clone(),
        binaries: Binaries { old, new },
        events: Vec::new(),
        replacements: Vec::new(),
        steady_since: Instant::now(),
        old_nodes: vec![(Instant::now(), (1..=NODES as u64).collect())],
    };
    rig.event(format!("cluster of {NODES} on the previous release"));

    let config = Config {
        prefix: PREFIX,
        workflows: 0,
        starters: 0,
        workers_per_type: 2,
        batch: 10,
        poll_timeout_ms: 200,
        in_flight_max: None,
        run_deadline: COMPLETION_DEADLINE,
    };
    let mut load = Load::start(nodes.clone(), config);
    let record = load.record.clone();
    let quic = QuicWorker::start(&rig.c);
    let probes = Probes::start(&rig.c, &pace, &nodes);
    let watch = LeaderWatch::start(&rig.c);
    let mut starters = Starters::start(pace, nodes.clone(), record.clone());
    rig.steady_since = Instant::now();
    harness::wait_until(STEP_DEADLINE, "the load to warm up", || {
        starters.assert_running();
        rig.steady_since.elapsed() >= WARM_UP && record.completions() >= 50
    });

    rig.roll(Which::New, "upgrade");
    starters.assert_running();
    rig.roll(Which::Old, "rollback");
    starters.assert_running();
    rig.roll(Which::New, "upgrade again");
    starters.assert_running();

    let newest = activate_and_check(&mut rig);
    let load_parts = LoadParts {
        load: &mut load,
        starters: &mut starters,
        watch,
        quic,
        probes,
    };
    finish(rig, load_parts, newest);
}

/// Reads the newest version the binary under test serves, activates, and (above version 1)
/// checks the previous release's refusal. Answers the version.
fn activate_and_check(rig: &mut Rig) -> u64 {
    let served: BTreeSet<(u64, String)> = rig
        .c
        .ids()
        .into_iter()
        .map(|id| served_max(&rig.c, id))
        .collect();
    assert_eq!(
        served.len(),
        1,
        "every node runs the binary under test: {served:?}"
    );
    let (newest, release) = served.into_iter().next().expect("one");
    if newest > 1 {
        eprintln!(
            "CASE: the binary under test ({release}) serves up to version {newest}: activation \
             raises the cluster to it; the previous release must be isolated, then refused"
        );
        activate_with_node_down(rig, NODES as u64, newest);
        previous_release_is_refused(rig, NODES as u64, newest);
    } else {
        let all = rig.c.ids();
        activate(rig, newest, &all);
        eprintln!(
            "CASE: the binary under test ({release}) serves version 1 only, as the previous \
             release: activation leaves the cluster at 1; the refusal is not checked"
        );
    }
    newest
}

/// What the final checks stop and read.
struct LoadParts<'a> {
    load: &'a mut Load,
    starters: &'a mut Starters,
    watch: LeaderWatch,
    quic: QuicWorker,
    probes: Probes,
}

/// Stops the load, waits for every acknowledged workflow to complete, checks what was
/// acknowledged and the final digests, and prints the report.
fn finish(rig: Rig, parts: LoadParts<'_>, newest: u64) {
    let LoadParts {
        load,
        starters,
        mut watch,
        quic,
        probes,
    } = parts;
    starters.stop();
    let load_end = Instant::now();
    watch.stop();
    let writes = Writes {
        probes: probes.finish(&rig.nodes),
        load: writes_by_partition(&load.record),
    };
    let started = load.record.started.lock().expect("lock").clone();
    eprintln!(
        "{} workflows started; {}",
        started.len(),
        load.record.progress()
    );
    let reader = Reader::node(&rig.c, 1);
    let unavailable = load.wait_all_completed(&reader, &started);
    let quic_status = quic.finish();
    load.stop_workers();
    let events = rig.events.join("; ");
    load.check(&reader, &started, &events);
    check_quic_branch(&reader, &started);
    let http_acked = load.record.acked.lock().expect("lock").len();
    assert!(
        http_acked >= 2 * started.len(),
        "{http_acked} HTTP updates acknowledged for {} workflows",
        started.len()
    );
    eprintln!(
        "QUIC worker: {} results acknowledged, {} refused as stale; {unavailable} reads retried \
         after a 503; cluster version {newest} active",
        quic_status.results_acked, quic_status.results_stale
    );
    assert_replicas_agree(&rig.c, "at the end");
    report(&rig, starters, &writes, &watch.moves(), load_end);
}
