//! `batonctl`: operate a Baton node through its HTTP API (it links no engine internals).
//!
//! `--url` names the node to talk to; any member answers for the whole cluster.
//!
//! - `status`: every Raft group hosted on the node: role, term, leader, log and applied index.
//! - `health`: the node's health.
//! - `workflow <id>`: a workflow's status and its tasks.
//! - `cluster`: the members (address, active or draining, live, replicas, leaderships) and every
//!   group (leader, term, voters, learners, each replica's role, applied index and lag).
//! - `add <id> <addr>`: add a member whose peer (QUIC) address is `addr` (what `--join` does).
//! - `drain <id> [--undo] [--wait [--timeout S]]`: move a member's replicas and leaderships to the
//!   other members (`--undo` makes it active again); `--wait` follows the drain until the member
//!   holds no replica, no leadership and no meta vote.
//! - `remove <id>`: forget a drained member (refused while it still holds replicas).
//! - `transfer <partition> [--to N]`: move a partition's leadership (to voter N); prints the new
//!   leader.
//! - `snapshot`: snapshot (and compact) every group hosted on the node.
//!
//! - `dsl apply|list|start|get`: Serverless Workflow documents and instances (see [`dsl`]).
//! - `upgrade status|finalize`: the cluster's active version and each member's binary, and
//!   activating a version (see [`upgrade`]).
//!
//! - `bench [--quick]`: start a local `baton server` and measure it (see [`bench`]).

mod bench;
mod dsl;
mod upgrade;

use anyhow::{bail, Context};
use clap::{Parser, Subcommand};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// How often `drain --wait` looks at the cluster.
const DRAIN_POLL: Duration = Duration::from_millis(500);

#[derive(Parser)]
#[command(name = "batonctl", version, about = "Operate a Baton node")]
struct Cli {
    /// The node's HTTP address (`https://...` for a node serving HTTPS).
    #[arg(long, global = true, default_value = "http://127.0.0.1:8080")]
    url: String,
    /// The certificates (PEM, one or a bundle) to trust for an `https` --url: the node's own
    /// when self-signed, its CA's, or the system's bundle (/etc/ssl/certs/ca-certificates.crt).
    #[arg(long, global = true, value_name = "PEM")]
    ca_cert: Option<std::path::PathBuf>,
    /// An access key (JSON: `{"keyId", "keySecret"}` as `baton server --auth` writes the
    /// administrator's, or `{"id", "secret"}` as a key is answered when made), exchanged for a
    /// token that every request then carries: for a node with access control on.
    #[arg(long, global = true, value_name = "FILE")]
    key_file: Option<std::path::PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Every Raft group on the node: role, term, leader, last log and applied index.
    Status,
    /// The node's health.
    Health,
    /// A workflow's status and tasks.
    Workflow { id: String },
    /// The cluster's members and groups (leader, term, voters, learners, replicas and their lag).
    Cluster,
    /// Add a member to the cluster.
    Add {
        /// The new node's id.
        id: u64,
        /// Its peer (QUIC) address, ip:port.
        addr: String,
    },
    /// Drain a member: its replicas and leaderships move to the other members.
    Drain {
        id: u64,
        /// Make the member active again.
        #[arg(long, conflicts_with = "wait")]
        undo: bool,
        /// Wait until the member holds no replica, no leadership and no meta vote.
        #[arg(long)]
        wait: bool,
        /// With --wait: give up (exit non-zero) after this many seconds.
        #[arg(long, default_value_t = 300, requires = "wait")]
        timeout: u64,
    },
    /// Forget a drained member.
    Remove { id: u64 },
    /// Move a partition's leadership.
    Transfer {
        partition: u16,
        /// The new leader (a voter of the partition); by default the voter leading the fewest.
        #[arg(long)]
        to: Option<u64>,
    },
    /// Snapshot (and compact) every group hosted on the node given by --url.
    Snapshot,
    /// Serverless Workflow documents and instances.
    Dsl {
        #[command(subcommand)]
        command: dsl::DslCommand,
    },
    /// The cluster's versions: `status`, and `finalize` to activate one.
    Upgrade {
        #[command(subcommand)]
        command: upgrade::UpgradeCommand,
    },
    /// Start a local baton server and benchmark it (ignores --url).
    Bench(Box<bench::BenchArgs>),
}

