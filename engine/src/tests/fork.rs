//! FORK_JOIN / JOIN: the conformance fixtures, nested forks, permissive and optional branches, SYNC
//! joins, refs outside joinOn, and a fork without a join (refused).

use super::*;
use TaskStatus::*;

fn run(h: &mut H, r: &str, out: Value) {
    h.poll(r);
    h.complete(r, out);
}

#[test]
fn fork_join_fixture() {
    let mut h = H::start(
        fixture("fork_join_integration_test.json"),
        json!({"param1": "p1"}),
    );
    assert_eq!(
        h.shape(),
        shape(&[
            ("fanouttask", Completed),
            ("t1", Scheduled),
            ("t2", Scheduled),
            ("fanouttask_join", InProgress)
        ])
    );
    let fork = h.task("fanouttask");
    assert_eq!((fork.task_type.as_str(), fork.seq), ("FORK", 1));
    assert_eq!(
        h.task("fanouttask_join").input_data["joinOn"],
        json!(["t3", "t2"])
    );
    assert_eq!(ready_tasks(h.wf()).len(), 2);
    run(&mut h, "t1", json!({"a": 1}));
    assert_eq!(h.st("t3"), Scheduled);
    run(&mut h, "t2", json!({"b": 2}));
    assert_eq!(h.st("fanouttask_join"), InProgress);
    run(&mut h, "t3", json!({"c": 3}));
    assert_eq!(h.st("fanouttask_join"), Completed);
    assert_eq!(
        h.task("fanouttask_join").output_data,
        obj(json!({"t3": {"c": 3}, "t2": {"b": 2}}))
    );
    assert_eq!(h.st("t4"), Scheduled);
    run(&mut h, "t4", json!({}));
    assert_eq!(h.status(), WorkflowStatus::Completed);
}

#[test]
fn nested_fork_join_fixture() {
    let mut h = H::start(
        fixture("nested_fork_join_integration_test.json"),
        json!({"case": "a"}),
    );
    assert_eq!(
        h.shape(),
        shape(&[
            ("fork1", Completed),
            ("t11", Scheduled),
            ("fork2", Completed),
            ("t12", Scheduled),
            ("t13", Scheduled),
            ("join2", InProgress),
            ("join1", InProgress),
        ])
    );
    run(&mut h, "t11", json!({}));
    run(&mut h, "t12", json!({}));
    run(&mut h, "t13", json!({}));
    assert_eq!(h.st("d1"), Completed);
    assert_eq!(
        h.task("d1").output_data,
        obj(json!({"evaluationResult": ["a"]}))
    );
    assert_eq!(h.st("t16"), Scheduled);
    run(&mut h, "t14", json!({"x": 14}));
    run(&mut h, "t16", json!({}));
    run(&mut h, "t19", json!({}));
    assert_eq!((h.st("join2"), h.st("join1")), (InProgress, InProgress));
    run(&mut h, "t20", json!({"x": 20}));
    assert_eq!(
        (h.st("join2"), h.st("join1")),
        (Completed, Completed),
        "both joins in the same decision"
    );
    assert_eq!(
        h.task("join2").output_data,
        obj(json!({"t14": {"x": 14}, "t20": {"x": 20}}))
    );
    assert_eq!(h.st("t15"), Scheduled);
    run(&mut h, "t15", json!({}));
    assert_eq!(h.status(), WorkflowStatus::Completed);
}

#[test]
fn permissive_branch_failure_waits_for_all_then_fails_the_join() {
    let mut h = H::start(
        fixture("fork_join_permissive_integration_test.json"),
        json!({}),
    );
    h.poll("t1");
    h.fail("t1");
    assert_eq!(
        h.attempts("t1").len(),
        2,
        "integration_task_1 has one retry"
    );
    h.advance_ms(60_000);
    h.poll("t1");
    h.fail("t1");
    assert_eq!(
        h.st("fanouttask_join"),
        InProgress,
        "waits for the other branch"
    );
    assert_eq!(h.status(), WorkflowStatus::Running);
    run(&mut h, "t2", json!({}));
    assert_eq!(h.st("fanouttask_join"), Failed);
    assert_eq!(h.status(), WorkflowStatus::Failed);
    assert!(!h.has("t3"));
    let join_id = h.task("fanouttask_join").task_id.clone();
    assert_eq!(h.wf().failed_task_id.as_deref(), Some(join_id.as_str()));
}

fn fork_def(
    a: WorkflowTask,
    b: WorkflowTask,
    join_on: &[&str],
    mode: Option<proto::model::JoinMode>,
) -> WorkflowDef {
    let mut fork = WorkflowTask {
        name: "f".into(),
        task_reference_name: "f".into(),
        task_type: "FORK_JOIN".into(),
        ..Default::default()
    };
    fork.fork_tasks = vec![vec![a], vec![b]];
    let mut join = WorkflowTask {
        name: "j".into(),
        task_reference_name: "j".into(),
        task_type: "JOIN".into(),
        ..Default::default()
    };
    join.join_on = join_on.iter().map(|s| s.to_string()).collect();
    join.join_mode = mode;
    def_of(vec![fork, join, simple("z")])
}

