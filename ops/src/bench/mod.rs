//! `batonctl bench`: measure Baton honestly.
//!
//! It starts its own target (one local `baton server`, or with `--nodes 3` a cluster on loopback
//! with RF 3, see [`target`]), prints the machine's calibration, runs in-process HTTP workers
//! speaking Conductor's task API (spread over the nodes), and runs these workloads:
//!
//! - **W1** one SIMPLE task, one workflow at a time: end-to-end latency (start to COMPLETED).
//! - **W2** FORK of 3 one-task branches + JOIN, open loop at `--rate` workflows/s: latency from the
//!   scheduled arrival (coordinated omission corrected), steps/s, and workflows lost after a drain.
//! - **W3** a chain of 10 SIMPLE tasks, `--w3-parallel` workflows in flight (closed loop): steps/s
//!   and the per-step overhead (median workflow latency / 10).
//! - **W4** `--w4-count` workflows each waiting on a 1 s WAIT timer, started as fast as the target
//!   takes them: the timers' lateness on the target's clock (`endTime - waitTimeout`).
//! - **W5** a FORK of 3 SUB_WORKFLOWs, each a one-task W1 workflow (so usually on other
//!   partitions), + JOIN, open loop at W2's rate for W2's time: steps/s and CPU per step of
//!   sub-workflows beside W2's, whose three steps are plain tasks.
//! - **W8** W2's shape as a Serverless Workflow (DSL 1.0) document: a `fork` of three branches,
//!   each a `call` of W2's task type (so W2's workers serve it), registered with `POST
//!   /api/dsl/workflows?overwrite=true`, started with `POST .../instances` at W2's rate for W2's
//!   time, and seen finishing by status polls (a DSL instance has no execute). It alternates run
//!   by run with a W2 that sees completion the same way (W2 itself with `--completion
//!   status-polls`, else a `W2-polls` row beside W2), and the ratio of their CPU per step is
//!   printed: the cost of the DSL's runtime over Conductor's for the same work.
//! - **W7** (clusters of 3 or more nodes; last, since it kills a node) W2 while the node leading
//!   the most partitions is killed halfway: lost workflows (must be 0) and how long its
//!   partitions took writes again (see [`failover`]).
//!
//! A *step* is one SIMPLE task scheduled, handed to a worker, completed and recorded; steps are
//! counted from completed workflows, never from accepted requests. The target's CPU time (from
//! `/proc`) per 1,000 steps and its RSS are reported per workload. The run exits non-zero when a
//! workload lost or failed a workflow.
//!
//! The `--sweep` of W2 rates runs after them on a fresh target of the same shape, so neither the
//! state the other workloads left nor W7's killed node weighs on it.
//!
//! `--repeat N` runs every workload N times (3 by default, 1 with `--quick`); the tables show the
//! median and the spread (min..max). `--peers dbos,celery,restate` then runs W1 and W2 with the
//! same sizes on each peer system (scripts in `bench/peers/`, see [`peers`]) and prints them side
//! by side with Baton, with each system's durability setting and the ratios Baton / peer.
//!
//! Not yet: QUIC workers as a worker kind.

mod auth_ab;
mod calibrate;
mod client;
mod failover;
mod peers;
mod pool;
mod quic_workers;
mod stats;
mod target;
mod workers;
mod workloads;

use anyhow::{bail, Context};
use calibrate::Calibration;
use client::Client;
use peers::{PeerResult, PeerWorkload};
use pool::Pool;
use quic_workers::QuicWorkers;
use std::path::PathBuf;
use std::time::Duration;
use target::{Target, TargetSpec};
use workers::Workers;
use workloads::{Completion, Flow, Outcome};

/// How the target makes records durable (printed with every result).
const FSYNC_MODE: &str = "Raft log fdatasync per append batch, shared by all partitions";
/// Threads that start W4's workflows.
const W4_STARTERS: usize = 8;
/// The row of W2 seen finishing by status polls, as W8 must be, when W2 itself executes.
const W2_POLLS: &str = "W2-polls";

