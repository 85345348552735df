//! Retrying a FAILED parent whose SUB_WORKFLOW task failed with its child: with
//! `resumeSubworkflowTasks=true` the same child is retried in place (on its own partition,
//! asked by the parent's leader after the parent's retry committed) and the parent's task waits
//! for it again, so the parent completes when that child completes; without the flag the retry
//! starts a new child, as before. Nested: a grandchild that failed is resumed the same way.

use harness::cluster::{partition_of, Cluster};
use harness::{task_def, wait_for, Api, Server};
use serde_json::{json, Value};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

fn register(api: &Api) {
    api.register_task_defs(&[task_def("kid_task", json!({"retryCount": 0}))]);
    for def in [
        json!({"name": "kid", "version": 1, "tasks": [
            {"name": "kid_task", "taskReferenceName": "k", "type": "SIMPLE"}]}),
        json!({"name": "family", "version": 1, "tasks": [
            {"name": "sub", "taskReferenceName": "sub", "type": "SUB_WORKFLOW",
             "subWorkflowParam": {"name": "kid"}}]}),
        json!({"name": "clan", "version": 1, "tasks": [
            {"name": "mid", "taskReferenceName": "mid", "type": "SUB_WORKFLOW",
             "subWorkflowParam": {"name": "family"}}]}),
    ] {
        api.register_workflow_def(&def);
    }
}

/// Polls the one `kid_task` and reports `status` for it; answers its workflow's id.
fn work_kid_task(api: &Api, status: &str) -> String {
    let task = api.poll_until("kid_task", "w1", WAIT);
    let child = task["workflowInstanceId"].as_str().expect("id").to_owned();
    api.post_json(
        "/api/tasks",
        &json!({"workflowInstanceId": child, "taskId": task["taskId"], "status": status,
                "outputData": {"kid": status}, "reasonForIncompletion": "kid said no"}),
    )
    .expect_ok("task result");
    child
}

/// The parent `name` started, its child's task failed, and the parent FAILED: answers the
/// parent's id and its child's.
fn failed_family(api: &Api, name: &str) -> (String, String) {
    let parent = api.start_workflow(name, &json!({}));
    let failed_child = work_kid_task(api, "FAILED");
    api.wait_workflow_status(&parent, "FAILED", WAIT);
    (parent, failed_child)
}

fn sub_tasks(wf: &Value) -> Vec<Value> {
    wf["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .filter(|t| t["taskType"] == "SUB_WORKFLOW")
        .cloned()
        .collect()
}

fn retry(api: &Api, id: &str, query: &str) {
    api.post_empty(&format!("/api/workflow/{id}/retry{query}"))
        .expect_status(204, "retry");
}

#[test]
fn resume_retries_the_same_child_and_the_parent_completes_with_it() {
    let server = Server::start();
    let api = server.api();
    register(api);
    let (parent, child) = failed_family(api, "family");
    assert_eq!(api.workflow_status(&child), "FAILED");
    retry(api, &parent, "?resumeSubworkflowTasks=true");
    let wf = api.wait_workflow_status(&parent, "RUNNING", WAIT);
    let subs = sub_tasks(&wf);
    assert_eq!(subs.len(), 1, "no new attempt: {wf:#}");
    assert_eq!(subs[0]["status"], "IN_PROGRESS");
    assert_eq!(subs[0]["subWorkflowId"], child.as_str());
    // The child is retried after the parent's retry committed: its task is polled again.
    assert_eq!(
        work_kid_task(api, "COMPLETED"),
        child,
        "the same child runs again"
    );
    api.wait_workflow_status(&child, "COMPLETED", WAIT);
    let done = api.wait_workflow_status(&parent, "COMPLETED", WAIT);
    let subs = sub_tasks(&done);
    assert_eq!(subs.len(), 1);
    assert_eq!(subs[0]["status"], "COMPLETED");
    assert_eq!(subs[0]["outputData"]["kid"], "COMPLETED");
    assert_eq!(subs[0]["subworkflowChanged"], false);
}

#[test]
fn resume_retries_a_child_led_by_another_node_of_a_cluster() {
    let cluster = Cluster::start(3);
    let api = cluster.api(1);
    register(&api);
    // A parent whose child's partition another node leads.
    let elsewhere = (0..10).find_map(|_| {
        let (parent, child) = failed_family(&api, "family");
        let partition = partition_of(&child, cluster.partitions());
        (cluster.leader_of_partition(partition) != Some(1)).then_some((parent, child))
    });
    let (parent, child) = elsewhere.expect("a child led elsewhere within ten parents");
    retry(&api, &parent, "?resumeSubworkflowTasks=true");
    assert_eq!(
        work_kid_task(&api, "COMPLETED"),
        child,
        "the same child runs again"
    );
    api.wait_workflow_status(&parent, "COMPLETED", WAIT);
    assert_eq!(sub_tasks(&api.workflow(&parent)).len(), 1);
}

#[test]
fn without_the_flag_the_retry_starts_a_new_child() {
    let server = Server::start();
    let api = server.api();
    register(api);
    let (parent, child) = failed_family(api, "family");
    retry(api, &parent, "");
    let second = work_kid_task(api, "COMPLETED");
    assert_ne!(second, child, "a new child");
    let done = api.wait_workflow_status(&parent, "COMPLETED", WAIT);
    let subs = sub_tasks(&done);
    assert_eq!(subs.len(), 2, "{done:#}");
    assert_eq!(subs[0]["subWorkflowId"], child.as_str());
    assert_eq!(subs[1]["subWorkflowId"], second.as_str());
    assert_eq!(
        api.workflow_status(&child),
        "FAILED",
        "the first child is left as it was"
    );
}

#[test]
fn resume_reaches_a_failed_grandchild_through_its_failed_child() {
    let server = Server::start();
    let api = server.api();
    register(api);
    let (grandparent, grandchild) = failed_family(api, "clan");
    let wf = api.workflow(&grandparent);
    let middle = sub_tasks(&wf)[0]["subWorkflowId"]
        .as_str()
        .expect("the middle workflow")
        .to_owned();
    assert_eq!(api.workflow_status(&middle), "FAILED");
    retry(api, &grandparent, "?resumeSubworkflowTasks=true");
    let again = wait_for(WAIT, "the grandchild's task polled again", || {
        api.poll("kid_task", "w1")
    });
    assert_eq!(again["workflowInstanceId"], grandchild.as_str());
    api.post_json(
        "/api/tasks",
        &json!({"workflowInstanceId": grandchild, "taskId": again["taskId"],
                "status": "COMPLETED", "outputData": {}}),
    )
    .expect_ok("task result");
    api.wait_workflow_status(&middle, "COMPLETED", WAIT);
    api.wait_workflow_status(&grandparent, "COMPLETED", WAIT);
    assert_eq!(sub_tasks(&api.workflow(&middle)).len(), 1);
    assert_eq!(sub_tasks(&api.workflow(&grandparent)).len(), 1);
}

#[test]
fn a_bad_flag_is_refused_and_changes_nothing() {
    let server = Server::start();
    let api = server.api();
    register(api);
    let (parent, _) = failed_family(api, "family");
    api.post_empty(&format!(
        "/api/workflow/{parent}/retry?resumeSubworkflowTasks=maybe"
    ))
    .expect_status(400, "not a boolean");
    assert_eq!(api.workflow_status(&parent), "FAILED");
}
