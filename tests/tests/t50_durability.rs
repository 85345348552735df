//! Crash durability: 1,000 fork/join workflows, `kill -9` of the server while workers complete tasks,
//! restart on the same data directory, and then every acknowledged write must be there exactly once.
//!
//! What an acknowledgement promises (DESIGN §3: nothing is acknowledged before it is committed and
//! flushed): a start answered 200 with an id exists after the crash; a task update answered 200 is
//! reflected; no task attempt is handed out or completed twice.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use harness::{attempts, task_def, task_result, Api, Server};
use serde_json::{json, Value};

const WORKFLOWS: usize = 1000;
const STARTERS: usize = 2;
const WORKERS_PER_TYPE: usize = 2;
const BATCH: usize = 20;
/// Task completions acknowledged before the crash (of 2,000): the kill lands mid-run.
const COMPLETIONS_BEFORE_KILL: usize = 500;
/// Longer than a restart takes, so a task a worker holds across the crash is not timed out before the
/// worker's retried update lands (that update must then be reflected); shorter than the test, so a
/// task whose poll answer was lost in the crash is retried and the workflow still finishes.
const RESPONSE_TIMEOUT_S: u64 = 20;
const RUN_DEADLINE: Duration = Duration::from_secs(100);
/// Pause after a failed request while the server is down; a retry interval, not synchronisation.
const BACKOFF: Duration = Duration::from_millis(50);

#[derive(Default)]
struct Record {
    /// Acknowledged starts: logical start index -> workflow id.
    started: Mutex<BTreeMap<usize, String>>,
    /// Acknowledged updates: task id -> (workflow id, output sent).
    acked: Mutex<BTreeMap<String, (String, Value)>>,
    /// How many times each task id was handed out by a poll.
    deliveries: Mutex<BTreeMap<String, usize>>,
    /// Updates the server refused with a 4xx (none expected).
    refused: Mutex<Vec<String>>,
    completions: AtomicUsize,
    stop: AtomicBool,
}

fn definitions(api: &Api) {
    let def = |name: &str| {
        task_def(
            name,
            json!({ "retryCount": 3, "retryDelaySeconds": 0, "responseTimeoutSeconds": RESPONSE_TIMEOUT_S }),
        )
    };
    api.register_task_defs(&[def("dur_a"), def("dur_b")]);
    api.register_workflow_def(&json!({
        "name": "durability_wf",
        "version": 1,
        "schemaVersion": 2,
        "ownerEmail": "test@harness.com",
        "tasks": [
            { "name": "fork", "taskReferenceName": "fork", "type": "FORK_JOIN", "forkTasks": [
                [{ "name": "dur_a", "taskReferenceName": "a", "type": "SIMPLE", "inputParameters": { "n": "${workflow.input.n}" } }],
                [{ "name": "dur_b", "taskReferenceName": "b", "type": "SIMPLE", "inputParameters": { "n": "${workflow.input.n}" } }]
            ]},
            { "name": "join", "taskReferenceName": "join", "type": "JOIN", "joinOn": ["a", "b"] }
        ],
    }));
}

fn starter(api: Api, record: Arc<Record>, indexes: Vec<usize>) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let deadline = Instant::now() + RUN_DEADLINE;
        for n in indexes {
            let mut last_failure = String::from("none");
            loop {
                assert!(
                    Instant::now() < deadline,
                    "start {n} not acknowledged before the deadline; last failure: {last_failure}"
                );
                let request = json!({
                    "name": "durability_wf",
                    "version": 1,
                    "correlationId": format!("dur-{n}"),
                    "input": { "n": n },
                });
                match api.try_post_json("/api/workflow", &request) {
                    Ok(reply) if reply.is_success() => {
                        let id = reply.id();
                        assert!(!id.is_empty(), "start {n}: empty id");
                        record.started.lock().expect("lock").insert(n, id);
                        break;
                    }
                    Ok(reply) if reply.status < 500 => panic!("start {n} refused: {reply:?}"),
                    // Server down, restarting or overloaded: unacknowledged, try again.
                    Ok(reply) => {
                        last_failure = format!("{reply:?}");
                        thread::sleep(BACKOFF);
                    }
                    Err(e) => {
                        last_failure = format!("{e:#}");
                        thread::sleep(BACKOFF);
                    }
                }
            }
        }
    })
}

