//! `batonctl`: operate a Baton node through its HTTP API (it links no engine internals).
//!
//! Commands: `status` (every Raft group: role, term, leader, log and applied index), `health`, and
//! `workflow <id>` (a workflow's status and its tasks). Cluster operations (drain, transfer, add and
//! remove nodes, upgrade) and `bench` come with the cluster and benchmark issues.

use anyhow::{bail, Context};
use clap::{Parser, Subcommand};
use serde_json::Value;

#[derive(Parser)]
#[command(name = "batonctl", version, about = "Operate a Baton node")]
struct Cli {
    /// The node's HTTP address.
    #[arg(long, global = true, default_value = "http://127.0.0.1:8080")]
    url: String,
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
}

fn get(url: &str) -> anyhow::Result<Value> {
    let resp = reqwest::blocking::get(url).with_context(|| format!("cannot reach {url}"))?;
    let status = resp.status();
    let body: Value = resp
        .json()
        .with_context(|| format!("{url} did not answer JSON"))?;
    if !status.is_success() && status.as_u16() != 503 {
        bail!(
            "{url}: {status}: {}",
            body.get("message").and_then(Value::as_str).unwrap_or("")
        );
    }
    Ok(body)
}

fn text(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let base = cli.url.trim_end_matches('/');
    match cli.command {
        Command::Status => {
            let groups = get(&format!("{base}/api/admin/status"))?;
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
        }
        Command::Health => println!(
            "{}",
            serde_json::to_string_pretty(&get(&format!("{base}/health"))?)?
        ),
        Command::Workflow { id } => {
            let wf = get(&format!("{base}/api/workflow/{id}?includeTasks=true"))?;
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
        }
    }
    Ok(())
}
