//! Workflow operations: pause, resume, terminate, retry, restart, rerun, skip, decide — and their
//! refusals in the wrong state.

use super::*;
use proto::model::{RerunWorkflowRequest, SkipTaskRequest};
use TaskStatus::*;

fn two() -> H {
    H::start(def_of(vec![simple("a"), simple("b")]), json!({"x": 1}))
}

fn conflict(h: &mut H, input: Input) -> String {
    let v = h.rec.clone();
    match h.apply(input) {
        Err(Error::Conflict(m)) => {
            assert_eq!(h.rec, v, "a refusal changes nothing");
            m
        }
        other => panic!("expected Conflict, got {other:?}"),
    }
}

#[test]
fn pause_records_results_but_schedules_nothing_until_resume() {
    let mut h = two();
    h.poll("a");
    h.ok(Input::Pause);
    assert_eq!(h.status(), WorkflowStatus::Paused);
    assert!(!h.ok(Input::Pause), "pausing twice changes nothing");
    h.complete("a", json!({}));
    assert_eq!(h.shape(), shape(&[("a", Completed)]));
    assert!(ready_tasks(h.wf()).is_empty());
    h.ok(Input::Resume);
    assert_eq!(h.status(), WorkflowStatus::Running);
    assert_eq!(h.shape(), shape(&[("a", Completed), ("b", Scheduled)]));
    let m = conflict(&mut h, Input::Resume);
    assert!(m.contains("is not PAUSED so cannot resume"), "{m}");
}

#[test]
fn terminate_cancels_and_refuses_twice() {
    let mut h = two();
    h.ok(Input::Terminate {
        reason: Some("enough".into()),
    });
    assert_eq!(h.status(), WorkflowStatus::Terminated);
    assert_eq!(h.st("a"), Canceled);
    assert_eq!(h.wf().reason_for_incompletion.as_deref(), Some("enough"));
    assert_eq!(
        h.effects,
        vec![Effect::Finished],
        "a user terminate starts no failure workflow"
    );
    conflict(&mut h, Input::Terminate { reason: None });
    let m = conflict(&mut h, Input::Pause);
    assert!(m.contains("has ended"), "{m}");
    let mut done = two();
    done.poll("a");
    done.complete("a", json!({}));
    done.poll("b");
    done.complete("b", json!({}));
    assert_eq!(
        conflict(&mut done, Input::Terminate { reason: None }),
        "Cannot terminate a COMPLETED workflow."
    );
}

#[test]
fn retry_reschedules_the_failed_task() {
    let mut h = two();
    let m = conflict(&mut h, Input::Retry);
    assert!(m.starts_with("Workflow is still running"), "{m}");
    h.poll("a");
    h.fail("a");
    assert_eq!(h.status(), WorkflowStatus::Failed);
    h.advance_ms(100);
    h.ok(Input::Retry);
    assert_eq!(h.status(), WorkflowStatus::Running);
    assert_eq!(h.wf().last_retried_time, T0 + 100);
    assert_eq!(h.wf().reason_for_incompletion, None);
    assert_eq!(h.shape(), shape(&[("a", Failed), ("a", Scheduled)]));
    let at = h.attempts("a");
    assert_eq!(at[1].retried_task_id.as_ref(), Some(&at[0].task_id));
    assert_eq!(at[1].retry_count, 1);
    h.poll("a");
    h.complete("a", json!({}));
    assert_eq!(h.st("b"), Scheduled);
}

#[test]
fn retry_reopens_a_failed_join() {
    let mut fork = WorkflowTask {
        name: "f".into(),
        task_reference_name: "f".into(),
        task_type: "FORK_JOIN".into(),
        ..Default::default()
    };
    fork.fork_tasks = vec![vec![simple("a")], vec![simple("b")]];
    let join = WorkflowTask {
        name: "j".into(),
        task_reference_name: "j".into(),
        task_type: "JOIN".into(),
        join_on: vec!["a".into(), "b".into()],
        ..Default::default()
    };
    let mut h = H::start(def_of(vec![fork, join]), json!({}));
    h.poll("a");
    h.fail("a");
    assert_eq!(h.status(), WorkflowStatus::Failed);
    h.ok(Input::Retry);
    assert_eq!(h.st("j"), InProgress);
    assert_eq!((h.st("a"), h.st("b")), (Scheduled, Scheduled));
    for r in ["a", "b"] {
        h.poll(r);
        h.complete(r, json!({}));
    }
    assert_eq!(h.status(), WorkflowStatus::Completed);
}

#[test]
fn retry_without_failed_tasks_is_refused() {
    let mut h = two();
    for r in ["a", "b"] {
        h.poll(r);
        h.complete(r, json!({}));
    }
    let m = conflict(&mut h, Input::Retry);
    assert!(m.contains("COMPLETED"), "{m}");
}

