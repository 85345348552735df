//! System tasks Baton runs itself: SWITCH/DECISION, SET_VARIABLE, TERMINATE, WAIT, EVENT.

use super::*;
use TaskStatus::*;

fn run(h: &mut H, r: &str) {
    h.poll(r);
    h.complete(r, json!({}));
}

#[test]
fn switch_fixture_takes_the_case_then_continues() {
    let table: [(&str, &[&str]); 3] = [("c", &["t1", "t2"]), ("other", &["t5"]), ("", &["t5"])];
    for (case, path) in table {
        let input = if case.is_empty() {
            json!({})
        } else {
            json!({"case": case})
        };
        let mut h = H::start(fixture("simple_switch_task_integration_test.json"), input);
        let sw = h.task("switchTask").clone();
        assert_eq!((sw.status, sw.task_type.as_str()), (Completed, "SWITCH"));
        let key = if case.is_empty() { "null" } else { case };
        assert_eq!(sw.output_data, obj(json!({"evaluationResult": [key]})));
        for r in path {
            assert_eq!(h.st(r), Scheduled, "case {case:?}: {r}");
            run(&mut h, r);
        }
        assert_eq!(h.st("t20"), Scheduled, "case {case:?}");
        run(&mut h, "t20");
        assert_eq!(h.status(), WorkflowStatus::Completed);
        let refs: Vec<String> = h.shape().into_iter().map(|s| s.0).collect();
        let mut want = vec!["switchTask".to_string()];
        want.extend(path.iter().map(|s| s.to_string()));
        want.push("t20".into());
        assert_eq!(refs, want);
    }
}

#[test]
fn switch_with_an_empty_case_moves_on() {
    let sw = WorkflowTask {
        name: "sw".into(),
        task_reference_name: "sw".into(),
        task_type: "SWITCH".into(),
        evaluator_type: Some("value-param".into()),
        expression: Some("k".into()),
        input_parameters: obj(json!({"k": "${workflow.input.k}"})),
        decision_cases: [("x".to_string(), vec![simple("x1")])]
            .into_iter()
            .collect(),
        ..Default::default()
    };
    let h = H::start(def_of(vec![sw, simple("after")]), json!({"k": 42}));
    assert_eq!(h.shape(), shape(&[("sw", Completed), ("after", Scheduled)]));
    assert_eq!(
        h.task("sw").output_data,
        obj(json!({"evaluationResult": ["42"]}))
    );
}

#[test]
fn set_variable_fixture() {
    let mut h = H::start(
        fixture("set_variable_workflow_integration_test.json"),
        json!({"var": "v1"}),
    );
    run(&mut h, "simple");
    assert_eq!(h.st("set_variable_1"), Completed);
    assert_eq!(h.wf().variables, obj(json!({"var": "v1"})));
    assert_eq!(
        (h.st("wait0"), h.task("wait0").task_type.as_str()),
        (InProgress, "WAIT")
    );
    assert!(
        ready_tasks(h.wf()).is_empty(),
        "WAIT is not offered to workers"
    );
    assert!(timers(h.wf()).is_empty());
    h.complete("wait0", json!({}));
    assert_eq!(h.status(), WorkflowStatus::Completed);
    assert_eq!(h.wf().output, obj(json!({"variables": {"var": "v1"}})));
}

fn terminate(status: &str) -> WorkflowTask {
    WorkflowTask {
        name: "terminate".into(),
        task_reference_name: "term".into(),
        task_type: "TERMINATE".into(),
        input_parameters: obj(json!({
            "terminationStatus": status,
            "terminationReason": "Early exit in terminate",
            "workflowOutput": {"from": "${a.output.v}"},
        })),
        ..Default::default()
    }
}

#[test]
fn terminate_completed_sets_the_output_and_skips_the_rest() {
    let mut h = H::start(
        def_of(vec![simple("a"), terminate("COMPLETED"), simple("never")]),
        json!({}),
    );
    h.poll("a");
    h.complete("a", json!({"v": 7}));
    assert_eq!(h.status(), WorkflowStatus::Completed);
    assert_eq!(h.wf().output, obj(json!({"from": 7})));
    assert!(!h.has("never"));
    assert_eq!(h.effects, vec![Effect::Finished]);
}

#[test]
fn terminate_failed_starts_the_failure_workflow() {
    let mut def = def_of(vec![simple("a"), terminate("FAILED"), simple("never")]);
    def.failure_workflow = Some("failure_workflow".into());
    let mut h = H::start(def, json!({}));
    h.poll("a");
    h.complete("a", json!({"v": 1}));
    assert_eq!(h.status(), WorkflowStatus::Failed);
    assert_eq!(
        h.wf().reason_for_incompletion.as_deref(),
        Some("Early exit in terminate")
    );
    assert_eq!(h.st("term"), Completed);
    match &h.effects[..] {
        [Effect::StartWorkflow { name, input, .. }, Effect::Finished] => {
            assert_eq!(name, "failure_workflow");
            assert_eq!(input["failureStatus"], json!("FAILED"));
            assert_eq!(input["reason"], json!("Early exit in terminate"));
            assert_eq!(input["workflowId"], json!(h.wf().workflow_id.as_str()));
        }
        other => panic!("unexpected effects {other:?}"),
    }
    let mut t = H::start(def_of(vec![terminate("TERMINATED")]), json!({}));
    assert_eq!(t.status(), WorkflowStatus::Terminated);
    assert!(!t.ok(Input::Decide));
}

