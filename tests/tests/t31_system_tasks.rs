//! Conductor's computing and dynamic system tasks on a running node: INLINE, LAMBDA,
//! JSON_JQ_TRANSFORM, SWITCH with a script, START_WORKFLOW, HUMAN, DYNAMIC,
//! FORK_JOIN_DYNAMIC and EXCLUSIVE_JOIN; scripts that throw or never end fail their task with
//! the reason, never the node; definitions that cannot work are refused at registration.

use std::time::Duration;

use harness::{status_of, task_by_ref, Api, Server};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(20);

fn register(api: &Api, name: &str, tasks: Value) {
    api.register_workflow_def(&json!({
        "name": name, "version": 1, "schemaVersion": 2, "tasks": tasks,
    }));
}

fn output_of(wf: &Value, reference: &str) -> Value {
    task_by_ref(wf, reference).map_or(Value::Null, |t| t["outputData"].clone())
}

#[test]
fn scripts_and_queries_compute_and_choose() {
    let server = Server::start();
    let api = server.api();
    register(
        api,
        "compute",
        json!([
            {"name": "double", "taskReferenceName": "double", "type": "INLINE",
             "inputParameters": {"evaluatorType": "graaljs", "n": "${workflow.input.n}",
                                 "expression": "(function () { return $.n * 2; })()"}},
            {"name": "pick", "taskReferenceName": "pick", "type": "JSON_JQ_TRANSFORM",
             "inputParameters": {"items": "${workflow.input.items}",
                                 "queryExpression": "[.items[] | select(.ok) | .id]"}},
            {"name": "lambda", "taskReferenceName": "lambda", "type": "LAMBDA",
             "inputParameters": {"v": "${double.output.result}",
                                 "scriptExpression": "return {twice: $.v};"}},
            {"name": "route", "taskReferenceName": "route", "type": "SWITCH",
             "evaluatorType": "javascript",
             "expression": "$.v > 10 ? 'big' : 'small'",
             "inputParameters": {"v": "${double.output.result}"},
             "decisionCases": {"big": [
                 {"name": "mark", "taskReferenceName": "mark", "type": "SET_VARIABLE",
                  "inputParameters": {"size": "big"}}]},
             "defaultCase": [
                 {"name": "mark_small", "taskReferenceName": "mark_small", "type": "SET_VARIABLE",
                  "inputParameters": {"size": "small"}}]}
        ]),
    );
    let items = json!([{"id": "a", "ok": true}, {"id": "b", "ok": false}, {"id": "c", "ok": true}]);
    let id = api.start_workflow("compute", &json!({"n": 21, "items": items}));
    let wf = api.wait_workflow_status(&id, "COMPLETED", WAIT);
    assert_eq!(output_of(&wf, "double"), json!({"result": 42}));
    assert_eq!(
        output_of(&wf, "pick"),
        json!({"result": ["a", "c"], "resultList": [["a", "c"]]})
    );
    assert_eq!(output_of(&wf, "lambda"), json!({"result": {"twice": 42}}));
    assert_eq!(
        output_of(&wf, "route"),
        json!({"evaluationResult": ["big"]})
    );
    assert_eq!(wf["variables"]["size"], "big");
    assert_eq!(status_of(&wf, "mark_small"), None);
}

#[test]
fn a_script_that_throws_or_never_ends_fails_its_task_not_the_node() {
    let server = Server::start();
    let api = server.api();
    for (name, expression, want) in [
        ("throws", "throw new Error('no way')", "no way"),
        ("spins", "while (true) {}", "ran longer than"),
    ] {
        register(
            api,
            name,
            json!([{"name": name, "taskReferenceName": "s", "type": "INLINE",
                    "inputParameters": {"evaluatorType": "javascript", "expression": expression}}]),
        );
        let id = api.start_workflow(name, &json!({}));
        let wf = api.wait_workflow_status(&id, "FAILED", WAIT);
        let reason = wf["reasonForIncompletion"].as_str().unwrap_or_default();
        assert!(reason.contains(want), "{name}: {reason}");
        assert_eq!(status_of(&wf, "s").as_deref(), Some("FAILED"));
    }
    register(
        api,
        "bad_jq_input",
        json!([{"name": "q", "taskReferenceName": "q", "type": "JSON_JQ_TRANSFORM",
                "inputParameters": {"queryExpression": ".a + 1", "a": "text"}}]),
    );
    let id = api.start_workflow("bad_jq_input", &json!({}));
    let wf = api.wait_workflow_status(&id, "FAILED", WAIT);
    let reason = wf["reasonForIncompletion"].as_str().unwrap_or_default();
    assert!(reason.contains("jq"), "{reason}");
    api.get("/health").expect_ok("the node still serves");
}

