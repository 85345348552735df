//! The rest of Conductor's catalogue the engine decides itself: HUMAN, DYNAMIC,
//! FORK_JOIN_DYNAMIC, EXCLUSIVE_JOIN, and the tasks that wait for work the runtime performs
//! (INLINE, LAMBDA, JSON_JQ_TRANSFORM, SWITCH with a script, START_WORKFLOW).

use super::*;
use TaskStatus::*;

fn run(h: &mut H, r: &str, out: Value) {
    h.poll(r);
    h.complete(r, out);
}

fn task(r: &str, ty: &str, params: Value) -> WorkflowTask {
    WorkflowTask {
        name: r.into(),
        task_reference_name: r.into(),
        task_type: ty.into(),
        input_parameters: obj(params),
        ..Default::default()
    }
}

#[test]
fn human_waits_in_progress_for_an_outside_update() {
    let mut h = H::start(
        def_of(vec![task("h", "HUMAN", json!({})), simple("a")]),
        json!({}),
    );
    assert_eq!(h.st("h"), InProgress);
    assert!(ready_tasks(h.wf()).is_empty(), "nobody polls a HUMAN task");
    h.complete("h", json!({"approved": true}));
    assert_eq!(h.st("a"), Scheduled);
}

#[test]
fn dynamic_runs_the_task_its_input_names() {
    let mut dynamic = task("d", "DYNAMIC", json!({"which": "${workflow.input.t}"}));
    dynamic.dynamic_task_name_param = Some("which".into());
    let mut h = H::start(def_of(vec![dynamic.clone()]), json!({"t": "resize"}));
    let t = h.task("d").clone();
    assert_eq!((t.task_type.as_str(), t.status), ("resize", Scheduled));
    assert_eq!(ready_tasks(h.wf())[0].task_type, "resize");
    run(&mut h, "d", json!({"ok": 1}));
    assert_eq!(h.status(), WorkflowStatus::Completed);

    let h = H::start(def_of(vec![dynamic]), json!({}));
    assert_eq!(h.st("d"), FailedWithTerminalError);
    assert_eq!(h.status(), WorkflowStatus::Failed);
    let reason = h.wf().reason_for_incompletion.clone().unwrap_or_default();
    assert!(reason.contains("Cannot map a dynamic task"), "{reason}");
}

#[test]
fn dynamic_fork_fixture_forks_what_the_first_task_lists() {
    let mut h = H::start(
        fixture("dynamic_fork_join_integration_test.json"),
        json!({}),
    );
    let listed = json!({
        "dynamicTasks": [
            {"name": "integration_task_2", "taskReferenceName": "xdt1", "type": "SIMPLE"},
            {"name": "integration_task_3", "taskReferenceName": "xdt2", "type": "SIMPLE"}
        ],
        "dynamicTasksInput": {"xdt1": {"k1": "v1"}, "xdt2": {"k2": "v2"}}
    });
    run(&mut h, "dt1", listed);
    assert_eq!(
        h.shape(),
        shape(&[
            ("dt1", Completed),
            ("dynamicfanouttask", Completed),
            ("xdt1", Scheduled),
            ("xdt2", Scheduled),
            ("dynamicfanouttask_join", InProgress),
        ])
    );
    let fork = h.task("dynamicfanouttask");
    assert_eq!(fork.task_type, "FORK");
    assert_eq!(fork.input_data["forkedTasks"], json!(["xdt1", "xdt2"]));
    assert_eq!(h.task("xdt2").input_data["k2"], json!("v2"));
    assert_eq!(
        h.task("dynamicfanouttask_join").input_data["joinOn"],
        json!(["xdt1", "xdt2"])
    );
    run(&mut h, "xdt1", json!({"a": 1}));
    assert_eq!(h.st("dynamicfanouttask_join"), InProgress);
    run(&mut h, "xdt2", json!({"b": 2}));
    assert_eq!(
        h.task("dynamicfanouttask_join").output_data,
        obj(json!({"xdt1": {"a": 1}, "xdt2": {"b": 2}}))
    );
    run(&mut h, "task4", json!({}));
    assert_eq!(h.status(), WorkflowStatus::Completed);
}

fn simple_fork_def() -> WorkflowDef {
    let fork = task(
        "fan",
        "FORK_JOIN_DYNAMIC",
        json!({"forkTaskName": "work", "forkTaskInputs": "${workflow.input.items}"}),
    );
    def_of(vec![
        fork,
        task("fan_join", "JOIN", json!({})),
        simple("after"),
    ])
}