#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// Small, fast sizes (the whole run takes well under a minute).
    #[arg(long)]
    quick: bool,
    /// The `baton` binary to benchmark; by default the one next to `batonctl`.
    #[arg(long)]
    baton_bin: Option<PathBuf>,
    /// Nodes of the target: 1 is the embedded single node; more form a cluster on loopback
    /// (RF = min(3, nodes)).
    #[arg(long, default_value_t = 1)]
    nodes: u16,
    /// Workflow partitions of the target.
    #[arg(long, default_value_t = 4)]
    partitions: u16,
    /// Runs of every workload (default 1 with --quick, 3 otherwise); tables show the median.
    #[arg(long)]
    repeat: Option<usize>,
    /// Turn the target's access control on: every request of the bench then carries a token
    /// (an administrator's), so the guard's checks are in every figure.
    #[arg(long)]
    auth: bool,
    /// Measure what access control costs: only W2's sweep (`--sweep`), `--repeat` times per
    /// rate on fresh targets, alternately with access control off and on, side by side.
    #[arg(long, conflicts_with = "auth", requires = "sweep")]
    auth_ab: bool,
    /// Peer systems to run W1 and W2 on beside Baton: a comma-separated subset of
    /// dbos,celery,restate (see bench/peers/).
    #[arg(long, value_delimiter = ',')]
    peers: Vec<String>,
    /// Where the peers' scripts are.
    #[arg(long)]
    peers_dir: Option<PathBuf>,
    /// How the bench's workers reach the target: Conductor's HTTP polling (batch poll +
    /// update-v2) or QUIC with the Rust SDK (tasks pushed against credits, mutual TLS).
    #[arg(long, value_enum, default_value_t = WorkerKind::Http)]
    worker_kind: WorkerKind,
    /// Workers (HTTP: threads that batch-poll; QUIC: SDK workers, one connection each). An
    /// HTTP worker has one request in flight, so few workers cap the rate at RF 3: 4 held W2
    /// near 80 workflows/s while the nodes had CPU left (the peers' workers are not capped so).
    #[arg(long, default_value_t = 16)]
    workers: usize,
    /// Tasks per batch poll (HTTP), or each QUIC worker's concurrency.
    #[arg(long, default_value_t = 8)]
    batch: usize,
    /// W1: workflows measured (default 200 quick, 2,000 otherwise).
    #[arg(long)]
    w1_count: Option<u64>,
    /// W2: arrivals per second (default 50 quick, 200 otherwise).
    #[arg(long)]
    rate: Option<f64>,
    /// W2: seconds of arrivals (default 10 quick, 60 otherwise).
    #[arg(long)]
    w2_secs: Option<u64>,
    /// W2: seconds to wait for stragglers after the last arrival before counting them lost.
    #[arg(long, default_value_t = 30)]
    drain_secs: u64,
    /// W3: workflows in flight.
    #[arg(long)]
    w3_parallel: Option<usize>,
    /// W3: workflows run in total (default 200 quick, 2,000 otherwise).
    #[arg(long)]
    w3_count: Option<u64>,
    /// W4: workflows started, each waiting on a 1 s timer (default 1,000 quick, 10,000 otherwise).
    #[arg(long)]
    w4_count: Option<u64>,
    /// How the bench sees a workflow finish (W1, W2, W3 and the sweep; W4 and W7 always start and
    /// poll the status): `execute` waits on one `POST /api/workflow/execute` per workflow, as the
    /// peers' clients wait for their results; `status-polls` starts, then polls the status.
    #[arg(long, value_enum, default_value_t = Completion::Execute)]
    completion: Completion,
    /// W2 rate sweep: arrival rates (workflows/s) to run W2 at, once each, on Baton and every
    /// peer, to find the maximum sustainable rate.
    #[arg(long, value_delimiter = ',')]
    sweep: Vec<f64>,
    /// Seconds of arrivals per sweep rate (default 5 with --quick, 20 otherwise).
    #[arg(long)]
    sweep_secs: Option<u64>,
    /// A sweep rate is sustainable when nothing is lost, p99 stays at or under this bound and
    /// completions keep up with arrivals (at least 95% of the rate).
    #[arg(long, default_value_t = 1_000.0)]
    p99_bound_ms: f64,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkerKind {
    Http,
    Quic,
}

impl WorkerKind {
    fn describe(self) -> &'static str {
        match self {
            WorkerKind::Http => "HTTP (batch poll + update-v2)",
            WorkerKind::Quic => "QUIC (Rust SDK, pushed against credits)",
        }
    }
}

/// The sizes of one run.
#[derive(Clone)]
struct Plan {
    repeat: usize,
    warmup: u64,
    w1_count: u64,
    rate: f64,
    w2_duration: Duration,
    drain: Duration,
    w3_parallel: usize,
    w3_count: u64,
    w4_count: u64,
    sweep: Vec<f64>,
    sweep_duration: Duration,
    p99_bound_ms: f64,
}

impl Plan {
    fn from(args: &BenchArgs) -> Self {
        let q = args.quick;
        Self {
            repeat: args.repeat.unwrap_or(if q { 1 } else { 3 }).max(1),
            warmup: if q { 20 } else { 200 },
            w1_count: args.w1_count.unwrap_or(if q { 200 } else { 2_000 }),
            rate: args.rate.unwrap_or(if q { 50.0 } else { 200.0 }),
            w2_duration: Duration::from_secs(args.w2_secs.unwrap_or(if q { 10 } else { 60 })),
            drain: Duration::from_secs(args.drain_secs),
            w3_parallel: args.w3_parallel.unwrap_or(if q { 8 } else { 32 }),
            w3_count: args.w3_count.unwrap_or(if q { 200 } else { 2_000 }),
            w4_count: args.w4_count.unwrap_or(if q { 1_000 } else { 10_000 }),
            sweep: args.sweep.iter().copied().filter(|r| *r > 0.0).collect(),
            sweep_duration: Duration::from_secs(args.sweep_secs.unwrap_or(if q { 5 } else { 20 })),
            p99_bound_ms: args.p99_bound_ms,
        }
    }
}

/// One run of one workload, as the tables show it (Baton's and the peers' alike).
#[derive(Debug, Clone)]
struct Measured {
    started: u64,
    completed: u64,
    failed: u64,
    lost: u64,
    steps_per_s: f64,
    p50_ms: f64,
    p99_ms: f64,
    p999_ms: f64,
    /// Server CPU per 1,000 steps; `None` when nothing completed.
    cpu_per_k: Option<f64>,
    rss_mib: f64,
    /// Durable flushes (all nodes) per step; `None` when not known (peers).
    flushes_per_step: Option<f64>,
    /// KiB written to storage (all nodes) per step; `None` when not known (peers).
    write_kib_per_step: Option<f64>,
    /// Raft log entries the partitions' leaders appended per step (every write of a workflow is
    /// one, replicated to each follower); `None` when not known (peers).
    entries_per_step: Option<f64>,
}

/// What the target's storage did during one run: flushes and bytes written, all nodes.
#[derive(Debug, Clone, Copy, Default)]
struct Io {
    flushes: u64,
    bytes: u64,
    /// The last log index of every workflow partition, summed over their leaders.
    entries: u64,
}

impl Io {
    fn now(admins: &[Client], pids: &[u32]) -> Self {
        Self {
            flushes: admins.iter().filter_map(|c| c.storage_flushes().ok()).sum(),
            bytes: stats::write_bytes(pids),
            entries: admins
                .iter()
                .filter_map(|c| c.groups().ok())
                .flatten()
                .filter(|g| {
                    g["role"] == "Leader" && g["name"].as_str().is_some_and(|n| n.starts_with('p'))
                })
                .filter_map(|g| g["last_log_index"].as_u64())
                .sum(),
        }
    }

    fn since(self, before: Io) -> Io {
        Io {
            flushes: self.flushes.saturating_sub(before.flushes),
            bytes: self.bytes.saturating_sub(before.bytes),
            entries: self.entries.saturating_sub(before.entries),
        }
    }
}