#[test]
fn start_workflow_starts_the_named_workflow_and_outputs_its_id() {
    let server = Server::start();
    let api = server.api();
    register(
        api,
        "child",
        json!([{"name": "c", "taskReferenceName": "c", "type": "SET_VARIABLE",
                "inputParameters": {"got": "${workflow.input.x}"}}]),
    );
    register(
        api,
        "parent",
        json!([{"name": "start", "taskReferenceName": "start", "type": "START_WORKFLOW",
                "inputParameters": {"startWorkflow": {"name": "${workflow.input.which}",
                                                      "input": {"x": 7}}}}]),
    );
    let id = api.start_workflow("parent", &json!({"which": "child"}));
    let wf = api.wait_workflow_status(&id, "COMPLETED", WAIT);
    let child = output_of(&wf, "start")["workflowId"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let child = api.wait_workflow_status(&child, "COMPLETED", WAIT);
    assert_eq!(child["variables"]["got"], 7);

    let id = api.start_workflow("parent", &json!({"which": "no_such_workflow"}));
    let wf = api.wait_workflow_status(&id, "FAILED", WAIT);
    let reason = wf["reasonForIncompletion"].as_str().unwrap_or_default();
    assert!(reason.contains("no_such_workflow"), "{reason}");
}

#[test]
fn human_dynamic_and_dynamic_forks_run_with_workers() {
    let server = Server::start();
    let api = server.api();
    register(
        api,
        "dynamic",
        json!([
            {"name": "approve", "taskReferenceName": "approve", "type": "HUMAN"},
            {"name": "pick", "taskReferenceName": "pick", "type": "DYNAMIC",
             "dynamicTaskNameParam": "which", "inputParameters": {"which": "${workflow.input.which}"}},
            {"name": "fan", "taskReferenceName": "fan", "type": "FORK_JOIN_DYNAMIC",
             "inputParameters": {"forkTaskName": "leaf", "forkTaskInputs": "${workflow.input.items}"}},
            {"name": "fan_join", "taskReferenceName": "fan_join", "type": "JOIN"}
        ]),
    );
    let id = api.start_workflow("dynamic", &json!({"which": "resize", "items": [1, 2]}));
    let wf = api.workflow(&id);
    assert_eq!(status_of(&wf, "approve").as_deref(), Some("IN_PROGRESS"));
    let human = task_by_ref(&wf, "approve").cloned().unwrap_or_default();
    api.complete(&human, json!({"by": "ann"}));
    let task = api.poll_until("resize", "w", WAIT);
    assert_eq!(task["referenceTaskName"], "pick");
    api.complete(&task, json!({}));
    for _ in 0..2 {
        let leaf = api.poll_until("leaf", "w", WAIT);
        let n = leaf["inputData"]["input"].clone();
        api.complete(&leaf, json!({ "n": n }));
    }
    let wf = api.wait_workflow_status(&id, "COMPLETED", WAIT);
    assert_eq!(
        output_of(&wf, "fan_join"),
        json!({"_leaf_0": {"n": 1}, "_leaf_1": {"n": 2}})
    );
}

#[test]
fn definitions_that_cannot_work_are_refused_naming_the_task() {
    let server = Server::start();
    let api = server.api();
    let cases = [
        (
            json!({"name": "q", "taskReferenceName": "q", "type": "JSON_JQ_TRANSFORM",
                "inputParameters": {"queryExpression": ".a | {"}}),
            "JSON_JQ_TRANSFORM task 'q'",
        ),
        (
            json!({"name": "i", "taskReferenceName": "i", "type": "INLINE",
                "inputParameters": {"evaluatorType": "javascript"}}),
            "INLINE task 'i' has no expression",
        ),
        (
            json!({"name": "f", "taskReferenceName": "f", "type": "FORK_JOIN_DYNAMIC"}),
            "FORK_JOIN_DYNAMIC task 'f'",
        ),
        (
            json!({"name": "d", "taskReferenceName": "d", "type": "DYNAMIC"}),
            "DYNAMIC task 'd' has no dynamicTaskNameParam",
        ),
        (
            json!({"name": "s", "taskReferenceName": "s", "type": "START_WORKFLOW",
                "inputParameters": {"startWorkflow": {}}}),
            "START_WORKFLOW task 's' names no workflow",
        ),
    ];
    for (task, want) in cases {
        let def = json!({"name": "bad", "version": 1, "tasks": [task, {"name": "j", "taskReferenceName": "j", "type": "JOIN"}]});
        let reply = api.post_json("/api/metadata/workflow", &def);
        reply.assert_error_response(400, want);
        let message = reply.json()["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(message.contains(want), "{message} should name {want}");
    }
    api.get("/api/metadata/workflow/bad")
        .expect_status(404, "nothing was stored");
}

#[test]
fn do_while_loops_until_its_condition_says_stop() {
    let server = Server::start();
    let api = server.api();
    api.register_spec_task_defs();
    api.register_fixture("do_while_integration_test.json");
    let id = api.start_workflow("Do_While_Workflow", &json!({"loop": 2}));
    for n in 1..=2 {
        for task_type in [
            "integration_task_0",
            "integration_task_1",
            "integration_task_2",
        ] {
            let task = api.poll_until(task_type, "w", WAIT);
            let reference = task["referenceTaskName"].as_str().unwrap_or_default();
            assert_eq!(reference, format!("{task_type}__{n}"));
            assert_eq!(task["iteration"], n);
            api.complete(&task, json!({ "n": n }));
        }
    }
    let wf = api.wait_workflow_status(&id, "COMPLETED", WAIT);
    let out = output_of(&wf, "loopTask");
    assert_eq!(out["iteration"], 2);
    assert_eq!(out["2"]["integration_task_0"], json!({"n": 2}));
}

#[test]
fn system_tasks_run_inside_a_loop() {
    let server = Server::start();
    let api = server.api();
    api.register_spec_task_defs();
    api.register_fixture("do_while_system_tasks.json");
    let name = harness::fixture("do_while_system_tasks.json")["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let id = api.start_workflow(&name, &json!({"loop": 3}));
    let task = api.poll_until("integration_task_1", "w", WAIT);
    api.complete(&task, json!({}));
    let wf = api.wait_workflow_status(&id, "COMPLETED", WAIT);
    let out = output_of(&wf, "loopTask");
    assert_eq!(out["iteration"], 3);
    let located = json!({"out": {"locationId": "some location id"}});
    assert_eq!(out["3"]["jq_add_location"]["result"], located);
}

fn register_family(api: &Api) {
    api.register_task_defs(&[harness::task_def("kid_task", json!({"retryCount": 0}))]);
    register(
        api,
        "kid",
        json!([{"name": "kid_task", "taskReferenceName": "k", "type": "SIMPLE",
                "inputParameters": {"x": "${workflow.input.x}"}}]),
    );
    register(
        api,
        "family",
        json!([{"name": "sub", "taskReferenceName": "sub", "type": "SUB_WORKFLOW",
                "inputParameters": {"x": "${workflow.input.x}"},
                "subWorkflowParam": {"name": "kid"}}]),
    );
}

fn child_of(api: &Api, parent: &str) -> String {
    harness::wait_for(WAIT, "the child to start", || {
        let wf = api.workflow(parent);
        let task = task_by_ref(&wf, "sub")?;
        task["subWorkflowId"].as_str().map(str::to_owned)
    })
}

#[test]
fn a_sub_workflow_runs_its_child_and_takes_its_outcome() {
    let server = Server::start();
    let api = server.api();
    register_family(api);
    let id = api.start_workflow("family", &json!({"x": 3}));
    let child = child_of(api, &id);
    let kid = api.workflow(&child);
    assert_eq!(kid["parentWorkflowId"], id.as_str());
    let task = api.poll_until("kid_task", "w", WAIT);
    assert_eq!(task["inputData"]["x"], 3);
    api.complete(&task, json!({"y": 4}));
    let wf = api.wait_workflow_status(&id, "COMPLETED", WAIT);
    assert_eq!(output_of(&wf, "sub")["subWorkflowId"], child.as_str());

    let id = api.start_workflow("family", &json!({"x": 1}));
    let task = api.poll_until("kid_task", "w", WAIT);
    api.fail(&task, "kid gave up");
    let wf = api.wait_workflow_status(&id, "FAILED", WAIT);
    let reason = wf["reasonForIncompletion"].as_str().unwrap_or_default();
    assert!(reason.contains("kid gave up"), "{reason}");
}

#[test]
fn terminating_the_parent_terminates_the_child() {
    let server = Server::start();
    let api = server.api();
    register_family(api);
    let id = api.start_workflow("family", &json!({"x": 1}));
    let child = child_of(api, &id);
    api.delete(&format!("/api/workflow/{id}?reason=enough"))
        .expect_ok("terminate");
    api.wait_workflow_status(&child, "TERMINATED", WAIT);
}

#[test]
fn an_inline_child_definition_runs_without_registration() {
    let server = Server::start();
    let api = server.api();
    register(
        api,
        "inline_family",
        json!([{"name": "sub", "taskReferenceName": "sub", "type": "SUB_WORKFLOW",
                "subWorkflowParam": {"name": "inline_kid", "workflowDefinition": {
                    "name": "inline_kid", "version": 1, "tasks": [
                        {"name": "v", "taskReferenceName": "v", "type": "SET_VARIABLE",
                         "inputParameters": {"done": true}}]}}}]),
    );
    let id = api.start_workflow("inline_family", &json!({}));
    api.wait_workflow_status(&id, "COMPLETED", WAIT);
}
