//! The membership controller's performer in process: clusters of three and four nodes over the
//! in-process peer network (`crate::testing`). What it promises: a transfer hands leadership to
//! the chosen voter and refuses any other node; the steps it performs move a replica with its
//! data; a drained node ends up with no replica, leadership or meta vote, and only then can be
//! removed; a step that cannot apply is refused and changes nothing.

use super::*;
use crate::testing::{cluster, start_op, until, workflow_on, TestCluster};

/// Whether `node` leads `p` with its actors running.
async fn leads(c: &TestCluster, node: NodeId, p: PartitionId) -> bool {
    match c.node(node).host.partition(p) {
        Some(part) => part.is_local_leader().await,
        None => false,
    }
}

/// `p`'s Raft status on `node`.
fn status(c: &TestCluster, node: NodeId, p: PartitionId) -> cluster::GroupStatus {
    let part = c.node(node).host.partition(p).expect("hosted");
    part.group.status()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transfer_hands_leadership_to_the_chosen_voter_and_refuses_any_other_node() {
    // One partition: no leadership to balance afterwards, so the transfer's outcome stays.
    let c = cluster(3, 1).await;
    let p = PartitionId(0);
    let (leader, followers) = c.followers(p).await;
    let m = &c.node(followers[0]).membership;
    let stranger = m.transfer(p, Some(NodeId(9))).await;
    assert!(
        matches!(&stranger, Err(Error::Conflict(e)) if e.contains("not a follower voter")),
        "{stranger:?}"
    );
    let itself = m.transfer(p, Some(leader)).await;
    assert!(matches!(itself, Err(Error::Conflict(_))), "{itself:?}");
    let absent = m.transfer(PartitionId(5), Some(followers[1])).await;
    assert!(matches!(absent, Err(Error::NotFound(_))), "{absent:?}");
    assert_eq!(c.leader(p).await, Some(leader), "refusals change nothing");
    let to = followers[1];
    assert_eq!(m.transfer(p, Some(to)).await.expect("transfers"), to);
    until("the chosen voter to lead", async || {
        let known = status(&c, followers[0], p).leader == Some(to);
        (known && leads(&c, to, p).await).then_some(())
    })
    .await;
    // The old leader left the membership; the controller brings it back as a voter.
    until("three voters again under the new leader", async || {
        let s = status(&c, to, p);
        (s.voters.len() == 3 && s.learners.is_empty()).then_some(())
    })
    .await;
    assert_eq!(c.leader(p).await, Some(to));
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn performed_steps_move_a_replica_and_its_data_to_another_node() {
    let c = cluster(4, 4).await;
    // The steps are taken here, one by one, not by the controller.
    for n in c.ids() {
        c.node(n).membership.loops.stop();
    }
    let p = PartitionId(0);
    let (leader, followers) = c.followers(p).await;
    let (gone, newcomer) = (followers[0], c.outsiders(p)[0]);
    let id = workflow_on(p, 1);
    let host = &c.node(leader).host;
    host.route_op(&id, start_op(&id)).await.expect("starts");
    let m = &c.node(followers[1]).membership;
    let add = Action::AddReplica {
        partition: p,
        node: newcomer,
    };
    m.perform(&m.view().await, &add).await.expect("adds");
    assert!(c.node(newcomer).host.partition(p).is_some(), "hosted");
    assert!(status(&c, leader, p).learners.contains(&newcomer));
    let view = until("the learner to catch up", async || {
        let view = m.view().await;
        view.partitions[&p]
            .caught_up
            .contains(&newcomer)
            .then_some(view)
    })
    .await;
    let promote = Action::Promote {
        partition: p,
        node: newcomer,
    };
    m.perform(&view, &promote).await.expect("promotes");
    assert!(status(&c, leader, p).voters.contains(&newcomer));
    let remove = Action::RemoveReplica {
        partition: p,
        node: gone,
    };
    m.perform(&m.view().await, &remove).await.expect("removes");
    let voters = BTreeSet::from([leader, followers[1], newcomer]);
    let now: BTreeSet<NodeId> = status(&c, leader, p).voters.into_iter().collect();
    assert_eq!(now, voters);
    let unhost = Action::Unhost {
        partition: p,
        node: gone,
    };
    m.perform(&m.view().await, &unhost).await.expect("unhosts");
    assert!(c.node(gone).host.partition(p).is_none(), "deleted");
    let copied = until("the new replica to hold the workflow", async || {
        let part = c.node(newcomer).host.partition(p)?;
        part.read(&id).ok().flatten().map(|r| r.version)
    })
    .await;
    assert_eq!(copied, 1);
    // The node that gave its replica up still reaches the workflow, through the leader.
    let record = c.node(gone).host.record(&id).await.expect("reads");
    assert_eq!(record.version, 1);
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drained_node_holds_nothing_and_only_then_can_be_removed() {
    let c = cluster(4, 4).await;
    let meta = c.meta_leader().expect("meta led");
    // A node that leads a partition but not the meta group.
    let mut drained = None;
    for p in (0..4).map(PartitionId) {
        drained = drained.or(c.leader(p).await.filter(|n| *n != meta));
    }
    let drained = drained.expect("a partition led outside the meta leader");
    let m = &c.node(meta).membership;
    let active = m.remove_node(drained).await;
    assert!(
        matches!(&active, Err(Error::Conflict(e)) if e.contains("not drained")),
        "{active:?}"
    );
    m.set_draining(drained, true).await.expect("drains");
    let holding = m.remove_node(drained).await;
    assert!(
        matches!(&holding, Err(Error::Conflict(e)) if e.contains("still holds")),
        "{holding:?}"
    );
    until("the drain to finish", async || {
        let s = m.cluster_status().await;
        let node = s.nodes.iter().find(|n| n.id == drained)?;
        let off = |g: &GroupSummary| !g.voters.contains(&drained) && g.leader != Some(drained);
        let whole =
            |g: &GroupSummary| g.leader.is_some() && (g.name == "meta" || g.voters.len() == 3);
        let done = node.draining && node.replicas == 0 && node.leads == 0;
        (done && s.groups.iter().all(|g| off(g) && whole(g))).then_some(())
    })
    .await;
    m.remove_node(drained).await.expect("removed once drained");
    let s = m.cluster_status().await;
    assert!(s.nodes.iter().all(|n| n.id != drained), "{:?}", s.nodes);
    assert_eq!(s.groups.len(), 5, "meta and four partitions");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn membership_steps_that_cannot_apply_are_refused_and_change_nothing() {
    let c = cluster(4, 4).await;
    let p = PartitionId(0);
    let (leader, followers) = c.followers(p).await;
    let outsider = c.outsiders(p)[0];
    let before = status(&c, leader, p);
    // Unhosting a replica that is not hosted is a no-op.
    let m = &c.node(outsider).membership;
    m.unhost_replica(p).await.expect("nothing to do");
    assert!(c.node(outsider).host.partition(p).is_none());
    // Hosting one that is changes nothing either.
    let hosted = c.node(leader).host.partition(p).expect("hosted");
    let m = &c.node(leader).membership;
    m.host_replica(p).await.expect("already hosted");
    let same = c.node(leader).host.partition(p).expect("hosted");
    assert!(Arc::ptr_eq(&hosted, &same));
    let on_follower = c
        .node(followers[0])
        .membership
        .add_replica(p, outsider, "127.0.0.1:1");
    let on_follower = on_follower.await;
    assert!(
        matches!(on_follower, Err(Error::Unavailable(_))),
        "{on_follower:?}"
    );
    let bad_addr = m.add_replica(p, outsider, "nowhere").await;
    assert!(matches!(bad_addr, Err(Error::Invalid(_))), "{bad_addr:?}");
    let not_learner = m.promote(p, outsider).await;
    assert!(
        matches!(not_learner, Err(Error::Conflict(_))),
        "{not_learner:?}"
    );
    let itself = m.remove_replica(p, leader).await;
    assert!(matches!(itself, Err(Error::Conflict(_))), "{itself:?}");
    let after = status(&c, leader, p);
    assert_eq!(
        (after.voters, after.learners),
        (before.voters, before.learners)
    );
    assert_eq!(c.hosts(p).len(), 3);
    c.stop().await;
}

/// Makes `node` lead `p` (the controller brings the old leader back as a voter), stops every
/// controller, then hands `p`'s leadership from `node` to another voter: `node` leaves `p`'s
/// membership, which a controller round would repair by adding it back. Answers the new leader.
async fn leave_led_partition(c: &TestCluster, node: NodeId, p: PartitionId) -> NodeId {
    if c.leader(p).await != Some(node) {
        let m = &c.node(node).membership;
        m.transfer(p, Some(node)).await.expect("transfers");
    }
    until("the node to lead a whole partition", async || {
        let s = status(c, node, p);
        let whole = s.voters.len() == 3 && s.learners.is_empty();
        (whole && c.leader(p).await == Some(node)).then_some(())
    })
    .await;
    // From here on, rounds are run by hand.
    for n in c.ids() {
        c.node(n).membership.stop_controller().await;
    }
    let to = c.followers(p).await.1[0];
    let m = &c.node(to).membership;
    assert_eq!(m.transfer(p, Some(to)).await.expect("transfers"), to);
    until("the other voter to lead without the node", async || {
        let s = status(c, to, p);
        // The node that left hears no more of `p`: only the others know the new leader.
        let left = !s.voters.contains(&node) && !s.learners.contains(&node);
        (left && leads(c, to, p).await).then_some(())
    })
    .await;
    to
}

/// Whether `node` is in `p`'s membership as its leader `leader` has it.
fn member(c: &TestCluster, leader: NodeId, p: PartitionId, node: NodeId) -> bool {
    let s = status(c, leader, p);
    s.voters.contains(&node) || s.learners.contains(&node)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_meta_leader_whose_shutdown_began_takes_no_membership_step() {
    let c = cluster(3, 1).await;
    let p = PartitionId(0);
    let meta = c.meta_leader().expect("meta led");
    let leader = leave_led_partition(&c, meta, p).await;
    c.node(meta).begin_shutdown().await;
    // Not stopping, this round would add the meta leader back to the partition it just left.
    c.node(meta).membership.control_round().await;
    assert!(!member(&c, leader, p, meta), "{:?}", status(&c, leader, p));
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_controller_places_a_replica_on_a_node_whose_shutdown_began() {
    let c = cluster(3, 1).await;
    let p = PartitionId(0);
    let meta = c.meta_leader().expect("meta led");
    let going = c.ids().into_iter().find(|n| *n != meta).expect("another");
    let leader = leave_led_partition(&c, going, p).await;
    c.node(going).begin_shutdown().await;
    // Not stopping, it would be the one place for the partition's third replica.
    let m = &c.node(meta).membership;
    m.control_round().await;
    assert!(!member(&c, leader, p, going), "{:?}", status(&c, leader, p));
    let view = m.view().await;
    assert!(!view.members[&going].live, "it reports no groups");
    assert_eq!(plan::next_action(&view), None);
    // Nor does it host a new replica or campaign when asked directly.
    for refused in [Request::Host { partition: p }, Request::Groups] {
        let answer = c.node(going).membership.answer(refused).await;
        assert!(matches!(answer, Err(Error::Unavailable(_))), "{answer:?}");
    }
    c.stop().await;
}
