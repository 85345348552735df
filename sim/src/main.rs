//! `baton-sim`: runs the deterministic simulation for one seed or a range of seeds.
//!
//! ```text
//! baton-sim --seed 42                       # one run: trace hash and summary
//! baton-sim --seeds 0..100 --check-determinism   # each seed twice, hashes must match
//! ```
//! With `--seeds`, every run is its own process (`--seed S --report-json`), several at once.
//! Exit status 1 when any run broke an invariant (or two runs of a seed differed); the exact
//! command that replays a failing seed is printed.

use clap::Parser;
use sim::counters::Counter;
use std::collections::BTreeMap;
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "baton-sim",
    about = "Deterministic simulation of a Baton cluster"
)]
struct Args {
    /// The seed of one run.
    #[arg(long, conflicts_with = "seeds")]
    seed: Option<u64>,
    /// A range of seeds, `A..B` (B excluded).
    #[arg(long)]
    seeds: Option<String>,
    #[arg(long, default_value_t = 3)]
    nodes: u64,
    #[arg(long, default_value_t = 2)]
    partitions: u16,
    #[arg(long, default_value_t = 40)]
    workflows: usize,
    /// Faults on or off.
    #[arg(long, default_value = "on")]
    faults: String,
    /// Length of the safety phase in simulated seconds.
    #[arg(long, default_value_t = 30)]
    safety_secs: u64,
    /// Bound of the liveness phase in simulated seconds.
    #[arg(long, default_value_t = 60)]
    liveness_secs: u64,
    /// `concurrentExecLimit` of the workload's `sim_work` tasks; the run then checks that it held.
    #[arg(long)]
    concurrency_limit: Option<u32>,
    /// Run each seed twice and require equal trace hashes.
    #[arg(long)]
    check_determinism: bool,
    /// Require every "sometimes" counter to be non-zero over the seeds run.
    #[arg(long)]
    require_coverage: bool,
    /// Print each run's summary, not only failures.
    #[arg(long)]
    verbose: bool,
    /// Turn on one deliberate bug (ack-before-flush, accept-without-fence, join-on-first-branch):
    /// the run must then break an invariant.
    #[arg(long)]
    mutation: Option<String>,
    /// With --seeds: stop at the first seed that breaks an invariant and succeed only if one did
    /// (the mutation check: the bug must be caught within the seeds).
    #[arg(long)]
    until_caught: bool,
    /// Runs at once with --seeds (default: the number of cores).
    #[arg(long)]
    jobs: Option<usize>,
    /// Print the run's report as one JSON line (how --seeds collects its child runs).
    #[arg(long, hide = true)]
    report_json: bool,
}

fn parse_range(s: &str) -> Result<std::ops::Range<u64>, String> {
    let (a, b) = s
        .split_once("..")
        .ok_or_else(|| format!("--seeds must look like A..B, not {s}"))?;
    let a: u64 = a.parse().map_err(|_| format!("bad seed {a}"))?;
    let b: u64 = b.parse().map_err(|_| format!("bad seed {b}"))?;
    if b <= a {
        return Err(format!("empty seed range {s}"));
    }
    Ok(a..b)
}

fn replay_command(args: &Args, seed: u64) -> String {
    let mutation = args
        .mutation
        .as_deref()
        .map(|m| format!(" --mutation {m}"))
        .unwrap_or_default();
    let limit = args
        .concurrency_limit
        .map(|n| format!(" --concurrency-limit {n}"))
        .unwrap_or_default();
    format!(
        "sim/run --seed {seed} --nodes {} --partitions {} --workflows {} --faults {} --safety-secs {} --liveness-secs {}{mutation}{limit}",
        args.nodes, args.partitions, args.workflows, args.faults, args.safety_secs, args.liveness_secs
    )
}

fn summary(r: &sim::Report) -> String {
    let faults: Vec<String> = r.faults.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let outcomes: Vec<String> = r.outcomes.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!(
        "seed {} trace {:016x} sim {:.1}s steps {} started {} [{}] faults [{}] violations {}",
        r.seed,
        r.trace_hash,
        r.sim_ms as f64 / 1000.0,
        r.steps,
        r.started,
        outcomes.join(" "),
        faults.join(" "),
        r.violations.len()
    )
}

/// One run's outcome as a child process reports it (one JSON line on stdout).
struct Outcome {
    seed: u64,
    trace: String,
    summary: String,
    counters: Vec<(String, u64)>,
    violations: Vec<String>,
}

fn report_json(r: &sim::Report) -> String {
    serde_json::json!({
        "seed": r.seed,
        "trace": format!("{:016x}", r.trace_hash),
        "summary": summary(r),
        "counters": r.counters.iter().map(|(c, v)| (c.label(), *v)).collect::<Vec<_>>(),
        "violations": r.violations.iter().map(|v| v.to_string()).collect::<Vec<_>>(),
    })
    .to_string()
}

