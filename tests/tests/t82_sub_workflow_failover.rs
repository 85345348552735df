//! A SUB_WORKFLOW across a failover, in a 3-node cluster: the node leading the parent's
//! partition is killed (a failpoint aborts it, as `kill -9`) right after it committed the
//! SUB_WORKFLOW task — once before it started the child, once after it started the child but
//! before it recorded that. Either way the new leader performs the start again, exactly one
//! child exists, and the parent completes.
//!
//! Each case is its own test (nextest runs each in its own process), so the failpoint variable
//! reaches only that test's nodes.

use std::time::Duration;

use harness::cluster::Cluster;
use harness::{nonce, task_def, wait_for, Api};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(60);

fn register(api: &Api) {
    api.register_task_defs(&[task_def("kid_task", json!({"retryCount": 0}))]);
    for def in [
        json!({"name": "kid", "version": 1, "tasks": [
            {"name": "kid_task", "taskReferenceName": "k", "type": "SIMPLE"}]}),
        json!({"name": "family", "version": 1, "tasks": [
            {"name": "sub", "taskReferenceName": "sub", "type": "SUB_WORKFLOW",
             "subWorkflowParam": {"name": "kid"}}]}),
    ] {
        api.register_workflow_def(&def);
    }
}

/// The first live node whose API answers `probe`.
fn on_any<T>(cluster: &Cluster, mut probe: impl FnMut(&Api) -> Option<T>) -> Option<T> {
    cluster
        .live_ids()
        .into_iter()
        .find_map(|id| probe(&cluster.api_with_timeout(id, Duration::from_secs(5))))
}

fn killed_around_the_childs_start(point: &str) {
    let marker_path = harness::arm_failpoint(point);
    let mut cluster = Cluster::start(3);
    let api = cluster.api(1);
    register(&api);
    let correlation = format!("family-{}", nonce());
    let request = json!({"name": "family", "version": 1, "correlationId": correlation});
    // The start is acknowledged once committed; the node answering may be the one that dies
    // right after, so the answer may be lost: the workflow is found by its correlation id.
    let _ = api.try_post_json("/api/workflow", &request);
    let killed = wait_for(WAIT, "the failpoint to abort the parent's leader", || {
        let exited = cluster.reap_exited();
        (marker_path.exists() && !exited.is_empty()).then_some(exited)
    });
    println!("killed node(s) {killed:?} at {point}");
    let parent = wait_for(WAIT, "the parent, by its correlation id", || {
        on_any(&cluster, |api| {
            let path = format!("/api/workflow/family/correlated/{correlation}?includeClosed=true");
            let reply = api.try_get(&path).ok().filter(|r| r.is_success())?;
            let found = reply.json().as_array()?.first()?["workflowId"]
                .as_str()?
                .to_owned();
            Some(found)
        })
    });
    let task = wait_for(WAIT, "the child's task, after failover", || {
        on_any(&cluster, |api| api.try_poll("kid_task", "w").ok().flatten())
    });
    on_any(&cluster, |api| {
        let result = json!({
            "workflowInstanceId": task["workflowInstanceId"], "taskId": task["taskId"],
            "status": "COMPLETED", "outputData": {"ok": true}});
        api.try_update_task(&result).ok().filter(|r| r.is_success())
    })
    .expect("the child's task is completed");
    let status = |api: &Api| -> Option<Value> {
        let wf = api.try_get(&format!("/api/workflow/{parent}")).ok()?;
        wf.is_success().then(|| wf.json())
    };
    wait_for(WAIT, "the parent to complete", || {
        on_any(&cluster, status).filter(|wf| wf["status"] == "COMPLETED")
    });
    let children = wait_for(WAIT, "the children to be listed", || {
        on_any(&cluster, |api| {
            let path = format!(
                "/api/workflow/kid/correlated/{correlation}?includeClosed=true&includeTasks=false"
            );
            let reply = api.try_get(&path).ok().filter(|r| r.is_success())?;
            reply.json().as_array().cloned()
        })
    });
    assert_eq!(children.len(), 1, "one child: {children:#?}");
    assert_eq!(children[0]["parentWorkflowId"], parent.as_str());
    let _ = std::fs::remove_file(&marker_path);
}

#[test]
fn a_leader_killed_before_it_starts_the_child_leaves_one_child() {
    killed_around_the_childs_start("sub-workflow-start");
}

#[test]
fn a_leader_killed_after_it_started_the_child_leaves_one_child() {
    killed_around_the_childs_start("sub-workflow-started");
}