impl Measured {
    fn of_baton(
        outcome: &Outcome,
        steps_per_workflow: u64,
        cpu_ms: u64,
        rss_mib: f64,
        io: Io,
    ) -> Self {
        let steps = outcome.completed * steps_per_workflow;
        let secs = outcome.elapsed.as_secs_f64();
        let per_step = |x: f64| (steps > 0).then(|| x / steps as f64);
        Self {
            flushes_per_step: per_step(io.flushes as f64),
            write_kib_per_step: per_step(io.bytes as f64 / 1024.0),
            entries_per_step: per_step(io.entries as f64),
            started: outcome.started,
            completed: outcome.completed,
            failed: outcome.failed,
            lost: outcome
                .started
                .saturating_sub(outcome.completed + outcome.failed),
            steps_per_s: if secs > 0.0 { steps as f64 / secs } else { 0.0 },
            p50_ms: outcome.latency.ms(0.50),
            p99_ms: outcome.latency.ms(0.99),
            p999_ms: outcome.latency.ms(0.999),
            cpu_per_k: (steps > 0).then(|| cpu_ms as f64 * 1_000.0 / steps as f64),
            rss_mib,
        }
    }

    fn of_peer(r: &PeerResult) -> Self {
        let steps = r.completed * r.steps_per_workflow;
        Self {
            started: r.started,
            completed: r.completed,
            failed: r.failed,
            lost: r.lost(),
            steps_per_s: r.steps_per_s(),
            p50_ms: r.p50_ms,
            p99_ms: r.p99_ms,
            p999_ms: r.p999_ms,
            cpu_per_k: (steps > 0).then(|| r.cpu_ms as f64 * 1_000.0 / steps as f64),
            rss_mib: r.rss_mib,
            flushes_per_step: None,
            write_kib_per_step: None,
            entries_per_step: None,
        }
    }
}

/// The repetitions of one workload on one system.
struct Row {
    system: String,
    workload: &'static str,
    what: String,
    /// How the system makes a step durable.
    durability: String,
    runs: Vec<Measured>,
    /// Workload-specific remarks for the notes under the table.
    note: Option<String>,
}

/// One W2 run of a rate sweep. A sweep is meant to pass the breaking point, so workflows still
/// running when its drain ends are reported as unfinished, never as a failure of the run.
struct SweepPoint {
    system: String,
    rate: f64,
    m: Measured,
    /// Completed workflows per second over the run (arrivals to last completion).
    achieved: f64,
    /// Median fdatasync latency while the point ran (Baton's points; see `DiskProbe`).
    disk_p50_ms: Option<f64>,
}

impl SweepPoint {
    /// Nothing lost or failed, p99 within the bound, and completions kept up with arrivals.
    fn sustainable(&self, p99_bound_ms: f64) -> bool {
        self.m.lost == 0
            && self.m.failed == 0
            && self.m.p99_ms <= p99_bound_ms
            && self.achieved >= 0.95 * self.rate
    }
}

/// The median of `xs` (the lower middle for an even count); 0 when empty.
fn median(mut xs: Vec<f64>) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    xs.sort_by(f64::total_cmp);
    xs[(xs.len() - 1) / 2]
}

impl Row {
    fn median_of(&self, f: impl Fn(&Measured) -> f64) -> f64 {
        median(self.runs.iter().map(f).collect())
    }

    /// `min..max` of a field over the runs (empty with one run).
    fn spread_of(&self, f: impl Fn(&Measured) -> f64, digits: usize) -> String {
        if self.runs.len() < 2 {
            return "-".into();
        }
        let xs: Vec<f64> = self.runs.iter().map(f).collect();
        let lo = xs.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        format!("{lo:.digits$}..{hi:.digits$}")
    }

    fn total(&self, f: impl Fn(&Measured) -> u64) -> u64 {
        self.runs.iter().map(f).sum()
    }

    fn is_bad(&self) -> bool {
        self.total(|m| m.lost) > 0 || self.total(|m| m.failed) > 0
    }
}

fn progress(line: String) {
    println!(".. {line}");
}

/// Runs the bench; `Ok(false)` when a workload lost or failed workflows.
pub fn run(args: BenchArgs) -> anyhow::Result<bool> {
    let plan = Plan::from(&args);
    let spec = target_spec(&args)?;

    progress("calibrating (fdatasync, loopback TCP)".into());
    let cal = Calibration::measure()?;
    print_calibration(&cal, &spec, &args, &plan);
    if args.auth_ab {
        auth_ab::run(&spec, &plan, &args)?;
        return Ok(true);
    }

    progress(format!("starting the target: {}", spec.describe()));
    let mut target = Target::start(&spec)?;
    progress(format!(
        "target up at {} (pids {:?})",
        target.urls().join(", "),
        target.pids()
    ));

    let result = run_workloads(&mut target, &plan, &args);
    if result.is_err() {
        eprintln!("--- target logs ---\n{}", target.log_tail());
    }
    let mut rows = result?;
    drop(target);
    let mut sweep = Vec::new();
    if !plan.sweep.is_empty() {
        sweep = run_sweep_on_fresh_target(&spec, &plan, &args)?;
    }
    let mut peer_rows = run_peers(&args, &plan, &mut sweep);

    print_table(&rows, cal.nproc);
    if !args.peers.is_empty() {
        print_side_by_side(&rows, &peer_rows);
    }
    if !sweep.is_empty() {
        print_sweep(&sweep, plan.p99_bound_ms);
    }
    rows.append(&mut peer_rows);
    Ok(report_losses(&rows))
}

/// The target `args` ask for; refuses unknown peers before anything starts.
fn target_spec(args: &BenchArgs) -> anyhow::Result<TargetSpec> {
    for p in &args.peers {
        if !peers::KNOWN.contains(&p.as_str()) {
            bail!(
                "unknown peer {p:?}: known peers are {}",
                peers::KNOWN.join(", ")
            );
        }
    }
    let bin = match &args.baton_bin {
        Some(b) => b.clone(),
        None => std::env::current_exe()
            .context("cannot locate batonctl")?
            .with_file_name("baton"),
    };
    let quic = args.worker_kind == WorkerKind::Quic;
    Ok(if args.nodes <= 1 {
        TargetSpec::LocalServer {
            bin,
            partitions: args.partitions,
            quic,
            auth: args.auth,
        }
    } else {
        TargetSpec::LocalCluster {
            bin,
            nodes: args.nodes,
            partitions: args.partitions,
            quic,
            auth: args.auth,
        }
    })
}

