//! Cluster mode end to end: three `baton server` processes with mutual-TLS QUIC between them, 8
//! partitions and the meta group replicated on every node.
//!
//! What is promised: any node accepts any request and forwards it
//! to the partition's leader; nothing is acknowledged before a quorum committed it, so killing or
//! freezing a leader loses no acknowledged start or update; a stale leader's late writes never
//! survive; terminal states absorb late results; replicas at the same applied index have the same
//! state digest; a peer without the cluster CA's certificate is refused; a frozen or dead peer does
//! not stop the survivors from handing out tasks; `/health` is 200 only on a node that can serve.
//!
//! Diagnosis: set `BATON_KEEP_FAILED=1` to keep a failed test's cluster directory (full node logs
//! and data); its path is printed.
//!
//! Timing is printed, not asserted, except for generous bounds that turn a stuck cluster into a
//! failure instead of a hang.

use std::collections::{BTreeMap, BTreeSet};
use std::thread;
use std::time::{Duration, Instant};

use harness::cluster::{copy_dir, partition_group, partition_of, write_certs, Cluster};
use harness::load::{
    fork_join_defs, read_workflow, transient, wall_ms, Config, Load, Nodes, Reader, BACKOFF,
};
use harness::{
    attempts, status_of, task_def, task_result, tasks, wait_for, wait_until, Api, Reply,
};
use serde_json::{json, Value};

const NODES: usize = 3;
const WAIT: Duration = Duration::from_secs(30);
/// Request timeout of load clients: what a hanging node (or a partition between leaders) costs a
/// client before it tries again elsewhere.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);

// ---------------------------------------------------------------------------------------------
// Shared pieces
// ---------------------------------------------------------------------------------------------

/// Definitions live in the meta group and every node reads them locally: a node may
/// learn a registration a heartbeat after the registering node acknowledged it. Waits until every
/// running node knows workflow `name`.
fn wait_defs_everywhere(c: &Cluster, name: &str) {
    for id in c.live_ids() {
        let api = c.api(id);
        wait_until(
            WAIT,
            &format!("node {id} to know workflow definition {name}"),
            || api.get(&format!("/api/metadata/workflow/{name}")).status == 200,
        );
    }
}

/// Posts `request` to `/api/workflow` through the nodes in turn until one acknowledges it; returns
/// the new id. Panics on a refusal (4xx) or after `timeout`.
fn start_anywhere(nodes: &Nodes, request: &Value, timeout: Duration) -> String {
    let deadline = Instant::now() + timeout;
    loop {
        let (node, api) = nodes.pick();
        let last = match api.try_post_json("/api/workflow", request) {
            Ok(reply) if reply.is_success() => {
                let id = reply.id();
                assert!(!id.is_empty(), "start via node {node}: empty id");
                return id;
            }
            Ok(reply) if !transient(reply.status) => {
                panic!("start {request} refused by node {node}: {reply:?}")
            }
            Ok(reply) => format!("node {node}: {reply:?}"),
            Err(e) => format!("node {node}: {e:#}"),
        };
        assert!(
            Instant::now() < deadline,
            "start {request} not acknowledged within {timeout:?}; last failure: {last}"
        );
        thread::sleep(BACKOFF);
    }
}

/// Group -> node -> (applied, digest), once every running node reports the same groups and, per
/// group, the same applied index; then asserts the digests are equal per group.
fn assert_digests_converge(c: &Cluster) {
    let deadline = Instant::now() + WAIT;
    let sample = loop {
        let last = match c.digests() {
            Ok(by_node) => {
                let group_sets: BTreeSet<BTreeSet<&String>> =
                    by_node.values().map(|g| g.keys().collect()).collect();
                if group_sets.len() != 1 {
                    format!("nodes host different groups: {by_node:?}")
                } else {
                    let mut lagging = Vec::new();
                    let names = group_sets.into_iter().next().expect("one group set");
                    for name in &names {
                        let applied: BTreeSet<Option<u64>> =
                            by_node.values().map(|g| g[*name].0).collect();
                        if applied.len() != 1 || applied.contains(&None) {
                            lagging.push(format!("{name}: applied {applied:?}"));
                        }
                    }
                    if lagging.is_empty() {
                        break by_node;
                    }
                    format!("applied indexes differ: {}", lagging.join("; "))
                }
            }
            Err(e) => format!("{e:#}"),
        };
        assert!(
            Instant::now() < deadline,
            "replicas did not reach the same applied index per group within {WAIT:?}: {last}"
        );
        thread::sleep(harness::WAIT_POLL_INTERVAL);
    };

    let ids: Vec<u64> = sample.keys().copied().collect();
    assert_eq!(
        ids.len(),
        c.live_ids().len(),
        "a digest from every live node"
    );
    let names: Vec<String> = sample[&ids[0]].keys().cloned().collect();
    let mut expected: Vec<String> = (0..c.partitions()).map(partition_group).collect();
    expected.push("meta".to_string());
    for name in &expected {
        assert!(
            names.contains(name),
            "group {name} missing from /api/admin/digest: {names:?}"
        );
    }
    let mut table = Vec::new();
    let mut mismatched = Vec::new();
    for name in &names {
        let mut line = format!("{name:>5}: applied {:?}", sample[&ids[0]][name].0);
        let mut digests = BTreeSet::new();
        for id in &ids {
            let digest = &sample[id][name].1;
            assert!(
                digest.len() == 16 && digest.chars().all(|ch| ch.is_ascii_hexdigit()),
                "node {id} group {name}: digest {digest:?} is not 16 hex digits"
            );
            line.push_str(&format!("  node {id} {digest}"));
            digests.insert(digest.clone());
        }
        if digests.len() != 1 {
            mismatched.push(name.clone());
        }
        table.push(line);
    }
    eprintln!("digests at equal applied indexes:\n{}", table.join("\n"));
    assert!(
        mismatched.is_empty(),
        "replicas at the same applied index have different digests in {mismatched:?}:\n{}",
        table.join("\n")
    );
}

/// Starts `count` workflows of `wf` through `via` (round-robin) and completes their `a` and `b` tasks
/// by id through those nodes (round-robin), reading each workflow to find them, until all are
/// COMPLETED. No polls: a poll gathers from every peer, and a dead peer stalls it (see
/// `survivors_keep_handing_out_tasks_while_a_peer_is_frozen`); this helper feeds the replication
/// tests, which are about state, not task delivery.
fn run_batch(c: &Cluster, via: &[u64], wf: &str, count: usize, tag: &str) -> Vec<String> {
    let nodes = Nodes::new(c, CLIENT_TIMEOUT);
    for id in c.ids() {
        nodes.set_live(id, via.contains(&id));
    }
    let mut ids = Vec::new();
    for n in 0..count {
        let request = json!({ "name": wf, "version": 1, "input": { "n": n, "tag": tag } });
        ids.push(start_anywhere(&nodes, &request, WAIT));
    }
    let deadline = Instant::now() + WAIT * 2;
    for id in &ids {
        loop {
            let (node, api) = nodes.pick();
            let wf = read_workflow(api, id);
            if wf["status"] == "COMPLETED" {
                break;
            }
            assert_eq!(
                wf["status"], "RUNNING",
                "batch {tag}: {id} via node {node}: {wf:#}"
            );
            assert!(
                Instant::now() < deadline,
                "batch {tag}: {id} not COMPLETED within {:?}: {wf:#}",
                WAIT * 2
            );
            for task in tasks(&wf) {
                let open = task["status"] == "SCHEDULED" || task["status"] == "IN_PROGRESS";
                let branch = task["referenceTaskName"] == "a" || task["referenceTaskName"] == "b";
                if !(open && branch) {
                    continue;
                }
                let result = task_result(
                    task,
                    "COMPLETED",
                    json!({ "by": tag, "task": task["taskId"] }),
                    None,
                    None,
                );
                let (unode, uapi) = nodes.pick();
                match uapi.try_update_task(&result) {
                    Ok(reply) if reply.is_success() || transient(reply.status) => {}
                    Ok(reply) => panic!("update refused by node {unode}: {reply:?} for {task}"),
                    Err(_) => {}
                }
            }
            thread::sleep(BACKOFF);
        }
    }
    ids
}