#[test]
fn decision_with_case_value_param() {
    let d = WorkflowTask {
        name: "Decision".into(),
        task_reference_name: "d".into(),
        task_type: "DECISION".into(),
        case_value_param: Some("case".into()),
        input_parameters: obj(json!({"case": "${workflow.input.case}"})),
        decision_cases: [("b".to_string(), vec![simple("b1")])]
            .into_iter()
            .collect(),
        default_case: vec![simple("def")],
        ..Default::default()
    };
    let h = H::start(def_of(vec![d.clone()]), json!({"case": "b"}));
    assert_eq!(h.shape(), shape(&[("d", Completed), ("b1", Scheduled)]));
    let h = H::start(def_of(vec![d]), json!({"case": "zzz"}));
    assert_eq!(h.shape(), shape(&[("d", Completed), ("def", Scheduled)]));
}

fn wait(r: &str, input: Value) -> WorkflowTask {
    WorkflowTask {
        name: r.into(),
        task_reference_name: r.into(),
        task_type: "WAIT".into(),
        input_parameters: obj(input),
        ..Default::default()
    }
}

#[test]
fn wait_with_a_duration_completes_when_its_timer_fires() {
    let mut h = H::start(
        def_of(vec![
            wait("w", json!({"duration": "${workflow.input.d}"})),
            simple("after"),
        ]),
        json!({"d": "1 seconds"}),
    );
    let w = h.task("w").clone();
    assert_eq!((w.status, w.wait_timeout), (InProgress, T0 + 1_000));
    let key = TimerKey {
        kind: TimerKind::Wait,
        task_id: Some(w.task_id.clone()),
    };
    assert_eq!(
        timers(h.wf()),
        vec![Timer {
            due_ms: T0 + 1_000,
            key: key.clone()
        }]
    );
    h.advance_ms(999);
    assert!(
        !h.ok(Input::Timer(key.clone())),
        "an early timer does nothing"
    );
    h.advance_ms(1);
    assert!(h.ok(Input::Timer(key.clone())));
    assert_eq!(h.shape(), shape(&[("w", Completed), ("after", Scheduled)]));
    assert_eq!(h.task("w").end_time, T0 + 1_000);
    assert!(timers(h.wf()).is_empty());
    assert!(!h.ok(Input::Timer(key)), "a fired timer is stale");
}

#[test]
fn wait_completed_from_outside_disarms_its_timer() {
    let mut h = H::start(
        def_of(vec![
            wait("w", json!({"until": "2100-01-01"})),
            simple("after"),
        ]),
        json!({}),
    );
    assert_eq!(timers(h.wf()).len(), 1);
    h.complete("w", json!({"by": "hand"}));
    assert_eq!(h.shape(), shape(&[("w", Completed), ("after", Scheduled)]));
    assert!(timers(h.wf()).is_empty());
}

#[test]
fn wait_with_bad_input_fails_the_workflow_and_a_past_time_passes_at_once() {
    let h = H::start(
        def_of(vec![wait(
            "w",
            json!({"duration": "1s", "until": "2100-01-01"}),
        )]),
        json!({}),
    );
    assert_eq!(h.st("w"), FailedWithTerminalError);
    assert_eq!(
        h.task("w").reason_for_incompletion.as_deref(),
        Some(crate::wait::BOTH_GIVEN)
    );
    assert_eq!(h.status(), WorkflowStatus::Failed);

    let h = H::start(
        def_of(vec![
            wait("w", json!({"until": "2000-01-01"})),
            simple("after"),
        ]),
        json!({}),
    );
    assert_eq!(h.shape(), shape(&[("w", Completed), ("after", Scheduled)]));
}

fn event(r: &str, sink: &str, async_complete: bool) -> WorkflowTask {
    WorkflowTask {
        name: r.into(),
        task_reference_name: r.into(),
        task_type: "EVENT".into(),
        sink: Some(sink.into()),
        async_complete,
        input_parameters: obj(json!({"orderId": "${workflow.input.orderId}"})),
        ..Default::default()
    }
}