/// The W2 sweep on a fresh target of `spec`; prints the target's logs if it fails.
fn run_sweep_on_fresh_target(
    spec: &TargetSpec,
    plan: &Plan,
    args: &BenchArgs,
) -> anyhow::Result<Vec<SweepPoint>> {
    progress(format!(
        "starting a fresh target for the sweep: {}",
        spec.describe()
    ));
    let target = Target::start(spec)?;
    let result = run_sweep(&target, plan, args);
    if result.is_err() {
        eprintln!("--- target logs ---\n{}", target.log_tail());
    }
    result
}

/// Runs every peer of `args`; their sweep points are added to `sweep`. A peer that fails is
/// reported and left out.
fn run_peers(args: &BenchArgs, plan: &Plan, sweep: &mut Vec<SweepPoint>) -> Vec<Row> {
    let peers_dir = args.peers_dir.clone().unwrap_or_else(peers::default_dir);
    let mut peer_rows = Vec::new();
    for name in &args.peers {
        match run_peer(&peers_dir, name, plan) {
            Ok((mut r, mut points)) => {
                peer_rows.append(&mut r);
                sweep.append(&mut points);
            }
            // A peer that cannot install or run here is reported, not fatal to Baton's figures.
            Err(e) => eprintln!("batonctl bench: peer {name} failed: {e:#}"),
        }
    }
    peer_rows
}

/// Reports every row that lost or failed workflows; false if one of them is Baton's.
fn report_losses(rows: &[Row]) -> bool {
    let mut ok = true;
    for r in rows {
        if r.is_bad() {
            eprintln!(
                "batonctl bench: {} {} lost {}, failed {}",
                r.system,
                r.workload,
                r.total(|m| m.lost),
                r.total(|m| m.failed),
            );
            // Only Baton's losses fail the run; a peer's are reported.
            ok &= r.system != "baton";
        }
    }
    ok
}

/// Registers the definitions on `target`, starts the workers and runs the warm-up; answers the
/// workers and an admin client per node (for the storage counters).
fn prepare(target: &Target, plan: &Plan, args: &BenchArgs) -> anyhow::Result<(Pool, Vec<Client>)> {
    let urls = target.urls();
    let admins = urls
        .iter()
        .map(|u| Client::new(u))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let admin = Client::new(&urls[0])?;
    let (task_defs, workflow_defs) = workloads::definitions();
    admin.register_task_defs(&task_defs)?;
    for def in &workflow_defs {
        admin.register_workflow(def)?;
    }
    admin.register_dsl(&workloads::w8_document())?;
    let workers = match args.worker_kind {
        WorkerKind::Http => Pool::Http(Workers::start(
            urls,
            workloads::TASK_TYPE,
            args.workers,
            args.batch,
        )?),
        WorkerKind::Quic => Pool::Quic(QuicWorkers::start(
            target.worker_addrs(),
            &target.certs_dir(),
            workloads::TASK_TYPE,
            args.workers,
            u32::try_from(args.batch).unwrap_or(u32::MAX),
        )?),
    };
    progress(format!("warm-up: {} x W1", plan.warmup));
    let warm = workloads::closed_loop(urls, workloads::W1, 1, plan.warmup, args.completion)?;
    if warm.completed != warm.started || warm.started == 0 {
        bail!(
            "warm-up: {} of {} workflows completed (errors {})",
            warm.completed,
            warm.started,
            warm.errors
        );
    }
    Ok((workers, admins))
}

/// Stops the workers and reports what they did.
fn finish(workers: Pool) {
    let (tasks, errors) = workers.stop();
    progress(format!(
        "workers: {tasks} tasks completed (warm-up included), {errors} failed requests or refused results"
    ));
}

fn run_workloads(target: &mut Target, plan: &Plan, args: &BenchArgs) -> anyhow::Result<Vec<Row>> {
    let (urls, pids) = (&target.urls().to_vec(), &target.pids());
    let (workers, admins) = prepare(target, plan, args)?;

    let durability = format!(
        "{FSYNC_MODE}, RF {}; workers over {}",
        args.nodes.clamp(1, 3),
        args.worker_kind.describe()
    );
    let meter = Meter {
        plan,
        pids,
        admins: &admins,
        durability: &durability,
    };
    let mut rows = measure_workloads(&meter, urls, args)?;

    if urls.len() >= 3 {
        rows.push(leader_killed(target, plan, args, &durability)?);
    }

    finish(workers);
    Ok(rows)
}

/// W1, W2 (and W8 beside it, see [`w2_and_w8`]), W5, W3 and W4 on the target at `urls`, each
/// measured by `meter`.
fn measure_workloads(
    meter: &Meter<'_>,
    urls: &[String],
    args: &BenchArgs,
) -> anyhow::Result<Vec<Row>> {
    let plan = meter.plan;
    let mut rows = vec![meter.measure(&Workload {
        name: "W1",
        what: format!("1 task, sequential, {} workflows", plan.w1_count),
        steps: workloads::W1_STEPS,
        body: &|| workloads::closed_loop(urls, workloads::W1, 1, plan.w1_count, args.completion),
    })?];
    rows.append(&mut w2_and_w8(meter, urls, args)?);
    let w5 = |completion| {
        workloads::open_loop(
            urls,
            Flow::Conductor(workloads::W5),
            plan.rate,
            plan.w2_duration,
            plan.drain,
            &progress,
            None,
            completion,
        )
    };
    rows.push(meter.measure(&Workload {
        name: "W5",
        what: format!(
            "3 sub-workflows of 1 task under fork + join, open loop {}/s for {} s",
            plan.rate,
            plan.w2_duration.as_secs()
        ),
        steps: workloads::W5_STEPS,
        body: &|| w5(args.completion),
    })?);
    rows.push(meter.measure(&Workload {
        name: "W3",
        what: format!(
            "10-task chain, {} in flight, {} workflows",
            plan.w3_parallel, plan.w3_count
        ),
        steps: workloads::W3_STEPS,
        body: &|| {
            let (parallel, count) = (plan.w3_parallel, plan.w3_count);
            workloads::closed_loop(urls, workloads::W3, parallel, count, args.completion)
        },
    })?);
    rows.push(meter.measure(&Workload {
        name: "W4",
        what: format!(
            "{} workflows on a {} s timer; latency is the timer's lateness",
            plan.w4_count,
            workloads::W4_WAIT.as_secs()
        ),
        steps: workloads::W4_STEPS,
        body: &|| workloads::timers(urls, plan.w4_count, W4_STARTERS, &progress),
    })?);
    Ok(rows)
}