/// A non-2xx answer: the status and the server's message.
#[derive(Debug)]
struct ApiError {
    request: String,
    status: StatusCode,
    message: String,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}: {}", self.request, self.status, self.message)
    }
}

impl std::error::Error for ApiError {}

/// A client trusting `ca_cert`'s certificates (besides the system's), sending `headers`.
fn http_client(
    ca_cert: Option<&std::path::Path>,
    headers: reqwest::header::HeaderMap,
) -> anyhow::Result<reqwest::blocking::Client> {
    let mut builder = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(60))
        .default_headers(headers);
    if let Some(path) = ca_cert {
        let pem = std::fs::read(path)
            .with_context(|| format!("cannot read --ca-cert {}", path.display()))?;
        let certificates = reqwest::Certificate::from_pem_bundle(&pem)
            .with_context(|| format!("--ca-cert {} holds no PEM certificate", path.display()))?;
        for certificate in certificates {
            builder = builder.add_root_certificate(certificate);
        }
    }
    builder.build().context("cannot build the HTTP client")
}

/// The node's HTTP API.
struct Api {
    http: reqwest::blocking::Client,
    base: String,
}

impl Api {
    /// The API at `url`, trusting `ca_cert`'s certificates; with `key_file`, every request
    /// carries a token for that key.
    fn new(
        url: &str,
        ca_cert: Option<&std::path::Path>,
        key_file: Option<&std::path::Path>,
    ) -> anyhow::Result<Self> {
        let base = url.trim_end_matches('/').to_owned();
        let api = Self {
            http: http_client(ca_cert, reqwest::header::HeaderMap::new())?,
            base,
        };
        let Some(key_file) = key_file else {
            return Ok(api);
        };
        let mut headers = reqwest::header::HeaderMap::new();
        let token = api.token(key_file)?;
        headers.insert(
            "x-authorization",
            token.parse().context("a token is a header value")?,
        );
        Ok(Self {
            http: http_client(ca_cert, headers)?,
            base: api.base,
        })
    }

    /// A token for the access key in `key_file` (`POST /api/token`).
    fn token(&self, key_file: &std::path::Path) -> anyhow::Result<String> {
        let text = std::fs::read_to_string(key_file)
            .with_context(|| format!("cannot read --key-file {}", key_file.display()))?;
        let key: Value = serde_json::from_str(&text)
            .with_context(|| format!("--key-file {} is not JSON", key_file.display()))?;
        let field = |a: &str, b: &str| key.get(a).or_else(|| key.get(b)).cloned();
        let body = serde_json::json!({
            "keyId": field("keyId", "id").context("the key file names no keyId")?,
            "keySecret": field("keySecret", "secret").context("the key file holds no keySecret")?,
        });
        let answer = self.call(Method::POST, "/api/token", Some(&body))?;
        let token = answer["token"]
            .as_str()
            .context("POST /api/token answered no token")?;
        Ok(token.to_owned())
    }

    /// Sends a request (with an optional JSON body) and answers the status and the body: `null`
    /// when empty (204), the JSON otherwise (an error's non-JSON body as a string).
    fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<(StatusCode, Value)> {
        let url = format!("{}{path}", self.base);
        let mut request = self.http.request(method.clone(), &url);
        if let Some(body) = body {
            request = request.json(body);
        }
        let resp = request
            .send()
            .with_context(|| format!("cannot reach {url}"))?;
        let status = resp.status();
        let text = resp
            .text()
            .with_context(|| format!("{method} {url}: reading the answer"))?;
        let value = if text.trim().is_empty() {
            Value::Null
        } else {
            match serde_json::from_str(&text) {
                Ok(v) => v,
                Err(_) if !status.is_success() => Value::String(text.trim().to_owned()),
                Err(e) => bail!("{method} {url} did not answer JSON: {e}"),
            }
        };
        Ok((status, value))
    }

    /// [`Api::send`], with any non-2xx status an [`ApiError`] carrying the server's message.
    fn call(&self, method: Method, path: &str, body: Option<&Value>) -> anyhow::Result<Value> {
        self.call_accepting(method, path, body, &[])
    }

    /// [`Api::call`], also answering the body of the statuses in `accept`.
    fn call_accepting(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        accept: &[StatusCode],
    ) -> anyhow::Result<Value> {
        let (status, value) = self.send(method.clone(), path, body)?;
        if status.is_success() || accept.contains(&status) {
            return Ok(value);
        }
        let message = match &value {
            Value::String(s) => s.clone(),
            v => v
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .unwrap_or_else(|| status.canonical_reason().unwrap_or("").to_owned()),
        };
        Err(ApiError {
            request: format!("{method} {}{path}", self.base),
            status,
            message,
        }
        .into())
    }

