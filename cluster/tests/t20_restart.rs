//! Restarting a group on the same database resumes vote, log, state and last applied index,
//! and the node leads its single-voter group again.

mod common;

use cluster::storage::{Batch, IVec};
use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reopen_resumes_state_and_indexes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let last_index = {
        let db = open_db(dir.path());
        let (group, _) = open_group(&db, options("p0")).await;
        let mut last = 0;
        for i in 0..50 {
            let (index, _) = group
                .propose_with_index(format!("set:k{i}=v{i}").into_bytes())
                .await
                .expect("propose");
            last = index;
        }
        let term = group.status().term;
        assert!(term >= 1);
        // The state tree buffers its applies until a checkpoint (256 entries): this restart
        // must get them back by replaying the log.
        let backend = db.open_tree("p0/state").expect("tree");
        assert_eq!(backend.get(b"k49").expect("read"), None);
        assert_eq!(
            group.state().get(b"k49").expect("read").as_deref(),
            Some(&b"v49"[..])
        );
        group.shutdown().await.expect("shutdown");
        last
    };

    let db = open_db(dir.path());
    let (group, _) = open_group(&db, options("p0")).await;
    assert!(group.is_leader());
    assert_eq!(count(group.state()), 50);
    assert_eq!(
        group.state().get(b"k49").expect("read").as_deref(),
        Some(&b"v49"[..])
    );
    let status = group.status();
    assert!(status.last_applied_index >= Some(last_index));

    let (index, response) = group
        .propose_with_index(b"after".to_vec())
        .await
        .expect("propose");
    assert!(
        index > last_index,
        "index {index} continues after {last_index}"
    );
    assert_eq!(decode_count(&response), 51);
    group.shutdown().await.expect("shutdown");
    drop(group);
    drop(db);

    // A third life, to make sure the second one left a consistent store too.
    let db = open_db(dir.path());
    let (group, _) = open_group(&db, options("p0")).await;
    assert_eq!(count(group.state()), 51);
    group.shutdown().await.expect("shutdown");
}

/// A crash can lose the last state batches (apply does not flush) while the flushed log keeps the
/// entries. Reopening must re-apply exactly the lost entries: none twice, none missing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_applies_are_replayed_exactly_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let db = open_db(dir.path());
        let (group, _) = open_group(&db, options("p0")).await;
        for i in 0..7 {
            group
                .propose(format!("c{i}").into_bytes())
                .await
                .expect("propose");
        }
        // The whole state tree, bookkeeping included, as of 7 applied commands.
        let before: Vec<(IVec, IVec)> = group
            .state()
            .iter()
            .collect::<Result<_, _>>()
            .expect("dump");
        for i in 7..10 {
            group
                .propose(format!("c{i}").into_bytes())
                .await
                .expect("propose");
        }
        group.shutdown().await.expect("shutdown");
        // Simulate losing the last three state batches.
        let state = group.state().clone();
        drop(group);
        let mut restore = Batch::default();
        for kv in state.iter() {
            restore.remove(kv.expect("read").0);
        }
        for (k, v) in before {
            restore.insert(k, v);
        }
        state.apply_batch(restore).expect("restore");
        assert_eq!(count(&state), 7);
        db.flush().await.expect("flush");
    }
    let db = open_db(dir.path());
    let (group, _) = open_group(&db, options("p0")).await;
    assert_eq!(count(group.state()), 10);
    for n in 1..=10u64 {
        let stored = group
            .state()
            .get(format!("cmd/{n:08}"))
            .expect("read")
            .expect("present");
        assert_eq!(stored.as_ref(), format!("c{}", n - 1).as_bytes());
    }
    assert!(group
        .state()
        .get(format!("cmd/{:08}", 11))
        .expect("read")
        .is_none());
    group.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opening_with_another_node_id_is_a_clear_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open_db(dir.path());
    let (group, _) = open_group(&db, options("p0")).await;
    group.shutdown().await.expect("shutdown");
    drop(group);

    let mut other = options("p0");
    other.node = cluster::NodeId(2);
    let result = cluster::Group::open(&db, other, std::sync::Arc::new(Counter::default())).await;
    match result {
        Err(cluster::Error::Options(message)) => assert!(message.contains("node 2"), "{message}"),
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("a foreign node id must not open the group"),
    }
}