#[test]
fn dynamic_fork_by_task_name_forks_one_task_per_input() {
    let mut h = H::start(simple_fork_def(), json!({"items": [{"n": 1}, 7]}));
    assert_eq!(h.st("_work_0"), Scheduled);
    assert_eq!(h.task("_work_0").input_data["n"], json!(1));
    assert_eq!(h.task("_work_1").input_data["input"], json!(7));
    assert_eq!(h.task("_work_1").input_data["__index"], json!(1));
    assert_eq!(h.task("_work_1").task_type, "work");
    run(&mut h, "_work_0", json!({}));
    run(&mut h, "_work_1", json!({}));
    assert_eq!(h.st("after"), Scheduled);

    let mut h = H::start(simple_fork_def(), json!({"items": []}));
    assert_eq!(h.st("fan_join"), Completed, "an empty fork joins at once");
    run(&mut h, "after", json!({}));
    assert_eq!(h.status(), WorkflowStatus::Completed);
}

#[test]
fn a_dynamic_fork_whose_input_is_not_a_list_fails_with_the_reason() {
    let mut fork = task(
        "fan",
        "FORK_JOIN_DYNAMIC",
        json!({"tasks": "${workflow.input.tasks}", "inputs": {}}),
    );
    fork.dynamic_fork_tasks_param = Some("tasks".into());
    fork.dynamic_fork_tasks_input_param_name = Some("inputs".into());
    let def = def_of(vec![fork, task("fan_join", "JOIN", json!({}))]);
    for bad in [
        json!("not a list"),
        json!([{"name": "x"}]),
        json!([{"name": "x", "taskReferenceName": "fan_join"}]),
    ] {
        let h = H::start(def.clone(), json!({ "tasks": bad }));
        assert_eq!(h.st("fan"), FailedWithTerminalError, "{bad}");
        assert_eq!(h.status(), WorkflowStatus::Failed);
        let reason = h
            .task("fan")
            .reason_for_incompletion
            .clone()
            .unwrap_or_default();
        assert!(!reason.is_empty(), "{bad}");
    }
}

#[test]
fn exclusive_join_takes_the_branch_that_ran() {
    let cases = [
        (
            json!({"decision_1": "true", "decision_2": "true"}),
            &["task2", "task3"][..],
            "task3",
        ),
        (
            json!({"decision_1": "true", "decision_2": "false"}),
            &["task2"][..],
            "task2",
        ),
        (
            json!({"decision_1": "false", "decision_3": "true"}),
            &["task4", "task5"][..],
            "task5",
        ),
    ];
    for (input, path, taken) in cases {
        let mut h = H::start(
            fixture("exclusive_join_integration_test.json"),
            input.clone(),
        );
        run(&mut h, "task1", json!({"payload": "p"}));
        for r in path {
            run(&mut h, r, json!({ "from": r }));
        }
        assert_eq!(h.st("exclusiveJoin"), Completed, "{input}");
        assert_eq!(
            h.task("exclusiveJoin").output_data,
            obj(json!({ "from": taken }))
        );
        assert_eq!(h.status(), WorkflowStatus::Completed);
    }
}

#[test]
fn inline_value_param_completes_at_once_and_javascript_waits_for_its_evaluation() {
    let vp = task(
        "v",
        "INLINE",
        json!({"evaluatorType": "value-param", "expression": "x", "x": "${workflow.input.x}"}),
    );
    let js = task(
        "j",
        "INLINE",
        json!({"evaluatorType": "javascript", "expression": "$.n * 2", "n": "${workflow.input.x}"}),
    );
    let mut h = H::start(def_of(vec![vp, js]), json!({"x": 21}));
    assert_eq!(h.task("v").output_data, obj(json!({"result": 21})));
    assert_eq!(h.st("j"), Scheduled);
    assert_eq!(
        h.work("j"),
        Some(Work::Script {
            script: "$.n * 2".into(),
            root: json!({"evaluatorType": "javascript", "expression": "$.n * 2", "n": 21}),
        })
    );
    assert!(ready_tasks(h.wf()).is_empty());
    h.perform("j", Ok(json!(42)));
    assert_eq!(h.task("j").output_data, obj(json!({"result": 42})));
    assert_eq!(h.status(), WorkflowStatus::Completed);
    assert!(
        !h.perform("j", Ok(json!(0))),
        "a repeated report changes nothing"
    );
}