#[test]
fn an_event_task_waits_for_its_publish_then_completes_with_the_payload() {
    let mut h = H::start(
        def_of(vec![event("e", "conductor", false), simple("after")]),
        json!({"orderId": "o1"}),
    );
    assert_eq!(h.shape(), shape(&[("e", Scheduled)]));
    assert!(
        crate::ready_tasks(h.wf()).is_empty(),
        "no worker polls an EVENT task"
    );
    let pending = crate::pending_events(h.wf());
    assert_eq!(pending.len(), 1);
    let e = &pending[0];
    assert_eq!(e.task_id, h.task("e").task_id);
    assert_eq!(e.sink, format!("conductor:{}:e", h.wf().workflow_name));
    assert_eq!(e.payload["orderId"], "o1");
    assert_eq!(e.payload["workflowInstanceId"], h.wf().workflow_id.as_str());

    let task_id = h.task("e").task_id.clone();
    h.ok(Input::EventPublished {
        task_id: task_id.clone(),
        error: None,
    });
    assert_eq!(h.shape(), shape(&[("e", Completed), ("after", Scheduled)]));
    assert_eq!(h.task("e").output_data["event_produced"], e.sink.as_str());
    assert!(crate::pending_events(h.wf()).is_empty());
    // A repeated report changes nothing.
    assert!(!h.ok(Input::EventPublished {
        task_id,
        error: None
    }));
}

#[test]
fn an_event_task_with_async_complete_stays_in_progress_and_a_failed_publish_fails_it() {
    let mut h = H::start(def_of(vec![event("e", "nats:orders", true)]), json!({}));
    let task_id = h.task("e").task_id.clone();
    h.ok(Input::EventPublished {
        task_id,
        error: None,
    });
    assert_eq!(h.st("e"), InProgress);
    assert_eq!(h.task("e").output_data["event_produced"], "nats:orders");

    let mut h = H::start(def_of(vec![event("e", "amqp_queue:q", false)]), json!({}));
    let task_id = h.task("e").task_id.clone();
    h.ok(Input::EventPublished {
        task_id,
        error: Some("broker down".into()),
    });
    assert_eq!(h.st("e"), Failed);
    assert_eq!(
        h.task("e").reason_for_incompletion.as_deref(),
        Some("broker down")
    );
}

#[test]
fn an_unreported_event_is_published_again_by_its_timer_with_backoff_until_reported() {
    let mut h = H::start(def_of(vec![event("e", "conductor", false)]), json!({}));
    let task_id = h.task("e").task_id.clone();
    let key = TimerKey {
        kind: TimerKind::EventPublish,
        task_id: Some(task_id.clone()),
    };
    let due = |h: &H| {
        let armed = timers(h.wf());
        assert_eq!(armed.len(), 1, "only the publication timer: {armed:?}");
        assert_eq!(armed[0].key, key);
        armed[0].due_ms
    };
    assert_eq!(due(&h), T0 + 5_000);
    h.advance_ms(4_999);
    assert!(
        !h.ok(Input::Timer(key.clone())),
        "an early timer does nothing"
    );
    // Each firing records an attempt (the write whose commit publishes again); the waits double
    // up to their maximum, and the message stays pending.
    let mut waits = Vec::new();
    for _ in 0..5 {
        h.now = due(&h);
        assert!(h.ok(Input::Timer(key.clone())));
        assert_eq!(h.task("e").update_time, h.now);
        assert_eq!(crate::pending_events(h.wf()).len(), 1);
        waits.push(due(&h) - h.now);
    }
    assert_eq!(waits, vec![10_000, 20_000, 30_000, 30_000, 30_000]);
    assert_eq!(h.task("e").poll_count, 5);
    assert!(
        !h.ok(Input::Timer(key.clone())),
        "the next publication is not due yet"
    );

    h.ok(Input::EventPublished {
        task_id,
        error: None,
    });
    assert_eq!(h.st("e"), Completed);
    assert!(timers(h.wf()).is_empty(), "a reported event needs no timer");
    h.advance_ms(60_000);
    assert!(
        !h.ok(Input::Timer(key)),
        "the timer of a reported event is stale"
    );
}

#[test]
fn a_paused_workflow_does_not_publish_its_event_again() {
    let mut h = H::start(def_of(vec![event("e", "conductor", false)]), json!({}));
    h.ok(Input::Pause);
    assert!(timers(h.wf()).is_empty());
    h.ok(Input::Resume);
    assert_eq!(timers(h.wf())[0].key.kind, TimerKind::EventPublish);
}

#[test]
fn outside_variable_updates_merge_append_and_apply_once() {
    let mut h = H::start(def_of(vec![simple("a")]), json!({}));
    let update = |vars: Value, append: bool, key: &str| Input::UpdateVariables {
        variables: obj(vars),
        append_array: append,
        key: key.into(),
    };
    assert!(h.ok(update(json!({"seen": [1], "x": "a"}), false, "k1")));
    assert!(h.ok(update(json!({"seen": 2, "x": "b"}), true, "k2")));
    // The same key again (a redelivered event) is a no-op.
    assert!(!h.ok(update(json!({"seen": 2}), true, "k2")));
    assert_eq!(h.wf().variables["seen"], json!([1, 2]));
    assert_eq!(h.wf().variables["x"], "b");
    h.poll("a");
    h.complete("a", json!({}));
    assert!(matches!(
        h.apply(update(json!({"y": 1}), false, "k3")),
        Err(Error::Conflict(_))
    ));
}
