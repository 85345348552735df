//! The rebalancing plan: from a snapshot of the cluster (members, and every group's leader,
//! voters, learners and hosting nodes), the next single membership step that brings the cluster
//! closer to where it should be. A pure function, so every rule is unit-tested here and the
//! simulator can drive it; `service::membership` gathers the view and performs the step.
//!
//! Where the cluster should be:
//! - every recorded member is in the meta group; its voters are the largest odd number of active
//!   members up to [`META_VOTERS_MAX`], the rest learners;
//! - every partition has `min(3, active members)` voters, none of them draining;
//! - replica counts per active member differ by at most one, and no member leads more than its
//!   share of partitions (rounded up);
//! - a node hosts a partition's replica only while it is in that partition's membership.
//!
//! Steps are small and safe one at a time, and none waits for long: a replica is added as a
//! learner, promoted to voter in a later step once its leader reports it caught up, and only then
//! is another removed; a leader is never removed while it leads — it steps down first (leaves the
//! membership) and a chosen voter takes over; no step involves a member that did not answer.

use super::{META_VOTERS_MAX, REPLICATION_FACTOR};
use proto::{NodeId, PartitionId};
use std::collections::{BTreeMap, BTreeSet};

/// A recorded member as the controller sees it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub draining: bool,
    /// Answered the controller this round.
    pub live: bool,
}

/// One group as its leader reports it, plus the nodes that run a replica of it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GroupView {
    pub leader: Option<NodeId>,
    pub voters: BTreeSet<NodeId>,
    pub learners: BTreeSet<NodeId>,
    /// The learners the leader reports as caught up with its log (ready to vote).
    pub caught_up: BTreeSet<NodeId>,
    /// Nodes that host a replica (have the group open), members or not.
    pub hosts: BTreeSet<NodeId>,
}

/// The cluster as the controller sees it at one moment.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct View {
    pub members: BTreeMap<NodeId, Member>,
    pub meta: GroupView,
    pub partitions: BTreeMap<PartitionId, GroupView>,
}

/// One membership step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Add a member to the meta group as a learner.
    MetaAddLearner(NodeId),
    /// Make these the meta group's voters (all already in its membership).
    MetaSetVoters(BTreeSet<NodeId>),
    /// Drop a non-voter from the meta group.
    MetaRemoveLearner(NodeId),
    /// Host a replica of `partition` on `node` and add it to the membership as a learner, which
    /// catches up from the leader's log or a snapshot.
    AddReplica {
        partition: PartitionId,
        node: NodeId,
    },
    /// Make a caught-up learner of `partition` a voter.
    Promote {
        partition: PartitionId,
        node: NodeId,
    },
    /// Remove `node` (not the leader) from `partition`'s membership.
    RemoveReplica {
        partition: PartitionId,
        node: NodeId,
    },
    /// `to` (a voter) takes over leading `partition`: the other voters hold their elections, the
    /// leader leaves the membership (a later step adds a replica back), and `to` is elected.
    Transfer { partition: PartitionId, to: NodeId },
    /// `node` stops hosting `partition` (it is no longer in its membership) and deletes its copy.
    Unhost {
        partition: PartitionId,
        node: NodeId,
    },
}

impl View {
    fn active(&self, n: &NodeId) -> bool {
        self.members.get(n).is_some_and(|m| !m.draining)
    }
    fn usable(&self, n: &NodeId) -> bool {
        self.members.get(n).is_some_and(|m| !m.draining && m.live)
    }
    fn live(&self, n: &NodeId) -> bool {
        self.members.get(n).is_some_and(|m| m.live)
    }
    fn active_count(&self) -> usize {
        self.members.values().filter(|m| !m.draining).count()
    }
    /// Voter replicas per active member.
    fn loads(&self) -> BTreeMap<NodeId, usize> {
        let active = self.members.keys().filter(|n| self.active(n));
        tally(active, self.partitions.values().flat_map(|g| &g.voters))
    }
}

/// How often each of `members` appears in `hits` (others are ignored; every member is listed).
fn tally<'a>(
    members: impl Iterator<Item = &'a NodeId>,
    hits: impl Iterator<Item = &'a NodeId>,
) -> BTreeMap<NodeId, usize> {
    let mut counts: BTreeMap<NodeId, usize> = members.map(|n| (*n, 0)).collect();
    for n in hits {
        if let Some(c) = counts.get_mut(n) {
            *c += 1;
        }
    }
    counts
}

/// The replication factor the active members allow.
fn replicas(view: &View) -> usize {
    REPLICATION_FACTOR.min(view.active_count()).max(1)
}

