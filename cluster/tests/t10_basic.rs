//! Basic behaviour of one group: propose/apply round trip, many concurrent proposals, limits,
//! shutdown, and two groups sharing one sled database.

mod common;

use cluster::Error;
use common::*;
use std::collections::BTreeSet;
use std::time::Instant;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn propose_applies_and_answers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open_db(dir.path());
    let (group, _) = open_group(&db, options("p0")).await;
    assert!(group.is_leader());
    assert!(group.leadership().borrow().is_some());

    let (index1, r1) = group
        .propose_with_index(b"set:a=1".to_vec())
        .await
        .expect("propose");
    let (index2, r2) = group
        .propose_with_index(b"set:b=2".to_vec())
        .await
        .expect("propose");
    assert_eq!(decode_count(&r1), 1);
    assert_eq!(decode_count(&r2), 2);
    assert!(index2 > index1);
    assert_eq!(
        group.state().get(b"a").expect("read").as_deref(),
        Some(&b"1"[..])
    );
    assert_eq!(
        group.state().get(b"b").expect("read").as_deref(),
        Some(&b"2"[..])
    );

    // Metrics follow the apply asynchronously.
    wait_until(
        "metrics show the last apply",
        std::time::Duration::from_secs(5),
        || group.status().last_applied_index == Some(index2),
    )
    .await;
    let status = group.status();
    assert_eq!(status.name, "p0");
    assert_eq!(status.role, "Leader");
    assert_eq!(status.leader, Some(cluster::NodeId(1)));
    assert_eq!(status.voters, vec![cluster::NodeId(1)]);
    assert_eq!(status.last_applied_index, Some(index2));
    assert!(serde_json::to_string(&status)
        .expect("serializes")
        .contains("\"p0\""));

    group.shutdown().await.expect("shutdown");
    assert!(!group.is_leader());
    assert_eq!(
        group.propose(b"late".to_vec()).await,
        Err(Error::ShuttingDown)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_proposals_are_all_applied_in_log_order() {
    const N: u64 = 1_000;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()))
        .try_init();
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open_db(dir.path());
    let (group, _) = open_group(&db, options("p0")).await;

    let started = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..N {
        let group = group.clone();
        tasks.push(tokio::spawn(async move {
            let (index, response) = group
                .propose_with_index(format!("c{i}").into_bytes())
                .await
                .expect("propose");
            (index, decode_count(&response), i)
        }));
    }
    let mut results = Vec::new();
    for task in tasks {
        results.push(task.await.expect("task"));
    }
    let elapsed = started.elapsed();
    eprintln!(
        "{N} concurrent proposals in {elapsed:?}: {:.0} proposals/s",
        N as f64 / elapsed.as_secs_f64()
    );

    // The counter's answer grows with the log position: applied in log order, none twice.
    // Concurrent commands share entries (group commit), so indexes only never decrease.
    results.sort_by_key(|r| (r.0, r.1));
    for pair in results.windows(2) {
        assert!(pair[0].0 <= pair[1].0, "indexes never decrease");
        assert_eq!(pair[0].1 + 1, pair[1].1, "counts follow the log");
    }
    let entries: BTreeSet<u64> = results.iter().map(|r| r.0).collect();
    eprintln!("{N} commands in {} log entries", entries.len());
    let counts: BTreeSet<u64> = results.iter().map(|r| r.1).collect();
    assert_eq!(counts, (1..=N).collect());
    assert_eq!(count(group.state()), N);
    // Every command is stored under the count it was answered with.
    for (_, n, i) in &results {
        let stored = group
            .state()
            .get(format!("cmd/{n:08}"))
            .expect("read")
            .expect("present");
        assert_eq!(stored.as_ref(), format!("c{i}").as_bytes());
    }
    group.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_commands_are_rejected_before_proposing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open_db(dir.path());
    let mut opts = options("p0");
    opts.command_bytes_max = 16;
    let (group, _) = open_group(&db, opts).await;
    let before = group.status().last_log_index;
    assert_eq!(
        group.propose(vec![0; 17]).await,
        Err(Error::CommandTooLarge { bytes: 17, max: 16 })
    );
    assert_eq!(group.status().last_log_index, before);
    assert_eq!(count(group.state()), 0);
    group.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_groups_in_one_db_do_not_interfere() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open_db(dir.path());
    let (p0, _) = open_group(&db, options("p0")).await;
    let (p1, _) = open_group(&db, options("p1")).await;

    for i in 0..20 {
        p0.propose(format!("set:p0key{i}=x").into_bytes())
            .await
            .expect("p0");
    }
    for i in 0..5 {
        p1.propose(format!("set:p1key{i}=y").into_bytes())
            .await
            .expect("p1");
    }
    assert_eq!(count(p0.state()), 20);
    assert_eq!(count(p1.state()), 5);
    assert!(p0.state().get(b"p1key0").expect("read").is_none());
    assert!(p1.state().get(b"p0key0").expect("read").is_none());
    assert_eq!(
        p1.state().get(b"p1key4").expect("read").as_deref(),
        Some(&b"y"[..])
    );

    let names: BTreeSet<String> = db
        .tree_names()
        .into_iter()
        .map(|n| String::from_utf8_lossy(&n).into_owned())
        .collect();
    for tree in ["p0/raft", "p0/state", "p1/raft", "p1/state"] {
        assert!(names.contains(tree), "tree {tree} exists");
    }
    p0.shutdown().await.expect("shutdown");
    // p1 keeps working after p0 stopped.
    assert_eq!(
        decode_count(&p1.propose(b"more".to_vec()).await.expect("p1")),
        6
    );
    p1.shutdown().await.expect("shutdown");
}
