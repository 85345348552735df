//! `batonctl upgrade`: the cluster's versions through `/api/admin/version`.
//!
//! - `status`: the active cluster version, the newest every member serves, and each member's
//!   binary with the versions it serves.
//! - `finalize [--version N]`: activate version N (by default the newest every member serves);
//!   after it, binaries that do not serve it refuse to start (docs/upgrading.md).

use super::{table, text, yes_no, Api};
use clap::Subcommand;
use serde_json::{json, Value};

#[derive(Subcommand)]
pub enum UpgradeCommand {
    /// The active cluster version and each member's binary and supported versions.
    Status,
    /// Activate a cluster version: the newest every member serves, or --version.
    Finalize {
        #[arg(long)]
        version: Option<u32>,
    },
}

pub fn run(api: &Api, command: UpgradeCommand) -> anyhow::Result<()> {
    match command {
        UpgradeCommand::Status => print(&api.get("/api/admin/version")?),
        UpgradeCommand::Finalize { version } => {
            let body = json!({ "version": version });
            let status = api.post("/api/admin/version/activate", Some(&body))?;
            println!("cluster version {} is active", text(&status["active"]));
        }
    }
    Ok(())
}

/// The versions, then a row per member.
fn print(status: &Value) {
    let newest = match &status["newest"] {
        Value::Null => "unknown until every member reports its binary".to_string(),
        v => text(v),
    };
    println!("active cluster version: {}", text(&status["active"]));
    println!("newest every member serves: {newest}");
    if status["held"].as_bool().unwrap_or(false) {
        println!(
            "activation held on node {}: run `batonctl upgrade finalize`",
            text(&status["node"])
        );
    }
    println!();
    let mut rows = vec![["id", "addr", "release", "serves", "serves active"]
        .map(String::from)
        .to_vec()];
    for m in status["members"].as_array().into_iter().flatten() {
        let binary = &m["binary"];
        let supports = &binary["supports"];
        let serves = match binary {
            Value::Null => "not reported".to_string(),
            _ => format!("{}..={}", text(&supports["min"]), text(&supports["max"])),
        };
        rows.push(vec![
            text(&m["id"]),
            text(&m["addr"]),
            text(&binary["release"]),
            serves,
            yes_no(&m["servesActive"]).into(),
        ]);
    }
    table(&rows, &[true, false, false, false, false]);
}