fn parse_outcome(seed: u64, stdout: &str) -> Result<Outcome, String> {
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .ok_or_else(|| format!("seed {seed}: the run printed no report"))?;
    let v: serde_json::Value =
        serde_json::from_str(line).map_err(|e| format!("seed {seed}: bad report: {e}"))?;
    let strings = |key: &str| -> Vec<String> {
        v[key]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    Ok(Outcome {
        seed,
        trace: v["trace"].as_str().unwrap_or_default().to_owned(),
        summary: v["summary"].as_str().unwrap_or_default().to_owned(),
        counters: v["counters"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|p| Some((p[0].as_str()?.to_owned(), p[1].as_u64()?)))
                    .collect()
            })
            .unwrap_or_default(),
        violations: strings("violations"),
    })
}

/// Runs one seed in a fresh process: tokio's task ids and ractor's actor ids are process-wide
/// counters, so only a fresh process replays a seed exactly (the same way `--seed` does).
fn run_child(args: &Args, seed: u64) -> Result<Outcome, String> {
    let exe = std::env::current_exe().map_err(|e| format!("own executable: {e}"))?;
    let output = std::process::Command::new(exe)
        .args(["--seed", &seed.to_string(), "--report-json"])
        .args(["--nodes", &args.nodes.to_string()])
        .args(["--partitions", &args.partitions.to_string()])
        .args(["--workflows", &args.workflows.to_string()])
        .args(["--faults", &args.faults])
        .args(["--safety-secs", &args.safety_secs.to_string()])
        .args(["--liveness-secs", &args.liveness_secs.to_string()])
        .args(
            args.mutation
                .iter()
                .flat_map(|m| ["--mutation", m.as_str()]),
        )
        .args(
            args.concurrency_limit
                .iter()
                .flat_map(|n| ["--concurrency-limit".to_owned(), n.to_string()]),
        )
        .output()
        .map_err(|e| format!("seed {seed}: cannot run: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    parse_outcome(seed, &stdout).map_err(|e| {
        format!(
            "{e}; exit {:?}; stderr: {}",
            output.status.code(),
            String::from_utf8_lossy(&output.stderr)
                .lines()
                .rev()
                .take(5)
                .collect::<Vec<_>>()
                .join(" | ")
        )
    })
}

/// Log lines carry the simulated time (seconds since the run began), which is what a replay
/// reproduces; wall-clock stamps mean nothing in a simulation.
struct SimTime;