#[test]
fn a_script_that_fails_fails_its_task_and_retry_evaluates_it_again() {
    let js = task(
        "j",
        "INLINE",
        json!({"evaluatorType": "javascript", "expression": "throw 1"}),
    );
    let mut h = H::start(def_of(vec![js]), json!({}));
    h.perform("j", Err("script threw: 1".into()));
    assert_eq!(h.st("j"), Failed);
    assert_eq!(h.status(), WorkflowStatus::Failed);
    assert!(h
        .wf()
        .reason_for_incompletion
        .clone()
        .unwrap_or_default()
        .contains("script threw: 1"));
    h.ok(Input::Retry);
    assert_eq!(h.st("j"), Scheduled);
    assert!(h.work("j").is_some());
}

#[test]
fn jq_reports_result_and_result_list() {
    let jq = task(
        "q",
        "JSON_JQ_TRANSFORM",
        json!({"queryExpression": ".a[]", "a": [1, 2]}),
    );
    let mut h = H::start(def_of(vec![jq]), json!({}));
    assert!(matches!(h.work("q"), Some(Work::Jq { ref query, .. }) if query == ".a[]"));
    h.perform("q", Ok(json!([1, 2])));
    assert_eq!(
        h.task("q").output_data,
        obj(json!({"result": 1, "resultList": [1, 2]}))
    );
}

#[test]
fn a_javascript_switch_takes_the_case_its_script_answers() {
    let mut sw = task("s", "SWITCH", json!({"v": "${workflow.input.v}"}));
    sw.evaluator_type = Some("javascript".into());
    sw.expression = Some("$.v > 1 ? 'big' : 'small'".into());
    sw.decision_cases.insert("big".into(), vec![simple("b")]);
    sw.default_case = vec![simple("d")];
    let mut h = H::start(def_of(vec![sw, simple("z")]), json!({"v": 5}));
    assert_eq!(h.st("s"), Scheduled);
    h.perform("s", Ok(json!("big")));
    assert_eq!(
        h.task("s").output_data,
        obj(json!({"evaluationResult": ["big"]}))
    );
    assert_eq!((h.st("b"), h.has("d")), (Scheduled, false));
    run(&mut h, "b", json!({}));
    assert_eq!(h.st("z"), Scheduled);
}

#[test]
fn start_workflow_starts_one_under_a_derived_id_and_outputs_it() {
    let spec = json!({"startWorkflow": {"name": "child", "version": 2, "input": {"a": 1}}});
    let mut h = H::start(def_of(vec![task("sw", "START_WORKFLOW", spec)]), json!({}));
    let Some(Work::Start(req)) = h.work("sw") else {
        panic!("START_WORKFLOW waits for its start");
    };
    assert_eq!((req.name.as_str(), req.version), ("child", Some(2)));
    assert_eq!(req.input, obj(json!({"a": 1})));
    let again = H::start((*h.rec.workflow.workflow_definition).clone(), json!({}));
    let Some(Work::Start(req2)) = again.work("sw") else {
        panic!("waits");
    };
    assert_eq!(
        req.workflow_id, req2.workflow_id,
        "the same task derives the same id"
    );
    h.perform("sw", Ok(json!({ "workflowId": req.workflow_id.as_str() })));
    assert_eq!(h.st("sw"), Completed);
    assert_eq!(h.status(), WorkflowStatus::Completed);
}

#[test]
fn unreported_work_is_performed_again_with_backoff() {
    let js = task("j", "LAMBDA", json!({"scriptExpression": "1"}));
    let mut h = H::start(def_of(vec![js]), json!({}));
    let id = h.task("j").task_id.clone();
    let key = TimerKey {
        kind: TimerKind::Perform,
        task_id: Some(id),
    };
    let due = |h: &H| {
        timers(h.wf())
            .into_iter()
            .find(|t| t.key == key)
            .map(|t| t.due_ms)
    };
    assert_eq!(due(&h), Some(h.now + 5_000));
    h.advance_ms(5_000);
    h.ok(Input::Timer(key.clone()));
    assert_eq!(h.task("j").poll_count, 1);
    assert_eq!(due(&h), Some(h.now + 10_000));
    h.perform("j", Ok(json!(1)));
    assert_eq!(due(&h), None);
}

#[test]
fn terminate_reports_its_reason_whatever_the_status() {
    for status in ["COMPLETED", "FAILED", "TERMINATED"] {
        let t = task(
            "t",
            "TERMINATE",
            json!({"terminationStatus": status, "terminationReason": "enough"}),
        );
        let h = H::start(def_of(vec![t]), json!({}));
        assert_eq!(
            h.wf().reason_for_incompletion.as_deref(),
            Some("enough"),
            "{status}"
        );
    }
}