fn worker(
    api: Api,
    record: Arc<Record>,
    task_type: &'static str,
    name: String,
) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        while !record.stop.load(Ordering::Relaxed) {
            let tasks = match api.try_batch_poll(task_type, &name, BATCH, 100) {
                Ok(tasks) => tasks,
                Err(_) => {
                    thread::sleep(BACKOFF);
                    continue;
                }
            };
            if tasks.is_empty() {
                thread::sleep(Duration::from_millis(10));
                continue;
            }
            for task in tasks {
                let task_id = task["taskId"]
                    .as_str()
                    .expect("polled task has an id")
                    .to_string();
                *record
                    .deliveries
                    .lock()
                    .expect("lock")
                    .entry(task_id.clone())
                    .or_default() += 1;
                let output =
                    json!({ "task": task_id, "worker": name, "n": task["inputData"]["n"] });
                let result = task_result(&task, "COMPLETED", output.clone(), None, None);
                // Retry until acknowledged: a worker that lost its answer in the crash sends again.
                loop {
                    if record.stop.load(Ordering::Relaxed) {
                        return;
                    }
                    match api.try_update_task(&result) {
                        Ok(reply) if reply.is_success() => {
                            let wf = task["workflowInstanceId"]
                                .as_str()
                                .expect("workflowInstanceId")
                                .to_string();
                            record
                                .acked
                                .lock()
                                .expect("lock")
                                .insert(task_id.clone(), (wf, output.clone()));
                            record.completions.fetch_add(1, Ordering::Relaxed);
                            break;
                        }
                        Ok(reply) if reply.status < 500 => {
                            record
                                .refused
                                .lock()
                                .expect("lock")
                                .push(format!("{task_id}: {reply:?}"));
                            break;
                        }
                        _ => thread::sleep(BACKOFF),
                    }
                }
            }
        }
    })
}