/// The next step, or `None` when the cluster is where it should be (or cannot be judged now: a
/// group without a known leader or led by a node that just left it, or a voter the controller does
/// not know as a member).
pub fn next_action(view: &View) -> Option<Action> {
    if view.members.is_empty() || view.meta.leader.is_none() {
        return None;
    }
    let groups = std::iter::once(&view.meta).chain(view.partitions.values());
    for g in groups {
        let settled = g.leader.is_some_and(|l| g.voters.contains(&l));
        if !settled || g.voters.iter().any(|v| !view.members.contains_key(v)) {
            return None;
        }
    }
    if let Some(step) = meta_step(view).or_else(|| partition_steps(view)) {
        return Some(step);
    }
    // Balance only a cluster with nothing to repair: every partition has its voters and no
    // learner still catching up.
    let rf = replicas(view);
    let whole = |g: &GroupView| g.voters.len() == rf && g.learners.is_empty();
    if !view.partitions.values().all(whole) {
        return None;
    }
    balance_replicas(view).or_else(|| balance_leaders(view))
}

fn meta_step(view: &View) -> Option<Action> {
    let meta = &view.meta;
    let in_group = |n: &NodeId| meta.voters.contains(n) || meta.learners.contains(n);
    if let Some(n) = view.members.keys().find(|n| view.live(n) && !in_group(n)) {
        return Some(Action::MetaAddLearner(*n));
    }
    if let Some(n) = meta
        .learners
        .iter()
        .find(|n| !view.members.contains_key(n) && !meta.voters.contains(n))
    {
        return Some(Action::MetaRemoveLearner(*n));
    }
    let usable = view.members.keys().filter(|n| view.usable(n)).count();
    let target = match usable.min(META_VOTERS_MAX) {
        0 => return None,
        n if n % 2 == 0 => n - 1,
        n => n,
    };
    let mut wanted: BTreeSet<NodeId> = meta
        .voters
        .iter()
        .filter(|v| view.active(v))
        .take(target)
        .copied()
        .collect();
    for l in &meta.learners {
        if wanted.len() >= target {
            break;
        }
        if view.usable(l) {
            wanted.insert(*l);
        }
    }
    // Shrink only to drop draining voters; never below what remains active.
    let draining_voter = meta.voters.iter().any(|v| !view.active(v));
    let grow = wanted.len() > meta.voters.len();
    (!wanted.is_empty() && wanted != meta.voters && (draining_voter || grow))
        .then_some(Action::MetaSetVoters(wanted))
}

/// A usable node to take a new replica of `g`: the least loaded one not in its membership.
fn candidate(view: &View, g: &GroupView, loads: &BTreeMap<NodeId, usize>) -> Option<NodeId> {
    loads
        .iter()
        .filter(|(n, _)| view.usable(n) && !g.voters.contains(n) && !g.learners.contains(n))
        .min_by_key(|(n, load)| (**load, **n))
        .map(|(n, _)| *n)
}

/// How a partition gets one more voter.
enum Grow {
    /// Promote a caught-up learner, or add a learner.
    Step(Action),
    /// A learner is still catching up: nothing to do for this partition now.
    Wait,
    /// No usable member can take a replica.
    Cannot,
}

/// The step towards one more voter for `g`: promote a usable learner that caught up, else wait
/// for one still catching up, else add a learner on the best candidate.
fn grow(
    view: &View,
    partition: PartitionId,
    g: &GroupView,
    loads: &BTreeMap<NodeId, usize>,
) -> Grow {
    let mut learners = g
        .learners
        .iter()
        .filter(|l| !g.voters.contains(l) && view.usable(l));
    if let Some(node) = learners.clone().find(|l| g.caught_up.contains(l)) {
        return Grow::Step(Action::Promote {
            partition,
            node: *node,
        });
    }
    if learners.next().is_some() {
        return Grow::Wait;
    }
    match candidate(view, g, loads) {
        Some(node) => Grow::Step(Action::AddReplica { partition, node }),
        None => Grow::Cannot,
    }
}

/// Leaderships per usable member.
fn leads(view: &View) -> BTreeMap<NodeId, usize> {
    let usable = view.members.keys().filter(|n| view.usable(n));
    tally(
        usable,
        view.partitions.values().filter_map(|g| g.leader.as_ref()),
    )
}

/// The usable voter of `g` other than its leader that leads the fewest partitions.
pub fn successor(view: &View, g: &GroupView) -> Option<NodeId> {
    let leads = leads(view);
    g.voters
        .iter()
        .filter(|v| Some(**v) != g.leader && view.usable(v))
        .min_by_key(|v| (leads.get(v).copied().unwrap_or(0), **v))
        .copied()
}

