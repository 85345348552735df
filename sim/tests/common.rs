//! Runs the simulator the way a developer does: `sim/run ARGS` builds its own binary (target/sim,
//! with `--cfg tokio_unstable --cfg baton_sim`) and runs it.

use std::path::PathBuf;
use std::process::Command;

/// Runs `sim/run` with `args`; returns whether it succeeded and everything it printed.
pub fn sim(args: &[&str]) -> (bool, String) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(PathBuf::from)
        .unwrap_or_default();
    let output = Command::new("bash")
        .arg(root.join("sim/run"))
        .args(args)
        .current_dir(&root)
        .output()
        .unwrap_or_else(|e| panic!("cannot run sim/run: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    println!("sim/run {}\n{text}", args.join(" "));
    (output.status.success(), text)
}
