//! Timers: what `timers()` derives, and what each kind does when it fires (and that early or stale
//! timers change nothing).

use super::*;
use proto::model::{TimeoutPolicy, WorkflowTimeoutPolicy};
use TaskStatus::*;

fn with_def(r: &str, def: TaskDef) -> WorkflowTask {
    WorkflowTask {
        task_definition: Some(def),
        ..simple(r)
    }
}

fn key(kind: TimerKind, h: &H, r: &str) -> TimerKey {
    TimerKey {
        kind,
        task_id: Some(h.task(r).task_id.clone()),
    }
}

fn fire(h: &mut H, k: TimerKey) -> bool {
    h.ok(Input::Timer(k))
}

#[test]
fn timers_are_derived_from_state() {
    let d = TaskDef {
        poll_timeout_seconds: Some(5),
        timeout_seconds: 20,
        total_timeout_seconds: 100,
        response_timeout_seconds: 10,
        ..TaskDef::named("task_a")
    };
    let mut def = def_of(vec![with_def("a", d)]);
    def.timeout_seconds = 300;
    let mut h = H::start(def, json!({}));
    let id = h.task("a").task_id.clone();
    let t = |kind, due_ms, id: Option<&proto::TaskId>| Timer {
        due_ms,
        key: TimerKey {
            kind,
            task_id: id.cloned(),
        },
    };
    assert_eq!(
        timers(h.wf()),
        vec![
            t(TimerKind::PollTimeout, T0 + 5_000, Some(&id)),
            t(TimerKind::TotalTimeout, T0 + 100_000, Some(&id)),
            t(TimerKind::WorkflowTimeout, T0 + 300_000, None),
        ]
    );
    h.advance_ms(1000);
    h.poll("a");
    assert_eq!(
        timers(h.wf()),
        vec![
            t(TimerKind::ResponseTimeout, T0 + 11_000, Some(&id)),
            t(TimerKind::TaskTimeout, T0 + 21_000, Some(&id)),
            t(TimerKind::TotalTimeout, T0 + 100_000, Some(&id)),
            t(TimerKind::WorkflowTimeout, T0 + 300_000, None),
        ]
    );
    h.ok(Input::Pause);
    assert!(timers(h.wf())
        .iter()
        .all(|x| x.key.kind != TimerKind::WorkflowTimeout));
    assert!(ready_tasks(h.wf()).is_empty());
}

#[test]
fn response_timeout_times_out_and_retries() {
    let d = TaskDef {
        response_timeout_seconds: 10,
        retry_delay_seconds: 0,
        retry_count: 1,
        ..TaskDef::named("task_rt")
    };
    let mut h = H::start(def_of(vec![with_def("a", d)]), json!({}));
    h.poll("a");
    let k = key(TimerKind::ResponseTimeout, &h, "a");
    h.advance_ms(9_999);
    assert!(!fire(&mut h, k.clone()), "early timer changes nothing");
    h.advance_ms(1);
    assert!(fire(&mut h, k.clone()));
    assert_eq!(h.shape(), shape(&[("a", TimedOut), ("a", Scheduled)]));
    assert_eq!(
        h.attempts("a")[0].reason_for_incompletion.as_deref(),
        Some("responseTimeout: 10 exceeded.")
    );
    assert!(!fire(&mut h, k), "stale timer changes nothing");
    h.poll("a");
    h.advance_ms(10_000);
    let k2 = key(TimerKind::ResponseTimeout, &h, "a");
    fire(&mut h, k2);
    assert_eq!(
        h.status(),
        WorkflowStatus::TimedOut,
        "retries exhausted on a timed-out task"
    );
    assert!(h.finished());
}

#[test]
fn poll_timeout_follows_the_policy() {
    for (policy, want_wf, attempts) in [
        (TimeoutPolicy::Retry, WorkflowStatus::Running, 2),
        (TimeoutPolicy::TimeOutWf, WorkflowStatus::TimedOut, 1),
    ] {
        let d = TaskDef {
            poll_timeout_seconds: Some(5),
            timeout_policy: policy,
            retry_delay_seconds: 0,
            retry_count: 1,
            ..TaskDef::named("task_a")
        };
        let mut h = H::start(def_of(vec![with_def("a", d)]), json!({}));
        let k = key(TimerKind::PollTimeout, &h, "a");
        h.advance_ms(5_000);
        assert!(fire(&mut h, k));
        assert_eq!(h.attempts("a")[0].status, TimedOut);
        assert_eq!(h.attempts("a").len(), attempts, "{policy:?}");
        assert_eq!(h.status(), want_wf, "{policy:?}");
    }
}