/// Repairs one partition: missing replicas, draining voters, extra voters, learners and stale
/// copies, in that order. A partition whose new replica is still catching up is left alone.
fn partition_steps(view: &View) -> Option<Action> {
    let rf = replicas(view);
    let loads = view.loads();
    for (p, g) in &view.partitions {
        let partition = *p;
        let leader = g.leader?;
        let draining: Vec<NodeId> = g
            .voters
            .iter()
            .filter(|v| !view.active(v))
            .copied()
            .collect();
        if g.voters.len() < rf || (!draining.is_empty() && g.voters.len() <= rf) {
            match grow(view, partition, g, &loads) {
                Grow::Step(action) => return Some(action),
                Grow::Wait => continue,
                Grow::Cannot => {}
            }
        }
        if let Some(bad) = draining.iter().find(|v| **v != leader).or(draining.first()) {
            if g.voters.len() == 1 {
                continue; // the last voter stays until a replacement exists
            }
            return Some(if *bad == leader {
                Action::Transfer {
                    partition,
                    to: successor(view, g)?,
                }
            } else {
                Action::RemoveReplica {
                    partition,
                    node: *bad,
                }
            });
        }
        if g.voters.len() > rf {
            // Drop the busiest voter that does not lead.
            let node = g
                .voters
                .iter()
                .filter(|v| **v != leader)
                .max_by_key(|v| (loads.get(v).copied().unwrap_or(0), **v))?;
            return Some(Action::RemoveReplica {
                partition,
                node: *node,
            });
        }
        // A learner of a full partition: a replica move under way (the learner is promoted, then
        // the busiest voter leaves), or a leftover, removed when its member cannot take it. A
        // short partition keeps its learner while the member does not answer: it is the
        // replacement.
        let full = g.voters.len() >= rf;
        let learners = || g.learners.iter().filter(|l| !g.voters.contains(l));
        if let Some(l) = learners().find(|l| full && !view.usable(l)) {
            return Some(Action::RemoveReplica {
                partition,
                node: *l,
            });
        }
        match grow(view, partition, g, &loads) {
            Grow::Step(action @ Action::Promote { .. }) => return Some(action),
            Grow::Wait => continue,
            _ => {}
        }
        if let Some(h) = g
            .hosts
            .iter()
            .find(|h| view.live(h) && !g.voters.contains(h) && !g.learners.contains(h))
        {
            return Some(Action::Unhost {
                partition,
                node: *h,
            });
        }
    }
    None
}

/// Moves one replica from the busiest active member to the idlest when they differ by more than one.
fn balance_replicas(view: &View) -> Option<Action> {
    let loads: BTreeMap<NodeId, usize> = view
        .loads()
        .into_iter()
        .filter(|(n, _)| view.usable(n))
        .collect();
    let (busy, most) = loads
        .iter()
        .max_by_key(|(n, l)| (**l, std::cmp::Reverse(**n)))?;
    let (idle, least) = loads.iter().min_by_key(|(n, l)| (**l, **n))?;
    if most - least <= 1 {
        return None;
    }
    let movable = |g: &GroupView| g.voters.contains(busy) && !g.voters.contains(idle);
    let (partition, g) = view
        .partitions
        .iter()
        .filter(|(_, g)| movable(g))
        .min_by_key(|(p, g)| (g.leader == Some(*busy), **p))?;
    // The busy member leads every candidate partition: it steps down first, so that the replica
    // removed after the addition can be its own.
    Some(if g.leader == Some(*busy) {
        Action::Transfer {
            partition: *partition,
            to: successor(view, g)?,
        }
    } else {
        Action::AddReplica {
            partition: *partition,
            node: *idle,
        }
    })
}

