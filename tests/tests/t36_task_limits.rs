//! A task definition's `concurrentExecLimit` and `rateLimitPerFrequency` /
//! `rateLimitFrequencyInSeconds`, end to end: what polls hand out on one node and across a
//! cluster whose nodes all poll at once, checked from the tasks' recorded start and end times.

use std::time::Duration;

use harness::cluster::Cluster;
use harness::{task_def, wait_for, Api};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(60);

/// A one-task workflow `name` whose task is of `task_type`, registered with `limits`.
fn limited_workflow(api: &Api, name: &str, task_type: &str, limits: Value) {
    api.register_task_defs(&[task_def(task_type, limits)]);
    api.register_workflow_def(&json!({
        "name": name,
        "version": 1,
        "schemaVersion": 2,
        "ownerEmail": "test@harness.com",
        "tasks": [{ "name": task_type, "taskReferenceName": "t", "type": "SIMPLE" }],
    }));
}

/// A poll on every node of `apis` at once, each for up to 5 tasks waiting up to `wait_ms`: what
/// they hand out.
fn poll_all(apis: &[Api], task_type: &str, wait_ms: u64) -> Vec<Value> {
    std::thread::scope(|s| {
        let polls: Vec<_> = apis
            .iter()
            .map(|api| s.spawn(move || api.batch_poll(task_type, "w", 5, wait_ms)))
            .collect();
        polls
            .into_iter()
            .flat_map(|p| p.join().expect("a poll"))
            .collect()
    })
}

/// (startTime, endTime) of the task of each workflow, ordered by start.
fn spans(api: &Api, workflows: &[String]) -> Vec<(i64, i64)> {
    let mut spans: Vec<(i64, i64)> = workflows
        .iter()
        .map(|id| {
            let task = &api.workflow(id)["tasks"][0];
            let at = |field: &str| task[field].as_i64().expect("a time");
            (at("startTime"), at("endTime"))
        })
        .collect();
    spans.sort_unstable();
    spans
}

#[test]
fn a_concurrency_limit_of_one_hands_out_one_task_at_a_time_and_the_next_once_it_ends() {
    let server = harness::Server::start();
    let api = server.api();
    limited_workflow(
        api,
        "limit_one_wf",
        "limit_one",
        json!({ "concurrentExecLimit": 1 }),
    );
    let ids: Vec<String> = (0..3)
        .map(|_| api.start_workflow("limit_one_wf", &json!({})))
        .collect();
    for _ in 0..ids.len() {
        let task = wait_for(WAIT, "a task under the limit", || {
            api.batch_poll("limit_one", "w", 5, 200).into_iter().next()
        });
        let more = api.batch_poll("limit_one", "w", 5, 300);
        assert_eq!(more, Vec::<Value>::new(), "one is IN_PROGRESS already");
        api.complete(&task, json!({}));
    }
    for id in &ids {
        api.wait_workflow_status(id, "COMPLETED", WAIT);
    }
    let spans = spans(api, &ids);
    for pair in spans.windows(2) {
        assert!(pair[1].0 >= pair[0].1, "tasks overlapped: {spans:?}");
    }
}

#[test]
fn a_rate_limit_spaces_the_starts_by_its_window() {
    const WINDOW_MS: i64 = 2_000;
    const PERMIT_VALID_MS: i64 = 1_000;
    let server = harness::Server::start();
    let api = server.api();
    let limits = json!({ "rateLimitPerFrequency": 1, "rateLimitFrequencyInSeconds": 2 });
    limited_workflow(api, "limit_rate_wf", "limit_rate", limits);
    let ids: Vec<String> = (0..3)
        .map(|_| api.start_workflow("limit_rate_wf", &json!({})))
        .collect();
    let deadline = std::time::Instant::now() + WAIT;
    let mut handed = 0;
    while handed < ids.len() {
        assert!(std::time::Instant::now() < deadline, "{handed} handed out");
        for task in api.batch_poll("limit_rate", "w", 5, 1_000) {
            api.complete(&task, json!({}));
            handed += 1;
        }
    }
    // The keeper spaces its permits by the window; a lease (the recorded start) follows its
    // permit by less than the permit's validity.
    let spans = spans(api, &ids);
    for pair in spans.windows(2) {
        assert!(
            pair[1].0 - pair[0].0 >= WINDOW_MS - PERMIT_VALID_MS,
            "two starts within one window: {spans:?}"
        );
    }
    assert!(
        spans[2].0 - spans[0].0 >= 2 * WINDOW_MS - PERMIT_VALID_MS,
        "three starts within two windows: {spans:?}"
    );
}

#[test]
fn a_concurrency_limit_holds_across_the_cluster() {
    const LIMIT: usize = 2;
    let c = Cluster::start(3);
    let apis: Vec<Api> = c.ids().into_iter().map(|id| c.api(id)).collect();
    let limits = json!({ "concurrentExecLimit": LIMIT });
    limited_workflow(&apis[0], "limit_cluster_wf", "limit_cluster", limits);
    let mut ids = Vec::new();
    for api in &apis {
        wait_for(WAIT, "the definition on every node", || {
            (api.get("/api/metadata/workflow/limit_cluster_wf").status == 200).then_some(())
        });
        // An unkeyed start lands on a partition the receiving node leads: tasks on every node.
        for _ in 0..2 {
            ids.push(api.start_workflow("limit_cluster_wf", &json!({})));
        }
    }
    let deadline = std::time::Instant::now() + WAIT;
    let mut done = 0;
    while done < ids.len() {
        assert!(
            std::time::Instant::now() < deadline,
            "{done} of {} done",
            ids.len()
        );
        let held = poll_all(&apis, "limit_cluster", 200);
        assert!(held.len() <= LIMIT, "{} handed out at once", held.len());
        // Polls at once from every node while these are held hand out nothing more.
        if !held.is_empty() {
            let more = poll_all(&apis, "limit_cluster", 0);
            assert!(
                held.len() + more.len() <= LIMIT,
                "{} IN_PROGRESS under a limit of {LIMIT}",
                held.len() + more.len()
            );
            for task in held.iter().chain(&more) {
                apis[0].complete(task, json!({}));
                done += 1;
            }
        }
    }
    let spans = spans(&apis[0], &ids);
    for (i, (start, _)) in spans.iter().enumerate() {
        let open = spans[..i].iter().filter(|(_, end)| end > start).count();
        assert!(open < LIMIT, "more than {LIMIT} at once: {spans:?}");
    }
}