/// W2, and W8 (W2's shape as a DSL document) alternating with a W2 that sees completion as W8
/// must, by status polls: with `--completion status-polls` that is W2 itself; with `execute`,
/// W2 runs as asked first, then a [`W2_POLLS`] row alternates with W8.
fn w2_and_w8(meter: &Meter<'_>, urls: &[String], args: &BenchArgs) -> anyhow::Result<Vec<Row>> {
    let plan = meter.plan;
    let open_loop = |flow, completion| {
        workloads::open_loop(
            urls,
            flow,
            plan.rate,
            plan.w2_duration,
            plan.drain,
            &progress,
            None,
            completion,
        )
    };
    let arrivals = format!(
        "open loop {}/s for {} s",
        plan.rate,
        plan.w2_duration.as_secs()
    );
    let w2_as_asked = || open_loop(Flow::Conductor(workloads::W2), args.completion);
    let w2_polled = || open_loop(Flow::Conductor(workloads::W2), Completion::StatusPolls);
    let w8_polled = || open_loop(workloads::W8, Completion::StatusPolls);
    let w2 = Workload {
        name: "W2",
        what: format!("fork 3 + join, {arrivals}"),
        steps: workloads::W2_STEPS,
        body: &w2_as_asked,
    };
    let w8 = Workload {
        name: "W8",
        what: format!("W2's fork of 3 calls as a DSL document, {arrivals}, status polls"),
        steps: workloads::W8_STEPS,
        body: &w8_polled,
    };
    if args.completion == Completion::StatusPolls {
        let (w2, w8) = meter.measure_alternating(&w2, &w8)?;
        return Ok(vec![w2, w8]);
    }
    let w2_polls = Workload {
        name: W2_POLLS,
        what: format!("W2 with status polls, as W8 sees completion, {arrivals}"),
        steps: workloads::W2_STEPS,
        body: &w2_polled,
    };
    let w2 = meter.measure(&w2)?;
    let (w2_polls, w8) = meter.measure_alternating(&w2_polls, &w8)?;
    Ok(vec![w2, w2_polls, w8])
}

/// One workload as [`Meter`] runs it.
struct Workload<'a> {
    name: &'static str,
    what: String,
    steps: u64,
    /// One run of it.
    body: &'a dyn Fn() -> anyhow::Result<Outcome>,
}

/// A workload's runs so far.
struct Tally {
    row: Row,
    errors: u64,
    /// Each run's median workflow latency per step, in ms.
    per_step: Vec<f64>,
}

impl Tally {
    /// The row, with notes: W3's per-step overhead, and any request errors.
    fn finish(mut self) -> Row {
        let mut notes = Vec::new();
        if self.row.workload == "W3" {
            notes.push(format!(
                "per-step overhead (p50 workflow / 10) {:.2} ms",
                median(self.per_step)
            ));
        }
        if self.errors > 0 {
            notes.push(format!("{} request errors", self.errors));
        }
        self.row.note = (!notes.is_empty()).then(|| notes.join("; "));
        self.row
    }
}

/// Measures Baton's workloads on one target: `plan.repeat` runs of each, with the target's CPU
/// time, storage and memory around every run.
struct Meter<'a> {
    plan: &'a Plan,
    pids: &'a [u32],
    /// An admin client per node, for the storage counters.
    admins: &'a [Client],
    durability: &'a str,
}

impl Meter<'_> {
    /// Runs `w` `plan.repeat` times.
    fn measure(&self, w: &Workload<'_>) -> anyhow::Result<Row> {
        let mut tally = self.tally(w);
        for run in 1..=self.plan.repeat {
            self.run_once(w, run, &mut tally)?;
        }
        Ok(tally.finish())
    }

    /// Runs `a` and `b` `plan.repeat` times each, alternating, `a` first in odd runs and `b` in
    /// even ones, so that neither always runs on a target the other just loaded; their runs
    /// pair up in order.
    fn measure_alternating(
        &self,
        a: &Workload<'_>,
        b: &Workload<'_>,
    ) -> anyhow::Result<(Row, Row)> {
        let (mut ta, mut tb) = (self.tally(a), self.tally(b));
        for run in 1..=self.plan.repeat {
            if run % 2 == 1 {
                self.run_once(a, run, &mut ta)?;
                self.run_once(b, run, &mut tb)?;
            } else {
                self.run_once(b, run, &mut tb)?;
                self.run_once(a, run, &mut ta)?;
            }
        }
        Ok((ta.finish(), tb.finish()))
    }

    fn tally(&self, w: &Workload<'_>) -> Tally {
        Tally {
            row: Row {
                system: "baton".into(),
                workload: w.name,
                what: w.what.clone(),
                durability: self.durability.to_owned(),
                runs: Vec::new(),
                note: None,
            },
            errors: 0,
            per_step: Vec::new(),
        }
    }

    /// Run `run` of `w`, measured, added to `tally`.
    fn run_once(&self, w: &Workload<'_>, run: usize, tally: &mut Tally) -> anyhow::Result<()> {
        let (pids, admins) = (self.pids, self.admins);
        progress(format!(
            "{} (run {run}/{}): {}",
            w.name, self.plan.repeat, w.what
        ));
        let cpu_before = stats::cpu_ms(pids);
        let io_before = Io::now(admins, pids);
        let outcome = (w.body)()?;
        let cpu_ms = stats::cpu_ms(pids).saturating_sub(cpu_before);
        let io = Io::now(admins, pids).since(io_before);
        progress(format!(
            "{}: completed {}/{} in {:.1} s, {}",
            w.name,
            outcome.completed,
            outcome.started,
            outcome.elapsed.as_secs_f64(),
            outcome.latency.summary(2)
        ));
        tally.errors += outcome.errors;
        tally
            .per_step
            .push(outcome.latency.ms(0.50) / w.steps as f64);
        tally.row.runs.push(Measured::of_baton(
            &outcome,
            w.steps,
            cpu_ms,
            stats::rss_mib(pids),
            io,
        ));
        Ok(())
    }
}

