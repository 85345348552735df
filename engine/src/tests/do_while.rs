//! DO_WHILE: iterations with `__N` references, forks inside the body, the condition asked once
//! per iteration with what it needs, the loop's output, `keepLastN`, and a failed condition.

use super::*;
use TaskStatus::*;

fn run(h: &mut H, r: &str, out: Value) {
    h.poll(r);
    h.complete(r, out);
}

/// Runs iteration `n` of the fixture's body.
fn body(h: &mut H, n: u32) {
    run(h, &format!("integration_task_0__{n}"), json!({ "i": n }));
    assert_eq!(h.st(&format!("fork__{n}")), Completed);
    run(h, &format!("integration_task_1__{n}"), json!({ "a": n }));
    assert_eq!(h.st(&format!("join__{n}")), InProgress);
    run(h, &format!("integration_task_2__{n}"), json!({ "b": n }));
    assert_eq!(h.st(&format!("join__{n}")), Completed);
}

/// The condition the loop waits on, and what `$` holds for it.
fn condition(h: &H) -> (String, Value) {
    match h.work("loopTask") {
        Some(Work::Script { script, root }) => (script, root),
        other => panic!("the loop waits for its condition, not {other:?}"),
    }
}

#[test]
fn do_while_fixture_runs_two_iterations_then_moves_on() {
    let mut h = H::start(
        fixture("do_while_integration_test.json"),
        json!({"loop": 2}),
    );
    let dw = h.task("loopTask").clone();
    assert_eq!((dw.status, dw.iteration), (InProgress, 1));
    assert_eq!(h.task("integration_task_0__1").iteration, 1);
    assert!(
        h.work("loopTask").is_none(),
        "no condition before the body ran"
    );
    body(&mut h, 1);
    let (script, root) = condition(&h);
    assert!(script.contains("$.loopTask['iteration'] < $.value"));
    assert_eq!(root["loopTask"]["iteration"], json!(1));
    assert_eq!(root["value"], json!(2));
    assert_eq!(root["integration_task_1"], json!({"a": 1}));
    h.perform("loopTask", Ok(json!(true)));
    assert_eq!(h.task("loopTask").iteration, 2);
    assert_eq!(h.st("integration_task_0__2"), Scheduled);
    body(&mut h, 2);
    assert_eq!(condition(&h).1["loopTask"]["iteration"], json!(2));
    h.perform("loopTask", Ok(json!(false)));
    assert_eq!(h.st("loopTask"), Completed);
    assert_eq!(h.status(), WorkflowStatus::Completed);
    let out = &h.task("loopTask").output_data;
    assert_eq!(out["iteration"], json!(2));
    assert_eq!(out["1"]["integration_task_0"], json!({"i": 1}));
    let join = json!({"integration_task_1__2": {"a": 2}, "integration_task_2__2": {"b": 2}});
    assert_eq!(
        out["2"]["join"], join,
        "a JOIN in a loop joins on its iteration's references"
    );
}

#[test]
fn a_condition_for_an_earlier_iteration_is_ignored() {
    let mut h = H::start(
        fixture("do_while_integration_test.json"),
        json!({"loop": 5}),
    );
    body(&mut h, 1);
    let id = h.task("loopTask").task_id.clone();
    h.perform("loopTask", Ok(json!(true)));
    let stale = Input::Performed {
        task_id: id,
        iteration: 1,
        outcome: Ok(json!(false)),
    };
    assert!(!h.ok(stale));
    assert_eq!(
        (h.st("loopTask"), h.task("loopTask").iteration),
        (InProgress, 2)
    );
}

#[test]
fn a_condition_that_fails_fails_the_loop_with_the_reason() {
    let mut h = H::start(
        fixture("do_while_integration_test.json"),
        json!({"loop": 2}),
    );
    body(&mut h, 1);
    h.perform("loopTask", Err("script failed: ReferenceError: x".into()));
    assert_eq!(h.st("loopTask"), Failed);
    assert_eq!(h.status(), WorkflowStatus::Failed);
    let reason = h.wf().reason_for_incompletion.clone().unwrap_or_default();
    assert!(reason.contains("ReferenceError"), "{reason}");
}

