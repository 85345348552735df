//! SUB_WORKFLOW: one child per task attempt under a derived id, the child's end reaching the
//! parent's task, the parent's timer asking after a child, and the parent's terminate, pause
//! and resume reaching its children.

use super::*;
use TaskStatus::*;

fn parent() -> WorkflowDef {
    let mut sub = simple("sub");
    sub.task_type = task_type::SUB_WORKFLOW.into();
    sub.input_parameters = obj(json!({"x": "${workflow.input.x}"}));
    sub.sub_workflow_param = Some(proto::model::SubWorkflowParams {
        name: "${workflow.input.child}".into(),
        version: Some(json!(3)),
        ..Default::default()
    });
    def_of(vec![sub, simple("after")])
}

fn start_request(h: &H) -> StartRequest {
    match h.work("sub") {
        Some(Work::Start(req)) => req,
        other => panic!("the task waits for its child's start, not {other:?}"),
    }
}

/// The parent with its child started.
fn started() -> (H, WorkflowId) {
    let mut h = H::start(parent(), json!({"x": 5, "child": "kid"}));
    let req = start_request(&h);
    h.perform("sub", Ok(json!({ "workflowId": req.workflow_id.as_str() })));
    (h, req.workflow_id)
}

fn ended(h: &mut H, child: &WorkflowId, status: WorkflowStatus, output: Value) -> bool {
    let task_id = h.task("sub").task_id.clone();
    h.ok(Input::ChildEnded {
        task_id,
        child: child.clone(),
        status,
        output: obj(output),
        reason: (status != WorkflowStatus::Completed).then(|| "child said no".into()),
    })
}

#[test]
fn the_child_is_asked_for_once_per_attempt_under_a_derived_id() {
    let h = H::start(parent(), json!({"x": 5, "child": "kid"}));
    let req = start_request(&h);
    assert_eq!((req.name.as_str(), req.version), ("kid", Some(3)));
    assert_eq!(req.input["x"], json!(5));
    assert_eq!(
        req.parent,
        Some((h.wf().workflow_id.clone(), h.task("sub").task_id.clone()))
    );
    let again = H::start(parent(), json!({"x": 5, "child": "kid"}));
    assert_eq!(start_request(&again).workflow_id, req.workflow_id);
}

#[test]
fn the_childs_end_completes_the_task_and_the_parent_moves_on() {
    let (mut h, child) = started();
    assert_eq!(h.st("sub"), InProgress);
    assert_eq!(
        h.task("sub").sub_workflow_id.as_deref(),
        Some(child.as_str())
    );
    let other = WorkflowId::new(PartitionId(1), 99);
    assert!(
        !ended(&mut h, &other, WorkflowStatus::Completed, json!({})),
        "another child's end"
    );
    assert!(ended(
        &mut h,
        &child,
        WorkflowStatus::Completed,
        json!({"r": 1})
    ));
    let out = h.task("sub").output_data.clone();
    assert_eq!(out, obj(json!({"r": 1, "subWorkflowId": child.as_str()})));
    assert_eq!(h.st("after"), Scheduled);
}

#[test]
fn a_failed_child_fails_the_task_and_retry_starts_a_new_child() {
    let (mut h, child) = started();
    ended(&mut h, &child, WorkflowStatus::Failed, json!({}));
    assert_eq!(h.st("sub"), Failed);
    assert_eq!(h.status(), WorkflowStatus::Failed);
    let reason = h.wf().reason_for_incompletion.clone().unwrap_or_default();
    assert!(reason.contains("child said no"), "{reason}");
    h.ok(Input::Retry);
    assert_eq!(h.attempts("sub").len(), 2);
    assert_ne!(
        start_request(&h).workflow_id,
        child,
        "a new attempt, a new child"
    );
}

#[test]
fn a_waiting_task_asks_after_its_child_on_a_timer() {
    let (mut h, child) = started();
    let key = TimerKey {
        kind: TimerKind::Perform,
        task_id: Some(h.task("sub").task_id.clone()),
    };
    let due = timers(h.wf())
        .into_iter()
        .find(|t| t.key == key)
        .map(|t| t.due_ms);
    assert_eq!(due, Some(h.now + 15_000));
    h.advance_ms(15_000);
    h.ok(Input::Timer(key));
    let asked = h.effects.iter().any(|e| {
        matches!(e, Effect::Perform { work: PendingWork { work: Work::CheckChild(c), .. }, .. } if *c == child)
    });
    assert!(asked, "{:?}", h.effects);
    assert!(
        pending_work(h.wf()).is_empty(),
        "a running child is not asked after every write"
    );
}

