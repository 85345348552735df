//! The official conductor-python 2.0.0 client against a real server: runs
//! `tests/python/test_conductor_client.py` with the repository's `.venv` (created by `.ci/run`).

use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use harness::{workspace_root, Server};

/// The Python suite starts workers and waits for workflows; it must not hang the Rust test forever.
const PYTEST_DEADLINE: Duration = Duration::from_secs(180);

#[test]
fn conductor_python_client_runs_workflows() {
    let root = workspace_root();
    let python = root.join(".venv/bin/python");
    assert!(
        python.is_file(),
        "{} is missing: create the venv as `.ci/run` does (python3 -m venv .venv && \
         .venv/bin/pip install conductor-python==2.0.0 pytest)",
        python.display()
    );

    let server = Server::start();
    let mut child = Command::new(&python)
        .args([
            "-m",
            "pytest",
            "tests/python",
            "-q",
            "-p",
            "no:cacheprovider",
        ])
        .current_dir(&root)
        .env("BATON_URL", server.base_url())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        // Thread isolation never stops its worker threads, so pytest would not exit; use processes.
        .env_remove("CONDUCTOR_WORKER_ISOLATION")
        .stdin(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", python.display()));

    let deadline = Instant::now() + PYTEST_DEADLINE;
    let status = loop {
        if let Some(status) = child.try_wait().expect("query pytest") {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("pytest did not finish within {PYTEST_DEADLINE:?}");
        }
        thread::sleep(Duration::from_millis(100));
    };
    assert!(
        status.success(),
        "pytest tests/python failed with {status} (its output is above)"
    );
}
