//! Python suites against a running node: `pytest` from the repository's `.venv` (created by
//! `.ci/run`), bounded by a deadline, its output left on the test's output.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::workspace_root;

/// The repository's venv Python; the test fails with how to create it when it is missing.
pub fn venv_python() -> PathBuf {
    let python = workspace_root().join(".venv/bin/python");
    assert!(
        python.is_file(),
        "{} is missing: create the venv as `.ci/run` does (python3 -m venv .venv && \
         .venv/bin/pip install conductor-python==2.0.0 pytest 'a2a-sdk[http-server]==1.3.0' uvicorn)",
        python.display()
    );
    python
}

/// Runs `pytest` on `target` (relative to the repository) with `BATON_URL` set to `base_url`
/// and the environment changes `env` (a `None` value removes the variable); fails the test if
/// it fails or runs longer than `deadline`.
pub fn pytest(target: &str, base_url: &str, env: &[(&str, Option<&str>)], deadline: Duration) {
    let python = venv_python();
    let mut command = Command::new(&python);
    command
        .args(["-m", "pytest", target, "-q", "-p", "no:cacheprovider"])
        .current_dir(workspace_root())
        .env("BATON_URL", base_url)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::null());
    for (key, value) in env {
        match value {
            Some(value) => command.env(key, value),
            None => command.env_remove(key),
        };
    }
    let mut child = command
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", python.display()));
    let until = Instant::now() + deadline;
    let status = loop {
        if let Some(status) = child.try_wait().expect("query pytest") {
            break status;
        }
        if Instant::now() >= until {
            let _ = child.kill();
            let _ = child.wait();
            panic!("pytest {target} did not finish within {deadline:?}");
        }
        thread::sleep(Duration::from_millis(100));
    };
    assert!(
        status.success(),
        "pytest {target} failed with {status} (its output is above)"
    );
}