// ---------------------------------------------------------------------------------------------
// 1. Any request on any node
// ---------------------------------------------------------------------------------------------

#[test]
fn three_nodes_serve_any_request_anywhere() {
    const WORKFLOWS: usize = 16;
    let c = Cluster::start(NODES);

    // Leaders are spread over the cluster.
    let counts = c.leader_counts();
    eprintln!(
        "partition leaders per node: {counts:?}; groups: {:?}",
        c.leaders()
    );
    assert_eq!(
        counts.values().sum::<usize>(),
        c.partitions(),
        "every partition has one agreed leader: {counts:?}"
    );
    for (node, led) in &counts {
        assert!(
            *led >= 1,
            "node {node} leads no partition; leaders are not spread: {counts:?}"
        );
    }

    // Definitions on node 1.
    let (n1, n2, n3) = (c.api(1), c.api(2), c.api(3));
    n1.register_task_defs(&[
        task_def("any_a", json!({ "retryCount": 0 })),
        task_def("any_b", json!({ "retryCount": 0 })),
    ]);
    n1.register_workflow_def(&json!({
        "name": "any_wf",
        "version": 1,
        "schemaVersion": 2,
        "ownerEmail": "test@harness.com",
        "tasks": [
            { "name": "any_a", "taskReferenceName": "a", "type": "SIMPLE", "inputParameters": { "x": "${workflow.input.x}" } },
            { "name": "any_b", "taskReferenceName": "b", "type": "SIMPLE", "inputParameters": { "fromA": "${a.output.v}" } }
        ],
        "outputParameters": { "a": "${a.output.v}", "b": "${b.output.v}" },
    }));
    wait_defs_everywhere(&c, "any_wf");

    // Starts on node 2: a start without an idempotency key picks a partition node 2 leads; one
    // with a key lands where the key hashes, which is mostly led elsewhere (forwarded).
    let mut started = BTreeMap::new();
    let mut keyed = BTreeSet::new();
    for n in 0..WORKFLOWS {
        let input = json!({ "x": format!("x{n}") });
        let id = if n % 2 == 0 {
            n2.start_workflow("any_wf", &input)
        } else {
            let id = n2.start_workflow_request(&json!({
                "name": "any_wf",
                "input": input,
                "idempotencyKey": format!("any-{n}"),
            }));
            keyed.insert(id.clone());
            id
        };
        started.insert(id, n);
    }
    let leaders = c.leaders();
    let led_by_2 =
        |id: &String| leaders.get(&partition_group(partition_of(id, c.partitions()))) == Some(&2);
    let partitions: BTreeSet<usize> = started
        .keys()
        .map(|id| partition_of(id, c.partitions()))
        .collect();
    let forwarded_by_2 = keyed.iter().filter(|id| !led_by_2(id)).count();
    eprintln!(
        "{WORKFLOWS} workflows on partitions {partitions:?}; {forwarded_by_2} started on a partition node 2 does not lead"
    );
    assert!(
        started
            .keys()
            .filter(|id| !keyed.contains(*id))
            .all(led_by_2),
        "a start without a key picks a partition the receiving node leads: {partitions:?}"
    );
    assert!(
        forwarded_by_2 > 0,
        "every keyed start landed on a partition led by node 2; forwarding was not exercised: {partitions:?}"
    );

    // Poll and complete through node 3.
    let mut delivered: BTreeMap<String, usize> = BTreeMap::new();
    let mut completed = 0;
    let deadline = Instant::now() + WAIT;
    while completed < 2 * WORKFLOWS {
        assert!(
            Instant::now() < deadline,
            "only {completed} of {} tasks were handed out by node 3 within {WAIT:?}",
            2 * WORKFLOWS
        );
        for (task_type, key) in [("any_a", "a"), ("any_b", "b")] {
            for task in n3.batch_poll(task_type, "node3-worker", 10, 100) {
                let wf_id = task["workflowInstanceId"].as_str().unwrap_or_default();
                let n = *started.get(wf_id).unwrap_or_else(|| {
                    panic!("node 3 handed out a task of an unknown workflow: {task}")
                });
                let task_id = task["taskId"].as_str().expect("task id").to_string();
                *delivered.entry(task_id.clone()).or_default() += 1;
                n3.complete(&task, json!({ "v": format!("{key}{n}") }));
                completed += 1;
            }
        }
    }
    let twice: Vec<_> = delivered.iter().filter(|(_, k)| **k > 1).collect();
    assert!(twice.is_empty(), "tasks handed out twice: {twice:?}");

    // Read through node 1: all COMPLETED with the outputs node 3 reported; nodes 2 and 3 agree.
    for (id, n) in &started {
        let wf = n1.wait_workflow_status(id, "COMPLETED", WAIT);
        assert_eq!(wf["input"]["x"], json!(format!("x{n}")), "{id} input");
        assert_eq!(
            wf["output"],
            json!({ "a": format!("a{n}"), "b": format!("b{n}") }),
            "{id}: output from the results completed through node 3: {wf:#}"
        );
        assert_eq!(status_of(&wf, "a").as_deref(), Some("COMPLETED"));
        assert_eq!(status_of(&wf, "b").as_deref(), Some("COMPLETED"));
        for other in [&n2, &n3] {
            wait_until(
                WAIT,
                &format!("{} to answer {id} as node 1 does", other.base_url()),
                || other.workflow(id) == wf,
            );
        }
    }

    // Execute through node 1 (start, then answer once finished). Keyed runs land where their key
    // hashes: a run whose partition node 1 does not lead is waited for on its leader. A first
    // execute with waitForSeconds=0 answers the run still RUNNING; executing the same key again
    // starts nothing new and waits for that run while node 3 completes its tasks.
    let path =
        |wait: u64| format!("/api/workflow/execute/any_wf/1?waitForSeconds={wait}&requestId=r1");
    let mut runs = BTreeMap::new();
    for n in 0..8 {
        let request =
            json!({ "input": { "x": format!("e{n}") }, "idempotencyKey": format!("exec-{n}") });
        let run = n1
            .post_json(&path(0), &request)
            .expect_ok("execute, no wait")
            .json();
        assert_eq!(run["status"], "RUNNING", "{run:#}");
        assert_eq!(run["requestId"], "r1", "{run:#}");
        let id = run["workflowId"].as_str().expect("workflowId").to_owned();
        runs.insert(id, (n, request));
    }
    let leaders = c.leaders();
    let elsewhere = runs
        .keys()
        .filter(|id| leaders.get(&partition_group(partition_of(id, c.partitions()))) != Some(&1))
        .count();
    assert!(
        elsewhere > 0,
        "every run landed on a partition node 1 leads: the forwarded wait is not exercised"
    );
    thread::scope(|s| {
        let waiters: Vec<_> = runs
            .iter()
            .map(|(id, (n, request))| {
                let (n1, path) = (&n1, path(WAIT.as_secs()));
                s.spawn(move || {
                    let run = n1.post_json(&path, request).expect_ok("execute").json();
                    assert_eq!(
                        run["workflowId"],
                        id.as_str(),
                        "the key's run, not a new one"
                    );
                    assert_eq!(run["status"], "COMPLETED", "{run:#}");
                    assert_eq!(
                        run["output"],
                        json!({ "a": format!("a{n}"), "b": format!("b{n}") })
                    );
                })
            })
            .collect();
        let mut left = 2 * runs.len();
        let deadline = Instant::now() + WAIT;
        while left > 0 {
            assert!(
                Instant::now() < deadline,
                "{left} execute tasks not handed out within {WAIT:?}"
            );
            for (task_type, key) in [("any_a", "a"), ("any_b", "b")] {
                for task in n3.batch_poll(task_type, "node3-exec", 10, 100) {
                    let wf_id = task["workflowInstanceId"].as_str().unwrap_or_default();
                    let (n, _) = runs.get(wf_id).expect("a task of an executed run");
                    n3.complete(&task, json!({ "v": format!("{key}{n}") }));
                    left -= 1;
                }
            }
        }
        for w in waiters {
            w.join().expect("an execute waiter failed");
        }
    });
}