#[test]
fn restart_starts_over_with_an_optional_new_definition() {
    let mut h = two();
    assert!(conflict(&mut h, Input::Restart { def: None }).starts_with("Workflow is still running"));
    h.poll("a");
    h.fail("a");
    h.advance_ms(50);
    h.ok(Input::Restart { def: None });
    assert_eq!(h.status(), WorkflowStatus::Running);
    assert_eq!(h.shape(), shape(&[("a", Scheduled)]));
    assert_eq!(h.wf().start_time, T0 + 50);
    assert!(h.wf().failed_reference_task_names.is_empty());
    h.ok(Input::Terminate { reason: None });
    let mut new_def = def_of(vec![simple("z")]);
    new_def.version = 2;
    h.ok(Input::Restart { def: Some(new_def) });
    assert_eq!(h.shape(), shape(&[("z", Scheduled)]));
    assert_eq!(h.wf().workflow_version, 2);
    h.ok(Input::Terminate { reason: None });
    assert!(matches!(
        h.apply(Input::Restart {
            def: Some(def_of(vec![]))
        }),
        Err(Error::Invalid(_))
    ));
}

#[test]
fn rerun_from_a_task_drops_what_followed() {
    let mut h = H::start(
        def_of(vec![simple("a"), simple("b"), simple("c")]),
        json!({}),
    );
    for r in ["a", "b", "c"] {
        h.poll(r);
        h.complete(r, json!({"r": r}));
    }
    assert_eq!(h.status(), WorkflowStatus::Completed);
    let b = h.task("b").task_id.clone();
    let req = RerunWorkflowRequest {
        re_run_from_task_id: Some(b.as_str().into()),
        task_input: Some(obj(json!({"fresh": true}))),
        ..Default::default()
    };
    h.ok(Input::Rerun(req));
    assert_eq!(h.status(), WorkflowStatus::Running);
    assert_eq!(h.shape(), shape(&[("a", Completed), ("b", Scheduled)]));
    assert_ne!(h.task("b").task_id, b);
    assert_eq!(h.task("b").input_data, obj(json!({"fresh": true})));
    assert_eq!(h.task("b").seq, 2);
    h.poll("b");
    h.complete("b", json!({}));
    assert_eq!(h.st("c"), Scheduled);
    let missing = RerunWorkflowRequest {
        re_run_from_task_id: Some(b.as_str().into()),
        ..Default::default()
    };
    assert!(
        matches!(h.apply(Input::Rerun(missing)), Err(Error::Conflict(_))),
        "still running"
    );
}

#[test]
fn rerun_from_the_start_with_new_input() {
    let mut h = two();
    h.poll("a");
    h.fail("a");
    let req = RerunWorkflowRequest {
        workflow_input: Some(obj(json!({"x": 2}))),
        ..Default::default()
    };
    h.ok(Input::Rerun(req));
    assert_eq!(h.shape(), shape(&[("a", Scheduled)]));
    assert_eq!(h.wf().input, obj(json!({"x": 2})));
}

#[test]
fn skip_a_pending_task_and_a_future_one() {
    let mut h = H::start(
        def_of(vec![simple("a"), simple("b"), simple("c")]),
        json!({}),
    );
    let req = SkipTaskRequest {
        task_input: None,
        task_output: Some(obj(json!({"skipped": 1}))),
    };
    h.ok(Input::SkipTask {
        reference: "a".into(),
        request: req,
    });
    assert_eq!(h.shape(), shape(&[("a", Skipped), ("b", Scheduled)]));
    assert_eq!(h.task("a").output_data, obj(json!({"skipped": 1})));
    h.ok(Input::SkipTask {
        reference: "c".into(),
        request: SkipTaskRequest::default(),
    });
    assert_eq!(
        h.shape(),
        shape(&[("a", Skipped), ("b", Scheduled), ("c", Skipped)])
    );
    assert_eq!(h.status(), WorkflowStatus::Running);
    h.poll("b");
    h.complete("b", json!({}));
    assert_eq!(h.status(), WorkflowStatus::Completed, "c was passed over");
    assert!(matches!(
        h.apply(Input::SkipTask {
            reference: "a".into(),
            request: SkipTaskRequest::default()
        }),
        Err(Error::Conflict(_))
    ));
    let mut h2 = two();
    assert!(matches!(
        h2.apply(Input::SkipTask {
            reference: "nope".into(),
            request: SkipTaskRequest::default()
        }),
        Err(Error::NotFound(_))
    ));
}

#[test]
fn decide_on_a_settled_workflow_changes_nothing() {
    let mut h = two();
    assert!(!h.ok(Input::Decide));
    assert!(h.effects.is_empty());
}