#[test]
fn the_parents_terminate_pause_and_resume_reach_the_child() {
    let (mut h, child) = started();
    let sent = |h: &H| -> Vec<String> {
        h.effects
            .iter()
            .filter_map(|e| match e {
                Effect::Notify { workflow_id, input } if *workflow_id == child => Some(
                    format!("{input:?}")
                        .split([' ', '{'])
                        .next()
                        .unwrap_or_default()
                        .to_owned(),
                ),
                _ => None,
            })
            .collect()
    };
    h.ok(Input::Pause);
    assert_eq!(sent(&h), ["Pause"]);
    h.ok(Input::Resume);
    assert_eq!(sent(&h), ["Resume"]);
    h.ok(Input::Terminate {
        reason: Some("stop".into()),
    });
    assert_eq!(sent(&h), ["Terminate"]);
}

#[test]
fn a_child_tells_its_parent_when_it_ends() {
    let parent_id = WorkflowId::new(PartitionId(2), 7);
    let parent_task = TaskId::of_workflow(&parent_id, 1);
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let start = StartInput {
        parent_workflow_id: Some(parent_id.to_string()),
        parent_workflow_task_id: Some(parent_task.to_string()),
        ..StartInput::new(wf_id(), def_of(vec![simple("a")]), obj(json!({})))
    };
    let d = crate::start(start, 0, &mut rng).expect("starts");
    let rec = d.record.expect("a record");
    let d = decide(
        &rec,
        Input::Terminate {
            reason: Some("no".into()),
        },
        1,
        &mut rng,
    )
    .expect("ends");
    let notice = d.effects.iter().find_map(|e| match e {
        Effect::Notify { workflow_id, input } if *workflow_id == parent_id => Some(input.clone()),
        _ => None,
    });
    match notice.as_deref() {
        Some(Input::ChildEnded {
            task_id, status, ..
        }) => {
            assert_eq!(
                (task_id, *status),
                (&parent_task, WorkflowStatus::Terminated)
            );
        }
        other => panic!("the parent hears of the end: {other:?}"),
    }
}

#[test]
fn a_child_that_ends_before_its_start_is_reported_still_counts() {
    let mut h = H::start(parent(), json!({"x": 5, "child": "kid"}));
    let child = start_request(&h).workflow_id;
    assert!(ended(
        &mut h,
        &child,
        WorkflowStatus::Completed,
        json!({"r": 2})
    ));
    assert_eq!(h.st("sub"), Completed);
    assert!(
        !h.perform("sub", Ok(json!({ "workflowId": child.as_str() }))),
        "the late start report"
    );
}

#[test]
fn a_childs_end_before_its_start_is_reported_records_the_child_as_started() {
    // The child's end first: the task still SCHEDULED takes it and names the child.
    let mut h = H::start(parent(), json!({"x": 5, "child": "kid"}));
    let child = start_request(&h).workflow_id;
    h.advance_ms(2_000);
    let ended_at = h.now;
    assert!(ended(
        &mut h,
        &child,
        WorkflowStatus::Completed,
        json!({"r": 2})
    ));
    let t = h.task("sub").clone();
    assert_eq!(t.status, Completed);
    assert_eq!(t.sub_workflow_id.as_deref(), Some(child.as_str()));
    assert_eq!(
        (t.start_time, t.end_time, t.update_time),
        (ended_at, ended_at, ended_at)
    );
    assert_eq!(
        t.output_data,
        obj(json!({"r": 2, "subWorkflowId": child.as_str()}))
    );
    assert_eq!(h.st("after"), Scheduled);
    h.advance_ms(1_000);
    assert!(
        !h.perform("sub", Ok(json!({ "workflowId": child.as_str() }))),
        "the late start report"
    );
    assert_eq!(h.task("sub"), &t, "the late start report changes nothing");

    // The usual order: the start, then the end; the start time is the start's.
    let mut h = H::start(parent(), json!({"x": 5, "child": "kid"}));
    h.advance_ms(1_000);
    let started_at = h.now;
    let req = start_request(&h);
    assert!(h.perform("sub", Ok(json!({ "workflowId": req.workflow_id.as_str() }))));
    h.advance_ms(2_000);
    assert!(ended(
        &mut h,
        &req.workflow_id,
        WorkflowStatus::Completed,
        json!({"r": 3})
    ));
    let t = h.task("sub");
    assert_eq!(t.status, Completed);
    assert_eq!(t.sub_workflow_id.as_deref(), Some(req.workflow_id.as_str()));
    assert_eq!((t.start_time, t.end_time), (started_at, h.now));
    assert_eq!(
        t.output_data,
        obj(json!({"r": 3, "subWorkflowId": req.workflow_id.as_str()}))
    );
    assert_eq!(h.st("after"), Scheduled);
}