#[test]
fn task_timeout_is_not_extended_by_heartbeats() {
    let table = [
        (
            TimeoutPolicy::Retry,
            WorkflowStatus::Running,
            Some(TimedOut),
            2,
        ),
        (
            TimeoutPolicy::TimeOutWf,
            WorkflowStatus::TimedOut,
            Some(TimedOut),
            1,
        ),
        (TimeoutPolicy::AlertOnly, WorkflowStatus::Running, None, 1),
    ];
    for (policy, want_wf, want_task, attempts) in table {
        let d = TaskDef {
            timeout_seconds: 20,
            timeout_policy: policy,
            retry_delay_seconds: 0,
            retry_count: 1,
            ..TaskDef::named("task_a")
        };
        let mut h = H::start(def_of(vec![with_def("a", d)]), json!({}));
        h.poll("a");
        h.advance_ms(15_000);
        h.result("a", TaskResultStatus::InProgress, json!({"beat": 1}));
        let k = key(TimerKind::TaskTimeout, &h, "a");
        let due = timers(h.wf())
            .into_iter()
            .find(|t| t.key == k)
            .map(|t| t.due_ms);
        h.advance_ms(5_000);
        let changed = fire(&mut h, k);
        match want_task {
            Some(s) => {
                assert_eq!(due, Some(T0 + 20_000), "{policy:?}");
                assert!(changed);
                assert_eq!(h.attempts("a")[0].status, s);
            }
            None => {
                assert_eq!(due, None, "ALERT_ONLY arms nothing");
                assert!(!changed);
            }
        }
        assert_eq!(h.attempts("a").len(), attempts, "{policy:?}");
        assert_eq!(h.status(), want_wf, "{policy:?}");
    }
}

#[test]
fn total_timeout_spans_attempts_and_stops_retries() {
    let d = TaskDef {
        total_timeout_seconds: 30,
        retry_delay_seconds: 0,
        retry_count: 5,
        ..TaskDef::named("task_a")
    };
    let mut h = H::start(def_of(vec![with_def("a", d)]), json!({}));
    h.poll("a");
    h.advance_ms(10_000);
    h.fail("a");
    h.poll("a");
    let k = key(TimerKind::TotalTimeout, &h, "a");
    assert_eq!(
        timers(h.wf())
            .into_iter()
            .find(|t| t.key == k)
            .map(|t| t.due_ms),
        Some(T0 + 30_000)
    );
    h.advance_ms(20_000);
    assert!(fire(&mut h, k));
    assert_eq!(h.shape(), shape(&[("a", Failed), ("a", TimedOut)]));
    assert_eq!(h.status(), WorkflowStatus::TimedOut);
}

#[test]
fn workflow_timeout() {
    for (policy, timed_out) in [
        (WorkflowTimeoutPolicy::TimeOutWf, true),
        (WorkflowTimeoutPolicy::AlertOnly, false),
    ] {
        let mut def = def_of(vec![simple("a")]);
        def.timeout_seconds = 60;
        def.timeout_policy = policy;
        let mut h = H::start(def, json!({}));
        h.poll("a");
        let k = TimerKey {
            kind: TimerKind::WorkflowTimeout,
            task_id: None,
        };
        h.advance_ms(59_999);
        assert!(!fire(&mut h, k.clone()));
        h.advance_ms(1);
        assert_eq!(fire(&mut h, k), timed_out);
        if timed_out {
            assert_eq!(h.status(), WorkflowStatus::TimedOut);
            assert_eq!(h.st("a"), Canceled);
            assert!(h.finished());
            assert!(timers(h.wf()).is_empty());
        } else {
            assert_eq!(h.status(), WorkflowStatus::Running);
        }
    }
}

#[test]
fn optional_fixture_retry_times_out_into_completed_with_errors() {
    let mut h = H::start(
        fixture("simple_workflow_with_optional_task_integration_test.json"),
        json!({}),
    );
    let first = h.shape()[0].0.clone();
    assert!(h.task(&first).workflow_task.optional);
    h.poll(&first);
    h.fail(&first);
    assert_eq!(h.attempts(&first).len(), 2);
    h.poll(&first);
    h.advance_ms(5_000);
    let k = key(TimerKind::ResponseTimeout, &h, &first);
    assert!(fire(&mut h, k));
    assert_eq!(h.st(&first), CompletedWithErrors);
    let next = h.shape().last().map(|s| s.0.clone()).expect("a next task");
    assert_ne!(next, first);
    h.poll(&next);
    h.complete(&next, json!({}));
    assert_eq!(h.status(), WorkflowStatus::Completed);
}