    fn get(&self, path: &str) -> anyhow::Result<Value> {
        self.call(Method::GET, path, None)
    }

    fn post(&self, path: &str, body: Option<&Value>) -> anyhow::Result<Value> {
        self.call(Method::POST, path, body)
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A list of node ids as `1,2,3` (`-` when empty).
fn ids(v: &Value) -> String {
    let list: Vec<String> = v.as_array().into_iter().flatten().map(text).collect();
    if list.is_empty() {
        "-".into()
    } else {
        list.join(",")
    }
}

fn yes_no(v: &Value) -> &'static str {
    if v.as_bool().unwrap_or(false) {
        "yes"
    } else {
        "no"
    }
}

/// Prints `rows` as columns two spaces apart; `right[i]` right-aligns column `i`. The last column
/// is not padded.
fn table(rows: &[Vec<String>], right: &[bool]) {
    let mut width: Vec<usize> = Vec::new();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            let n = cell.chars().count();
            match width.get_mut(i) {
                Some(w) => *w = (*w).max(n),
                None => width.push(n),
            }
        }
    }
    for row in rows {
        let mut line = String::new();
        for (i, (cell, w)) in row.iter().zip(&width).enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            let _ = if right.get(i).copied().unwrap_or(false) {
                write!(line, "{cell:>w$}")
            } else {
                write!(line, "{cell:<w$}")
            };
        }
        println!("{}", line.trim_end());
    }
}

/// `batonctl cluster`: the members table, then the groups table.
fn print_cluster(cluster: &Value) {
    let mut members = vec![["id", "addr", "state", "live", "replicas", "leads"]
        .map(String::from)
        .to_vec()];
    for n in cluster["nodes"].as_array().into_iter().flatten() {
        let draining = n["draining"].as_bool().unwrap_or(false);
        members.push(vec![
            text(&n["id"]),
            text(&n["addr"]),
            (if draining { "draining" } else { "active" }).into(),
            yes_no(&n["live"]).into(),
            text(&n["replicas"]),
            text(&n["leads"]),
        ]);
    }
    if members.len() == 1 {
        println!("no members recorded (a node started without --cluster runs alone)");
    } else {
        table(&members, &[true, false, false, false, true, true]);
    }
    println!();

    // Each replica as `node:role applied lag`, its fields aligned across every group.
    let groups: Vec<&Value> = cluster["groups"].as_array().into_iter().flatten().collect();
    let fields = |r: &Value| {
        (
            format!("{}:{}", text(&r["node"]), text(&r["role"])),
            text(&r["applied"]),
            text(&r["lag"]),
        )
    };
    let replicas = || {
        groups
            .iter()
            .flat_map(|g| g["replicas"].as_array().into_iter().flatten())
    };
    let (mut w_role, mut w_applied, mut w_lag) = (0, 0, 0);
    for (role, applied, lag) in replicas().map(fields) {
        w_role = w_role.max(role.chars().count());
        w_applied = w_applied.max(applied.len());
        w_lag = w_lag.max(lag.len());
    }
    let mut rows = vec![[
        "group",
        "leader",
        "term",
        "voters",
        "learners",
        "replicas (node:role applied lag)",
    ]
    .map(String::from)
    .to_vec()];
    for g in &groups {
        let replicas: Vec<String> = g["replicas"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| {
                let (role, applied, lag) = fields(r);
                format!("{role:<w_role$} {applied:>w_applied$} {lag:>w_lag$}")
            })
            .collect();
        rows.push(vec![
            text(&g["name"]),
            text(&g["leader"]),
            text(&g["term"]),
            ids(&g["voters"]),
            ids(&g["learners"]),
            replicas.join("   "),
        ]);
    }
    if rows.len() == 1 {
        println!("no groups reported");
    } else {
        table(&rows, &[false, true, true, false, false, false]);
    }
}

/// Where a drain stands, from `GET /api/admin/cluster`.
enum DrainState {
    /// No replica, leadership, group membership or meta vote left.
    Done,
    /// The node is no longer a member.
    Gone,
    /// What it still holds, as a progress line.
    Holds(String),
}

