//! The workflow status listener: a workflow that ends owes its sink the publication of its
//! end until that is reported, is reminded by a timer, gives up after the last attempt, and
//! owes a new publication for each end.

use super::*;
use proto::record::STATUS_NOTICE_ATTEMPTS_MAX;

fn listened(sink: Option<&str>) -> WorkflowDef {
    WorkflowDef {
        workflow_status_listener_enabled: true,
        workflow_status_listener_sink: sink.map(str::to_owned),
        ..def_of(vec![simple("a")])
    }
}

fn timer() -> Input {
    Input::Timer(TimerKey {
        kind: TimerKind::StatusPublish,
        task_id: None,
    })
}

fn owed(h: &H) -> Option<StatusPublication> {
    let publications: Vec<_> = outbound(&h.rec)
        .into_iter()
        .filter_map(|e| match e {
            Effect::PublishStatus {
                workflow_id,
                publication,
            } => {
                assert_eq!(workflow_id, wf_id());
                Some(publication)
            }
            _ => None,
        })
        .collect();
    assert!(publications.len() <= 1);
    assert_eq!(publications.first(), status_publication(&h.rec).as_ref());
    publications.into_iter().next()
}

#[test]
fn a_completed_workflow_owes_its_summary_until_reported_published() {
    let mut h = H::start(listened(Some("conductor:ends")), json!({"x": 1}));
    assert_eq!(owed(&h), None, "nothing is owed while it runs");
    assert_eq!(status_timer(&h.rec), None);
    h.poll("a");
    h.advance_ms(1_000);
    h.complete("a", json!({"y": 2}));
    assert_eq!(h.status(), WorkflowStatus::Completed);
    let end = h.wf().end_time;
    let p = owed(&h).expect("the end is owed");
    assert_eq!(p.sink, "conductor:ends");
    assert_eq!(p.message_id, format!("{}-{end}", wf_id()));
    assert_eq!(p.end_time, end);
    assert_eq!(p.payload["workflowId"], json!(wf_id().as_str()));
    assert_eq!(p.payload["status"], json!("COMPLETED"));
    assert_eq!(p.payload["workflowType"], json!("wf"));
    assert_eq!(p.payload["output"], json!("{\"y\":2}"));
    assert_eq!(p.payload["correlationId"], json!("corr"));
    assert!(h.rec.owes_status_notice());
    let t = status_timer(&h.rec).expect("a terminal workflow keeps a timer");
    assert_eq!(t.due_ms, end + 5_000);
    // A report for another end changes nothing; the right one records it done.
    assert!(!h.ok(Input::StatusPublished { end_time: end - 1 }));
    assert!(h.ok(Input::StatusPublished { end_time: end }));
    assert!(!h.rec.owes_status_notice());
    assert_eq!(owed(&h), None);
    assert_eq!(status_timer(&h.rec), None);
    assert!(
        !h.ok(Input::StatusPublished { end_time: end }),
        "a repeat is a no-op"
    );
}

#[test]
fn a_terminated_workflow_owes_its_end_and_the_timer_repeats_then_gives_up() {
    let mut h = H::start(listened(Some("nats:ends")), json!({}));
    h.ok(Input::Terminate {
        reason: Some("enough".into()),
    });
    let end = h.wf().end_time;
    let p = owed(&h).expect("owed");
    assert_eq!(p.payload["status"], json!("TERMINATED"));
    assert_eq!(p.payload["reasonForIncompletion"], json!("enough"));
    assert!(!h.ok(timer()), "not due yet");
    let mut due = end + 5_000;
    for attempt in 1..STATUS_NOTICE_ATTEMPTS_MAX {
        h.now = due;
        assert!(h.ok(timer()), "attempt {attempt}");
        let notice = h.rec.status_notice.clone().expect("noted");
        assert_eq!((notice.attempts, notice.last_attempt_ms), (attempt, due));
        assert!(owed(&h).is_some(), "the write publishes again");
        let wait = (5_000i64 << attempt.min(16)).min(60_000);
        due = status_timer(&h.rec).expect("armed").due_ms;
        assert_eq!(due, h.now + wait);
    }
    h.now = due;
    assert!(h.ok(timer()));
    let notice = h.rec.status_notice.clone().expect("noted");
    assert!(notice.done);
    assert!(notice
        .error
        .expect("says why")
        .contains("after 10 attempts"));
    assert_eq!(owed(&h), None, "given up");
    assert_eq!(status_timer(&h.rec), None);
    assert_eq!(
        h.status(),
        WorkflowStatus::Terminated,
        "the workflow is unchanged"
    );
}

#[test]
fn each_end_is_published_a_retried_workflow_owes_nothing_while_it_runs() {
    let mut h = H::start(listened(Some("conductor:ends")), json!({}));
    h.poll("a");
    h.fail("a");
    assert_eq!(h.status(), WorkflowStatus::Failed);
    let first = owed(&h).expect("owed");
    assert_eq!(first.payload["status"], json!("FAILED"));
    assert!(h.ok(Input::StatusPublished {
        end_time: first.end_time
    }));
    h.advance_ms(10);
    h.ok(Input::Retry);
    assert_eq!(h.status(), WorkflowStatus::Running);
    assert_eq!(
        h.rec.status_notice, None,
        "a running workflow carries no notice"
    );
    assert_eq!(owed(&h), None);
    h.advance_ms(10);
    h.poll("a");
    h.complete("a", json!({}));
    let second = owed(&h).expect("the new end is owed");
    assert_eq!(second.payload["status"], json!("COMPLETED"));
    assert_ne!(second.message_id, first.message_id);
    assert!(!h.ok(Input::StatusPublished {
        end_time: first.end_time
    }));
    assert!(h.rec.owes_status_notice());
}

#[test]
fn without_a_sink_or_when_disabled_nothing_is_owed() {
    for def in [
        listened(None),
        listened(Some("  ")),
        WorkflowDef {
            workflow_status_listener_enabled: false,
            ..listened(Some("conductor:ends"))
        },
    ] {
        let mut h = H::start(def, json!({}));
        h.ok(Input::Terminate { reason: None });
        assert_eq!(owed(&h), None);
        assert_eq!(status_timer(&h.rec), None);
        assert!(!h.ok(timer()));
        let end = h.wf().end_time;
        assert!(!h.ok(Input::StatusPublished { end_time: end }));
    }
}