#[test]
fn a_failed_child_that_ended_before_its_start_is_reported_can_be_resumed() {
    let mut h = H::start(parent(), json!({"x": 5, "child": "kid"}));
    let child = start_request(&h).workflow_id;
    ended(&mut h, &child, WorkflowStatus::Failed, json!({}));
    assert_eq!(h.st("sub"), Failed);
    assert_eq!(
        h.task("sub").sub_workflow_id.as_deref(),
        Some(child.as_str())
    );
    h.advance_ms(1_000);
    assert!(h.ok(Input::RetryResumingSubworkflows));
    assert_eq!(h.attempts("sub").len(), 1, "the same child, resumed");
    assert_eq!(h.work("sub"), Some(Work::RetryChild(child)));
}

/// The parent's `sub` task, and the child it waits for, after a retry with
/// `resumeSubworkflowTasks` of the parent whose child failed.
fn resumed() -> (H, WorkflowId) {
    let (mut h, child) = started();
    ended(&mut h, &child, WorkflowStatus::Failed, json!({}));
    assert_eq!(h.status(), WorkflowStatus::Failed);
    h.advance_ms(1_000);
    assert!(h.ok(Input::RetryResumingSubworkflows));
    (h, child)
}

#[test]
fn a_retry_resuming_sub_workflows_waits_for_the_same_child_retried() {
    let (mut h, child) = resumed();
    assert_eq!(h.status(), WorkflowStatus::Running);
    assert_eq!(h.wf().last_retried_time, h.now);
    assert_eq!(h.wf().reason_for_incompletion, None);
    assert_eq!(h.attempts("sub").len(), 1, "no new attempt");
    let t = h.task("sub").clone();
    assert_eq!((t.status, t.subworkflow_changed), (InProgress, true));
    assert_eq!(t.sub_workflow_id.as_deref(), Some(child.as_str()));
    assert_eq!(h.work("sub"), Some(Work::RetryChild(child.clone())));
    // Its old end, arriving late, is the one being retried: ignored.
    assert!(!ended(&mut h, &child, WorkflowStatus::Failed, json!({})));
    // Until the retry is reported, the timer repeats it rather than reading the child.
    let key = TimerKey {
        kind: TimerKind::Perform,
        task_id: Some(t.task_id.clone()),
    };
    let due = timers(h.wf()).into_iter().find(|x| x.key == key);
    assert_eq!(due.map(|x| x.due_ms), Some(h.now + 5_000));
    h.advance_ms(5_000);
    assert!(h.ok(Input::Timer(key)));
    assert_eq!(h.work("sub"), Some(Work::RetryChild(child.clone())));
    assert!(h.perform("sub", Ok(json!({ "subWorkflowId": child.as_str() }))));
    let t = h.task("sub").clone();
    assert_eq!((t.status, t.subworkflow_changed), (InProgress, false));
    assert_eq!(h.work("sub"), None, "it waits for the child's end");
    assert!(ended(
        &mut h,
        &child,
        WorkflowStatus::Completed,
        json!({"r": 2})
    ));
    assert_eq!(h.st("sub"), Completed);
    assert_eq!(h.task("sub").output_data["r"], json!(2));
    assert_eq!(h.st("after"), Scheduled);
}

#[test]
fn a_child_that_cannot_be_retried_fails_the_task_again() {
    let (mut h, _) = resumed();
    assert!(h.perform("sub", Err("no such workflow".into())));
    assert_eq!(h.st("sub"), Failed);
    assert_eq!(h.status(), WorkflowStatus::Failed);
    let reason = h.wf().reason_for_incompletion.clone().unwrap_or_default();
    assert!(reason.contains("no such workflow"), "{reason}");
}

#[test]
fn resuming_retries_other_tasks_as_a_plain_retry_does() {
    let (mut h, child) = started();
    ended(&mut h, &child, WorkflowStatus::Completed, json!({}));
    h.poll("after");
    h.fail("after");
    assert_eq!(h.status(), WorkflowStatus::Failed);
    h.ok(Input::RetryResumingSubworkflows);
    assert_eq!(
        h.attempts("after").len(),
        2,
        "a new attempt of the worker task"
    );
    assert_eq!(h.st("after"), Scheduled);
    assert_eq!(h.st("sub"), Completed);
    // A running workflow is refused, as by a plain retry.
    let refused = h.apply(Input::RetryResumingSubworkflows);
    assert!(matches!(refused, Err(Error::Conflict(_))), "{refused:?}");
}