/// Moves one leadership from a member that leads more than its share (rounded up) to a voter of
/// that partition that leads less than its share (rounded down), so no move overloads anyone.
fn balance_leaders(view: &View) -> Option<Action> {
    let leads = leads(view);
    if leads.is_empty() || view.partitions.is_empty() {
        return None;
    }
    let high = view.partitions.len().div_ceil(leads.len());
    let low = view.partitions.len() / leads.len();
    for (p, g) in &view.partitions {
        let leader = g.leader?;
        let over = leads.get(&leader).copied().unwrap_or(0);
        if over <= low || (over <= high && !leads.values().any(|l| *l < low)) {
            continue;
        }
        let to = g
            .voters
            .iter()
            .filter(|v| **v != leader && view.usable(v))
            .filter(|v| leads.get(v).copied().unwrap_or(0) + 1 < over)
            .filter(|v| leads.get(v).copied().unwrap_or(0) < low.max(1) || over > high)
            .min_by_key(|v| (leads.get(v).copied().unwrap_or(0), **v));
        if let Some(to) = to {
            return Some(Action::Transfer {
                partition: *p,
                to: *to,
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(ids: &[u64]) -> BTreeSet<NodeId> {
        ids.iter().map(|i| NodeId(*i)).collect()
    }

    fn group(leader: u64, voters: &[u64]) -> GroupView {
        GroupView {
            leader: Some(NodeId(leader)),
            voters: set(voters),
            learners: BTreeSet::new(),
            caught_up: BTreeSet::new(),
            hosts: set(voters),
        }
    }

    /// Three members, eight partitions on all three, leaders spread, meta on all three.
    fn three() -> View {
        let members = (1..=3)
            .map(|i| {
                (
                    NodeId(i),
                    Member {
                        draining: false,
                        live: true,
                    },
                )
            })
            .collect();
        let partitions = (0..8u16)
            .map(|p| (PartitionId(p), group(u64::from(p % 3) + 1, &[1, 2, 3])))
            .collect();
        View {
            members,
            meta: group(1, &[1, 2, 3]),
            partitions,
        }
    }

    /// Applies an action the way the cluster would (a step-down elects the lowest other voter).
    fn apply(view: &mut View, action: &Action) {
        match action {
            Action::MetaAddLearner(n) => {
                view.meta.learners.insert(*n);
            }
            Action::MetaSetVoters(v) => {
                let all: BTreeSet<NodeId> = view
                    .meta
                    .voters
                    .union(&view.meta.learners)
                    .copied()
                    .collect();
                view.meta.voters = v.clone();
                view.meta.learners = all.difference(v).copied().collect();
                if !v.contains(&view.meta.leader.expect("leader")) {
                    view.meta.leader = v.first().copied();
                }
            }
            Action::MetaRemoveLearner(n) => {
                view.meta.learners.remove(n);
            }
            Action::AddReplica { partition, node } => {
                let g = view.partitions.get_mut(partition).expect("partition");
                assert!(!g.voters.contains(node) && !g.learners.contains(node));
                g.learners.insert(*node);
                g.hosts.insert(*node);
            }
            Action::Promote { partition, node } => {
                let g = view.partitions.get_mut(partition).expect("partition");
                assert!(
                    g.caught_up.contains(node),
                    "promotes only a caught-up learner"
                );
                g.learners.remove(node);
                g.caught_up.remove(node);
                g.voters.insert(*node);
            }
            Action::RemoveReplica { partition, node } => {
                let g = view.partitions.get_mut(partition).expect("partition");
                assert_ne!(g.leader, Some(*node), "never removes the leader");
                g.voters.remove(node);
                g.learners.remove(node);
            }
            Action::Transfer { partition, to } => {
                let g = view.partitions.get_mut(partition).expect("partition");
                let old = g.leader.expect("leader");
                assert!(g.voters.contains(to) && *to != old);
                g.voters.remove(&old);
                g.leader = Some(*to);
            }
            Action::Unhost { partition, node } => {
                let g = view.partitions.get_mut(partition).expect("partition");
                assert!(!g.voters.contains(node) && !g.learners.contains(node));
                g.hosts.remove(node);
            }
        }
    }

    /// Runs the plan to a fixed point (bounded), returning the steps taken. A learner catches up
    /// in the round after it was added.
    fn settle(view: &mut View) -> Vec<Action> {
        let mut steps = Vec::new();
        loop {
            for g in view.partitions.values_mut() {
                g.caught_up = g.learners.clone();
            }
            let Some(a) = next_action(view) else { break };
            apply(view, &a);
            steps.push(a);
            assert!(steps.len() < 200, "does not settle: {steps:?}");
        }
        steps
    }

    #[test]
    fn a_settled_cluster_needs_nothing() {
        assert_eq!(next_action(&three()), None);
    }

    #[test]
    fn a_new_member_gets_meta_membership_replicas_and_leaders() {
        let mut view = three();
        view.members.insert(
            NodeId(4),
            Member {
                draining: false,
                live: true,
            },
        );
        assert_eq!(next_action(&view), Some(Action::MetaAddLearner(NodeId(4))));
        settle(&mut view);
        let loads = view.loads();
        assert_eq!(
            loads.values().copied().collect::<Vec<_>>(),
            vec![6, 6, 6, 6]
        );
        for g in view.partitions.values() {
            assert_eq!(g.voters.len(), 3);
            assert!(g.learners.is_empty());
            assert_eq!(g.hosts, g.voters, "no stale copies");
        }
        let led_by_4 = view
            .partitions
            .values()
            .filter(|g| g.leader == Some(NodeId(4)))
            .count();
        assert!(led_by_4 >= 1, "{view:?}");
        // Four active members: three meta voters, one learner.
        assert_eq!(view.meta.voters.len(), 3);
        assert_eq!(view.meta.learners.len(), 1);
    }

    #[test]
    fn a_draining_member_is_emptied_leaderships_first() {
        let mut view = three();
        view.members.insert(
            NodeId(4),
            Member {
                draining: false,
                live: true,
            },
        );
        settle(&mut view);
        view.members.get_mut(&NodeId(1)).expect("1").draining = true;
        let steps = settle(&mut view);
        assert!(!steps.is_empty());
        for g in view.partitions.values() {
            assert!(!g.voters.contains(&NodeId(1)) && !g.learners.contains(&NodeId(1)));
            assert!(!g.hosts.contains(&NodeId(1)));
            assert_eq!(g.voters.len(), 3);
        }
        assert!(!view.meta.voters.contains(&NodeId(1)));
        assert_eq!(view.meta.voters, set(&[2, 3, 4]));
    }

    #[test]
    fn draining_one_of_three_keeps_two_replicas() {
        let mut view = three();
        view.members.get_mut(&NodeId(3)).expect("3").draining = true;
        settle(&mut view);
        for g in view.partitions.values() {
            assert_eq!(g.voters, set(&[1, 2]));
        }
    }

    #[test]
    fn nothing_moves_onto_a_member_that_did_not_answer_or_while_a_group_has_no_leader() {
        let mut view = three();
        view.members.insert(
            NodeId(4),
            Member {
                draining: false,
                live: false,
            },
        );
        assert_eq!(next_action(&view), None);
        let mut view = three();
        view.partitions.get_mut(&PartitionId(2)).expect("p2").leader = None;
        view.members.get_mut(&NodeId(1)).expect("1").draining = true;
        assert_eq!(next_action(&view), None);
    }

    #[test]
    fn a_new_replica_votes_only_once_caught_up_and_other_partitions_go_on_meanwhile() {
        let mut view = three();
        // p0's leader stepped down (a transfer); p1 lost a voter to a drain that has finished.
        let p0 = view.partitions.get_mut(&PartitionId(0)).expect("p0");
        p0.voters.remove(&NodeId(1));
        p0.leader = Some(NodeId(2));
        let p1 = view.partitions.get_mut(&PartitionId(1)).expect("p1");
        p1.voters.remove(&NodeId(3));
        let add = |p, n| Action::AddReplica {
            partition: PartitionId(p),
            node: NodeId(n),
        };
        assert_eq!(next_action(&view), Some(add(0, 1)));
        apply(&mut view, &add(0, 1));
        // Still catching up: p0 waits, p1 is repaired meanwhile.
        assert_eq!(next_action(&view), Some(add(1, 3)));
        apply(&mut view, &add(1, 3));
        assert_eq!(next_action(&view), None, "both learners are catching up");
        view.partitions
            .get_mut(&PartitionId(1))
            .expect("p1")
            .caught_up = set(&[3]);
        let promote = Action::Promote {
            partition: PartitionId(1),
            node: NodeId(3),
        };
        assert_eq!(next_action(&view), Some(promote.clone()));
        apply(&mut view, &promote);
        assert_eq!(next_action(&view), None);
        // A learner whose member stopped answering is not waited for (and here no other member
        // can take p0's replica instead).
        view.members.get_mut(&NodeId(1)).expect("1").live = false;
        assert_eq!(
            next_action(&view),
            None,
            "no other member can take p0's replica"
        );
        view.members.get_mut(&NodeId(1)).expect("1").live = true;
        view.partitions
            .get_mut(&PartitionId(0))
            .expect("p0")
            .caught_up = set(&[1]);
        settle(&mut view);
        for g in view.partitions.values() {
            assert_eq!(g.voters, set(&[1, 2, 3]));
            assert!(g.learners.is_empty());
        }
    }

    #[test]
    fn leaders_spread_without_overloading_anyone() {
        let mut view = three();
        for g in view.partitions.values_mut() {
            g.leader = Some(NodeId(1));
        }
        let steps = settle(&mut view);
        assert!(steps.iter().any(|s| matches!(s, Action::Transfer { .. })));
        let mut leads = BTreeMap::new();
        for g in view.partitions.values() {
            *leads.entry(g.leader.expect("leader")).or_insert(0) += 1;
            assert_eq!(g.voters.len(), 3, "demoted leaders are promoted again");
        }
        assert!(leads.values().all(|n| *n <= 3), "{leads:?}");
    }
}
