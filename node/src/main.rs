//! `baton`: run a Baton node.
//!
//! `baton server` with no flags runs the embedded default: one node, data in `./baton-data`, the
//! Conductor-compatible HTTP API on 127.0.0.1:8080, 8 workflow partitions and the meta group.

use clap::{Parser, Subcommand};
use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "baton",
    version,
    about = "Baton: a durable workflow engine that speaks Conductor's API"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a node: the HTTP API and the partitions it leads.
    Server {
        /// Where the node keeps its data (created if missing).
        #[arg(long, default_value = "baton-data")]
        data_dir: PathBuf,
        /// Address of the HTTP API.
        #[arg(long, default_value = "127.0.0.1:8080")]
        http: SocketAddr,
        /// Workflow partitions (fixed when the data directory is created).
        #[arg(long, default_value_t = 8)]
        partitions: u16,
        /// This node's id.
        #[arg(long, default_value_t = 1)]
        node_id: u64,
    },
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,openraft=warn,sled=warn".into()),
        )
        .init();
    let cli = Cli::parse();
    match cli.command {
        Command::Server {
            data_dir,
            http,
            partitions,
            node_id,
        } => {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?;
            let options = node::server::Options {
                data_dir,
                http,
                partitions,
                node: proto::NodeId(node_id),
            };
            runtime.block_on(node::server::serve(options, shutdown_signal()))
        }
    }
}

/// Resolves on Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %e, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
    tracing::info!("shutting down");
}