#[test]
fn failed_branch_fails_the_workflow_and_cancels_the_join() {
    let mut h = H::start(
        fork_def(simple("a"), simple("b"), &["a", "b"], None),
        json!({}),
    );
    h.poll("a");
    h.fail("a");
    assert_eq!(
        h.shape(),
        shape(&[
            ("f", Completed),
            ("a", Failed),
            ("b", Canceled),
            ("j", Canceled)
        ])
    );
    assert_eq!(h.status(), WorkflowStatus::Failed);
    assert!(h.finished());
}

#[test]
fn optional_branch_failure_counts_as_done() {
    let mut a = simple("a");
    a.optional = true;
    let mut h = H::start(fork_def(a, simple("b"), &["a", "b"], None), json!({}));
    h.poll("a");
    h.fail("a");
    assert_eq!(h.st("a"), CompletedWithErrors);
    run(&mut h, "b", json!({"b": 1}));
    assert_eq!(h.st("j"), CompletedWithErrors);
    assert_eq!(
        h.task("j").output_data,
        obj(json!({"a": {}, "b": {"b": 1}}))
    );
    assert_eq!(h.st("z"), Scheduled);
}

#[test]
fn refs_outside_join_on_do_not_block() {
    let mut def = fork_def(simple("a"), simple("b"), &["a"], None);
    def.tasks[0].fork_tasks[1].push(simple("c"));
    let mut h = H::start(def, json!({}));
    run(&mut h, "a", json!({}));
    assert_eq!(h.st("j"), Completed);
    assert_eq!(h.st("z"), Scheduled);
    assert_eq!(h.st("b"), Scheduled);
    run(&mut h, "z", json!({}));
    assert_eq!(h.status(), WorkflowStatus::Running, "b's branch still runs");
    run(&mut h, "b", json!({}));
    run(&mut h, "c", json!({}));
    assert_eq!(h.status(), WorkflowStatus::Completed);
}

#[test]
fn sync_join_fixture() {
    let mut h = H::start(
        fixture("fork_join_sync_mode_integration_test.json"),
        json!({}),
    );
    assert_eq!(h.st("joinTask"), InProgress);
    run(&mut h, "branch_a", json!({}));
    run(&mut h, "branch_b", json!({}));
    let v = h.rec.version;
    run(&mut h, "branch_c", json!({}));
    assert_eq!(
        h.rec.version,
        v + 2,
        "lease + result; the join completes inside the result's decision"
    );
    assert_eq!(h.st("joinTask"), Completed);
    assert_eq!(h.st("postJoinTask"), Scheduled);
}

#[test]
fn a_fork_without_a_join_is_refused() {
    let mut fork = WorkflowTask {
        name: "f".into(),
        task_reference_name: "f".into(),
        task_type: "FORK_JOIN".into(),
        ..Default::default()
    };
    fork.fork_tasks = vec![vec![simple("a")]];
    let refused = H::try_start(def_of(vec![fork, simple("z")]), json!({}));
    assert_eq!(
        refused.map(|_| ()),
        Err(Error::Invalid(
            "FORK_JOIN task 'f' is not followed by a JOIN task".into()
        ))
    );
}

#[test]
fn a_batch_decides_what_the_same_inputs_decide_one_write_at_a_time() {
    let mut h = H::start(
        fork_def(simple("a"), simple("b"), &["a", "b"], None),
        json!({}),
    );
    h.poll("a");
    h.poll("b");
    let done = |h: &H, r: &str| {
        let t = h.task(r);
        Input::TaskResult(TaskResult {
            workflow_instance_id: t.workflow_instance_id.as_str().into(),
            task_id: t.task_id.as_str().into(),
            status: TaskResultStatus::Completed,
            output_data: obj(json!({ "from": r })),
            ..Default::default()
        })
    };
    let stale_lease = Input::Lease {
        task_id: proto::TaskId::new(PartitionId(3), 42),
        worker_id: None,
    };
    let inputs = || vec![done(&h, "a"), stale_lease.clone(), done(&h, "b")];
    let rng_for = |version: u64| ChaCha8Rng::seed_from_u64(version);

    // One write at a time: each input decided on the record the one before committed.
    let mut rec = h.rec.clone();
    let mut one_by_one = Vec::new();
    for input in inputs() {
        let answer = decide(&rec, input, h.now, &mut rng_for(rec.version));
        one_by_one.push(answer.map(|d| {
            if let Some(next) = d.record {
                rec = next;
            }
            d.effects
        }));
    }

    let mut boxed = |version: u64| -> Box<dyn rand::RngCore> { Box::new(rng_for(version)) };
    let (last, batch) = decide_all(&h.rec, inputs(), h.now, &mut boxed);
    assert_eq!(batch, one_by_one, "the same answers, refusals included");
    assert!(batch[1].is_err(), "the stale lease is refused");
    let last = last.expect("the batch changed the workflow");
    assert_eq!(last, rec, "the same record");
    assert_eq!(last.version, h.rec.version + 2, "two inputs changed it");
    assert_eq!(
        last.workflow.task_by_ref("j").map(|t| t.status),
        Some(Completed)
    );
    let (none, refused) = decide_all(&last, vec![stale_lease], h.now, &mut boxed);
    assert!(
        none.is_none() && refused[0].is_err(),
        "a batch of refusals writes nothing"
    );
}