/// The W2 rate sweep, on a target of its own (so that neither the other workloads' state nor a
/// node killed by W7 weighs on it).
fn run_sweep(target: &Target, plan: &Plan, args: &BenchArgs) -> anyhow::Result<Vec<SweepPoint>> {
    let (urls, pids) = (&target.urls().to_vec(), &target.pids());
    let (workers, admins) = prepare(target, plan, args)?;
    let mut sweep = Vec::new();
    for &rate in &plan.sweep {
        progress(format!(
            "sweep: W2 at {rate}/s for {} s",
            plan.sweep_duration.as_secs()
        ));
        let cpu_before = stats::cpu_ms(pids);
        let io_before = Io::now(&admins, pids);
        let disk = calibrate::DiskProbe::start();
        let outcome = workloads::open_loop(
            urls,
            Flow::Conductor(workloads::W2),
            rate,
            plan.sweep_duration,
            plan.drain,
            &progress,
            None,
            args.completion,
        )?;
        let disk_p50_ms = disk.finish().map(|d| d.ms(0.5));
        let cpu_ms = stats::cpu_ms(pids).saturating_sub(cpu_before);
        let io = Io::now(&admins, pids).since(io_before);
        let secs = outcome.elapsed.as_secs_f64();
        let achieved = if secs > 0.0 {
            outcome.completed as f64 / secs
        } else {
            0.0
        };
        sweep.push(SweepPoint {
            system: "baton".into(),
            rate,
            m: Measured::of_baton(
                &outcome,
                workloads::W2_STEPS,
                cpu_ms,
                stats::rss_mib(pids),
                io,
            ),
            achieved,
            disk_p50_ms,
        });
    }

    finish(workers);
    Ok(sweep)
}

/// W7, once (it kills a node of the target, so it runs last).
fn leader_killed(
    target: &mut Target,
    plan: &Plan,
    args: &BenchArgs,
    durability: &str,
) -> anyhow::Result<Row> {
    let what = format!(
        "W2 open loop {}/s for {} s, the busiest leader killed halfway",
        plan.rate,
        plan.w2_duration.as_secs()
    );
    progress(format!("W7: {what}"));
    let report = failover::run(
        target,
        args.partitions,
        plan.rate,
        plan.w2_duration,
        plan.drain,
        &progress,
    )?;
    let o = &report.outcome;
    progress(format!(
        "W7: completed {}/{}; {}",
        o.completed,
        o.started,
        report.note()
    ));
    let m = Measured::of_baton(
        o,
        workloads::W2_STEPS,
        report.cpu_ms,
        report.rss_mib,
        Io::default(),
    );
    let mut note = report.note();
    if let Some(worst) = report.worst_resume_ms() {
        note.push_str(&format!(
            "; time to resume (slowest partition) {worst:.0} ms"
        ));
    }
    if o.errors > 0 {
        note.push_str(&format!("; {} request errors", o.errors));
    }
    Ok(Row {
        system: "baton".into(),
        workload: "W7",
        what,
        durability: durability.to_owned(),
        runs: vec![Measured {
            flushes_per_step: None,
            write_kib_per_step: None,
            entries_per_step: None,
            ..m
        }],
        note: Some(note),
    })
}

/// Runs W1 and W2 on peer `name`, `plan.repeat` times each, with Baton's sizes, then W2 at each
/// sweep rate.
fn run_peer(
    dir: &std::path::Path,
    name: &str,
    plan: &Plan,
) -> anyhow::Result<(Vec<Row>, Vec<SweepPoint>)> {
    let workloads = [
        (
            "W1",
            format!("1 task, sequential, {} workflows", plan.w1_count),
            PeerWorkload::W1 {
                count: plan.w1_count,
                warmup: plan.warmup,
            },
        ),
        (
            "W2",
            format!(
                "fork 3 + join, open loop {}/s for {} s",
                plan.rate,
                plan.w2_duration.as_secs()
            ),
            PeerWorkload::W2 {
                rate: plan.rate,
                secs: plan.w2_duration.as_secs(),
                drain_secs: plan.drain.as_secs(),
                warmup: plan.warmup,
            },
        ),
    ];
    let mut rows = Vec::new();
    for (workload, what, spec) in workloads {
        let mut row = Row {
            system: name.to_owned(),
            workload,
            what,
            durability: String::new(),
            runs: Vec::new(),
            note: None,
        };
        for run in 1..=plan.repeat {
            progress(format!(
                "peer {name}: {workload} (run {run}/{})",
                plan.repeat
            ));
            let r = peers::run(dir, name, &spec)?;
            progress(format!(
                "peer {name}: {workload} completed {}/{}, p50 {:.2} ms, p99 {:.2} ms",
                r.completed, r.started, r.p50_ms, r.p99_ms
            ));
            row.system = format!("{} {}", r.system, r.version);
            row.durability = r.durability.clone();
            row.note = Some(format!("workers: {}; {}", r.workers, r.notes));
            row.runs.push(Measured::of_peer(&r));
        }
        rows.push(row);
    }
    let mut sweep = Vec::new();
    for &rate in &plan.sweep {
        progress(format!("peer {name}: sweep W2 at {rate}/s"));
        let spec = PeerWorkload::W2 {
            rate,
            secs: plan.sweep_duration.as_secs(),
            drain_secs: plan.drain.as_secs(),
            warmup: plan.warmup,
        };
        let r = peers::run(dir, name, &spec)?;
        sweep.push(SweepPoint {
            system: format!("{} {}", r.system, r.version),
            rate,
            achieved: if r.elapsed_s > 0.0 {
                r.completed as f64 / r.elapsed_s
            } else {
                0.0
            },
            m: Measured::of_peer(&r),
            disk_p50_ms: None,
        });
    }
    Ok((rows, sweep))
}