fn http_task(retries: Option<u32>) -> WorkflowTask {
    let mut t = task(
        "call",
        "HTTP",
        json!({"http_request": {"uri": "http://svc/x", "method": "post", "body": {"a": 1},
                                 "headers": {"X-N": 1}, "readTimeOut": 700}}),
    );
    t.task_definition = retries.map(|n| TaskDef {
        retry_count: n,
        retry_delay_seconds: 2,
        ..TaskDef::named("call")
    });
    t
}

#[test]
fn http_asks_for_the_call_its_input_describes() {
    let h = H::start(def_of(vec![http_task(None)]), json!({}));
    let Some(Work::Http(req)) = h.work("call") else {
        panic!("an HTTP task waits for its call");
    };
    assert_eq!(
        (req.method.as_str(), req.uri.as_str()),
        ("POST", "http://svc/x")
    );
    assert_eq!(req.headers.get("X-N").map(String::as_str), Some("1"));
    assert_eq!(req.body, Some(json!({"a": 1})));
    assert_eq!((req.read_timeout_ms, req.connect_timeout_ms), (700, 5_000));
    assert_eq!(req.accept, "application/json");
}

#[test]
fn http_completes_on_2xx_and_fails_otherwise_retrying_under_its_definition() {
    let ok = json!({"response": {"statusCode": 200, "body": {"v": 1}, "headers": {}, "reasonPhrase": "OK"}});
    let mut h = H::start(def_of(vec![http_task(None)]), json!({}));
    h.perform("call", Ok(ok.clone()));
    assert_eq!(h.st("call"), Completed);
    assert_eq!(h.task("call").output_data, obj(ok.clone()));

    let busy = json!({"response": {"statusCode": 503, "reasonPhrase": "Service Unavailable"}});
    let mut h = H::start(def_of(vec![http_task(None)]), json!({}));
    h.perform("call", Ok(busy.clone()));
    assert_eq!(
        h.status(),
        WorkflowStatus::Failed,
        "no registered definition: no retry"
    );
    let reason = h
        .task("call")
        .reason_for_incompletion
        .clone()
        .unwrap_or_default();
    assert_eq!(reason, "HTTP 503 Service Unavailable");

    let mut h = H::start(def_of(vec![http_task(Some(1))]), json!({}));
    h.perform("call", Ok(busy.clone()));
    let retry = h.attempts("call")[1].clone();
    assert_eq!((retry.status, retry.retry_count), (Scheduled, 1));
    let pending = pending_work(h.wf());
    assert_eq!(
        pending[0].not_before,
        h.now + 2_000,
        "the retry waits out its delay"
    );
    h.perform("call", Err("connection refused".into()));
    assert_eq!(h.status(), WorkflowStatus::Failed);
    assert_eq!(h.attempts("call").len(), 2);
}

#[test]
fn a_report_for_another_iteration_changes_nothing() {
    let js = task(
        "j",
        "INLINE",
        json!({"evaluatorType": "javascript", "expression": "1"}),
    );
    let mut h = H::start(def_of(vec![js]), json!({}));
    let task_id = h.task("j").task_id.clone();
    let stale = Input::Performed {
        task_id,
        iteration: 3,
        outcome: Ok(json!(1)),
    };
    assert!(!h.ok(stale));
    assert_eq!(h.st("j"), Scheduled);
}

#[test]
fn a_decision_with_a_case_expression_asks_its_script_for_the_case() {
    let mut d = task("d", "DECISION", json!({"v": "${workflow.input.v}"}));
    d.case_expression = Some("$.v > 1 ? 'big' : 'small'".into());
    d.decision_cases.insert("big".into(), vec![simple("b")]);
    let mut h = H::start(def_of(vec![d]), json!({"v": 3}));
    assert!(
        matches!(h.work("d"), Some(Work::Script { ref script, .. }) if script.contains("'big'"))
    );
    h.perform("d", Ok(json!("big")));
    assert_eq!(h.st("b"), Scheduled);
}

#[test]
fn a_workflow_definitions_input_template_fills_missing_input() {
    let mut def = def_of(vec![simple("a")]);
    def.input_template = obj(json!({"p1": "default", "p2": [1]}));
    let h = H::start(def, json!({"p1": "given"}));
    assert_eq!(h.wf().input, obj(json!({"p1": "given", "p2": [1]})));
}