#[test]
fn acknowledged_work_survives_kill_9() {
    let mut server = Server::start();
    let api = server.api().clone();
    definitions(&api);

    let record = Arc::new(Record::default());
    let mut threads = Vec::new();
    for s in 0..STARTERS {
        let indexes: Vec<usize> = (0..WORKFLOWS).filter(|n| n % STARTERS == s).collect();
        threads.push(starter(api.clone(), record.clone(), indexes));
    }
    let mut workers = Vec::new();
    for task_type in ["dur_a", "dur_b"] {
        for w in 0..WORKERS_PER_TYPE {
            workers.push(worker(
                api.clone(),
                record.clone(),
                task_type,
                format!("{task_type}-worker-{w}"),
            ));
        }
    }

    let progress = |record: &Record| {
        format!(
            "{} starts and {} completions acknowledged, {} task deliveries",
            record.started.lock().expect("lock").len(),
            record.completions.load(Ordering::Relaxed),
            record.deliveries.lock().expect("lock").len()
        )
    };
    let before_kill = Instant::now() + RUN_DEADLINE;
    while record.completions.load(Ordering::Relaxed) < COMPLETIONS_BEFORE_KILL {
        assert!(
            Instant::now() < before_kill,
            "no crash point reached within {RUN_DEADLINE:?}: {}",
            progress(&record)
        );
        thread::sleep(harness::WAIT_POLL_INTERVAL);
    }
    server.kill9();
    let at_kill = record.completions.load(Ordering::Relaxed);
    server.restart();
    eprintln!("killed after {at_kill} acknowledged completions; restarted");

    // A starter that gives up panics; report where the run stood as well.
    for t in threads {
        if t.join().is_err() {
            panic!(
                "a starter gave up (its message is above): {}",
                progress(&record)
            );
        }
    }

    let started = record.started.lock().expect("lock").clone();
    assert_eq!(started.len(), WORKFLOWS, "every logical start acknowledged");
    let ids: BTreeSet<&String> = started.values().collect();
    assert_eq!(
        ids.len(),
        WORKFLOWS,
        "acknowledged starts have distinct ids"
    );

    // Every acknowledged start exists after the crash and finishes.
    let deadline = Instant::now() + RUN_DEADLINE;
    for (n, id) in &started {
        loop {
            let reply = api.get(&format!("/api/workflow/{id}?includeTasks=false"));
            assert_eq!(
                reply.status, 200,
                "acknowledged start {n} ({id}) lost: {reply:?}"
            );
            let status = reply.json()["status"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            if status == "COMPLETED" {
                break;
            }
            assert!(status == "RUNNING", "workflow {id} ended {status}");
            assert!(
                Instant::now() < deadline,
                "workflow {n} ({id}) still {status} at the deadline: {}",
                progress(&record)
            );
            thread::sleep(harness::WAIT_POLL_INTERVAL);
        }
    }
    record.stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().expect("worker thread");
    }

    let refused = record.refused.lock().expect("lock").clone();
    assert!(refused.is_empty(), "updates refused: {refused:#?}");
    let deliveries = record.deliveries.lock().expect("lock").clone();
    let twice: Vec<_> = deliveries.iter().filter(|(_, count)| **count > 1).collect();
    assert!(
        twice.is_empty(),
        "task attempts handed out more than once: {twice:?}"
    );

    // Per workflow: one COMPLETED attempt per reference, distinct task ids, join output from them.
    let mut workflows: BTreeMap<String, Value> = BTreeMap::new();
    for (n, id) in &started {
        let wf = api.workflow(id);
        assert_eq!(wf["status"], "COMPLETED");
        assert_eq!(
            wf["input"]["n"],
            json!(n),
            "workflow {id} has the input of start {n}"
        );
        let all_ids: Vec<&str> = harness::tasks(&wf)
            .iter()
            .filter_map(|t| t["taskId"].as_str())
            .collect();
        let unique: BTreeSet<&str> = all_ids.iter().copied().collect();
        assert_eq!(
            all_ids.len(),
            unique.len(),
            "a task row appears twice in {id}"
        );
        for reference in ["a", "b"] {
            let completed: Vec<&Value> = attempts(&wf, reference)
                .into_iter()
                .filter(|t| t["status"] == "COMPLETED")
                .collect();
            assert_eq!(
                completed.len(),
                1,
                "{id}: {reference} must have exactly one COMPLETED attempt: {wf:#}"
            );
            let task = completed[0];
            assert_eq!(
                task["outputData"]["task"], task["taskId"],
                "{id}: output of another attempt: {task:#}"
            );
            assert_eq!(task["outputData"]["n"], json!(n));
            let join = harness::task_by_ref(&wf, "join").expect("join");
            assert_eq!(
                join["outputData"][reference], task["outputData"],
                "{id}: join output of {reference}"
            );
        }
        workflows.insert(id.clone(), wf);
    }

    // Every acknowledged update is reflected in the attempt it was for.
    let acked = record.acked.lock().expect("lock").clone();
    for (task_id, (wf_id, output)) in &acked {
        let wf = match workflows.get(wf_id) {
            Some(wf) => wf.clone(),
            // A workflow whose start was not acknowledged (the answer was lost in the crash) may exist.
            None => api.workflow(wf_id),
        };
        let row = harness::tasks(&wf)
            .iter()
            .find(|t| t["taskId"] == task_id.as_str())
            .unwrap_or_else(|| panic!("acknowledged task {task_id} missing from {wf_id}"));
        assert_eq!(
            row["status"], "COMPLETED",
            "acknowledged completion of {task_id} lost: {row:#}"
        );
        assert_eq!(
            &row["outputData"], output,
            "acknowledged output of {task_id} lost"
        );
    }
    assert!(
        acked.len() >= 2 * WORKFLOWS,
        "{} acknowledged updates for {} tasks",
        acked.len(),
        2 * WORKFLOWS
    );
}
