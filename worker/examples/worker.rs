//! A runnable worker that completes every task of one type with `{"echo": <input>}`.
//!
//! ```text
//! cargo run -p baton-worker --example worker -- \
//!     --node 127.0.0.1:7070 --node 127.0.0.1:7071 --certs certs/ --id echo-1 --task-type echo
//! ```
//!
//! `--certs DIR` holds `ca.pem` (the cluster CA) and `worker-<id>.pem` / `worker-<id>.key`, as
//! `baton worker-cert` writes them. Optional: `--concurrency N` (default 8). Stops gracefully on
//! Ctrl-C. Logs with `RUST_LOG` (default `info`).

use anyhow::{bail, Context};
use serde_json::json;
use std::net::SocketAddr;
use std::path::PathBuf;
use worker::{Outcome, Task, Tls, Worker};

struct Args {
    nodes: Vec<SocketAddr>,
    certs: PathBuf,
    id: String,
    task_type: String,
    concurrency: u32,
}

const USAGE: &str = "usage: worker --node ADDR [--node ADDR ...] --certs DIR --id ID --task-type T [--concurrency N]";

fn parse_args() -> anyhow::Result<Args> {
    let mut nodes = Vec::new();
    let (mut certs, mut id, mut task_type, mut concurrency) = (None, None, None, 8);
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || {
            args.next()
                .with_context(|| format!("{flag} needs a value\n{USAGE}"))
        };
        match flag.as_str() {
            "--node" => nodes.push(value()?.parse().context("--node takes HOST:PORT")?),
            "--certs" => certs = Some(PathBuf::from(value()?)),
            "--id" => id = Some(value()?),
            "--task-type" => task_type = Some(value()?),
            "--concurrency" => {
                concurrency = value()?.parse().context("--concurrency takes a number")?
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => bail!("unknown argument {other}\n{USAGE}"),
        }
    }
    if nodes.is_empty() {
        bail!("give at least one --node\n{USAGE}");
    }
    Ok(Args {
        nodes,
        certs: certs.with_context(|| format!("--certs is required\n{USAGE}"))?,
        id: id.with_context(|| format!("--id is required\n{USAGE}"))?,
        task_type: task_type.with_context(|| format!("--task-type is required\n{USAGE}"))?,
        concurrency,
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let args = parse_args()?;
    let tls = Tls::from_dir(&args.certs, &args.id)?;
    let worker = Worker::builder()
        .nodes(args.nodes)
        .tls(tls)
        .worker_id(&args.id)
        .handler(&args.task_type, args.concurrency, |task: Task| async move {
            Ok(Outcome::completed(json!({ "echo": task.input() })))
        })
        .build()?;
    let handle = worker.start();
    tokio::signal::ctrl_c().await?;
    tracing::info!("Ctrl-C: shutting down");
    handle.shutdown().await?;
    Ok(())
}
