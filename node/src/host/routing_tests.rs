//! Routing in process: clusters of three and four nodes over the in-process peer network
//! (`crate::testing`). What the routing promises: an operation sent to any node runs on its
//! partition's leader, once; it goes through a failover within the route deadline; a request
//! that has used its hops is not forwarded again; a node without a replica finds the leader by
//! asking its peers, and so does a node whose replica left the partition's membership; reads
//! retry only while the leader is unavailable.

use super::*;
use crate::testing::{cluster, start_op, workflow_on};
use proto::record::dead_letter::Attempts;
use std::sync::atomic::{AtomicU32, Ordering};

/// Counts one more handling of message `m` of event `e` (answers the attempts so far).
fn begin_attempt() -> PartitionCommand {
    PartitionCommand::BeginAttempt {
        event: "e".into(),
        message_id: "m".into(),
        now: 1,
        last_error: None,
    }
}

fn attempts(outcome: PartitionOutcome) -> u32 {
    match outcome {
        PartitionOutcome::Attempts(a) => {
            let Attempts { attempts, .. } = *a;
            attempts
        }
        other => panic!("not an attempts outcome: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_forwards_an_operation_to_the_leader() {
    let c = cluster(3, 3).await;
    let p = PartitionId(1);
    let (leader, followers) = c.followers(p).await;
    assert_eq!(followers.len(), 2, "three replicas");
    let id = workflow_on(p, 1);
    let via = &c.node(followers[0]).host;
    via.route_op(&id, start_op(&id))
        .await
        .expect("starts through a follower");
    // The leader applied it before the answer came back.
    let on_leader = c.node(leader).host.partition(p).expect("hosted");
    let stored = on_leader.read(&id).expect("reads");
    assert_eq!(stored.map(|r| r.version), Some(1));
    for n in c.ids() {
        let record = c.node(n).host.record(&id).await.expect("reads");
        assert_eq!((record.version, &record.workflow.workflow_id), (1, &id));
    }
    // Sent again through the other follower, the start finds the workflow and changes nothing.
    let again = c.node(followers[1]).host.route_op(&id, start_op(&id)).await;
    assert!(matches!(again, Err(Error::Conflict(_))), "{again:?}");
    assert_eq!(via.record(&id).await.expect("reads").version, 1);
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_command_through_a_follower_runs_once_on_the_leader() {
    let c = cluster(3, 3).await;
    let p = PartitionId(2);
    let (leader, followers) = c.followers(p).await;
    let through = [followers[0], followers[1], leader];
    for (i, via) in (1..).zip(through) {
        let host = &c.node(via).host;
        let outcome = host.partition_command(p, begin_attempt()).await;
        assert_eq!(
            attempts(outcome.expect("proposed")),
            i,
            "through node {via}"
        );
    }
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operation_through_a_follower_goes_through_after_its_leader_is_cut_off() {
    let c = cluster(3, 3).await;
    let p = PartitionId(0);
    let (old, followers) = c.followers(p).await;
    c.net.cut(old);
    let via = &c.node(followers[0]).host;
    let id = workflow_on(p, 2);
    let started = tokio::time::Instant::now();
    via.route_op(&id, start_op(&id))
        .await
        .expect("starts after the failover");
    assert!(started.elapsed() < Duration::from_millis(ROUTE_DEADLINE_MS));
    let new = via.partition(p).and_then(|x| x.group.leader());
    let new = new.expect("the follower knows the new leader");
    assert!(followers.contains(&new), "{new} leads, not the cut {old}");
    let on_new = c.node(new).host.partition(p).expect("hosted");
    assert_eq!(on_new.read(&id).expect("reads").map(|r| r.version), Some(1));
    for f in &followers {
        let record = c.node(*f).host.record(&id).await.expect("reads");
        assert_eq!(record.version, 1);
    }
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_has_used_its_hops_is_not_forwarded_again() {
    let c = cluster(3, 3).await;
    let p = PartitionId(0);
    let (leader, followers) = c.followers(p).await;
    let via = &c.node(followers[0]).host;
    let id = workflow_on(p, 3);
    let op = via.route_op_hops(&id, start_op(&id), HOPS_MAX).await;
    assert!(matches!(op, Err(Error::Unavailable(_))), "{op:?}");
    let read = via.record_hops(&id, HOPS_MAX).await;
    assert!(matches!(read, Err(Error::Unavailable(_))), "{read:?}");
    let command = via.partition_command_hops(p, begin_attempt(), HOPS_MAX);
    let command = command.await;
    assert!(matches!(command, Err(Error::Unavailable(_))), "{command:?}");
    // Nothing reached the leader: no workflow, and the next attempt is the first.
    let on_leader = c.node(leader).host.partition(p).expect("hosted");
    assert_eq!(on_leader.read(&id).expect("reads"), None);
    let first = c.node(leader).host.partition_command(p, begin_attempt());
    assert_eq!(attempts(first.await.expect("proposed")), 1);
    // With a hop left, the same operation runs.
    via.route_op_hops(&id, start_op(&id), HOPS_MAX - 1)
        .await
        .expect("forwarded");
    assert!(on_leader.read(&id).expect("reads").is_some());
    c.stop().await;
}

#[tokio::test(start_paused = true)]
async fn reads_retry_while_the_leader_is_unavailable_and_return_other_errors_at_once() {
    let calls = &AtomicU32::new(0);
    let electing = || Error::Unavailable("an election is in progress".into());
    let read = through_failover(|| async move {
        match calls.fetch_add(1, Ordering::SeqCst) {
            0..=2 => Err(electing()),
            n => Ok(n),
        }
    });
    assert_eq!(read.await.expect("the fourth read answers"), 3);
    calls.store(0, Ordering::SeqCst);
    let started = tokio::time::Instant::now();
    let missing = through_failover(|| async move {
        calls.fetch_add(1, Ordering::SeqCst);
        Err::<(), _>(Error::NotFound("no such workflow".into()))
    });
    assert!(matches!(missing.await, Err(Error::NotFound(_))));
    assert_eq!(calls.load(Ordering::SeqCst), 1, "not retried");
    assert_eq!(started.elapsed(), Duration::ZERO);
    let deadline = Duration::from_millis(ROUTE_DEADLINE_MS);
    let never = through_failover(|| async move { Err::<(), _>(electing()) });
    assert!(matches!(never.await, Err(Error::Unavailable(_))));
    let waited = started.elapsed();
    let poll = Duration::from_millis(LEADER_POLL_MS);
    assert!(
        waited >= deadline && waited <= deadline + poll,
        "{waited:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_without_a_replica_locates_the_leader_remembers_it_and_forgets_it() {
    // Four nodes, three replicas per partition: one node hosts none of each partition.
    let c = cluster(4, 4).await;
    // The outsider must not lead the meta group: its controller would mark the peers it cannot
    // reach as down while it is cut off, and a peer marked down is not taken from memory.
    let meta = c.meta_leader();
    let p = (0..4)
        .map(PartitionId)
        .find(|p| c.outsiders(*p)[0] != meta.expect("meta led"));
    let p = p.expect("a partition whose outsider does not lead the meta group");
    let (leader, _) = c.followers(p).await;
    let outsider = c.outsiders(p)[0];
    let host = &c.node(outsider).host;
    let hint = || lock(&host.leader_hints).get(&p.0).copied();
    assert_eq!(host.locate(p).await, Some(leader));
    assert_eq!(hint(), Some(leader));
    // Remembered: found while no peer can be asked.
    c.net.cut(outsider);
    assert_eq!(host.locate(p).await, Some(leader));
    host.forget_leader(p);
    assert_eq!(hint(), None);
    assert_eq!(host.locate(p).await, None, "asked, nobody answers");
    c.net.heal(outsider);
    // An operation sent there runs on the leader, located again.
    let id = workflow_on(p, 4);
    host.route_op(&id, start_op(&id)).await.expect("starts");
    assert_eq!(hint(), Some(leader));
    let on_leader = c.node(leader).host.partition(p).expect("hosted");
    assert_eq!(
        on_leader.read(&id).expect("reads").map(|r| r.version),
        Some(1)
    );
    assert_eq!(host.record(&id).await.expect("reads").version, 1);
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_replica_left_the_membership_routes_through_the_members_at_once() {
    let c = cluster(3, 1).await;
    // Nothing adds the old leader back: it stays out of the membership (as a node whose
    // shutdown began after it handed its leaderships away).
    for n in c.ids() {
        c.node(n).membership.stop_controller().await;
    }
    let p = PartitionId(0);
    let (gone, followers) = c.followers(p).await;
    let to = followers[0];
    let m = &c.node(to).membership;
    assert_eq!(m.transfer(p, Some(to)).await.expect("transfers"), to);
    crate::testing::until("the leadership handed over", async || {
        let part = c.node(to).host.partition(p)?;
        let left = !part.group.status().voters.contains(&gone);
        (left && part.is_local_leader().await).then_some(())
    })
    .await;
    let host = &c.node(gone).host;
    assert!(host.member_replica(p).is_none(), "out of the membership");
    assert!(host.partition(p).is_some(), "still hosted");
    assert_eq!(
        c.node(gone).membership.local_leader(p),
        None,
        "says nothing stale"
    );
    // Its replica never hears of the new leader; the operation goes there all the same.
    let id = workflow_on(p, 5);
    host.route_op(&id, start_op(&id)).await.expect("starts");
    let on_leader = c.node(to).host.partition(p).expect("hosted");
    assert_eq!(
        on_leader.read(&id).expect("reads").map(|r| r.version),
        Some(1)
    );
    assert_eq!(host.record(&id).await.expect("reads").version, 1);
    c.stop().await;
}
