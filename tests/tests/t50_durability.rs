//! Crash durability: 1,000 fork/join workflows, `kill -9` of the server while workers complete tasks,
//! restart on the same data directory, and then every acknowledged write must be there exactly once.
//!
//! What an acknowledgement promises (nothing is acknowledged before it is committed and flushed):
//! a start answered 200 with an id exists after the crash; a task update answered 200 is
//! reflected; no task attempt is handed out or completed twice.

use std::sync::Arc;

use harness::load::{fork_join_defs, wall_ms, Config, Load, Reader};
use harness::Server;

/// Longer than a restart takes, so a task a worker holds across the crash is not timed out before the
/// worker's retried update lands (that update must then be reflected); shorter than the test, so a
/// task whose poll answer was lost in the crash is retried and the workflow still finishes.
const RESPONSE_TIMEOUT_S: u64 = 20;
/// Task completions acknowledged before the crash (of 2,000): the kill lands mid-run.
const COMPLETIONS_BEFORE_KILL: usize = 500;
const LOAD: Config = Config {
    prefix: "dur",
    workflows: 1000,
    starters: 2,
    workers_per_type: 2,
    batch: 20,
    poll_timeout_ms: 100,
    // Unpaced: every start is sent as fast as the server takes it.
    in_flight_max: None,
    run_deadline: std::time::Duration::from_secs(100),
};

#[test]
fn acknowledged_work_survives_kill_9() {
    let mut server = Server::start();
    let api = server.api().clone();
    fork_join_defs(&api, LOAD.prefix, RESPONSE_TIMEOUT_S);

    // The server keeps its port across the restart, so one client serves the whole run.
    let mut load = Load::start(Arc::new(api.clone()), LOAD);
    load.wait_completions(COMPLETIONS_BEFORE_KILL, "the crash point");
    let kill_wall = wall_ms();
    server.kill9();
    let at_kill = load.record.completions();
    server.restart();
    let restart_wall = wall_ms();
    eprintln!("killed after {at_kill} acknowledged completions; restarted");

    let started = load.join_starters();
    // Every acknowledged start exists after the crash and finishes.
    let reader = Reader::server(&api);
    load.wait_all_completed(&reader, &started);
    load.stop_workers();
    load.check(
        &reader,
        &started,
        &format!("the server was killed at {kill_wall} and answered again at {restart_wall}"),
    );
}
