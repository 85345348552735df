//! Activation in process: clusters of three over the in-process peer network whose nodes serve
//! more versions than this build (`Options::supports`), as a newer build's would. What it
//! promises: the meta leader activates the newest version every member serves unless it holds;
//! an operator's activation is refused while a member does not serve the version; every node
//! keeps the active version in its data directory; a binary that does not serve it is refused,
//! before it opens anything, when it joins, and stops if it runs when the version is activated.

use super::*;
use crate::meta::VersionFile;
use crate::options::Options;
use crate::testing::{cluster_with, until};
use proto::record::NodeEntry;

fn serving(max: u32) -> VersionRange {
    VersionRange {
        min: ClusterVersion(1),
        max: ClusterVersion(max),
    }
}

/// Asserts `result` is a conflict whose message contains `says`.
#[track_caller]
fn assert_conflict<T: std::fmt::Debug>(result: &Result<T>, says: &str) {
    assert!(
        matches!(result, Err(Error::Conflict(e)) if e.contains(says)),
        "{result:?}"
    );
}

/// Every node's data directory holds `version`.
fn kept_everywhere(c: &crate::testing::TestCluster, version: u32) -> Option<()> {
    c.ids()
        .iter()
        .all(|n| {
            let kept = VersionFile::in_dir(c.dir(*n)).read().ok().flatten();
            kept == Some(ClusterVersion(version))
        })
        .then_some(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_meta_leader_activates_the_newest_version_every_member_serves() {
    let c = cluster_with(3, 1, |o: &mut Options| o.supports = serving(2)).await;
    until("version 2 to be active on every node", async || {
        let active = c
            .ids()
            .iter()
            .all(|n| c.node(*n).host.defs.cluster_version() == ClusterVersion(2));
        active.then_some(())
    })
    .await;
    until("every data directory to keep version 2", async || {
        kept_everywhere(&c, 2)
    })
    .await;
    let status = c.node(NodeId(2)).upgrade.status();
    assert_eq!(status.newest, Some(ClusterVersion(2)));
    assert!(status.members.iter().all(|m| m.serves_active), "{status:?}");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_cluster_waits_for_the_operator_who_cannot_activate_what_a_member_does_not_serve() {
    let c = cluster_with(3, 1, |o: &mut Options| {
        o.hold_cluster_version = true;
        o.supports = serving(if o.node == NodeId(3) { 1 } else { 2 });
    })
    .await;
    let upgrade = &c.node(NodeId(1)).upgrade;
    let status = upgrade.status();
    assert_eq!(status.active, ClusterVersion(1));
    assert_eq!(
        status.newest,
        Some(ClusterVersion(1)),
        "node 3 serves 1 only"
    );
    assert!(status.held);
    let refused = upgrade.finalize(Some(ClusterVersion(2))).await;
    assert_conflict(&refused, "node 3 serves cluster version 1, not version 2");
    // Node 3 is replaced by a binary that serves version 2 (its record, as it would register).
    let mut entry = c
        .node(NodeId(3))
        .host
        .defs
        .node(NodeId(3))
        .expect("recorded");
    entry.binary = Some(Binary::this_build(serving(2)));
    let put = MetaCommand::PutNode(entry);
    assert_eq!(
        c.node(NodeId(3))
            .host
            .propose_meta(put)
            .await
            .expect("succeeds"),
        MetaOutcome::Applied
    );
    assert_eq!(upgrade.status().newest, Some(ClusterVersion(2)));
    assert_eq!(
        upgrade.status().active,
        ClusterVersion(1),
        "held: nothing activated yet"
    );
    assert_eq!(
        upgrade.finalize(None).await.expect("succeeds"),
        ClusterVersion(2)
    );
    until("every data directory to keep version 2", async || {
        kept_everywhere(&c, 2)
    })
    .await;
    // Node 3 still runs the binary that serves version 1 only: it stops rather than read the
    // formats of version 2.
    let stopped = until("node 3 to stop itself", async || {
        let stopped = c.stopped.lock().expect("lock").clone();
        stopped.into_iter().find(|(n, _)| *n == NodeId(3))
    })
    .await;
    assert!(
        stopped
            .1
            .contains("serves cluster version 1, but the cluster is at version 2"),
        "{stopped:?}"
    );
    // A new member whose binary serves version 1 only is refused when it joins.
    let joiner = NodeEntry {
        id: NodeId(4),
        addr: "127.0.0.1:7004".into(),
        draining: false,
        binary: Some(Binary::this_build(serving(1))),
    };
    let refused = c.node(NodeId(1)).membership.route_join(joiner).await;
    assert_conflict(&refused, "node 4 serves cluster version 1, not version 2");
    // A member whose binary serves version 1 only is refused now (a join, or a rollback).
    let mut old = c
        .node(NodeId(2))
        .host
        .defs
        .node(NodeId(2))
        .expect("recorded");
    old.binary = Some(Binary::this_build(serving(1)));
    let rolled_back = c.node(NodeId(1)).membership.put_node(old).await;
    assert_conflict(
        &rolled_back,
        "node 2 serves cluster version 1, not version 2",
    );
    let back = upgrade.finalize(Some(ClusterVersion(1))).await;
    assert_conflict(&back, "cannot be rolled back");
    c.stop().await;
}

#[tokio::test]
async fn a_binary_that_does_not_serve_the_kept_version_refuses_before_it_opens_anything() {
    let dir = tempfile::tempdir().expect("succeeds");
    VersionFile::in_dir(dir.path())
        .write(ClusterVersion(2))
        .expect("succeeds");
    let options = Options {
        data_dir: dir.path().to_owned(),
        supports: serving(1),
        ..Default::default()
    };
    let refused = crate::service::open(&options).await.err().expect("refused");
    assert!(
        refused
            .to_string()
            .contains("serves cluster version 1, but the cluster is at version 2"),
        "{refused}"
    );
    let entries: Vec<_> = std::fs::read_dir(dir.path())
        .expect("succeeds")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(
        entries,
        [VersionFile::FILE_NAME],
        "nothing else was created"
    );
}

/// The audit log's actions on workflow definitions, oldest first.
fn definition_actions(c: &crate::testing::TestCluster) -> Vec<String> {
    let mut entries = c.node(NodeId(1)).host.defs.audit(None, 100);
    entries.sort_by_key(|e| e.seq);
    let actions = entries.into_iter().map(|e| e.action);
    actions.filter(|a| a.contains("WorkflowDef")).collect()
}

/// Starts `name` through node 1 and answers its first task's rate limit as recorded.
async fn first_task_rate(
    c: &crate::testing::TestCluster,
    name: &str,
) -> (Option<u32>, Option<u32>) {
    let workflows = &c.node(NodeId(1)).workflows;
    let request = proto::model::StartWorkflowRequest {
        name: name.into(),
        ..Default::default()
    };
    let id = workflows.start_workflow(request).await.expect("started");
    let wf = workflows.workflow(&id, true).await.expect("read back");
    let task = wf.tasks.first().expect("its first task is scheduled");
    (
        task.rate_limit_per_frequency,
        task.rate_limit_frequency_in_seconds,
    )
}

/// Registers a rate-limited task type and, in one bulk update, workflows `{prefix}_a` and
/// `{prefix}_b` that run it.
async fn define_rate_limited(c: &crate::testing::TestCluster, prefix: &str) {
    let defs = &c.node(NodeId(1)).definitions;
    let task = proto::model::TaskDef {
        rate_limit_per_frequency: Some(5),
        rate_limit_frequency_in_seconds: Some(10),
        ..proto::model::TaskDef::named("limited")
    };
    defs.put_task_defs(vec![task]).await.expect("task type");
    let workflow = |suffix: &str| {
        let def = serde_json::json!({ "name": format!("{prefix}_{suffix}"), "tasks": [
            { "name": "limited", "taskReferenceName": "l", "type": "SIMPLE" } ] });
        let def = serde_json::from_value(def).expect("a definition");
        defs.prepare_workflow_def(def, true).expect("valid")
    };
    let bulk = vec![workflow("a"), workflow("b")];
    defs.put_workflow_defs(bulk).await.expect("stored");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_format_is_written_only_once_its_version_is_active() {
    let c = cluster_with(3, 1, |o: &mut Options| o.hold_cluster_version = true).await;
    assert_eq!(c.node(NodeId(1)).upgrade.status().active, ClusterVersion(1));
    // Version 1: a bulk update is a command per definition, tasks carry no rate limit.
    define_rate_limited(&c, "before").await;
    assert_eq!(definition_actions(&c), ["PutWorkflowDef", "PutWorkflowDef"]);
    assert_eq!(first_task_rate(&c, "before_a").await, (None, None));
    let upgrade = &c.node(NodeId(1)).upgrade;
    upgrade
        .finalize(None)
        .await
        .expect("every member serves version 2");
    assert_eq!(upgrade.status().active, ClusterVersion(2));
    // Version 2: one command for the whole update, and the task records its definition's limit.
    define_rate_limited(&c, "after").await;
    let actions = definition_actions(&c);
    assert_eq!(actions[2..], ["PutWorkflowDefs"]);
    assert_eq!(first_task_rate(&c, "after_b").await, (Some(5), Some(10)));
    for n in c.ids() {
        let defs = &c.node(n).host.defs;
        let stored = until("node {n} to hold both definitions", async || {
            defs.workflow_def("after_b", None)
                .and(defs.workflow_def("after_a", None))
        });
        stored.await;
    }
    c.stop().await;
}