fn print_calibration(cal: &Calibration, spec: &TargetSpec, args: &BenchArgs, plan: &Plan) {
    println!();
    println!("calibration");
    println!("  git commit        {}", cal.git);
    println!("  nproc             {}", cal.nproc);
    println!("  target            {}", spec.describe());
    println!(
        "  baton binary      {} (a target/debug build is unoptimised: compare release builds)",
        spec.bin().display()
    );
    println!("  fsync mode        {FSYNC_MODE}");
    println!("  payload           {{}} input, {{\"ok\":true}} output per task");
    println!("  completion        {}", args.completion.describe());
    match args.worker_kind {
        WorkerKind::Http => println!(
            "  workers           {} HTTP threads in-process, batch poll of {}, spread over the nodes",
            args.workers, args.batch
        ),
        WorkerKind::Quic => println!(
            "  workers           {} QUIC SDK workers in-process, concurrency {} each, spread over the nodes",
            args.workers, args.batch
        ),
    }
    println!("  repetitions       {}", plan.repeat);
    println!(
        "  fdatasync 4 KB    {}  ({} samples)",
        cal.fsync.summary(3),
        cal.fsync.count()
    );
    println!(
        "  loopback TCP RTT  {}  ({} samples)",
        cal.rtt.summary(3),
        cal.rtt.count()
    );
    println!();
}

/// Prints `cells` (the first row is the header) as aligned columns.
fn print_columns(cells: &[Vec<String>]) {
    let mut width = vec![0; cells[0].len()];
    for row in cells {
        for (w, c) in width.iter_mut().zip(row) {
            *w = (*w).max(c.len());
        }
    }
    for row in cells {
        let line: Vec<String> = row
            .iter()
            .zip(&width)
            .enumerate()
            .map(|(i, (c, w))| {
                if i == 0 {
                    format!("{c:<w$}")
                } else {
                    format!("{c:>w$}")
                }
            })
            .collect();
        println!("{}", line.join("  ").trim_end());
    }
}

fn header(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| (*s).to_owned()).collect()
}

fn cpu_cell(row: &Row) -> String {
    optional_cell(row, |m| m.cpu_per_k, 0)
}

/// The median of an optional field over the runs that have it, or `-`.
fn optional_cell(row: &Row, f: impl Fn(&Measured) -> Option<f64>, digits: usize) -> String {
    let xs: Vec<f64> = row.runs.iter().filter_map(f).collect();
    if xs.is_empty() {
        "-".into()
    } else {
        format!("{:.digits$}", median(xs))
    }
}

fn print_table(rows: &[Row], nproc: usize) {
    let mut cells = vec![header(&[
        "workload",
        "started",
        "completed",
        "failed",
        "lost",
        "steps/s",
        "(spread)",
        "steps/s/core",
        "p50_ms",
        "p99_ms",
        "(spread)",
        "p99.9_ms",
        "cpu_ms/1k_steps",
        "flushes/step",
        "entries/step",
        "KiB_written/step",
        "rss_MiB",
    ])];
    for r in rows {
        let steps = r.median_of(|m| m.steps_per_s);
        cells.push(vec![
            r.workload.to_owned(),
            r.total(|m| m.started).to_string(),
            r.total(|m| m.completed).to_string(),
            r.total(|m| m.failed).to_string(),
            r.total(|m| m.lost).to_string(),
            format!("{steps:.0}"),
            r.spread_of(|m| m.steps_per_s, 0),
            format!("{:.0}", steps / nproc as f64),
            format!("{:.2}", r.median_of(|m| m.p50_ms)),
            format!("{:.2}", r.median_of(|m| m.p99_ms)),
            r.spread_of(|m| m.p99_ms, 1),
            format!("{:.2}", r.median_of(|m| m.p999_ms)),
            cpu_cell(r),
            optional_cell(r, |m| m.flushes_per_step, 2),
            optional_cell(r, |m| m.entries_per_step, 2),
            optional_cell(r, |m| m.write_kib_per_step, 1),
            format!("{:.0}", r.median_of(|m| m.rss_mib)),
        ]);
    }
    println!();
    println!("results (baton; medians of the runs, counts summed over them)");
    print_columns(&cells);
    println!();
    for r in rows {
        match &r.note {
            Some(note) => println!("  {}: {}; {note}", r.workload, r.what),
            None => println!("  {}: {}", r.workload, r.what),
        }
    }
    for line in [
        "latency: W1/W3 from start request to COMPLETED observed; W2, W5 and W8 from the",
        "scheduled arrival. W1-W3 and W5 see completion as the calibration block's `completion`",
        "says; W4, W7, W8 and W2-polls start, then poll the status (a tenth of the workflow's age",
        "apart, 1-250 ms). The target's CPU for either is included in cpu_ms/1k_steps.",
    ] {
        println!("  {line}");
    }
    print_w8_ratio(rows);
}

/// W8's CPU per step over that of the W2 row it alternated with (the one that sees completion
/// by status polls too): the median over the pairs of runs, and each pair's.
fn print_w8_ratio(rows: &[Row]) {
    let find = |name: &str| rows.iter().find(|r| r.workload == name);
    let (Some(w8), Some(w2)) = (find("W8"), find(W2_POLLS).or_else(|| find("W2"))) else {
        return;
    };
    let ratios: Vec<f64> = w8
        .runs
        .iter()
        .zip(&w2.runs)
        .filter_map(|(a, b)| Some(a.cpu_per_k? / b.cpu_per_k?))
        .collect();
    if ratios.is_empty() {
        return;
    }
    let each: Vec<String> = ratios.iter().map(|r| format!("{r:.2}")).collect();
    println!(
        "  W8/{} CPU per step: {:.2} (each pair of runs: {})",
        w2.workload,
        median(ratios),
        each.join(", ")
    );
}