/// A crash inside a batched entry (two of its three commands applied) resumes with the third:
/// the progress marker written with each command's batch makes the replay skip the first two.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partly_applied_entry_resumes_after_its_last_applied_command() {
    use cluster::codec;
    use cluster::state_store::StateStore;
    use cluster::{Request, StateMachine};
    use openraft::storage::RaftStateMachine;
    use openraft::{CommittedLeaderId, EntryPayload, LogId};

    let dir = tempfile::tempdir().expect("tempdir");
    let db = open_db(dir.path());
    let sm = std::sync::Arc::new(Counter::default());
    let mut store = StateStore::open(&db, "p0", 0, sm.clone()).expect("store");
    let state = db.open_tree("p0/state").expect("tree");
    let log_id = LogId::new(CommittedLeaderId::new(1, 1), 5);

    // What survived the crash: commands "a" and "b" of entry 5, each with its progress marker.
    for (done, command) in [(1u32, &b"a"[..]), (2, &b"b"[..])] {
        let mut batch = Batch::default();
        sm.apply(&state, &mut batch, command);
        batch.insert(codec::KEY_PARTIAL, codec::encode_partial(&log_id, done));
        state.apply_batch(batch).expect("apply");
    }

    let entry = openraft::Entry {
        log_id,
        payload: EntryPayload::Normal(Request(vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()])),
    };
    let responses = store.apply([entry]).await.expect("replay");
    assert_eq!(responses.len(), 1);
    assert_eq!(responses[0].0.len(), 3);
    assert_eq!(decode_count(&responses[0].0[2]), 3);
    assert_eq!(count(&state), 3);
    assert_eq!(
        state.get(b"cmd/00000003").expect("read").as_deref(),
        Some(&b"c"[..])
    );
    assert!(state.get(codec::KEY_PARTIAL).expect("read").is_none());
    let (applied, _) = store.applied_state().await.expect("applied");
    assert_eq!(applied, Some(log_id));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn packed_batches_are_stored_packed_and_replayed_as_their_commands() {
    use cluster::log_store::LogStore;
    use openraft::storage::RaftLogReader;
    use openraft::EntryPayload;

    const N: usize = 200;
    let command = |i: usize| {
        format!("{{\"workflowId\":\"wf-{i:04}\",\"status\":\"RUNNING\",\"input\":{{\"slot\":{i}}},\"tasks\":[]}}")
    };
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let db = open_db(dir.path());
        let (group, _) = open_group(&db, options("p0")).await;
        // Concurrent proposals share entries; those batches are large enough to be packed.
        let proposals = (0..N).map(|i| {
            let group = group.clone();
            tokio::spawn(async move { group.propose(command(i).into_bytes()).await })
        });
        for p in futures::future::join_all(proposals).await {
            p.expect("task").expect("propose");
        }
        assert_eq!(count(group.state()), N as u64);
        group.shutdown().await.expect("shutdown");
        drop(group);

        // The log holds packed batches, each a single command beginning with the marker.
        let mut log = LogStore::open(&db, "p0").await.expect("log");
        let entries = log.try_get_log_entries(0..u64::MAX).await.expect("entries");
        let packed = entries
            .iter()
            .filter(|e| match &e.payload {
                EntryPayload::Normal(r) => r.0.len() == 1 && cluster::pack::looks_packed(&r.0[0]),
                _ => false,
            })
            .count();
        assert!(packed > 0, "no packed entry among {}", entries.len());
        // Lose the state (it was never checkpointed: fewer than 256 entries): only the log is left.
        let backend = db.open_tree("p0/state").expect("tree");
        assert_eq!(backend.get(b"count").expect("read"), None);
        db.flush().await.expect("flush");
    }
    let db = open_db(dir.path());
    let (group, _) = open_group(&db, options("p0")).await;
    assert_eq!(count(group.state()), N as u64);
    let mut stored: Vec<String> = (1..=N)
        .map(|n| {
            let v = group
                .state()
                .get(format!("cmd/{n:08}"))
                .expect("read")
                .expect("present");
            String::from_utf8(v.to_vec()).expect("utf-8")
        })
        .collect();
    stored.sort();
    assert_eq!(stored, (0..N).map(command).collect::<Vec<_>>());
    // A command that begins with the marker is refused before it is proposed.
    let mut fake = cluster::pack::MARKER.to_vec();
    fake.extend_from_slice(b"not a batch");
    assert_eq!(
        group.propose(fake).await,
        Err(cluster::Error::CommandLooksPacked)
    );
    assert_eq!(count(group.state()), N as u64);
    group.shutdown().await.expect("shutdown");
}
