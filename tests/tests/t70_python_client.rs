//! The official conductor-python 2.0.0 client against a real server: runs
//! `tests/python/test_conductor_client.py` with the repository's `.venv` (created by `.ci/run`).

use std::time::Duration;

use harness::python::pytest;
use harness::Server;

/// The Python suite starts workers and waits for workflows; it must not hang the Rust test forever.
const PYTEST_DEADLINE: Duration = Duration::from_secs(180);

#[test]
fn conductor_python_client_runs_workflows() {
    let server = Server::start();
    // Thread isolation never stops its worker threads, so pytest would not exit; use processes.
    let env = [("CONDUCTOR_WORKER_ISOLATION", None)];
    pytest(
        "tests/python/test_conductor_client.py",
        &server.base_url(),
        &env,
        PYTEST_DEADLINE,
    );
}