struct Registered;

impl Catalog for Registered {
    fn task_def(&self, name: &str) -> Option<TaskDef> {
        (name == "resize").then(|| TaskDef {
            retry_count: 5,
            ..TaskDef::named("resize")
        })
    }
}

struct Limited;

impl Catalog for Limited {
    fn task_def(&self, name: &str) -> Option<TaskDef> {
        Some(TaskDef {
            concurrent_exec_limit: Some(2),
            ..TaskDef::named(name)
        })
    }
}

#[test]
fn a_result_then_lease_leaves_a_limited_types_next_task_to_its_permits() {
    let same_type = |r: &str| WorkflowTask {
        name: "task_x".into(),
        ..simple(r)
    };
    let mut h = H::start(def_of(vec![same_type("a"), same_type("b")]), json!({}));
    h.poll("a");
    let report = TaskResult {
        workflow_instance_id: h.wf().workflow_id.as_str().into(),
        task_id: h.task("a").task_id.as_str().into(),
        status: TaskResultStatus::Completed,
        ..Default::default()
    };
    let inputs = vec![Input::TaskResultThenLease(report)];
    let mut rng = |_| -> Box<dyn rand::RngCore> { Box::new(ChaCha8Rng::seed_from_u64(3)) };
    let (next, answers) = crate::decide_all_with(&h.rec, inputs, h.now, &mut rng, &Limited);
    assert!(answers[0].as_ref().is_ok_and(Vec::is_empty), "{answers:?}");
    let wf = next.expect("the result is recorded").workflow;
    let status = |r: &str| wf.task_by_ref(r).map(|t| t.status);
    assert_eq!(
        (status("a"), status("b")),
        (Some(TaskStatus::Completed), Some(TaskStatus::Scheduled))
    );
}

#[test]
fn a_dynamic_task_runs_under_its_names_registered_definition() {
    let mut dynamic = task("d", "DYNAMIC", json!({"which": "resize"}));
    dynamic.dynamic_task_name_param = Some("which".into());
    let start = StartInput::new(wf_id(), def_of(vec![dynamic]), obj(json!({})));
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let d = crate::start_with(start, 0, &mut rng, &Registered).expect("starts");
    let wf = d.record.expect("a record").workflow;
    let def = wf.tasks[0].workflow_task.task_definition.clone();
    assert_eq!(def.map(|d| d.retry_count), Some(5));
}

#[test]
fn a_retry_that_received_its_own_id_receives_the_retrys_id() {
    let mut t = task(
        "a",
        "SIMPLE",
        json!({"me": "${CPEWF_TASK_ID}", "other": "x"}),
    );
    t.task_definition = Some(TaskDef {
        retry_count: 1,
        retry_delay_seconds: 0,
        ..TaskDef::named("a")
    });
    let mut h = H::start(def_of(vec![t]), json!({}));
    let first = h.task("a").clone();
    assert_eq!(first.input_data["me"], json!(first.task_id.as_str()));
    h.poll("a");
    h.fail("a");
    let retry = h.task("a").clone();
    assert_ne!(retry.task_id, first.task_id);
    assert_eq!(retry.input_data["me"], json!(retry.task_id.as_str()));
    assert_eq!(retry.input_data["other"], json!("x"));
}

/// A catalog whose cluster is at `0`.
struct AtVersion(proto::version::ClusterVersion);

impl Catalog for AtVersion {
    fn task_def(&self, _name: &str) -> Option<TaskDef> {
        None
    }

    fn cluster_version(&self) -> proto::version::ClusterVersion {
        self.0
    }
}

#[test]
fn a_task_carries_its_rate_limit_once_the_cluster_writes_that_format() {
    use proto::version::{ClusterVersion, TASK_RATE_LIMITS};
    let mut a = simple("a");
    a.task_definition = Some(TaskDef {
        rate_limit_per_frequency: Some(10),
        rate_limit_frequency_in_seconds: Some(60),
        ..TaskDef::named("a")
    });
    let limits_at = |version| {
        let catalog = std::sync::Arc::new(AtVersion(version));
        let h = H::try_start_with(def_of(vec![a.clone()]), json!({}), catalog).expect("starts");
        let task = h.task("a").clone();
        (
            task.rate_limit_per_frequency,
            task.rate_limit_frequency_in_seconds,
        )
    };
    assert_eq!(limits_at(ClusterVersion::FIRST), (None, None));
    assert_eq!(limits_at(TASK_RATE_LIMITS.since), (Some(10), Some(60)));
}