/// An execute through a node that does not lead the workflow's partition waits on that leader;
/// when the leader is killed meanwhile, the wait carries on with the next leader and answers the
/// finished run.
#[test]
fn an_execute_outlives_the_leader_it_waits_on() {
    let mut c = Cluster::start(NODES);
    let n1 = c.api_with_timeout(1, Duration::from_secs(90));
    n1.register_task_defs(&[task_def("exec_kill_t", json!({ "retryCount": 0 }))]);
    n1.register_workflow_def(&json!({
        "name": "exec_kill_wf",
        "version": 1,
        "schemaVersion": 2,
        "ownerEmail": "test@harness.com",
        "tasks": [{ "name": "exec_kill_t", "taskReferenceName": "t", "type": "SIMPLE" }],
        "outputParameters": { "v": "${t.output.v}" },
    }));
    wait_defs_everywhere(&c, "exec_kill_wf");

    // A keyed run on a partition led by node 2 or 3 (a wait of 0 answers at once, RUNNING).
    let execute = |wait: u64, key: &str| {
        n1.post_json(
            &format!("/api/workflow/execute/exec_kill_wf/1?waitForSeconds={wait}"),
            &json!({ "idempotencyKey": key }),
        )
        .expect_ok("execute")
        .json()
    };
    let (key, id, leader) = (0..64)
        .find_map(|k| {
            let key = format!("kill-{k}");
            let run = execute(0, &key);
            let id = run["workflowId"].as_str().expect("workflowId").to_owned();
            let leader = c.leader_of_partition(partition_of(&id, c.partitions()))?;
            (leader != 1).then_some((key, id, leader))
        })
        .expect("some key lands on a partition node 1 does not lead");

    thread::scope(|s| {
        let waiter = s.spawn(|| execute(60, &key));
        // The wait is parked on the leader before it dies.
        let on_leader = c.api(leader);
        wait_until(WAIT, "node 1 to forward the wait to the leader", || {
            on_leader.get("/api/admin/waits").json()["watchedWorkflows"] == 1
        });
        c.kill9(leader);
        let task = wait_for_task(&n1, "exec_kill_t", &id, WAIT);
        n1.complete(&task, json!({ "v": "done" }));
        let run = waiter.join().expect("the execute waiter");
        assert_eq!(run["workflowId"], id.as_str(), "{run:#}");
        assert_eq!(run["status"], "COMPLETED", "{run:#}");
        assert_eq!(run["output"], json!({ "v": "done" }));
    });
}

