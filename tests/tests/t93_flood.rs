//! A flood against one node: 20,000 workflow starts and 2,000 parked polls at once. Past its
//! bounds the node answers 503 with `Retry-After` instead of queueing without limit; its memory
//! stays under a bound; and afterwards every start it acknowledged exists, every task it owes is
//! there to poll, and it serves as before.

use harness::{nonce, Server};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

const STARTS: usize = 20_000;
const PARKED_POLLS: usize = 2_000;
/// Starts the client keeps in flight at once: well past the node's 1,024 request slots and, with
/// the parked polls, past the 4,096 connections it holds open.
const STARTS_IN_FLIGHT: usize = 4_000;
/// How long each parked poll waits for a task (of a type no workflow has).
const POLL_WAIT_MS: u64 = 20_000;
/// Most memory the node may have held at any time (its peak resident set): about 110 KiB per open
/// connection in a debug build, at most 4,096 of them, and the workflows accepted.
const RSS_PEAK_MAX_MIB: u64 = 800;

#[derive(Default, Debug)]
struct Tally {
    accepted: Vec<String>,
    refused: usize,
    refused_without_retry_after: usize,
    other: Vec<String>,
}

/// The node's peak resident set size, from `/proc`.
fn rss_peak_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in proc status");
    kib / 1024
}

async fn start_all(client: reqwest::Client, base: String, name: String) -> Tally {
    let slots = Arc::new(tokio::sync::Semaphore::new(STARTS_IN_FLIGHT));
    let mut starts = tokio::task::JoinSet::new();
    for i in 0..STARTS {
        let slot = slots.clone().acquire_owned().await.expect("semaphore open");
        let (client, url) = (client.clone(), format!("{base}/api/workflow/{name}"));
        starts.spawn(async move {
            let answer = client.post(url).json(&json!({ "i": i })).send().await;
            drop(slot);
            let answer = answer.map_err(|e| format!("{e:?}"))?;
            let retry_after = answer.headers().contains_key("retry-after");
            let status = answer.status().as_u16();
            let body = answer.text().await.map_err(|e| e.to_string())?;
            Ok::<_, String>((status, retry_after, body))
        });
    }
    let mut tally = Tally::default();
    while let Some(joined) = starts.join_next().await {
        match joined.expect("start task") {
            Ok((200, _, id)) => tally.accepted.push(id),
            Ok((503, retry_after, _)) => {
                tally.refused += 1;
                tally.refused_without_retry_after += usize::from(!retry_after);
            }
            Ok((status, _, body)) => tally.other.push(format!("{status}: {body}")),
            Err(e) => tally.other.push(e),
        }
    }
    tally
}

/// Waits until `count` polls are parked on the node.
async fn parked(client: &reqwest::Client, base: &str, count: usize) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let waits: Value = match client.get(format!("{base}/api/admin/waits")).send().await {
            Ok(answer) => answer.json().await.unwrap_or_default(),
            Err(_) => Value::Null,
        };
        if waits["parkedPolls"].as_u64() == Some(count as u64) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "polls never all parked: {waits}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Parks `PARKED_POLLS` batch polls for a type no workflow has; answers their statuses.
async fn park_all(client: reqwest::Client, base: String, task_type: String) -> Vec<u16> {
    let mut polls = tokio::task::JoinSet::new();
    for i in 0..PARKED_POLLS {
        let url = format!(
            "{base}/api/tasks/poll/batch/{task_type}?count=1&timeout={POLL_WAIT_MS}&workerid=p{i}"
        );
        let client = client.clone();
        polls.spawn(async move {
            match client.get(url).send().await {
                Ok(answer) => answer.status().as_u16(),
                Err(_) => 0,
            }
        });
    }
    let mut statuses = Vec::new();
    while let Some(status) = polls.join_next().await {
        statuses.push(status.expect("poll task"));
    }
    statuses
}

#[test]
fn a_flood_is_shed_with_503_and_nothing_acknowledged_is_lost() {
    let server = Server::start();
    let api = server.api().clone();
    let (name, work, idle) = (
        format!("flood_{}", nonce()),
        format!("flood_work_{}", nonce()),
        format!("flood_idle_{}", nonce()),
    );
    api.register_workflow_def(&json!({
        "name": name, "version": 1, "schemaVersion": 2,
        "tasks": [{"name": work, "taskReferenceName": "w", "type": "SIMPLE"}]
    }));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    // Every request on its own connection, closed after its answer: an idle pooled connection
    // would hold one of the node's connection slots.
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(120))
        .build()
        .expect("client");
    let base = server.base_url();
    let (tally, polls) = runtime.block_on(async {
        let polls = tokio::spawn(park_all(client.clone(), base.clone(), idle));
        parked(&client, &base, PARKED_POLLS).await;
        let starts = start_all(client.clone(), base.clone(), name.clone()).await;
        (starts, polls.await.expect("polls"))
    });

    // Shed where full, never failed otherwise.
    assert!(
        tally.other.is_empty(),
        "unexpected answers: {:?}",
        &tally.other[..tally.other.len().min(5)]
    );
    assert!(
        tally.refused > 0,
        "4,000 starts in flight never filled 1,024 slots"
    );
    assert_eq!(
        tally.refused_without_retry_after, 0,
        "every 503 says when to retry"
    );
    assert_eq!(tally.accepted.len() + tally.refused, STARTS);
    assert!(
        polls.iter().all(|s| *s == 200),
        "every parked poll answered: {polls:?}"
    );
    let peak = rss_peak_mib(server.pid().expect("running"));
    eprintln!(
        "flood: {} starts accepted, {} refused with 503; {} polls parked; node's peak RSS {peak} MiB",
        tally.accepted.len(),
        tally.refused,
        PARKED_POLLS
    );
    assert!(peak < RSS_PEAK_MAX_MIB, "peak RSS {peak} MiB");

    // Nothing acknowledged is lost: every accepted start exists and owes its task.
    for id in &tally.accepted {
        let wf = api
            .get(&format!("/api/workflow/{id}?includeTasks=false"))
            .expect_ok("accepted start");
        assert_eq!(wf.json()["status"], "RUNNING", "{id}");
    }
    let queued = api
        .get(&format!("/api/tasks/queue/sizes?taskType={work}"))
        .expect_ok("queue sizes");
    let queued: Value = queued.json();
    assert_eq!(
        queued[&work],
        json!(tally.accepted.len()),
        "one task per accepted start"
    );

    // And it serves as before.
    api.get("/health").expect_ok("health after the flood");
    let after = api
        .post_json(&format!("/api/workflow/{name}"), &json!({}))
        .expect_ok("a start after the flood");
    let task = api
        .get(&format!("/api/tasks/poll/{work}?workerid=after"))
        .expect_ok("poll after the flood");
    assert!(
        !task.json().is_null(),
        "a task to poll after the flood (started {})",
        after.id()
    );
}
