//! `batonctl bench`: measure Baton honestly (see BENCHMARKS.md).
//!
//! It starts its own target (one local `baton server` for now, see [`target`]), prints the
//! machine's calibration, runs in-process HTTP workers speaking Conductor's task API, and runs
//! three workloads:
//!
//! - **W1** one SIMPLE task, one workflow at a time: end-to-end latency (start to COMPLETED).
//! - **W2** FORK of 3 one-task branches + JOIN, open loop at `--rate` workflows/s: latency from the
//!   scheduled arrival (coordinated omission corrected), steps/s, and workflows lost after a drain.
//! - **W3** a chain of 10 SIMPLE tasks, `--w3-parallel` workflows in flight (closed loop): steps/s
//!   and the per-step overhead (median workflow latency / 10).
//!
//! A *step* is one SIMPLE task scheduled, handed to a worker, completed and recorded; steps are
//! counted from completed workflows, never from accepted requests. The target's CPU time (from
//! `/proc`) per 1,000 steps and its RSS are reported per workload. The run exits non-zero when a
//! workload lost or failed a workflow.
//!
//! What it is not (yet): repeated runs with median and spread, peer systems, multi-node targets
//! and QUIC workers.

mod calibrate;
mod client;
mod stats;
mod target;
mod workers;
mod workloads;

use anyhow::{bail, Context};
use calibrate::Calibration;
use client::Client;
use std::path::PathBuf;
use std::time::Duration;
use target::{Target, TargetSpec};
use workers::Workers;
use workloads::Outcome;

/// How the target makes records durable (printed with every result).
const FSYNC_MODE: &str = "sled flush per batch";

#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// Small, fast sizes (the whole run takes well under a minute).
    #[arg(long)]
    quick: bool,
    /// The `baton` binary to benchmark; by default the one next to `batonctl`.
    #[arg(long)]
    baton_bin: Option<PathBuf>,
    /// Workflow partitions of the target.
    #[arg(long, default_value_t = 4)]
    partitions: u16,
    /// Worker threads (each batch-polls and completes tasks).
    #[arg(long, default_value_t = 4)]
    workers: usize,
    /// Tasks per batch poll.
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
}

/// The sizes of one run.
struct Plan {
    warmup: u64,
    w1_count: u64,
    rate: f64,
    w2_duration: Duration,
    drain: Duration,
    w3_parallel: usize,
    w3_count: u64,
}

impl Plan {
    fn from(args: &BenchArgs) -> Self {
        let q = args.quick;
        Self {
            warmup: if q { 20 } else { 200 },
            w1_count: args.w1_count.unwrap_or(if q { 200 } else { 2_000 }),
            rate: args.rate.unwrap_or(if q { 50.0 } else { 200.0 }),
            w2_duration: Duration::from_secs(args.w2_secs.unwrap_or(if q { 10 } else { 60 })),
            drain: Duration::from_secs(args.drain_secs),
            w3_parallel: args.w3_parallel.unwrap_or(if q { 8 } else { 32 }),
            w3_count: args.w3_count.unwrap_or(if q { 200 } else { 2_000 }),
        }
    }
}

/// One row of the final table.
struct Row {
    name: &'static str,
    what: String,
    steps_per_workflow: u64,
    outcome: Outcome,
    cpu_ms: u64,
    rss_mib: f64,
}

impl Row {
    fn steps(&self) -> u64 {
        self.outcome.completed * self.steps_per_workflow
    }

    fn lost(&self) -> u64 {
        self.outcome.started.saturating_sub(self.outcome.completed)
    }

    fn steps_per_s(&self) -> f64 {
        let secs = self.outcome.elapsed.as_secs_f64();
        if secs > 0.0 {
            self.steps() as f64 / secs
        } else {
            0.0
        }
    }
}

fn progress(line: String) {
    println!(".. {line}");
}

/// Runs the bench; `Ok(false)` when a workload lost or failed workflows.
pub fn run(args: BenchArgs) -> anyhow::Result<bool> {
    let plan = Plan::from(&args);
    let bin = match &args.baton_bin {
        Some(b) => b.clone(),
        None => std::env::current_exe()
            .context("cannot locate batonctl")?
            .with_file_name("baton"),
    };
    let spec = TargetSpec::LocalServer {
        bin,
        partitions: args.partitions,
    };

    progress("calibrating (fdatasync, loopback TCP)".into());
    let cal = Calibration::measure()?;
    print_calibration(&cal, &spec, &args);

    progress(format!("starting the target: {}", spec.describe()));
    let target = Target::start(&spec)?;
    let pids = target.pids();
    let url = target.url().to_owned();
    progress(format!("target up at {url} (pid {pids:?})"));

    let result = run_workloads(&url, &pids, &plan, &args);
    if result.is_err() {
        eprintln!("--- target log ---\n{}", target.log_tail());
    }
    let rows = result?;
    drop(target);

    print_table(&rows, cal.nproc);
    let mut ok = true;
    for r in &rows {
        if r.lost() > 0 || r.outcome.failed > 0 || r.outcome.errors > 0 {
            eprintln!(
                "batonctl bench: {} lost {}, failed {}, errors {}",
                r.name,
                r.lost(),
                r.outcome.failed,
                r.outcome.errors
            );
            ok = false;
        }
    }
    Ok(ok)
}

