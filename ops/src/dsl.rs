//! `batonctl dsl`: Serverless Workflow (DSL 1.0) documents and instances through `/api/dsl`.
//!
//! - `apply FILE [--overwrite]`: register a document (YAML or JSON); prints its header, or each
//!   problem with its JSON pointer (and exits non-zero).
//! - `list`: every registered version.
//! - `start NAMESPACE/NAME/VERSION [--input JSON] [--follow]`: start an instance; prints its id;
//!   `--follow` prints each phase it reaches until it ends, then its output or its error.
//! - `get ID`: an instance in the DSL's terms.

use super::{table, text, Api};
use anyhow::{bail, Context};
use clap::Subcommand;
use reqwest::{Method, StatusCode};
use serde_json::Value;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How often `start --follow` reads the instance.
const FOLLOW_POLL: Duration = Duration::from_millis(500);

#[derive(Subcommand)]
pub enum DslCommand {
    /// Register a workflow document (YAML or JSON).
    Apply {
        file: PathBuf,
        /// Replace the version when it is registered with another document.
        #[arg(long)]
        overwrite: bool,
    },
    /// Every registered document version.
    List,
    /// Start an instance of NAMESPACE/NAME/VERSION; prints its id.
    Start {
        workflow: String,
        /// The instance's input, a JSON object.
        #[arg(long, default_value = "{}")]
        input: String,
        /// Print each phase the instance reaches until it ends, then its output or error.
        #[arg(long)]
        follow: bool,
    },
    /// An instance: its phase, input, output, error and tasks.
    Get { id: String },
}

pub fn run(api: &Api, command: DslCommand) -> anyhow::Result<()> {
    match command {
        DslCommand::Apply { file, overwrite } => apply(api, &file, overwrite),
        DslCommand::List => list(api),
        DslCommand::Start {
            workflow,
            input,
            follow,
        } => start(api, &workflow, &input, follow),
        DslCommand::Get { id } => {
            let view = api.get(&format!("/api/dsl/instances/{id}"))?;
            println!("{}", serde_json::to_string_pretty(&view)?);
            Ok(())
        }
    }
}

/// `apply`: sends the file as it is; a refusal prints its problems.
fn apply(api: &Api, file: &PathBuf, overwrite: bool) -> anyhow::Result<()> {
    let body =
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    let url = format!("{}/api/dsl/workflows?overwrite={overwrite}", api.base);
    let resp = api
        .http
        .request(Method::POST, &url)
        .header(reqwest::header::CONTENT_TYPE, "application/yaml")
        .body(body)
        .send()
        .with_context(|| format!("cannot reach {url}"))?;
    let status = resp.status();
    let answer: Value = resp.json().unwrap_or(Value::Null);
    if status.is_success() {
        let title = answer["title"].as_str().unwrap_or_default();
        println!(
            "registered {}/{}/{} (DSL {}) {title}",
            text(&answer["namespace"]),
            text(&answer["name"]),
            text(&answer["version"]),
            text(&answer["dsl"]),
        );
        return Ok(());
    }
    if status == StatusCode::BAD_REQUEST && answer["errors"].is_array() {
        eprintln!("{}: {}", file.display(), text(&answer["title"]));
        for p in answer["errors"].as_array().into_iter().flatten() {
            let pointer = p["pointer"]
                .as_str()
                .filter(|s| !s.is_empty())
                .unwrap_or("/");
            eprintln!("  {pointer}: {}", text(&p["message"]));
        }
        bail!("{} was refused", file.display());
    }
    bail!("POST {url}: {status}: {}", text(&answer["message"]))
}

/// `list`: one line per version.
fn list(api: &Api) -> anyhow::Result<()> {
    let all = api.get("/api/dsl/workflows")?;
    let mut rows = vec![["namespace", "name", "version", "dsl", "title"]
        .map(String::from)
        .to_vec()];
    for d in all.as_array().into_iter().flatten() {
        rows.push(
            ["namespace", "name", "version", "dsl", "title"]
                .iter()
                .map(|f| text(&d[*f]))
                .collect(),
        );
    }
    if rows.len() == 1 {
        println!("no workflow documents registered");
    } else {
        table(&rows, &[]);
    }
    Ok(())
}

/// `start`: the instance's id, then (with `follow`) its phases and its end.
fn start(api: &Api, workflow: &str, input: &str, follow: bool) -> anyhow::Result<()> {
    let parts: Vec<&str> = workflow.split('/').collect();
    if parts.len() != 3 || parts.iter().any(|p| p.is_empty()) {
        bail!("expected NAMESPACE/NAME/VERSION, got '{workflow}'");
    }
    let input: Value = serde_json::from_str(input).context("--input is not valid JSON")?;
    let answer = api.post(
        &format!("/api/dsl/workflows/{workflow}/instances"),
        Some(&input),
    )?;
    let id = text(&answer["id"]);
    println!("{id}");
    if follow {
        follow_instance(api, &id)?;
    }
    Ok(())
}

/// Polls the instance, printing each phase change, until it is completed, faulted or cancelled.
fn follow_instance(api: &Api, id: &str) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut last = String::new();
    loop {
        let view = api.get(&format!("/api/dsl/instances/{id}"))?;
        let phase = text(&view["phase"]);
        if phase != last {
            println!("[{:>4}s] {phase}", started.elapsed().as_secs());
            last.clone_from(&phase);
        }
        match phase.as_str() {
            "completed" => {
                println!("{}", serde_json::to_string_pretty(&view["output"])?);
                return Ok(());
            }
            "faulted" | "cancelled" => {
                println!("{}", serde_json::to_string_pretty(&view["error"])?);
                bail!("instance {id} is {phase}");
            }
            _ => std::thread::sleep(FOLLOW_POLL),
        }
    }
}