fn drain_state(cluster: &Value, id: u64) -> DrainState {
    let nodes: Vec<&Value> = cluster["nodes"].as_array().into_iter().flatten().collect();
    let Some(node) = nodes.iter().find(|n| n["id"].as_u64() == Some(id)) else {
        if nodes.is_empty() {
            return DrainState::Holds("the cluster reports no members".into());
        }
        return DrainState::Gone;
    };
    let replicas = node["replicas"].as_u64().unwrap_or(0);
    let leads = node["leads"].as_u64().unwrap_or(0);
    let live = node["live"].as_bool().unwrap_or(false);
    let has = |list: &Value| {
        list.as_array()
            .into_iter()
            .flatten()
            .any(|v| v.as_u64() == Some(id))
    };
    let groups: Vec<&Value> = cluster["groups"].as_array().into_iter().flatten().collect();
    let meta = groups.iter().find(|g| g["name"] == "meta");
    let meta_led = meta.is_some_and(|g| !g["leader"].is_null());
    let meta_vote = meta.is_some_and(|g| has(&g["voters"]));
    // A replica of a node that does not answer is not counted in `replicas`; the leaders' member
    // lists still name it.
    let member_of = groups
        .iter()
        .filter(|g| g["name"] != "meta" && (has(&g["voters"]) || has(&g["learners"])))
        .count();
    let leaderless = groups.iter().filter(|g| g["leader"].is_null()).count();
    if replicas == 0 && leads == 0 && member_of == 0 && meta_led && !meta_vote && leaderless == 0 {
        return DrainState::Done;
    }
    let mut line = format!(
        "replicas {replicas}, leads {leads}, meta voter {}",
        if !meta_led {
            "unknown"
        } else if meta_vote {
            "yes"
        } else {
            "no"
        }
    );
    if member_of as u64 > replicas {
        let _ = write!(line, ", member of {member_of} partitions");
    }
    if leaderless > 0 {
        let _ = write!(line, ", leaderless groups {leaderless}");
    }
    if !live {
        line.push_str(", not answering");
    }
    DrainState::Holds(line)
}