fn counter_loop(keep: Option<u64>) -> WorkflowDef {
    let mut dw = simple("loop");
    dw.task_type = task_type::DO_WHILE.into();
    dw.loop_condition = Some("true".into());
    dw.loop_over = vec![simple("step")];
    if let Some(k) = keep {
        dw.input_parameters.insert("keepLastN".into(), k.into());
    }
    def_of(vec![dw, simple("after")])
}

#[test]
fn keep_last_n_drops_older_iterations_and_later_tasks_see_the_latest() {
    let mut h = H::start(counter_loop(Some(2)), json!({}));
    for n in 1..=4 {
        run(&mut h, &format!("step__{n}"), json!({ "n": n }));
        let more = n < 4;
        h.perform("loop", Ok(json!(more)));
    }
    let steps: Vec<String> = h
        .shape()
        .into_iter()
        .map(|(r, _)| r)
        .filter(|r| r.starts_with("step"))
        .collect();
    assert_eq!(steps, ["step__3", "step__4"]);
    let out = &h.task("loop").output_data;
    let kept: Vec<&String> = out.keys().collect();
    assert_eq!(kept, ["iteration", "3", "4"]);
    assert_eq!(h.st("after"), Scheduled);
}

#[test]
fn tasks_after_a_loop_read_its_last_iteration_by_plain_reference() {
    let mut def = counter_loop(None);
    def.tasks[1]
        .input_parameters
        .insert("last".into(), "${step.output.n}".into());
    let mut h = H::start(def, json!({}));
    for n in 1..=3 {
        run(&mut h, &format!("step__{n}"), json!({ "n": n }));
        h.perform("loop", Ok(json!(n < 3)));
    }
    assert_eq!(h.task("after").input_data["last"], json!(3));
}

#[test]
fn a_failed_body_task_is_retried_within_its_iteration() {
    let mut def = counter_loop(None);
    def.tasks[0].loop_over[0].task_definition = Some(TaskDef {
        retry_count: 1,
        retry_delay_seconds: 0,
        ..TaskDef::named("step")
    });
    let mut h = H::start(def, json!({}));
    h.poll("step__1");
    h.fail("step__1");
    let attempts = h.attempts("step__1");
    assert_eq!(attempts.len(), 2);
    assert_eq!((attempts[1].status, attempts[1].iteration), (Scheduled, 1));
    assert!(
        h.work("loop").is_none(),
        "the iteration is not over while a retry is due"
    );
    run(&mut h, "step__1", json!({}));
    assert!(h.work("loop").is_some());
}

#[test]
fn the_condition_sees_the_loops_parameters_resolved_again() {
    let mut def = counter_loop(None);
    def.tasks[0].input_parameters = obj(json!({"done": "${workflow.variables.done}"}));
    let mut h = H::start(def, json!({}));
    run(&mut h, "step__1", json!({}));
    let Some(Work::Script { root, .. }) = h.work("loop") else {
        panic!("the loop waits for its condition");
    };
    assert_eq!(root["done"], Value::Null);
    h.perform("loop", Ok(json!(true)));
    h.rec.workflow.variables.insert("done".into(), json!(true));
    run(&mut h, "step__2", json!({}));
    let Some(Work::Script { root, .. }) = h.work("loop") else {
        panic!("the loop waits for its condition");
    };
    assert_eq!(root["done"], json!(true));
}

#[test]
fn an_empty_condition_runs_the_body_once() {
    let mut def = counter_loop(None);
    def.tasks[0].loop_condition = Some(String::new());
    let mut h = H::start(def, json!({}));
    run(&mut h, "step__1", json!({}));
    h.perform("loop", Ok(Value::Null));
    assert_eq!(h.st("loop"), Completed);
}
