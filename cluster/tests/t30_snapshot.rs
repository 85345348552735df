//! Snapshots: building one purges the log and a restart restores from it; installing it on another
//! store replaces that store's state and lets a group resume from it.

mod common;

use cluster::state_store::StateStore;
use cluster::NodeId;
use common::*;
use openraft::storage::RaftStateMachine;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_purges_log_and_restart_restores() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter("openraft=info,cluster=debug")
        .try_init();
    let dir = tempfile::tempdir().expect("tempdir");
    let snapshot_index = {
        let db = open_db(dir.path());
        let mut opts = options("p0");
        opts.snapshot_logs_since_last = 0;
        opts.logs_to_keep_after_snapshot = 0;
        let (group, _) = open_group(&db, opts).await;
        propose_all(&group, (0..100).map(|i| format!("set:k{i}=v{i}"))).await;
        let (last, _) = group
            .propose_with_index(b"last".to_vec())
            .await
            .expect("propose");
        wait_until(
            "metrics show the last apply",
            Duration::from_secs(5),
            || group.status().last_applied_index == Some(last),
        )
        .await;
        let applied = Some(last);
        group.raft().trigger().snapshot().await.expect("trigger");
        wait_until("snapshot and purge", Duration::from_secs(10), || {
            let s = group.status();
            s.snapshot_index == applied && s.purged_index == applied
        })
        .await;
        // The purged entries are gone from the log.
        let purged = last;
        let kept = db.raft_log().read("p0", ..=purged).expect("read");
        assert!(kept.is_empty(), "{} purged entries still read", kept.len());
        // Proposals continue after the purge.
        group
            .propose(b"set:after=1".to_vec())
            .await
            .expect("propose");
        group.shutdown().await.expect("shutdown");
        last
    };

    let db = open_db(dir.path());
    let (group, _) = open_group(&db, options("p0")).await;
    let status = group.status();
    // Opening reads the current snapshot, which is the state as it is: after the entry proposed
    // after the purge. The log stays purged where the built snapshot was.
    assert_eq!(status.snapshot_index, Some(snapshot_index + 1));
    assert_eq!(status.purged_index, Some(snapshot_index));
    assert_eq!(count(group.state()), 102);
    assert_eq!(
        group.state().get(b"after").expect("read").as_deref(),
        Some(&b"1"[..])
    );
    assert_eq!(
        decode_count(&group.propose(b"x".to_vec()).await.expect("propose")),
        103
    );
    group.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_installs_on_another_store() {
    let source_dir = tempfile::tempdir().expect("tempdir");
    let target_dir = tempfile::tempdir().expect("tempdir");

    // Build a snapshot on the source.
    let snapshot = {
        let db = open_db(source_dir.path());
        let (group, _) = open_group(&db, options("p3")).await;
        for i in 0..30 {
            group
                .propose(format!("set:k{i}=v{i}").into_bytes())
                .await
                .expect("propose");
        }
        let index = group
            .snapshot(Duration::from_secs(10))
            .await
            .expect("snapshot");
        assert!(index.is_some());
        group.shutdown().await.expect("shutdown");
        drop(group);
        let mut store =
            StateStore::open(&db, "p3", 256, Arc::new(Counter::default())).expect("store");
        store
            .get_current_snapshot()
            .await
            .expect("read")
            .expect("a snapshot is stored")
    };
    assert!(snapshot.meta.last_log_id.is_some());

    // Install it over unrelated state on the target.
    let db = open_db(target_dir.path());
    let stale = db.open_tree("p3/state").expect("tree");
    stale.insert(b"stale", b"gone soon").expect("insert");
    {
        let sm = Arc::new(Counter::default());
        let mut store = StateStore::open(&db, "p3", 256, sm.clone()).expect("store");
        store
            .install_snapshot(&snapshot.meta, snapshot.snapshot.clone())
            .await
            .expect("install");
        assert_eq!(sm.restored.load(Ordering::SeqCst), 1);
        let (applied, membership) = store.applied_state().await.expect("applied state");
        assert_eq!(applied, snapshot.meta.last_log_id);
        assert_eq!(membership, snapshot.meta.last_membership);
        let current = store
            .get_current_snapshot()
            .await
            .expect("read")
            .expect("stored");
        assert_eq!(current.meta, snapshot.meta);
    }
    assert!(stale.get(b"stale").expect("read").is_none());
    assert_eq!(count(&stale), 30);
    assert_eq!(
        stale.get(b"k29").expect("read").as_deref(),
        Some(&b"v29"[..])
    );

    // A group opened on the installed state resumes after the snapshot.
    let mut opts = options("p3");
    opts.node = NodeId(1);
    let (group, _) = open_group(&db, opts).await;
    let snapshot_index = snapshot.meta.last_log_id.map(|l| l.index).expect("index");
    let (index, response) = group
        .propose_with_index(b"next".to_vec())
        .await
        .expect("propose");
    assert!(index > snapshot_index);
    assert_eq!(decode_count(&response), 31);
    group.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_policy_builds_snapshots_while_proposing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open_db(dir.path());
    let mut opts = options("p0");
    opts.snapshot_logs_since_last = 50;
    opts.logs_to_keep_after_snapshot = 10;
    let (group, _) = open_group(&db, opts).await;
    for i in 0..200 {
        group
            .propose(format!("c{i}").into_bytes())
            .await
            .expect("propose");
    }
    wait_until(
        "a policy snapshot and a purge",
        Duration::from_secs(10),
        || {
            let s = group.status();
            s.snapshot_index >= Some(100) && s.purged_index.is_some()
        },
    )
    .await;
    let s = group.status();
    // The log keeps entries after the purge point, and everything is still applied.
    assert!(s.purged_index < s.snapshot_index);
    assert_eq!(count(group.state()), 200);
    group.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_built_snapshot_is_a_recorded_point_and_reading_one_dumps_the_present_state() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open_db(dir.path());
    let raft = db.open_tree("p0/raft").expect("tree");
    let last = {
        let (group, _) = open_group(&db, options("p0")).await;
        propose_all(
            &group,
            (0..30).map(|i| format!("set:k{i}={}", "v".repeat(512))),
        )
        .await;
        let built = group
            .snapshot(Duration::from_secs(10))
            .await
            .expect("snapshot")
            .expect("index");
        assert_eq!(group.status().snapshot_index, Some(built));
        // Building stored the point only: no copy of the state.
        let stored: usize = raft.iter().map(|kv| kv.expect("read").1.len()).sum();
        assert!(stored < 4096, "the raft tree holds {stored} bytes");
        propose_all(&group, (30..40).map(|i| format!("set:k{i}=w"))).await;
        let (last, _) = group
            .propose_with_index(b"last".to_vec())
            .await
            .expect("propose");
        group.shutdown().await.expect("shutdown");
        last
    };

    // Opening the group replays the log and reads the snapshot: the state as it is then, at the
    // entry applied last.
    {
        let (group, _) = open_group(&db, options("p0")).await;
        assert_eq!(group.status().snapshot_index, Some(last));
        group.shutdown().await.expect("shutdown");
    }
    let mut store = StateStore::open(&db, "p0", 256, Arc::new(Counter::default())).expect("store");
    let snapshot = store
        .get_current_snapshot()
        .await
        .expect("read")
        .expect("a snapshot exists");
    assert!(snapshot.meta.last_log_id.map(|l| l.index) >= Some(last));
    let (applied, _) = store.applied_state().await.expect("applied state");
    assert_eq!(snapshot.meta.last_log_id, applied);
    let pairs = cluster::snapshot::decode(snapshot.snapshot.get_ref()).expect("decodes");
    assert_eq!(
        pairs,
        cluster::snapshot::dump_pairs(store.state()).expect("dump")
    );
    let value = |key: &[u8]| {
        pairs
            .iter()
            .find(|(k, _)| &k[..] == key)
            .map(|(_, v)| v.to_vec())
    };
    assert_eq!(value(b"k39"), Some(b"w".to_vec()));
    assert_eq!(value(b"count"), Some(41u64.to_be_bytes().to_vec()));

    // Nothing applied since: reading again names the same snapshot.
    let again = store
        .get_current_snapshot()
        .await
        .expect("read")
        .expect("a snapshot exists");
    assert_eq!(again.meta, snapshot.meta);
}
