//! `batonctl bench --quick` runs end to end against the `baton` binary it starts itself, and loses
//! no workflow in any workload: on one node with HTTP workers (W1-W5, and W8, W2's shape as a
//! Serverless Workflow document, beside W2 with status polls), and on three nodes with QUIC
//! workers, where W7 kills the busiest leader during W2. Smoke only: timing belongs to the
//! benchmark, not to this test. W2 runs at 20/s, below what an unoptimised build sustains on 2
//! cores, so a busy CI box still drains it.

use std::path::PathBuf;
use std::process::Command;

/// `$BATONCTL_BIN`, else `batonctl` next to the `baton` binary the harness tests.
fn batonctl_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("BATONCTL_BIN") {
        return PathBuf::from(bin);
    }
    harness::baton_bin().with_file_name("batonctl")
}

/// The `lost` column of the results row of `workload`.
fn lost(stdout: &str, workload: &str) -> Option<u64> {
    let mut lines = stdout.lines().skip_while(|l| !l.starts_with("workload "));
    let header: Vec<&str> = lines.next()?.split_whitespace().collect();
    let column = header.iter().position(|h| *h == "lost")?;
    let row = lines.find(|l| l.split_whitespace().next() == Some(workload))?;
    row.split_whitespace().nth(column)?.parse().ok()
}

/// Runs `batonctl bench --quick --rate 20` with `extra` arguments and checks that it succeeds
/// and that each of `workloads` reports lost 0.
fn run_quick(extra: &[&str], workloads: &[&str]) {
    let bin = batonctl_bin();
    assert!(
        bin.is_file(),
        "batonctl not found at {}: run `cargo build -p baton-ops --bin batonctl` first",
        bin.display()
    );
    let output = Command::new(&bin)
        .args(["bench", "--quick", "--rate", "20"])
        .args(extra)
        .arg("--baton-bin")
        .arg(harness::baton_bin())
        .output()
        .expect("run batonctl bench");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "batonctl bench --quick {extra:?} failed with {}\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}",
        output.status
    );
    for workload in workloads {
        assert_eq!(
            lost(&stdout, workload),
            Some(0),
            "{workload} must report lost 0\n--- stdout ---\n{stdout}"
        );
    }
}

#[test]
fn bench_quick_runs_and_loses_nothing() {
    run_quick(&[], &["W1", "W2", "W3", "W4", "W5", "W2-polls", "W8"]);
}

#[test]
fn bench_quick_on_three_nodes_with_quic_workers_loses_nothing_when_a_leader_is_killed() {
    run_quick(
        &[
            "--nodes",
            "3",
            "--worker-kind",
            "quic",
            "--w3-count",
            "100",
            "--w4-count",
            "300",
        ],
        &["W1", "W2", "W3", "W4", "W5", "W2-polls", "W8", "W7"],
    );
}
