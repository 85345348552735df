//! An HTTP task whose input sets `atMostOnce`: its call is claimed (SCHEDULED -> IN_PROGRESS)
//! before it is made, a claim is taken once, the claimed task's report is taken, and a claimed
//! task whose report never comes fails by its timer instead of being called again.

use super::*;
use TaskStatus::*;

fn call(at_most_once: bool) -> WorkflowDef {
    def_of(vec![WorkflowTask {
        name: "call".into(),
        task_reference_name: "call".into(),
        task_type: task_type::HTTP.into(),
        input_parameters: obj(
            json!({"http_request": {"uri": "http://svc/x", "method": "POST",
            "connectionTimeOut": 1_000, "readTimeOut": 2_000}, "atMostOnce": at_most_once}),
        ),
        ..Default::default()
    }])
}

fn claim(h: &mut H) -> Result<bool, Error> {
    let t = h.task("call");
    let (task_id, iteration) = (t.task_id.clone(), t.iteration);
    h.apply(Input::Claim { task_id, iteration })
}

fn perform_timer(h: &H) -> Option<Timer> {
    let id = h.task("call").task_id.clone();
    timers(h.wf())
        .into_iter()
        .find(|t| t.key.kind == TimerKind::Perform && t.key.task_id.as_ref() == Some(&id))
}

#[test]
fn a_call_is_claimed_once_and_then_no_longer_asked_for() {
    let mut h = H::start(call(true), json!({}));
    match h.work("call") {
        Some(Work::Http(request)) => assert!(request.at_most_once),
        other => panic!("an HTTP call: {other:?}"),
    }
    assert_eq!(claim(&mut h).ok(), Some(true));
    assert_eq!(h.st("call"), InProgress);
    assert_eq!(h.work("call"), None, "no leader is asked to call again");
    assert!(matches!(claim(&mut h), Err(Error::Conflict(_))));
    let ok = json!({"response": {"statusCode": 200, "body": {}}});
    assert!(
        h.perform("call", Ok(ok)),
        "the claimed call's report is taken"
    );
    assert_eq!(h.status(), WorkflowStatus::Completed);
}

#[test]
fn a_task_called_at_least_once_cannot_be_claimed() {
    let mut h = H::start(call(false), json!({}));
    assert!(matches!(claim(&mut h), Err(Error::Conflict(_))));
    assert_eq!(h.st("call"), Scheduled);
}

#[test]
fn a_claimed_call_without_a_report_fails_after_its_timeouts() {
    let mut h = H::start(call(true), json!({}));
    let scheduled_timer = perform_timer(&h).expect("work's timer");
    claim(&mut h).expect("claimed");
    let claimed = h.task("call").update_time;
    let timer = perform_timer(&h).expect("the claim's timer");
    assert_ne!(timer.due_ms, scheduled_timer.due_ms);
    assert_eq!(timer.due_ms, claimed + 3_000 + crate::work::CLAIM_MARGIN_MS);
    h.now = timer.due_ms - 1;
    assert!(!h.ok(Input::Timer(timer.key.clone())), "early: nothing");
    h.now = timer.due_ms;
    assert!(h.ok(Input::Timer(timer.key)));
    assert_eq!(h.st("call"), Failed);
    let reason = h.task("call").reason_for_incompletion.clone();
    assert_eq!(reason.as_deref(), Some(CLAIM_LOST));
    assert_eq!(h.status(), WorkflowStatus::Failed);
    assert!(pending_work(h.wf()).is_empty(), "never called again");
}

#[test]
fn a_claimed_calls_report_is_taken_while_the_workflow_is_paused() {
    let mut h = H::start(call(true), json!({}));
    claim(&mut h).expect("claimed");
    h.ok(Input::Pause);
    let ok = json!({"response": {"statusCode": 200, "body": {}}});
    assert!(
        h.perform("call", Ok(ok)),
        "the call was made: its answer is kept"
    );
    assert_eq!(
        (h.st("call"), h.status()),
        (Completed, WorkflowStatus::Paused)
    );
    h.ok(Input::Resume);
    assert_eq!(h.status(), WorkflowStatus::Completed);
}