impl tracing_subscriber::fmt::time::FormatTime for SimTime {
    fn format_time(&self, w: &mut tracing_subscriber::fmt::format::Writer<'_>) -> std::fmt::Result {
        match turmoil::sim_elapsed() {
            Some(t) => write!(w, "sim {:>9.3}s", t.as_secs_f64()),
            None => write!(w, "sim         -"),
        }
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("BATON_SIM_LOG")
                .unwrap_or_else(|_| "off".into()),
        )
        .with_writer(std::io::stderr)
        .with_timer(SimTime)
        .init();
    let faults = match args.faults.as_str() {
        "on" => true,
        "off" => false,
        other => {
            eprintln!("--faults must be on or off, not {other}");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = sim::mutation::activate(args.mutation.as_deref()) {
        eprintln!("{e}");
        return ExitCode::from(2);
    }
    if let (Some(seed), None) = (args.seed, &args.seeds) {
        return run_one(&args, seed, faults);
    }
    let seeds = match args.seeds.as_deref().map(parse_range) {
        Some(Ok(r)) => r,
        Some(Err(e)) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
        None => 0..1,
    };
    run_many(&args, seeds)
}

/// One seed in this process: the summary, every counter, the violations and the replay command.
fn run_one(args: &Args, seed: u64, faults: bool) -> ExitCode {
    let config = sim::Config {
        seed,
        nodes: args.nodes,
        partitions: args.partitions,
        workflows: args.workflows,
        faults,
        safety_ms: args.safety_secs * 1_000,
        liveness_ms: args.liveness_secs * 1_000,
        concurrency_limit: args.concurrency_limit,
    };
    let report = sim::run(&config);
    if args.report_json {
        println!("{}", report_json(&report));
        return ExitCode::SUCCESS;
    }
    println!("{}", summary(&report));
    for (c, v) in &report.counters {
        println!("  {:<48} {v}", c.label());
    }
    for v in &report.violations {
        println!("  VIOLATION {v}");
    }
    if report.violations.is_empty() {
        ExitCode::SUCCESS
    } else {
        println!("  replay: {}", replay_command(args, seed));
        ExitCode::from(1)
    }
}

/// The mutation check: seeds in order, each in its own process, until one breaks an invariant.
fn until_caught(args: &Args, seeds: std::ops::Range<u64>) -> ExitCode {
    let started = std::time::Instant::now();
    for seed in seeds.clone() {
        match run_child(args, seed) {
            Ok(o) if !o.violations.is_empty() => {
                println!("{}", o.summary);
                for v in o.violations.iter().take(5) {
                    println!("  VIOLATION {v}");
                }
                println!(
                    "caught by seed {seed} after {} seeds in {:.1}s; replay: {}",
                    seed - seeds.start + 1,
                    started.elapsed().as_secs_f64(),
                    replay_command(args, seed)
                );
                return ExitCode::SUCCESS;
            }
            Ok(_) => {}
            Err(e) => {
                println!("seed {seed}: {e}");
                return ExitCode::from(1);
            }
        }
    }
    println!(
        "not caught by any of seeds {}..{} ({:.1}s)",
        seeds.start,
        seeds.end,
        started.elapsed().as_secs_f64()
    );
    ExitCode::from(1)
}

/// Many seeds, each in its own process, as many at once as there are cores.
fn run_many(args: &Args, seeds: std::ops::Range<u64>) -> ExitCode {
    if args.until_caught {
        return until_caught(args, seeds);
    }
    let started = std::time::Instant::now();
    let jobs = args.jobs.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    // Each seed once, or twice when checking determinism.
    let mut work: Vec<u64> = Vec::new();
    for seed in seeds.clone() {
        work.push(seed);
        if args.check_determinism {
            work.push(seed);
        }
    }
    let by_seed = run_children(args, work, jobs);
    let mut failed = Vec::new();
    let mut totals: BTreeMap<String, u64> = BTreeMap::new();
    for (seed, outcomes) in &by_seed {
        if !check_seed(args, *seed, outcomes, &mut totals) {
            failed.push(*seed);
        }
    }
    let runs = seeds.end - seeds.start;
    println!(
        "{runs} seeds ({} runs, {jobs} at a time) in {:.1}s: {} failed{}",
        by_seed.values().map(Vec::len).sum::<usize>(),
        started.elapsed().as_secs_f64(),
        failed.len(),
        if failed.is_empty() {
            String::new()
        } else {
            format!(" {failed:?}")
        }
    );
    let uncovered = print_counters(&totals);
    if args.require_coverage && !uncovered.is_empty() {
        println!("never exercised: {}", uncovered.join(", "));
        return ExitCode::from(1);
    }
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// Runs the seeds of `work` in child processes, `jobs` at once; the outcomes of each seed.
fn run_children(
    args: &Args,
    work: Vec<u64>,
    jobs: usize,
) -> BTreeMap<u64, Vec<Result<Outcome, String>>> {
    let queue = std::sync::Mutex::new(work.into_iter());
    let results = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            scope.spawn(|| loop {
                let next = queue.lock().unwrap_or_else(|e| e.into_inner()).next();
                let Some(seed) = next else { break };
                let outcome = run_child(args, seed);
                results
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((seed, outcome));
            });
        }
    });
    let mut by_seed: BTreeMap<u64, Vec<Result<Outcome, String>>> = BTreeMap::new();
    for (seed, outcome) in results.into_inner().unwrap_or_else(|e| e.into_inner()) {
        by_seed.entry(seed).or_default().push(outcome);
    }
    by_seed
}

/// Checks the runs of one seed (violations, errors, differing trace hashes), prints its summary
/// when verbose or failed, and adds its first run's counters to `totals`. True if it passed.
fn check_seed(
    args: &Args,
    seed: u64,
    outcomes: &[Result<Outcome, String>],
    totals: &mut BTreeMap<String, u64>,
) -> bool {
    let mut problems = Vec::new();
    let mut traces = Vec::new();
    let mut summary_line = None;
    for outcome in outcomes {
        match outcome {
            Ok(o) => {
                traces.push(o.trace.clone());
                problems.extend(o.violations.iter().cloned());
                summary_line.get_or_insert_with(|| o.summary.clone());
                if traces.len() == 1 {
                    for (c, v) in &o.counters {
                        *totals.entry(c.clone()).or_default() += v;
                    }
                }
                debug_assert_eq!(o.seed, seed);
            }
            Err(e) => problems.push(e.clone()),
        }
    }
    problems.dedup();
    if traces.windows(2).any(|w| w[0] != w[1]) {
        problems.push(format!(
            "nondeterminism: trace hashes {}",
            traces.join(" then ")
        ));
    }
    if args.verbose || !problems.is_empty() {
        if let Some(line) = &summary_line {
            println!("{line}");
        }
    }
    if problems.is_empty() {
        return true;
    }
    for p in &problems {
        println!("  VIOLATION {p}");
    }
    println!("  replay: {}", replay_command(args, seed));
    false
}

/// Prints every "sometimes" counter summed over the seeds; returns the required ones that stayed
/// at zero.
fn print_counters(totals: &BTreeMap<String, u64>) -> Vec<&'static str> {
    println!("sometimes counters over all seeds:");
    for c in Counter::ALL {
        println!(
            "  {:<48} {}",
            c.label(),
            totals.get(c.label()).copied().unwrap_or(0)
        );
    }
    Counter::ALL
        .iter()
        .filter(|c| c.required())
        .map(|c| c.label())
        .filter(|l| totals.get(*l).copied().unwrap_or(0) == 0)
        .collect()
}
