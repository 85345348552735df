//! A follower that was down while the leader compacted its log catches up by snapshot
//! installation over the transport (openraft 0.9 sends it in `install_snapshot` chunks), and ends
//! with the same state as the others.

mod common;

use cluster::NodeId;
use common::nodes::TestCluster;
use common::*;
use std::sync::atomic::Ordering;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_restarted_follower_catches_up_by_snapshot() {
    let mut cluster = TestCluster::start(3, &["p0"], |o| {
        // Snapshots only when asked; purge everything a snapshot covers; small chunks so the
        // snapshot travels in several messages.
        o.snapshot_logs_since_last = 0;
        o.logs_to_keep_after_snapshot = 0;
        o.snapshot_chunk_bytes_max = 4 * 1024;
    })
    .await;
    let leader = cluster.leader("p0").await;
    let follower = *cluster
        .running()
        .iter()
        .find(|id| **id != leader)
        .expect("a follower");
    {
        let group = cluster.group(leader, "p0").clone();
        group.propose(b"before".to_vec()).await.expect("propose");
    }
    cluster.converged("p0", 1).await;
    cluster.stop(follower).await;

    // While the follower is down: enough state for several chunks, then compaction.
    let last = {
        let group = cluster.group(leader, "p0").clone();
        for i in 0..200 {
            group
                .propose(format!("set:key{i:04}={}", "v".repeat(64)).into_bytes())
                .await
                .expect("propose");
        }
        let snapshot = group
            .snapshot(Duration::from_secs(10))
            .await
            .expect("snapshot")
            .expect("index");
        wait_until("the leader purges its log", Duration::from_secs(10), || {
            group.status().purged_index >= Some(snapshot)
        })
        .await;
        snapshot
    };

    cluster.restart(follower).await;
    cluster.converged("p0", 201).await;
    let node = cluster.node(follower);
    let (group, sm) = &node.groups["p0"];
    // Metrics follow the install asynchronously.
    wait_until(
        "the follower's metrics show the installed snapshot",
        Duration::from_secs(10),
        || group.status().snapshot_index >= Some(last),
    )
    .await;
    assert!(sm.restored.load(Ordering::SeqCst) >= 1);
    assert_ne!(follower, NodeId(0));

    // And it keeps following from the log after the snapshot.
    cluster
        .group(leader, "p0")
        .propose(b"after".to_vec())
        .await
        .expect("propose");
    cluster.converged("p0", 202).await;
    cluster.stop_all().await;
}