/// `drain --wait`: polls the cluster until node `id` is drained, printing what it still holds
/// whenever that changes.
fn wait_drained(api: &Api, id: u64, timeout: Duration) -> anyhow::Result<()> {
    let start = Instant::now();
    let mut last: Option<String> = None;
    loop {
        let line = match api.get("/api/admin/cluster").map(|c| drain_state(&c, id)) {
            Ok(DrainState::Done) => {
                println!(
                    "[{:>4}s] node {id} is drained; `batonctl remove {id}` forgets it",
                    start.elapsed().as_secs()
                );
                return Ok(());
            }
            Ok(DrainState::Gone) => {
                println!("node {id} is no longer a member");
                return Ok(());
            }
            Ok(DrainState::Holds(line)) => line,
            Err(e) => format!("cannot read the cluster: {e:#}"),
        };
        if last.as_deref() != Some(line.as_str()) {
            println!("[{:>4}s] node {id}: {line}", start.elapsed().as_secs());
            last = Some(line);
        }
        if start.elapsed() >= timeout {
            bail!(
                "node {id} is not drained after {}s ({}); the drain goes on, `batonctl cluster` \
                 shows where it stands",
                timeout.as_secs(),
                last.unwrap_or_default()
            );
        }
        std::thread::sleep(DRAIN_POLL);
    }
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("batonctl: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The node's health report (an unhealthy node answers 503 with the same report).
fn health_of(api: &Api) -> anyhow::Result<serde_json::Value> {
    api.call_accepting(
        Method::GET,
        "/health",
        None,
        &[StatusCode::SERVICE_UNAVAILABLE],
    )
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let api = Api::new(&cli.url, cli.ca_cert.as_deref(), cli.key_file.as_deref())?;
    match cli.command {
        Command::Status => print_status(&api)?,
        Command::Health => {
            let health = health_of(&api)?;
            println!("{}", serde_json::to_string_pretty(&health)?);
        }
        Command::Workflow { id } => print_workflow(&api, &id)?,
        Command::Cluster => print_cluster(&api.get("/api/admin/cluster")?),
        Command::Add { id, addr } => {
            api.post("/api/admin/nodes", Some(&json!({"id": id, "addr": addr})))?;
            println!("node {id} added at {addr}; replicas move to it as the cluster rebalances");
        }
        Command::Drain {
            id,
            undo,
            wait,
            timeout,
        } => drain(&api, id, undo, wait.then(|| Duration::from_secs(timeout)))?,
        Command::Remove { id } => remove(&api, id)?,
        Command::Transfer { partition, to } => {
            let query = to.map(|n| format!("?to={n}")).unwrap_or_default();
            let answer = api.post(
                &format!("/api/admin/partitions/{partition}/transfer{query}"),
                None,
            )?;
            println!(
                "partition {}: leader is now node {}",
                text(&answer["partition"]),
                text(&answer["to"])
            );
        }
        Command::Snapshot => {
            api.post("/api/admin/snapshot", None)?;
            println!("snapshot taken of every group on {}", api.base);
        }
        Command::Dsl { command } => dsl::run(&api, command)?,
        Command::Upgrade { command } => upgrade::run(&api, command)?,
        Command::Bench(args) => {
            if !bench::run(*args)? {
                bail!("the benchmark lost or failed workflows");
            }
        }
    }
    Ok(())
}

/// `status`: every group on the node, then the partitions led here that cannot run and the
/// records set aside.
fn print_status(api: &Api) -> anyhow::Result<()> {
    let groups = api.get("/api/admin/status")?;
    println!(
        "{:<6} {:<9} {:>5} {:>7} {:>9} {:>9} {:>9}",
        "group", "role", "term", "leader", "last_log", "applied", "snapshot"
    );
    for g in groups.as_array().into_iter().flatten() {
        println!(
            "{:<6} {:<9} {:>5} {:>7} {:>9} {:>9} {:>9}",
            text(&g["name"]),
            text(&g["role"]),
            text(&g["term"]),
            text(&g["leader"]),
            text(&g["last_log_index"]),
            text(&g["last_applied_index"]),
            text(&g["snapshot_index"]),
        );
    }
    // Partitions led here that cannot run, and records set aside: both need an operator.
    let health = health_of(api)?;
    for p in health["partitionsStopped"].as_array().into_iter().flatten() {
        println!(
            "partition {} cannot run: {}",
            text(&p["partition"]),
            text(&p["reason"])
        );
    }
    let quarantined = api.get("/api/admin/quarantine")?;
    for q in quarantined.as_array().into_iter().flatten() {
        println!(
            "quarantined: workflow {} (partition {}): {}",
            text(&q["workflowId"]),
            text(&q["partition"]),
            text(&q["reason"])
        );
    }
    Ok(())
}

/// `workflow <id>`: the workflow's status and one line per task.
fn print_workflow(api: &Api, id: &str) -> anyhow::Result<()> {
    let wf = api.get(&format!("/api/workflow/{id}?includeTasks=true"))?;
    println!(
        "{} {} v{} {}",
        text(&wf["workflowId"]),
        text(&wf["workflowName"]),
        text(&wf["workflowVersion"]),
        text(&wf["status"])
    );
    for t in wf["tasks"].as_array().into_iter().flatten() {
        println!(
            "  {:>3} {:<24} {:<22} attempt {} {}",
            text(&t["seq"]),
            text(&t["referenceTaskName"]),
            text(&t["status"]),
            text(&t["retryCount"]),
            text(&t["taskId"])
        );
    }
    Ok(())
}

/// `drain <id>`: starts draining the member (or, with `undo`, makes it active again); with
/// `wait`, follows the drain for up to that long.
fn drain(api: &Api, id: u64, undo: bool, wait: Option<Duration>) -> anyhow::Result<()> {
    if undo {
        api.post(&format!("/api/admin/nodes/{id}/drain?undo=true"), None)?;
        println!("node {id} is active again");
    } else {
        api.post(&format!("/api/admin/nodes/{id}/drain"), None)?;
        println!("node {id} is draining");
        if let Some(timeout) = wait {
            wait_drained(api, id, timeout)?;
        }
    }
    Ok(())
}

/// `remove <id>`: forgets a drained member; a refusal (it still holds replicas) says why.
fn remove(api: &Api, id: u64) -> anyhow::Result<()> {
    match api.call(Method::DELETE, &format!("/api/admin/nodes/{id}"), None) {
        Ok(_) => println!("node {id} removed"),
        Err(e) => match e.downcast_ref::<ApiError>() {
            Some(a) if a.status == StatusCode::CONFLICT => {
                bail!("node {id} cannot be removed: {}", a.message)
            }
            _ => return Err(e),
        },
    }
    Ok(())
}