fn run_workloads(
    url: &str,
    pids: &[u32],
    plan: &Plan,
    args: &BenchArgs,
) -> anyhow::Result<Vec<Row>> {
    let admin = Client::new(url)?;
    let (task_defs, workflow_defs) = workloads::definitions();
    admin.register_task_defs(&task_defs)?;
    for def in &workflow_defs {
        admin.register_workflow(def)?;
    }
    let workers = Workers::start(url, workloads::TASK_TYPE, args.workers, args.batch)?;

    progress(format!("warm-up: {} x W1", plan.warmup));
    let warm = workloads::closed_loop(url, workloads::W1, 1, plan.warmup)?;
    if warm.completed != warm.started || warm.started == 0 {
        bail!(
            "warm-up: {} of {} workflows completed (errors {})",
            warm.completed,
            warm.started,
            warm.errors
        );
    }

    let mut rows = Vec::new();
    let measure = |name: &'static str,
                   what: String,
                   steps_per_workflow: u64,
                   body: &dyn Fn() -> anyhow::Result<Outcome>|
     -> anyhow::Result<Row> {
        progress(format!("{name}: {what}"));
        let cpu_before = stats::cpu_ms(pids);
        let outcome = body()?;
        let cpu_ms = stats::cpu_ms(pids).saturating_sub(cpu_before);
        let row = Row {
            name,
            what,
            steps_per_workflow,
            outcome,
            cpu_ms,
            rss_mib: stats::rss_mib(pids),
        };
        progress(format!(
            "{name}: completed {}/{} in {:.1} s, {}",
            row.outcome.completed,
            row.outcome.started,
            row.outcome.elapsed.as_secs_f64(),
            row.outcome.latency.summary(2)
        ));
        Ok(row)
    };

    rows.push(measure(
        "W1",
        format!("1 task, sequential, {} workflows", plan.w1_count),
        workloads::W1_STEPS,
        &|| workloads::closed_loop(url, workloads::W1, 1, plan.w1_count),
    )?);
    rows.push(measure(
        "W2",
        format!(
            "fork 3 + join, open loop {}/s for {} s",
            plan.rate,
            plan.w2_duration.as_secs()
        ),
        workloads::W2_STEPS,
        &|| {
            workloads::open_loop(
                url,
                workloads::W2,
                plan.rate,
                plan.w2_duration,
                plan.drain,
                &progress,
            )
        },
    )?);
    rows.push(measure(
        "W3",
        format!(
            "10-task chain, {} in flight, {} workflows",
            plan.w3_parallel, plan.w3_count
        ),
        workloads::W3_STEPS,
        &|| workloads::closed_loop(url, workloads::W3, plan.w3_parallel, plan.w3_count),
    )?);

    let errors = workers
        .counters
        .errors
        .load(std::sync::atomic::Ordering::Relaxed);
    let tasks = workers
        .counters
        .completed
        .load(std::sync::atomic::Ordering::Relaxed);
    workers.stop();
    progress(format!(
        "workers: {tasks} tasks completed (warm-up included), {errors} failed requests"
    ));
    Ok(rows)
}

fn print_calibration(cal: &Calibration, spec: &TargetSpec, args: &BenchArgs) {
    println!();
    println!("calibration");
    println!("  git commit        {}", cal.git);
    println!("  nproc             {}", cal.nproc);
    println!("  target            {}", spec.describe());
    let TargetSpec::LocalServer { bin, .. } = spec;
    println!(
        "  baton binary      {} (a target/debug build is unoptimised: compare release builds)",
        bin.display()
    );
    println!("  fsync mode        {FSYNC_MODE}");
    println!("  payload           {{}} input, {{\"ok\":true}} output per task");
    println!(
        "  workers           {} HTTP threads in-process, batch poll of {}",
        args.workers, args.batch
    );
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

fn print_table(rows: &[Row], nproc: usize) {
    let mut cells: Vec<Vec<String>> = vec![[
        "workload",
        "started",
        "completed",
        "failed",
        "lost",
        "steps/s",
        "steps/s/core",
        "p50_ms",
        "p99_ms",
        "p99.9_ms",
        "cpu_ms/1k_steps",
        "rss_MiB",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect()];
    for r in rows {
        let o = &r.outcome;
        let steps = r.steps();
        let cpu_per_k = if steps > 0 {
            format!("{:.0}", r.cpu_ms as f64 * 1_000.0 / steps as f64)
        } else {
            "-".into()
        };
        cells.push(vec![
            r.name.to_owned(),
            o.started.to_string(),
            o.completed.to_string(),
            o.failed.to_string(),
            r.lost().to_string(),
            format!("{:.0}", r.steps_per_s()),
            format!("{:.0}", r.steps_per_s() / nproc as f64),
            format!("{:.2}", o.latency.ms(0.50)),
            format!("{:.2}", o.latency.ms(0.99)),
            format!("{:.2}", o.latency.ms(0.999)),
            cpu_per_k,
            format!("{:.0}", r.rss_mib),
        ]);
    }
    let mut width = vec![0; cells[0].len()];
    for row in &cells {
        for (w, c) in width.iter_mut().zip(row) {
            *w = (*w).max(c.len());
        }
    }
    println!();
    println!("results");
    for row in &cells {
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
        println!("{}", line.join("  "));
    }
    println!();
    for r in rows {
        let mut note = format!("{}: {}", r.name, r.what);
        if r.name == "W3" && r.outcome.completed > 0 {
            let per_step = r.outcome.latency.ms(0.50) / r.steps_per_workflow as f64;
            let _ = std::fmt::Write::write_fmt(
                &mut note,
                format_args!("; per-step overhead (p50 workflow / 10) {per_step:.2} ms"),
            );
        }
        if r.outcome.errors > 0 {
            let _ = std::fmt::Write::write_fmt(
                &mut note,
                format_args!("; {} request errors", r.outcome.errors),
            );
        }
        println!("  {note}");
    }
    println!("  latency: W1/W3 from start request to COMPLETED observed; W2 from the scheduled");
    println!("  arrival. Completion is seen by status polls (1-10 ms apart), whose CPU the target");
    println!("  pays and which is included in cpu_ms/1k_steps. One repetition: no spread yet.");
}