/// Polls `task_type` through `api` until the task of workflow `id` comes (an election may be in
/// progress); tasks of other workflows are completed on the way.
fn wait_for_task(api: &harness::Api, task_type: &str, id: &str, within: Duration) -> Value {
    let deadline = Instant::now() + within;
    loop {
        assert!(
            Instant::now() < deadline,
            "no {task_type} task of {id} within {within:?}"
        );
        for task in api
            .try_batch_poll(task_type, "exec-kill-worker", 10, 200)
            .unwrap_or_default()
        {
            if task["workflowInstanceId"] == id {
                return task;
            }
            api.complete(&task, json!({ "v": "other" }));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// 2. kill -9 of the busiest leader under load
// ---------------------------------------------------------------------------------------------

mod kill {
    use super::*;

    pub const LOAD: Config = Config {
        prefix: "kill",
        workflows: 240,
        starters: 2,
        workers_per_type: 2,
        batch: 10,
        poll_timeout_ms: 200,
        in_flight_max: Some(40),
        run_deadline: Duration::from_secs(120),
    };
    /// Completions acknowledged before the kill (of 2 x workflows).
    pub const COMPLETIONS_BEFORE_KILL: usize = 120;
    /// Completions acknowledged with the node down before it is restarted.
    pub const COMPLETIONS_WHILE_DOWN: usize = 120;
    /// Longer than a failover, so a task a worker holds across the kill is not timed out before its
    /// retried update lands (it must then be reflected); short enough that a task whose poll answer
    /// died with the killed node is offered again within the test.
    pub const RESPONSE_TIMEOUT_S: u64 = 10;
    /// A partition that accepts no write for this long after the kill counts as stuck.
    pub const UNAVAILABILITY_BOUND: Duration = Duration::from_secs(20);

    /// Per partition: (last write before the kill, first write after it), as offsets from the kill.
    pub fn unavailability(
        writes: &[(usize, Instant)],
        kill_at: Instant,
    ) -> BTreeMap<usize, (Option<Duration>, Option<Duration>)> {
        let mut out = BTreeMap::new();
        for p in 0..harness::PARTITIONS {
            let before = writes
                .iter()
                .filter(|(q, t)| *q == p && *t < kill_at)
                .map(|(_, t)| kill_at - *t)
                .min();
            let after = writes
                .iter()
                .filter(|(q, t)| *q == p && *t >= kill_at)
                .map(|(_, t)| *t - kill_at)
                .min();
            out.insert(p, (before, after));
        }
        out
    }

    /// The longest gap between two consecutive acknowledged writes (any partition) in `[from, to]`.
    pub fn longest_gap(writes: &[(usize, Instant)], from: Instant, to: Instant) -> Duration {
        let mut times: Vec<Instant> = writes
            .iter()
            .map(|(_, t)| *t)
            .filter(|t| *t >= from && *t <= to)
            .collect();
        times.sort();
        times.push(to);
        let mut prev = from;
        let mut longest = Duration::ZERO;
        for t in times {
            longest = longest.max(t - prev);
            prev = t;
        }
        longest
    }
}

#[test]
fn killing_the_busiest_leader_loses_nothing() {
    use kill::*;

    let mut c = Cluster::start(NODES);
    let wf = fork_join_defs(&c.api(1), LOAD.prefix, RESPONSE_TIMEOUT_S);
    wait_defs_everywhere(&c, &wf);

    let nodes = Nodes::new(&c, CLIENT_TIMEOUT);
    let mut load = Load::start(nodes.clone(), LOAD);
    let record = load.record.clone();

    load.wait_completions(COMPLETIONS_BEFORE_KILL, "before the kill");
    let counts = c.leader_counts();
    let leaders_before = c.leaders();
    let victim = *counts
        .iter()
        .max_by_key(|(id, led)| (**led, std::cmp::Reverse(**id)))
        .expect("a node")
        .0;
    nodes.set_live(victim, false);
    let kill_at = Instant::now();
    let kill_wall = wall_ms();
    c.kill9(victim);
    let at_kill = record.completions();
    eprintln!(
        "killed node {victim} (leader of {} partitions; leaders {leaders_before:?}) after {at_kill} completions",
        counts[&victim]
    );
    c.wait_ready();
    let releaded = kill_at.elapsed();
    let leaders_after = c.leaders();
    eprintln!("survivors lead every group {releaded:?} after the kill: {leaders_after:?}");
    assert!(
        !leaders_after.values().any(|l| *l == victim),
        "the killed node is still named leader: {leaders_after:?}"
    );

    load.wait_completions(at_kill + COMPLETIONS_WHILE_DOWN, "with a node down");
    let restart_at = Instant::now();
    let restart_wall = wall_ms();
    c.restart(victim);
    nodes.set_live(victim, true);
    let ready_wall = wall_ms();
    let leaders_ready = c.leaders();
    eprintln!(
        "restarted node {victim} after {:?} down; cluster ready {:?} later; {}",
        restart_at - kill_at,
        restart_at.elapsed(),
        record.progress()
    );

    let started = load.join_starters();
    // Every acknowledged start finishes; read through the restarted node.
    let reader = Reader::node(&c, victim);
    let unavailable_reads = load.wait_all_completed(&reader, &started);
    load.stop_workers();
    let leaders_end = c.leaders();
    eprintln!(
        "reads through node {victim} answered 503 {unavailable_reads} times after the restart; \
         leaders when it was ready {leaders_ready:?}, at the end {leaders_end:?}"
    );

    // Write unavailability around the kill: printed, bounded only generously.
    let writes = record.writes.lock().expect("lock").clone();
    let per_partition = unavailability(&writes, kill_at);
    let mut lines = Vec::new();
    let mut worst = Duration::ZERO;
    let mut stuck = Vec::new();
    // The partitions the victim led: their unavailability is the failover's.
    let mut failed_over: Vec<Duration> = Vec::new();
    for (p, (before, after)) in &per_partition {
        let group = partition_group(*p);
        if let (Some(after), Some(&leader)) = (after, leaders_before.get(&group)) {
            if leader == victim {
                failed_over.push(*after);
            }
        }
        lines.push(format!(
            "{group}: leader before {:?}, last write {:?} before the kill, first write {:?} after it",
            leaders_before.get(&group),
            before,
            after
        ));
        match after {
            Some(after) => worst = worst.max(*after),
            None => stuck.push(group),
        }
    }
    failed_over.sort();
    let rank = |q: f64| {
        let i =
            ((failed_over.len() as f64 * q).ceil() as usize).clamp(1, failed_over.len().max(1)) - 1;
        failed_over.get(i).copied()
    };
    eprintln!(
        "failover of the {} partitions node {victim} led: first write after p50 {:?}, p99 {:?} \
         (goal p50 < 1 s, p99 < 3 s)",
        failed_over.len(),
        rank(0.5),
        rank(0.99)
    );
    let gap = longest_gap(&writes, kill_at - Duration::from_secs(1), restart_at);
    eprintln!(
        "write unavailability after kill -9 of node {victim}: longest wait for a partition's first \
         write {worst:?}; longest gap between any two writes {gap:?}\n{}",
        lines.join("\n")
    );
    assert!(
        stuck.is_empty(),
        "partitions without any write after the kill: {stuck:?}"
    );
    assert!(
        worst < UNAVAILABILITY_BOUND,
        "a partition accepted no write for {worst:?} after the kill (bound {UNAVAILABILITY_BOUND:?})"
    );

    load.check(
        &reader,
        &started,
        &format!(
            "node {victim} killed at {kill_wall}, restarted at {restart_wall}, cluster ready at \
             {ready_wall}"
        ),
    );
}

// ---------------------------------------------------------------------------------------------
// 3. A frozen (isolated) leader
// ---------------------------------------------------------------------------------------------

#[test]
fn an_isolated_leader_accepts_no_surviving_write() {
    /// Short, so the new leader times the frozen node's lease out quickly; long enough that the lease
    /// is still running when the node is frozen right after the poll.
    const RESPONSE_TIMEOUT_S: u64 = 3;
    /// Starts sent to the frozen node and answered only after it is thawed.
    const QUEUED_STARTS: usize = 6;

    let mut c = Cluster::start(NODES);
    let api1 = c.api(1);
    api1.register_task_defs(&[
        task_def(
            "iso_task",
            json!({ "retryCount": 3, "retryDelaySeconds": 0, "responseTimeoutSeconds": RESPONSE_TIMEOUT_S }),
        ),
        task_def("iso_bg_task", json!({})),
    ]);
    api1.register_workflow_def(&json!({
        "name": "iso_wf", "version": 1, "schemaVersion": 2, "ownerEmail": "test@harness.com",
        "tasks": [{ "name": "iso_task", "taskReferenceName": "t", "type": "SIMPLE" }],
        "outputParameters": { "v": "${t.output.v}" },
    }));
    api1.register_workflow_def(&json!({
        "name": "iso_bg", "version": 1, "schemaVersion": 2, "ownerEmail": "test@harness.com",
        "tasks": [{ "name": "iso_bg_task", "taskReferenceName": "bg", "type": "SIMPLE" }],
    }));
    wait_defs_everywhere(&c, "iso_wf");
    wait_defs_everywhere(&c, "iso_bg");

    // W on partition p, led by `isolated`; a survivor `m` leases W's task T1 (on `isolated`).
    let w = api1.start_workflow("iso_wf", &json!({}));
    let p = partition_of(&w, c.partitions());
    let group = partition_group(p);
    let isolated = c
        .leader_of_partition(p)
        .unwrap_or_else(|| panic!("no agreed leader of {group}"));
    let survivors: Vec<u64> = c.ids().into_iter().filter(|id| *id != isolated).collect();
    let m = c.api(survivors[0]);
    let t1 = m.poll_until("iso_task", "iso-worker-1", WAIT);
    assert_eq!(
        t1["workflowInstanceId"],
        w.as_str(),
        "the only iso_task is W's"
    );
    let t1_id = t1["taskId"].as_str().expect("task id").to_string();
    let term_before = c.group_status(isolated, &group).expect("status")["term"]
        .as_u64()
        .expect("term");
    assert_eq!(
        status_of(&m.workflow(&w), "t").as_deref(),
        Some("IN_PROGRESS"),
        "T1 is leased when its partition leader is frozen"
    );

    c.sigstop(isolated);
    let frozen_at = Instant::now();
    let frozen_wall = wall_ms();
    eprintln!("froze node {isolated}, leader of {group} at term {term_before}");

    // A write with a short timeout against the frozen node cannot be acknowledged.
    let short = c.api_with_timeout(isolated, Duration::from_secs(1));
    let r = short.try_post_json("/api/workflow/iso_bg", &json!({ "k": "short" }));
    assert!(
        !matches!(&r, Ok(reply) if reply.is_success()),
        "frozen node {isolated} acknowledged a start: {r:?}"
    );

    // Writes with a long timeout sit in the frozen node's sockets; it handles them when thawed,
    // while it may still believe it leads.
    let mut queued = Vec::new();
    for k in 0..QUEUED_STARTS {
        let api = c.api_with_timeout(isolated, Duration::from_secs(60));
        queued.push(thread::spawn(move || {
            let r = api.try_post_json("/api/workflow/iso_bg", &json!({ "k": k }));
            (k, r, Instant::now())
        }));
    }
    let stale_via_isolated = {
        let api = c.api_with_timeout(isolated, Duration::from_secs(60));
        let result = task_result(
            &t1,
            "COMPLETED",
            json!({ "v": "stale-via-isolated" }),
            None,
            None,
        );
        thread::spawn(move || (api.try_update_task(&result), Instant::now()))
    };

    // The survivors elect a new leader of p with a higher term.
    let (new_leader, new_term) = wait_for(
        WAIT,
        &format!("a survivor to lead {group} with a term above {term_before}"),
        || {
            survivors.iter().find_map(|id| {
                let g = c.group_status(*id, &group).ok()?;
                let term = g["term"].as_u64()?;
                (g["role"] == "Leader" && term > term_before).then_some((*id, term))
            })
        },
    );
    eprintln!(
        "node {new_leader} leads {group} at term {new_term}, {:?} after the freeze",
        frozen_at.elapsed()
    );
    c.wait_ready();

    // The survivors accept writes meanwhile.
    let survivor_nodes = Nodes::new(&c, CLIENT_TIMEOUT);
    survivor_nodes.set_live(isolated, false);
    let bg_survivor = start_anywhere(
        &survivor_nodes,
        &json!({ "name": "iso_bg", "version": 1, "input": { "k": "survivor" } }),
        WAIT,
    );
    eprintln!(
        "survivors acknowledged a start {:?} after the freeze",
        frozen_at.elapsed()
    );

    // The new leader times T1 out (its lease was on the frozen node) and schedules a retry T2.
    // Read and polled through the new leader itself: T2 is in its own queue, so the poll needs no
    // peer (polls that gather from a frozen peer are `survivors_keep_handing_out_tasks...`'s matter).
    let leader_api = c.api(new_leader);
    let timed_out = wait_for(
        WAIT,
        &format!("T1 to time out on the new leader {new_leader}"),
        || {
            let wf = leader_api.workflow(&w);
            let row = tasks(&wf)
                .iter()
                .find(|t| t["taskId"] == t1_id.as_str())
                .cloned()?;
            (row["status"] == "TIMED_OUT").then_some(row)
        },
    );
    let t2 = leader_api.poll_until("iso_task", "iso-worker-2", WAIT);
    eprintln!(
        "retry T2 handed out {:?} after the freeze; T1 leased at {}, timed out at {} (wall ms; \
         frozen at {frozen_wall}); T2 scheduled at {}, leased at {}",
        frozen_at.elapsed(),
        timed_out["startTime"],
        timed_out["endTime"],
        t2["scheduledTime"],
        t2["startTime"]
    );
    assert_eq!(t2["workflowInstanceId"], w.as_str());
    assert_eq!(t2["referenceTaskName"], "t");
    assert_ne!(t2["taskId"], t1["taskId"], "the retry is a new attempt");
    m.complete(&t2, json!({ "v": "attempt-2" }));
    m.wait_workflow_status(&w, "COMPLETED", WAIT);

    // A late result for T1 through a survivor: rejected, or ignored (checked below).
    let late = m
        .try_update_task(&task_result(
            &t1,
            "COMPLETED",
            json!({ "v": "stale-via-survivor" }),
            None,
            None,
        ))
        .expect("late result through a survivor");
    assert!(
        late.status < 500,
        "a late result must be rejected (4xx) or ignored (2xx), not fail: {late:?}"
    );

    let frozen_for = frozen_at.elapsed();
    c.sigcont(isolated);
    let thawed_at = Instant::now();
    c.wait_ready();
    eprintln!(
        "thawed node {isolated} after {frozen_for:?}; cluster ready {:?} later; leaders {:?}",
        thawed_at.elapsed(),
        c.leaders()
    );

    // Writes sent to the frozen node: nothing answered while frozen; what was acknowledged survives.
    let mut acknowledged = Vec::new();
    let mut outcomes = Vec::new();
    for handle in queued {
        let (k, r, answered_at): (usize, anyhow::Result<Reply>, Instant) =
            handle.join().expect("queued start thread");
        if let Ok(reply) = &r {
            if reply.is_success() {
                assert!(
                    answered_at >= thawed_at,
                    "node {isolated} acknowledged start {k} while frozen: {reply:?}"
                );
                acknowledged.push((k, reply.id()));
            }
        }
        outcomes.push(format!("start {k}: {r:?}"));
    }
    let (stale, stale_at) = stale_via_isolated.join().expect("stale result thread");
    if let Ok(reply) = &stale {
        assert!(
            !(reply.is_success() && stale_at < thawed_at),
            "node {isolated} answered a result while frozen: {reply:?}"
        );
    }
    eprintln!(
        "answers of the thawed node {isolated}:\n{}\nstale T1 result: {stale:?}\nlate T1 result via a survivor: {late:?}",
        outcomes.join("\n")
    );

    // Everything converges, on every node.
    for id in c.ids() {
        let api = c.api(id);
        let wf = api.wait_workflow_status(&w, "COMPLETED", WAIT);
        let row1 = tasks(&wf)
            .iter()
            .find(|t| t["taskId"] == t1_id.as_str())
            .unwrap_or_else(|| panic!("node {id}: T1 row missing: {wf:#}"));
        assert_eq!(
            row1["status"], "TIMED_OUT",
            "node {id}: a late result revived the timed-out T1 (terminal states absorb): {row1:#}"
        );
        assert!(
            !row1["outputData"].to_string().contains("stale"),
            "node {id}: T1 carries a late result's output: {row1:#}"
        );
        let completed: Vec<&Value> = attempts(&wf, "t")
            .into_iter()
            .filter(|t| t["status"] == "COMPLETED")
            .collect();
        assert_eq!(
            completed.len(),
            1,
            "node {id}: one COMPLETED attempt: {wf:#}"
        );
        assert_eq!(completed[0]["taskId"], t2["taskId"]);
        assert_eq!(
            wf["output"],
            json!({ "v": "attempt-2" }),
            "node {id}: {wf:#}"
        );

        for (k, started_id) in &acknowledged {
            let reply = api.get(&format!("/api/workflow/{started_id}?includeTasks=false"));
            assert_eq!(
                reply.status, 200,
                "node {id}: start {k}, acknowledged by the thawed node {isolated}, is lost: {reply:?}"
            );
            assert_eq!(reply.json()["input"]["k"], json!(k));
        }
        let reply = api.get(&format!("/api/workflow/{bg_survivor}?includeTasks=false"));
        assert_eq!(
            reply.status, 200,
            "node {id}: the survivors' start is lost: {reply:?}"
        );
    }
    eprintln!(
        "{} of {QUEUED_STARTS} starts queued on the frozen node were acknowledged after the thaw; all exist",
        acknowledged.len()
    );
    assert_digests_converge(&c);
}

// ---------------------------------------------------------------------------------------------
// 4. Replicas converge
// ---------------------------------------------------------------------------------------------

#[test]
fn replicas_converge_to_equal_digests() {
    let mut c = Cluster::start(NODES);
    let wf = fork_join_defs(&c.api(1), "dig", 60);
    wait_defs_everywhere(&c, &wf);

    run_batch(&c, &[1, 2, 3], &wf, 20, "all");
    // Node 3 misses part of the history and must catch up from the leaders.
    c.kill9(3);
    c.wait_ready();
    run_batch(&c, &[1, 2], &wf, 20, "two");
    c.restart(3);
    let ids = run_batch(&c, &[3, 1, 2], &wf, 10, "back");
    // The restarted node answers what the others answer.
    for id in &ids {
        let via3 = c.api(3).workflow(id);
        assert_eq!(
            via3,
            c.api(1).workflow(id),
            "{id} read through nodes 3 and 1"
        );
    }
    assert_digests_converge(&c);
}

// ---------------------------------------------------------------------------------------------
// 5. Mutual TLS refuses a foreign peer
// ---------------------------------------------------------------------------------------------

#[test]
fn a_peer_without_the_cluster_certificate_is_refused() {
    /// How long the impostor is watched. A node with the cluster's certificate learns its leaders at
    /// the first heartbeat (100 ms); the real node 3 must rejoin within this too (checked below).
    const WINDOW: Duration = Duration::from_secs(10);

    let mut c = Cluster::start(NODES);
    let api1 = c.api(1);
    api1.register_task_defs(&[task_def("tls_task", json!({ "retryCount": 0 }))]);
    api1.register_workflow_def(&json!({
        "name": "tls_wf", "version": 1, "schemaVersion": 2, "ownerEmail": "test@harness.com",
        "tasks": [{ "name": "tls_task", "taskReferenceName": "t", "type": "SIMPLE" }],
    }));
    wait_defs_everywhere(&c, "tls_wf");
    let run_one = |via: &Api, worker: &Api| {
        let id = via.start_workflow("tls_wf", &json!({}));
        let task = worker.poll_until("tls_task", "tls-worker", WAIT);
        assert_eq!(task["workflowInstanceId"], id.as_str());
        worker.complete(&task, json!({ "ok": true }));
        via.wait_workflow_status(&id, "COMPLETED", WAIT);
    };
    run_one(&api1, &c.api(3));

    // Certificates of another CA, for the same node ids and host.
    let foreign = c.dir().join("foreign-certs");
    write_certs(&foreign, &[1, 2, 3]);
    assert_ne!(
        std::fs::read(foreign.join("ca.pem")).expect("foreign ca.pem"),
        std::fs::read(c.certs_dir().join("ca.pem")).expect("cluster ca.pem"),
        "two `baton certs` runs must make two different CAs"
    );

    // Node 3 goes away; the impostor gets node 3's data, id, ports and --cluster, and the foreign
    // certificates: the only difference from the real node 3 is the CA.
    c.kill9(3);
    c.wait_ready();
    let impostor_data = c.dir().join("impostor-data");
    copy_dir(&c.data_dir(3), &impostor_data).expect("copy node 3's data");
    let voters_before: BTreeMap<u64, Vec<Value>> = [1, 2]
        .into_iter()
        .map(|id| (id, c.status(id).expect("status")))
        .collect();
    let logs_before: BTreeMap<u64, usize> = [1, 2]
        .into_iter()
        .map(|id| (id, c.logs(id).len()))
        .collect();
    let mut impostor = c.start_impostor(3, &foreign, &impostor_data);
    let watch_start = Instant::now();

    // While the impostor runs, the cluster commits a new meta entry and a workflow: a member would
    // receive both within a heartbeat or two.
    api1.register_task_defs(&[task_def("tls_marker", json!({}))]);
    run_one(&api1, &c.api(2));
    let cluster_meta: u64 = wait_for(WAIT, "nodes 1 and 2 to apply the same meta index", || {
        let a = c.group_status(1, "meta").ok()?["last_applied_index"].as_u64()?;
        let b = c.group_status(2, "meta").ok()?["last_applied_index"].as_u64()?;
        (a == b).then_some(a)
    });

    let mut exited = None;
    let mut impostor_status = Vec::new();
    let mut impostor_health = None;
    while watch_start.elapsed() < WINDOW {
        if let Some(status) = impostor.exited() {
            exited = Some(status);
            break;
        }
        if let Ok(reply) = impostor.api().try_get("/api/admin/status") {
            if reply.status == 200 {
                if let Ok(Value::Array(groups)) = serde_json::from_str::<Value>(&reply.body) {
                    impostor_status = groups;
                }
            }
        }
        let meta = impostor_status.iter().find(|g| g["name"] == "meta");
        if let Some(meta) = meta {
            assert!(
                meta["last_applied_index"].as_u64().unwrap_or(0) < cluster_meta,
                "a node with a foreign CA's certificate received the cluster's meta entries \
                 (applied {} >= {cluster_meta}) {:?} after its start: {meta}",
                meta["last_applied_index"],
                watch_start.elapsed()
            );
        }
        if let Ok(reply) = impostor.api().try_get("/health") {
            impostor_health = Some(reply.status);
        }
        for id in [1, 2] {
            let health = c
                .api_with_timeout(id, Duration::from_secs(2))
                .try_get("/health");
            assert!(
                matches!(&health, Ok(reply) if reply.is_success()),
                "node {id} became unhealthy while the impostor ran: {health:?}"
            );
        }
        thread::sleep(Duration::from_millis(200));
    }
    assert!(
        !impostor_status.is_empty() || exited.is_some(),
        "the impostor neither answered /api/admin/status nor exited within {WINDOW:?}"
    );
    eprintln!(
        "impostor watched for {:?}; exited on its own: {exited:?}; last /health status {impostor_health:?} \
         (printed: a restarted node's /health is `a_node_without_a_quorum_...`'s matter); cluster meta \
         applied {cluster_meta}, impostor's groups: {:?}",
        watch_start.elapsed(),
        impostor_status
            .iter()
            .map(|g| format!("{}: applied {} leader {} role {}", g["name"], g["last_applied_index"], g["leader"], g["role"]))
            .collect::<Vec<_>>()
    );

    // The cluster is unaffected: same voters, and it runs workflows.
    for id in [1u64, 2] {
        let now = c.status(id).expect("status");
        for g in &now {
            let before = voters_before[&id]
                .iter()
                .find(|b| b["name"] == g["name"])
                .expect("same groups");
            assert_eq!(
                (&g["voters"], &g["learners"]),
                (&before["voters"], &before["learners"]),
                "node {id}: membership of {} changed while the impostor ran",
                g["name"]
            );
        }
    }
    run_one(&api1, &c.api(2));

    // The members logged the refused handshakes of the impostor's address.
    let impostor_addr = format!("127.0.0.1:{}", c.quic_port(3));
    let mut refusals = Vec::new();
    for id in [1u64, 2] {
        let log = c.logs(id);
        let fresh = &log[logs_before[&id].min(log.len())..];
        refusals.extend(
            fresh
                .lines()
                .filter(|l| l.to_lowercase().contains("handshake") && l.contains(&impostor_addr))
                .take(2)
                .map(|l| format!("node {id}: {l}")),
        );
    }
    eprintln!("refused handshakes:\n{}", refusals.join("\n"));
    assert!(
        !refusals.is_empty(),
        "neither node 1 nor node 2 logged a failed handshake from the impostor at {impostor_addr}"
    );
    impostor.kill9();

    // Control: the real node 3 (the same data as the impostor's copy, the cluster's certificate)
    // receives the meta entry the impostor never got, within the window the impostor had.
    let rejoin_start = Instant::now();
    c.spawn(3);
    wait_until(
        WINDOW,
        "the real node 3 to apply the meta entry committed while it was away",
        || {
            c.group_status(3, "meta")
                .ok()
                .and_then(|g| g["last_applied_index"].as_u64())
                .is_some_and(|applied| applied >= cluster_meta)
        },
    );
    eprintln!(
        "the real node 3 caught up on meta {:?} after its start",
        rejoin_start.elapsed()
    );
    c.wait_ready();
    run_one(&c.api(3), &c.api(1));
}

// ---------------------------------------------------------------------------------------------
// 7. Health means "can serve"
// ---------------------------------------------------------------------------------------------

#[test]
fn a_node_without_a_quorum_does_not_report_healthy() {
    /// How long the restarted, cut-off node is watched. A healthy cluster elects in under a second.
    const WINDOW: Duration = Duration::from_secs(5);

    let mut c = Cluster::start(NODES);
    // Node 1 restarts while its two peers are frozen: it cannot reach a quorum in any group, so no
    // group has a leader it can reach, and it can serve nothing.
    c.sigstop(2);
    c.sigstop(3);
    c.kill9(1);
    c.spawn(1);
    let node1 = c.api_with_timeout(1, Duration::from_secs(2));
    let started = Instant::now();
    let mut answers = 0;
    while started.elapsed() < WINDOW {
        if let Ok(reply) = node1.try_get("/health") {
            answers += 1;
            let status = c.status(1).map(|groups| {
                groups
                    .iter()
                    .map(|g| {
                        format!(
                            "{}: {} leader {} term {}",
                            g["name"], g["role"], g["leader"], g["term"]
                        )
                    })
                    .collect::<Vec<_>>()
            });
            assert!(
                !reply.is_success(),
                "node 1 reports healthy {:?} after a restart with both peers frozen (no quorum \
                 anywhere): {}; its groups: {status:?}",
                started.elapsed(),
                reply.body
            );
        }
        thread::sleep(Duration::from_millis(100));
    }
    assert!(
        answers > 0,
        "node 1 never answered /health within {WINDOW:?}"
    );
    c.sigcont(2);
    c.sigcont(3);
    c.wait_ready();
}

// ---------------------------------------------------------------------------------------------
// 6. A frozen peer does not stall the survivors' polls
// ---------------------------------------------------------------------------------------------

#[test]
fn survivors_keep_handing_out_tasks_while_a_peer_is_frozen() {
    /// A poll that asks not to wait (`timeout=0`) and takes this long has stalled: workers give up
    /// on requests far shorter than that. Generous; the typical answer takes milliseconds.
    const POLL_BOUND: Duration = Duration::from_secs(5);
    const WORKFLOWS: usize = 8;
    const FROZEN: u64 = 3;

    let mut c = Cluster::start(NODES);
    let api1 = c.api(1);
    api1.register_task_defs(&[task_def("frz_task", json!({ "retryCount": 0 }))]);
    api1.register_workflow_def(&json!({
        "name": "frz_wf", "version": 1, "schemaVersion": 2, "ownerEmail": "test@harness.com",
        "tasks": [{ "name": "frz_task", "taskReferenceName": "t", "type": "SIMPLE" }],
    }));
    wait_defs_everywhere(&c, "frz_wf");

    c.sigstop(FROZEN);
    // The survivors lead every group (readiness ignores the frozen node).
    c.wait_ready();
    let survivors: Vec<u64> = c.ids().into_iter().filter(|id| *id != FROZEN).collect();
    let nodes = Nodes::new(&c, CLIENT_TIMEOUT);
    nodes.set_live(FROZEN, false);
    let mut open: BTreeSet<String> = BTreeSet::new();
    for n in 0..WORKFLOWS {
        let request = json!({ "name": "frz_wf", "version": 1, "input": { "n": n } });
        open.insert(start_anywhere(&nodes, &request, WAIT));
    }

    // Poll through the survivors in turn, without waiting server-side, until every task is out.
    let clients: Vec<(u64, Api)> = survivors
        .iter()
        .map(|id| (*id, c.api_with_timeout(*id, WAIT)))
        .collect();
    let mut latencies = Vec::new();
    let deadline = Instant::now() + WAIT;
    let mut turn = 0;
    while !open.is_empty() {
        assert!(
            Instant::now() < deadline,
            "{} tasks of running workflows not handed out by the survivors within {WAIT:?} while node \
             {FROZEN} is frozen; poll latencies {latencies:?}",
            open.len()
        );
        let (id, api) = &clients[turn % clients.len()];
        turn += 1;
        let started = Instant::now();
        let polled = api.try_batch_poll("frz_task", "frz-worker", 1, 0);
        let took = started.elapsed();
        latencies.push((*id, took));
        let polled = polled.unwrap_or_else(|e| {
            panic!(
                "poll through node {id} failed after {took:?} while node {FROZEN} is frozen: {e:#}"
            )
        });
        assert!(
            took < POLL_BOUND,
            "a poll with timeout=0 through node {id} took {took:?} while node {FROZEN} is frozen \
             (bound {POLL_BOUND:?}); latencies so far {latencies:?}"
        );
        for task in polled {
            let wf = task["workflowInstanceId"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            assert!(open.remove(&wf), "unexpected or repeated task {task}");
            api.complete(&task, json!({ "by": id }));
        }
    }
    eprintln!("poll latencies while node {FROZEN} was frozen: {latencies:?}");

    c.sigcont(FROZEN);
    c.wait_ready();
}

// ---------------------------------------------------------------------------------------------
// 7. Membership: a node joins and another drains and leaves, under load
// ---------------------------------------------------------------------------------------------

mod membership {
    use super::*;

    pub const LOAD: Config = Config {
        prefix: "member",
        // Enough that the load still runs through the join and the drain.
        workflows: 1200,
        starters: 2,
        workers_per_type: 2,
        batch: 10,
        poll_timeout_ms: 200,
        in_flight_max: Some(40),
        run_deadline: Duration::from_secs(300),
    };
    /// How long replicas and leaderships may take to move after a join or a drain.
    pub const MOVE_DEADLINE: Duration = Duration::from_secs(150);

    /// `GET /api/admin/cluster` through node `via`.
    pub fn cluster(c: &Cluster, via: u64) -> Option<Value> {
        let reply = c
            .api_with_timeout(via, Duration::from_secs(10))
            .try_get("/api/admin/cluster")
            .ok()?;
        (reply.status == 200).then(|| reply.json())
    }

    /// Member `id`'s line in a cluster status.
    pub fn member(status: &Value, id: u64) -> Option<Value> {
        status["nodes"]
            .as_array()?
            .iter()
            .find(|n| n["id"] == id)
            .cloned()
    }

    /// A compact line per group: `p3 leader 2 voters [1,2,4] learners []`.
    pub fn groups(status: &Value) -> String {
        status["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|g| {
                format!(
                    "{} leader {} term {} voters {} learners {}",
                    g["name"], g["leader"], g["term"], g["voters"], g["learners"]
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Waits until `done` holds for the cluster status seen through `via`; prints it when it does.
    pub fn wait_for(c: &Cluster, via: u64, what: &str, done: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + MOVE_DEADLINE;
        let mut last = Value::Null;
        loop {
            if let Some(status) = cluster(c, via) {
                if done(&status) {
                    eprintln!("{what}: {}\n{}", status["nodes"], groups(&status));
                    return status;
                }
                last = status;
            }
            if Instant::now() >= deadline {
                let mut views = Vec::new();
                for id in c.live_ids() {
                    for g in c.status(id).unwrap_or_default() {
                        views.push(format!(
                            "node {id} {} role {} term {} leader {} voters {} learners {} applied {}",
                            g["name"], g["role"], g["term"], g["leader"], g["voters"], g["learners"],
                            g["last_applied_index"]
                        ));
                    }
                }
                panic!(
                    "{what}: not within {MOVE_DEADLINE:?}; last status {}\n{}\nas each node sees its groups:\n{}",
                    last["nodes"],
                    groups(&last),
                    views.join("\n")
                );
            }
            thread::sleep(Duration::from_millis(250));
        }
    }

    /// Every partition group has `n` voters and no learners.
    pub fn settled(status: &Value, n: usize) -> bool {
        status["groups"].as_array().is_some_and(|gs| {
            gs.iter().filter(|g| g["name"] != "meta").all(|g| {
                g["voters"].as_array().map(Vec::len) == Some(n)
                    && g["learners"].as_array().is_some_and(Vec::is_empty)
                    && !g["leader"].is_null()
            })
        })
    }
}

#[test]
fn a_node_joins_and_a_drained_node_leaves_under_load() {
    use membership::*;

    let mut c = Cluster::start_with_spares(NODES, 1);
    let joiner = NODES as u64 + 1;
    let wf = fork_join_defs(&c.api(1), LOAD.prefix, 10);
    wait_defs_everywhere(&c, &wf);
    let nodes = Nodes::new(&c, CLIENT_TIMEOUT);
    nodes.set_live(joiner, false);
    let mut load = Load::start(nodes.clone(), LOAD);
    let record = load.record.clone();
    load.wait_completions(100, "before the join");

    // Compact every log, so the joiner's replicas must catch up by snapshot install.
    for id in c.ids().into_iter().take(NODES) {
        let reply = c.api(id).post_empty("/api/admin/snapshot");
        assert_eq!(reply.status, 204, "snapshot on node {id}: {reply:?}");
    }
    let joined_at = Instant::now();
    c.spawn(joiner);
    let status = wait_for(&c, 1, "after the join", |s| {
        member(s, joiner).is_some_and(|m| {
            m["live"] == true && m["replicas"].as_u64() >= Some(5) && m["leads"].as_u64() >= Some(1)
        }) && settled(s, 3)
    });
    eprintln!(
        "node {joiner} took replicas and leaderships {:?} after it started; {}",
        joined_at.elapsed(),
        record.progress()
    );
    let per_node: Vec<u64> = (1..=joiner)
        .map(|id| {
            member(&status, id)
                .and_then(|m| m["replicas"].as_u64())
                .unwrap_or(0)
        })
        .collect();
    assert!(
        per_node.iter().all(|r| (5..=7).contains(r)),
        "replicas spread evenly over four nodes: {per_node:?}"
    );
    // The joiner's replicas were installed from snapshots (the logs had been compacted).
    let joiner_groups = c.status(joiner).expect("status of the joiner");
    for g in joiner_groups.iter().filter(|g| g["name"] != "meta") {
        assert!(
            g["snapshot_index"].as_u64().is_some(),
            "replica {} on node {joiner} did not start from a snapshot: {g}",
            g["name"]
        );
    }
    nodes.set_live(joiner, true);
    // The joiner hosts six of the eight partitions; a search through it still covers all of them
    // (the others are scanned on their leaders) and finds what a search through node 1 finds.
    let hosted_by_joiner = c.status(joiner).expect("status").len() - 1;
    assert!(
        hosted_by_joiner < c.partitions(),
        "the joiner hosts {hosted_by_joiner} partitions"
    );
    for n in 0..40 {
        let url = format!(
            "/api/workflow/search?start=0&size=10&query=correlationId%20%3D%20%27member-{n}%27"
        );
        let via =
            |id: u64| c.api(id).get(&url).expect_status(200, "search").json()["totalHits"].as_u64();
        let (through_joiner, through_1) = (via(joiner), via(1));
        assert!(
            through_joiner >= Some(1) && through_joiner == through_1,
            "workflow member-{n}: {through_joiner:?} hits through node {joiner}, {through_1:?} through node 1"
        );
    }
    let at_join = record.completions();
    load.wait_completions((at_join + 60).min(2 * LOAD.workflows), "with four nodes");

    // Drain node 1: everything moves off it while the load runs, then it leaves.
    let leaving = 1;
    let reply = c
        .api(2)
        .post_empty(&format!("/api/admin/nodes/{leaving}/drain"));
    assert_eq!(reply.status, 204, "drain: {reply:?}");
    let refused = c.api(2).delete(&format!("/api/admin/nodes/{leaving}"));
    assert_eq!(
        refused.status, 409,
        "remove before the drain finished: {refused:?}"
    );
    let drained_at = Instant::now();
    wait_for(&c, 2, "after the drain", |s| {
        let meta_voter = s["groups"].as_array().into_iter().flatten().any(|g| {
            g["name"] == "meta"
                && g["voters"]
                    .as_array()
                    .is_some_and(|v| v.contains(&Value::from(leaving)))
        });
        member(s, leaving).is_some_and(|m| m["replicas"] == 0 && m["leads"] == 0)
            && !meta_voter
            && settled(s, 3)
    });
    eprintln!(
        "node {leaving} drained {:?} after the request; {}",
        drained_at.elapsed(),
        record.progress()
    );
    let reply = c.api(2).delete(&format!("/api/admin/nodes/{leaving}"));
    assert_eq!(reply.status, 204, "remove after the drain: {reply:?}");
    nodes.set_live(leaving, false);
    c.kill9(leaving);
    let status = wait_for(&c, 2, "after the removal", |s| {
        member(s, leaving).is_none() && settled(s, 3)
    });
    assert_eq!(status["nodes"].as_array().map(Vec::len), Some(NODES));

    let started = load.join_starters();
    let reader = Reader::node(&c, 2);
    load.wait_all_completed(&reader, &started);
    load.stop_workers();
    load.check(
        &reader,
        &started,
        &format!("node {joiner} joined, node {leaving} drained and removed"),
    );
    assert_digests_converge(&c);
}