/// W1 and W2 of Baton and every peer, with the ratios Baton / peer.
fn print_side_by_side(baton: &[Row], peers: &[Row]) {
    let mut cells = vec![header(&[
        "workload",
        "system",
        "completed",
        "lost",
        "steps/s",
        "p50_ms",
        "p99_ms",
        "cpu_ms/1k_steps",
        "rss_MiB",
        "baton/peer steps/s",
        "baton/peer p50",
        "baton/peer p99",
    ])];
    let mut durability = Vec::new();
    for workload in ["W1", "W2"] {
        let Some(b) = baton.iter().find(|r| r.workload == workload) else {
            continue;
        };
        for r in std::iter::once(b).chain(peers.iter().filter(|r| r.workload == workload)) {
            cells.push(side_by_side_cells(workload, r, b));
            if !durability
                .iter()
                .any(|(name, _): &(String, String)| name == &r.system)
            {
                durability.push((r.system.clone(), r.durability.clone()));
            }
        }
    }
    println!();
    println!("side by side (same machine, same run; medians)");
    print_columns(&cells);
    println!();
    println!("  durability:");
    for (system, d) in &durability {
        println!("    {system}: {d}");
    }
    let mut noted: Vec<&str> = Vec::new();
    for r in peers {
        if let Some(note) = &r.note {
            if !noted.contains(&r.system.as_str()) {
                noted.push(&r.system);
                println!("  {}: {note}", r.system);
            }
        }
    }
    println!("  baton/peer steps/s above 1 means Baton does more; p50/p99 below 1 means Baton is faster.");
    println!("  cpu_ms/1k_steps counts each system's server-side processes (see its notes).");
}

/// One line of the side-by-side table: row `r` of `workload`, with its ratios to Baton's row
/// `b` (`-` on Baton's own line).
fn side_by_side_cells(workload: &str, r: &Row, b: &Row) -> Vec<String> {
    let (bs, b50, b99) = (
        b.median_of(|m| m.steps_per_s),
        b.median_of(|m| m.p50_ms),
        b.median_of(|m| m.p99_ms),
    );
    let (s, p50, p99) = (
        r.median_of(|m| m.steps_per_s),
        r.median_of(|m| m.p50_ms),
        r.median_of(|m| m.p99_ms),
    );
    let is_baton = std::ptr::eq(r, b);
    let ratio = |a: f64, peer: f64| {
        if is_baton || peer <= 0.0 {
            "-".to_owned()
        } else {
            format!("{:.2}", a / peer)
        }
    };
    vec![
        workload.to_owned(),
        r.system.clone(),
        r.total(|m| m.completed).to_string(),
        r.total(|m| m.lost).to_string(),
        format!("{s:.0}"),
        format!("{p50:.2}"),
        format!("{p99:.2}"),
        cpu_cell(r),
        format!("{:.0}", r.median_of(|m| m.rss_mib)),
        ratio(bs, s),
        ratio(b50, p50),
        ratio(b99, p99),
    ]
}

/// The W2 sweep of every system, and each one's maximum sustainable rate.
fn print_sweep(points: &[SweepPoint], p99_bound_ms: f64) {
    let mut cells = vec![header(&[
        "system",
        "rate/s",
        "started",
        "completed",
        "unfinished",
        "achieved/s",
        "steps/s",
        "p50_ms",
        "p99_ms",
        "cpu_ms/1k_steps",
        "flushes/step",
        "entries/step",
        "disk_p50_ms",
        "sustainable",
    ])];
    let mut best: Vec<(String, Option<&SweepPoint>)> = Vec::new();
    for p in points {
        let ok = p.sustainable(p99_bound_ms);
        cells.push(vec![
            p.system.clone(),
            format!("{}", p.rate),
            p.m.started.to_string(),
            p.m.completed.to_string(),
            p.m.lost.to_string(),
            format!("{:.1}", p.achieved),
            format!("{:.0}", p.m.steps_per_s),
            format!("{:.2}", p.m.p50_ms),
            format!("{:.2}", p.m.p99_ms),
            p.m.cpu_per_k.map_or("-".into(), |c| format!("{c:.0}")),
            p.m.flushes_per_step
                .map_or("-".into(), |f| format!("{f:.2}")),
            p.m.entries_per_step
                .map_or("-".into(), |f| format!("{f:.2}")),
            p.disk_p50_ms.map_or("-".into(), |d| format!("{d:.2}")),
            if ok { "yes" } else { "no" }.into(),
        ]);
        let slot = match best.iter_mut().find(|(s, _)| *s == p.system) {
            Some(slot) => slot,
            None => {
                best.push((p.system.clone(), None));
                best.last_mut().expect("just pushed")
            }
        };
        if ok && slot.1.is_none_or(|b| b.rate < p.rate) {
            slot.1 = Some(p);
        }
    }
    println!();
    println!(
        "W2 sweep (sustainable: all finished, p99 <= {p99_bound_ms} ms, completions >= 95% of the rate)"
    );
    print_columns(&cells);
    println!();
    let baton = best
        .iter()
        .find(|(s, _)| s == "baton")
        .and_then(|(_, b)| *b)
        .map(|b| b.m.steps_per_s);
    for (system, b) in &best {
        match b {
            Some(b) => {
                let ratio = match baton {
                    Some(x) if system != "baton" && b.m.steps_per_s > 0.0 => {
                        format!(" (baton/{system} {:.2})", x / b.m.steps_per_s)
                    }
                    _ => String::new(),
                };
                println!(
                    "  {system}: max sustainable W2 rate {}/s, {:.0} steps/s{ratio}",
                    b.rate, b.m.steps_per_s
                );
            }
            None => println!("  {system}: no sweep rate was sustainable"),
        }
    }
}
