//! The stored encoding of a workflow record (`proto::record::compact`): what a record leaves
//! out, what it keeps, and that the API view is untouched. `H` already round-trips every record
//! of every engine test through it.

use super::*;

fn encoded(h: &H) -> Value {
    let bytes = proto::record::encode(&h.rec);
    serde_json::from_slice(&bytes[2..]).expect("a record body is JSON")
}

fn fork_of_three() -> H {
    let branches = ["a", "b", "c"].map(|b| vec![simple(b)]).to_vec();
    let fork = WorkflowTask {
        name: "fork".into(),
        task_reference_name: "fork".into(),
        task_type: task_type::FORK_JOIN.into(),
        fork_tasks: branches,
        ..Default::default()
    };
    let join = WorkflowTask {
        name: "join".into(),
        task_reference_name: "join".into(),
        task_type: task_type::JOIN.into(),
        join_on: vec!["a".into(), "b".into(), "c".into()],
        ..Default::default()
    };
    H::start(def_of(vec![fork, join]), json!({}))
}

#[test]
fn a_record_leaves_out_the_task_definitions_its_workflow_definition_holds() {
    let mut h = fork_of_three();
    for r in ["a", "b", "c"] {
        h.poll(r);
        h.complete(r, json!({ "r": r }));
    }
    assert_eq!(h.status(), WorkflowStatus::Completed);
    let stored = encoded(&h);
    let tasks = stored["workflow"]["tasks"].as_array().expect("tasks");
    assert_eq!(tasks.len(), 5);
    assert!(
        tasks.iter().all(|t| t.get("workflowTask").is_none()),
        "every task's definition is in the workflow definition"
    );
    // The API shows them all.
    let api = serde_json::to_value(h.wf()).expect("serialises");
    for t in api["tasks"].as_array().expect("tasks") {
        assert_eq!(
            t["workflowTask"]["taskReferenceName"], t["referenceTaskName"],
            "the API view carries each task's definition"
        );
    }
    // Leaving the copies out is most of the record.
    let full = serde_json::to_vec(&api).expect("serialises").len();
    let compact = proto::record::encode(&h.rec).len();
    assert!(compact * 10 < full * 7, "{compact} bytes stored for {full}");
}

#[test]
fn a_task_whose_definition_differs_from_the_workflow_definition_keeps_its_own() {
    let mut h = fork_of_three();
    let mut rec = h.rec.clone();
    let task = rec
        .workflow
        .tasks
        .iter_mut()
        .find(|t| t.reference_task_name == "b")
        .expect("branch b");
    task.workflow_task.input_parameters = obj(json!({ "changed": true }));
    h.rec = rec.clone();
    let stored = encoded(&h);
    let kept: Vec<&str> = stored["workflow"]["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .filter(|t| t.get("workflowTask").is_some())
        .map(|t| t["referenceTaskName"].as_str().expect("ref"))
        .collect();
    assert_eq!(kept, vec!["b"]);
    let back: WorkflowRecord =
        proto::record::decode(&proto::record::encode(&rec)).expect("decodes");
    assert_eq!(back, rec);
}

/// The patch from `prev` to `next`, encoded.
fn patch_bytes(prev: &WorkflowRecord, next: &WorkflowRecord) -> Option<Vec<u8>> {
    proto::record::patch::diff(prev, next).map(|p| proto::record::encode(&p))
}

#[test]
fn a_step_writes_only_what_changed() {
    let mut h = fork_of_three();
    let mut sizes = Vec::new();
    for r in ["a", "b", "c"] {
        for step in [0, 1] {
            let before = h.rec.clone();
            if step == 0 {
                h.poll(r);
            } else {
                h.complete(r, json!({ "r": r }));
            }
            let bytes = patch_bytes(&before, &h.rec).expect("a step is a patch");
            let body: Value = serde_json::from_slice(&bytes[2..]).expect("JSON");
            let head = &body["workflow"];
            assert!(head.get("tasks").is_none() && head.get("workflowDefinition").is_none());
            let refs: Vec<&str> = body["tasks"]
                .as_array()
                .expect("tasks")
                .iter()
                .map(|t| t["referenceTaskName"].as_str().expect("ref"))
                .collect();
            // Completing the last branch also completes the join.
            let expected = if step == 1 && r == "c" {
                vec!["c", "join"]
            } else {
                vec![r]
            };
            assert_eq!(refs, expected, "only the changed tasks");
            sizes.push(bytes.len());
        }
    }
    assert_eq!(h.status(), WorkflowStatus::Completed);
    let full = proto::record::encode(&h.rec).len();
    assert!(
        sizes.iter().all(|s| s * 3 < full),
        "patches {sizes:?} against a {full}-byte record"
    );
}

#[test]
fn what_a_patch_cannot_say_is_written_whole() {
    let mut h = fork_of_three();
    let prev = h.rec.clone();
    let mut next = prev.clone();
    next.version += 1;
    next.workflow.tasks.pop();
    assert!(patch_bytes(&prev, &next).is_none(), "a task removed");
    let mut next = prev.clone();
    next.version += 1;
    next.workflow.tasks.swap(0, 1);
    assert!(patch_bytes(&prev, &next).is_none(), "tasks reordered");
    let mut next = prev.clone();
    next.version += 1;
    std::sync::Arc::make_mut(&mut next.workflow.workflow_definition).version = 7;
    assert!(patch_bytes(&prev, &next).is_none(), "a new definition");
    h.poll("a");
    let mut logged = h.rec.clone();
    logged
        .task_logs
        .insert("x".into(), vec![proto::model::TaskExecLog::default()]);
    let mut next = h.rec.clone();
    next.version = logged.version + 1;
    assert!(patch_bytes(&logged, &next).is_none(), "task logs dropped");
    assert!(patch_bytes(&h.rec, &prev).is_none(), "an older version");
}
