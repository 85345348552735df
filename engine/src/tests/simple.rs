//! SIMPLE tasks: start, lease, results, parameter passing, retries and backoff, late results,
//! callbackAfterSeconds, optional and permissive tasks, the failure workflow.

use super::*;
use crate::advance::retry_delay_s;
use proto::model::{RetryLogic, TaskExecLog};

fn harness() -> H {
    H::start(
        fixture("simple_workflow_1_integration_test.json"),
        json!({"param1": "p1 value", "param2": "p2 value"}),
    )
}

#[test]
fn simple_workflow_passes_parameters_and_completes() {
    let mut h = harness();
    assert_eq!(h.status(), WorkflowStatus::Running);
    assert_eq!(
        (h.wf().create_time, h.wf().start_time, h.wf().update_time),
        (T0, T0, T0)
    );
    assert_eq!(h.shape(), shape(&[("t1", TaskStatus::Scheduled)]));
    let t1 = h.task("t1").clone();
    assert_eq!(
        (
            t1.task_type.as_str(),
            t1.task_def_name.as_str(),
            t1.seq,
            t1.retry_count
        ),
        ("integration_task_1", "integration_task_1", 1, 0)
    );
    assert_eq!(t1.input_data["p1"], json!("p1 value"));
    assert_eq!(t1.input_data["p3"], json!(t1.task_id.as_str()));
    assert_eq!(t1.input_data["someNullKey"], Value::Null);
    assert_eq!(t1.response_timeout_seconds, 120);
    assert_eq!(t1.correlation_id.as_deref(), Some("corr"));
    assert_eq!(
        t1.task_id.partition(u16::MAX),
        PartitionId(3),
        "task ids share the workflow's partition"
    );
    assert_eq!(
        ready_tasks(h.wf()),
        vec![Ready {
            task_id: t1.task_id.clone(),
            task_type: "integration_task_1".into(),
            domain: None,
            priority: 0,
            visible_at_ms: T0
        }]
    );

    h.advance_ms(10);
    h.poll("t1");
    let leased = h.task("t1").clone();
    assert_eq!(
        (leased.status, leased.poll_count, leased.start_time),
        (TaskStatus::InProgress, 1, T0 + 10)
    );
    assert_eq!(leased.worker_id.as_deref(), Some("w1"));
    assert_eq!(h.effects, vec![Effect::Deliver(Box::new(leased))]);
    assert!(ready_tasks(h.wf()).is_empty());

    h.advance_ms(10);
    let v = h.rec.version;
    h.complete("t1", json!({"op": "task1.done"}));
    assert_eq!(
        h.rec.version,
        v + 1,
        "the result and the next task commit together"
    );
    assert_eq!(
        h.shape(),
        shape(&[("t1", TaskStatus::Completed), ("t2", TaskStatus::Scheduled)])
    );
    let t2 = h.task("t2");
    assert_eq!(t2.input_data["tp1"], json!("p1 value"));
    assert_eq!(t2.input_data["tp2"], json!("task1.done"));
    assert_eq!((t2.seq, t2.scheduled_time), (2, T0 + 20));
    assert_eq!(h.task("t1").end_time, T0 + 20);

    h.poll("t2");
    h.complete("t2", json!({"uuid": "u-1"}));
    assert_eq!(h.status(), WorkflowStatus::Completed);
    assert_eq!(
        h.wf().output,
        obj(json!({"o1": "p1 value", "o2": "u-1", "o3": "task1.done"}))
    );
    assert_eq!(h.wf().end_time, T0 + 20);
    assert_eq!(h.effects, vec![Effect::Finished]);
    assert!(ready_tasks(h.wf()).is_empty() && timers(h.wf()).is_empty());
}

#[test]
fn retries_chain_retried_task_id_and_record_failed_refs() {
    let mut def = fixture("simple_workflow_1_integration_test.json");
    def.tasks[1].task_definition = Some(TaskDef {
        retry_count: 3,
        retry_delay_seconds: 2,
        ..TaskDef::named("integration_task_2")
    });
    let mut h = H::start(def, json!({"param1": "a"}));
    h.poll("t1");
    h.complete("t1", json!({"op": "x"}));
    for n in 0..2 {
        h.poll("t2");
        h.fail("t2");
        let t = h.task("t2").clone();
        assert_eq!(
            (t.status, t.retry_count, t.scheduled_time),
            (TaskStatus::Scheduled, n + 1, h.now + 2000)
        );
        assert_eq!(t.start_delay_in_seconds, 2);
        let lease_early = h.apply(Input::Lease {
            task_id: t.task_id.clone(),
            worker_id: None,
        });
        assert!(
            matches!(lease_early, Err(Error::Conflict(_))),
            "not visible before its backoff"
        );
        h.advance_ms(2000);
    }
    h.poll("t2");
    h.complete("t2", json!({"uuid": "u"}));
    let attempts = h.attempts("t2");
    assert_eq!(attempts.len(), 3);
    assert_eq!(attempts[0].retried_task_id, None);
    assert_eq!(
        attempts[1].retried_task_id.as_ref(),
        Some(&attempts[0].task_id)
    );
    assert_eq!(
        attempts[2].retried_task_id.as_ref(),
        Some(&attempts[1].task_id)
    );
    assert!(attempts[0].retried && attempts[1].retried && !attempts[2].retried);
    assert_eq!(
        attempts[2].first_scheduled_time,
        attempts[0].first_scheduled_time
    );
    // The same input, but `tp3` (${CPEWF_TASK_ID}) is each attempt's own id.
    for a in &attempts {
        assert_eq!(a.input_data["tp3"], json!(a.task_id.as_str()));
    }
    let without_id = |t: &proto::model::Task| {
        let mut input = t.input_data.clone();
        input.remove("tp3");
        input
    };
    assert_eq!(without_id(attempts[0]), without_id(attempts[2]));
    assert_eq!(h.status(), WorkflowStatus::Completed);
    assert_eq!(h.wf().failed_reference_task_names, vec!["t2".to_string()]);
    assert_eq!(
        h.wf().failed_task_names,
        vec!["integration_task_2".to_string()]
    );
}

#[test]
fn backoff_policies_match_conductor() {
    let d = |logic, delay, scale, cap| TaskDef {
        retry_logic: logic,
        retry_delay_seconds: delay,
        backoff_scale_factor: scale,
        max_retry_delay_seconds: cap,
        ..TaskDef::named("x")
    };
    use RetryLogic::*;
    let table = [
        (d(Fixed, 5, 1, 0), [5, 5, 5]),
        (d(ExponentialBackoff, 2, 1, 3), [2, 3, 3]),
        (d(ExponentialBackoff, 2, 1, 0), [2, 4, 8]),
        (d(LinearBackoff, 2, 2, 5), [4, 5, 5]),
        (d(LinearBackoff, 2, 2, 0), [4, 8, 12]),
        (d(Fixed, 0, 1, 0), [0, 0, 0]),
    ];
    for (def, want) in table {
        let got: Vec<u64> = (0..3).map(|n| retry_delay_s(&def, n)).collect();
        assert_eq!(
            got,
            want,
            "{:?} d={} scale={} cap={}",
            def.retry_logic,
            def.retry_delay_seconds,
            def.backoff_scale_factor,
            def.max_retry_delay_seconds
        );
    }
    assert_eq!(
        retry_delay_s(&d(ExponentialBackoff, 1, 1, 0), 200),
        u64::MAX,
        "saturates"
    );
}

#[test]
fn jitter_is_added_after_the_cap_within_bounds() {
    let mut seen = std::collections::BTreeSet::new();
    for seed in 0..20u64 {
        let mut t = simple("a");
        t.task_definition = Some(TaskDef {
            retry_count: 1,
            retry_logic: RetryLogic::ExponentialBackoff,
            retry_delay_seconds: 2,
            max_retry_delay_seconds: 3,
            backoff_jitter_ms: 500,
            ..TaskDef::named("task_a")
        });
        let mut h = H::start(def_of(vec![t]), json!({}));
        h.rng = ChaCha8Rng::seed_from_u64(seed);
        h.poll("a");
        h.fail("a");
        let delay = h.task("a").scheduled_time - h.now;
        assert!((2000..=2500).contains(&delay), "delay {delay}");
        seen.insert(delay);
    }
    assert!(seen.len() > 1, "jitter varies with the seed");
}

#[test]
fn late_and_duplicate_results_change_nothing() {
    let mut h = H::start(def_of(vec![simple("a"), simple("b")]), json!({}));
    h.poll("a");
    let old = h.task("a").clone();
    h.complete("a", json!({"x": 1}));
    let v = h.rec.version;
    for status in [
        TaskResultStatus::Completed,
        TaskResultStatus::Failed,
        TaskResultStatus::InProgress,
    ] {
        let late = TaskResult {
            task_id: old.task_id.as_str().into(),
            status,
            ..Default::default()
        };
        assert_eq!(
            decide(&h.rec, Input::TaskResult(late), h.now, &mut h.rng),
            Ok(Decision {
                record: None,
                effects: vec![]
            })
        );
    }
    assert_eq!(h.rec.version, v);
    let unknown = TaskResult {
        task_id: proto::TaskId::new(PartitionId(3), 99).as_str().into(),
        ..Default::default()
    };
    assert!(matches!(
        h.apply(Input::TaskResult(unknown)),
        Err(Error::NotFound(_))
    ));
    let garbage = TaskResult {
        task_id: "nope".into(),
        ..Default::default()
    };
    assert!(matches!(
        h.apply(Input::TaskResult(garbage)),
        Err(Error::NotFound(_))
    ));
}

#[test]
fn lease_conflicts() {
    let mut h = H::start(def_of(vec![simple("a"), simple("b")]), json!({}));
    h.poll("a");
    let id = h.task("a").task_id.clone();
    assert!(matches!(
        h.apply(Input::Lease {
            task_id: id.clone(),
            worker_id: None
        }),
        Err(Error::Conflict(_))
    ));
    h.complete("a", json!({}));
    assert!(matches!(
        h.apply(Input::Lease {
            task_id: id,
            worker_id: None
        }),
        Err(Error::Conflict(_))
    ));
    h.ok(Input::Pause);
    let b = h.task("b").task_id.clone();
    assert!(matches!(
        h.apply(Input::Lease {
            task_id: b,
            worker_id: None
        }),
        Err(Error::Conflict(_))
    ));
}

#[test]
fn callback_after_seconds_requeues_the_task() {
    let mut h = H::start(def_of(vec![simple("a")]), json!({}));
    h.poll("a");
    h.advance_ms(1000);
    let t = h.task("a").clone();
    let res = TaskResult {
        task_id: t.task_id.as_str().into(),
        status: TaskResultStatus::InProgress,
        callback_after_seconds: 30,
        output_data: obj(json!({"progress": 1})),
        logs: vec![TaskExecLog {
            log: "working".into(),
            task_id: String::new(),
            created_time: 5,
        }],
        ..Default::default()
    };
    h.ok(Input::TaskResult(res));
    let t = h.task("a").clone();
    assert_eq!(
        (t.status, t.callback_after_seconds, t.update_time),
        (TaskStatus::InProgress, 30, T0 + 1000)
    );
    assert_eq!(t.output_data, obj(json!({"progress": 1})));
    assert_eq!(
        h.rec.task_logs[t.task_id.as_str()][0].task_id,
        t.task_id.as_str()
    );
    let ready = ready_tasks(h.wf());
    assert_eq!(ready.len(), 1);
    assert_eq!(ready[0].visible_at_ms, T0 + 31_000);
    let rt = timers(h.wf())
        .into_iter()
        .find(|x| x.key.kind == TimerKind::ResponseTimeout)
        .expect("armed");
    assert_eq!(
        rt.due_ms,
        T0 + 1000 + (3600 + 30) * 1000,
        "response timeout extended by the callback"
    );
    assert!(matches!(
        h.apply(Input::Lease {
            task_id: t.task_id.clone(),
            worker_id: None
        }),
        Err(Error::Conflict(_))
    ));
    h.advance_ms(30_000);
    h.poll("a");
    let t = h.task("a");
    assert_eq!(
        (t.poll_count, t.callback_after_seconds, t.start_time),
        (2, 0, T0)
    );
    assert!(ready_tasks(h.wf()).is_empty());
}

#[test]
fn task_logs_are_capped() {
    let mut h = H::start(def_of(vec![simple("a")]), json!({}));
    let id = h.task("a").task_id.clone();
    for round in 0..2 {
        let logs = (0..proto::limits::TASK_LOGS_MAX)
            .map(|n| TaskExecLog {
                log: format!("{round}-{n}"),
                task_id: String::new(),
                created_time: 0,
            })
            .collect();
        let res = TaskResult {
            task_id: id.as_str().into(),
            logs,
            ..Default::default()
        };
        h.ok(Input::TaskResult(res));
    }
    let logs = &h.rec.task_logs[id.as_str()];
    assert_eq!(logs.len(), proto::limits::TASK_LOGS_MAX);
    assert_eq!(logs[0].log, "1-0", "the newest lines are kept");
}

#[test]
fn optional_task_fails_for_good_and_the_workflow_continues() {
    let mut a = simple("a");
    a.optional = true;
    a.task_definition = Some(TaskDef {
        retry_count: 1,
        retry_delay_seconds: 0,
        ..TaskDef::named("task_a")
    });
    let mut h = H::start(def_of(vec![a, simple("b")]), json!({}));
    h.poll("a");
    h.fail("a");
    assert_eq!(
        h.shape(),
        shape(&[("a", TaskStatus::Failed), ("a", TaskStatus::Scheduled)])
    );
    h.poll("a");
    h.fail("a");
    assert_eq!(
        h.shape(),
        shape(&[
            ("a", TaskStatus::Failed),
            ("a", TaskStatus::CompletedWithErrors),
            ("b", TaskStatus::Scheduled)
        ])
    );
    h.poll("b");
    h.complete("b", json!({}));
    assert_eq!(h.status(), WorkflowStatus::Completed);
}

#[test]
fn permissive_task_lets_the_workflow_run_then_fail() {
    let mut a = simple("a");
    a.permissive = true;
    let mut h = H::start(def_of(vec![a, simple("b")]), json!({}));
    h.poll("a");
    h.fail("a");
    assert_eq!(
        h.shape(),
        shape(&[("a", TaskStatus::Failed), ("b", TaskStatus::Scheduled)])
    );
    assert_eq!(h.status(), WorkflowStatus::Running);
    h.poll("b");
    h.complete("b", json!({}));
    assert_eq!(h.status(), WorkflowStatus::Failed);
    let a_id = h.task("a").task_id.clone();
    assert_eq!(
        h.wf().reason_for_incompletion.as_deref(),
        Some(format!("Task {a_id} failed with status: FAILED and reason: 'a said no'").as_str())
    );
    assert!(h.finished());
}

#[test]
fn terminal_error_is_not_retried_and_starts_the_failure_workflow() {
    let mut h = H::start(
        fixture("simple_workflow_1_integration_test.json"),
        json!({"param1": "a", "failureWfName": "on_failure"}),
    );
    h.poll("t1");
    h.result("t1", TaskResultStatus::FailedWithTerminalError, json!({}));
    assert_eq!(h.status(), WorkflowStatus::Failed);
    assert_eq!(h.attempts("t1").len(), 1, "no retry for a terminal error");
    let t1 = h.task("t1").clone();
    assert_eq!(h.wf().failed_task_id.as_deref(), Some(t1.task_id.as_str()));
    assert_eq!(h.effects.len(), 2);
    match &h.effects[0] {
        Effect::StartWorkflow {
            workflow_id,
            name,
            input,
            correlation_id,
            ..
        } => {
            assert_eq!(name, "on_failure");
            assert_eq!(workflow_id.partition(u16::MAX), PartitionId(3));
            assert_eq!(
                workflow_id,
                &crate::state::failure_workflow_id(h.wf()),
                "derived, not random"
            );
            assert_ne!(workflow_id, &h.wf().workflow_id);
            assert_eq!(input["workflowId"], json!(h.wf().workflow_id.as_str()));
            assert_eq!(input["failureStatus"], json!("FAILED"));
            assert_eq!(input["failureTaskId"], json!(t1.task_id.as_str()));
            assert_eq!(
                input["reason"],
                json!(format!(
                    "Task {} failed with status: FAILED and reason: 't1 said no'",
                    t1.task_id
                ))
            );
            assert_eq!(
                input["failedWorkflow"]["workflowId"],
                json!(h.wf().workflow_id.as_str())
            );
            assert_eq!(correlation_id.as_deref(), Some("corr"));
        }
        other => panic!("expected StartWorkflow, got {other:?}"),
    }
    assert_eq!(h.effects[1], Effect::Finished);
}

#[test]
fn retries_exhausted_fail_the_workflow() {
    let mut h = H::start(def_of(vec![simple("a"), simple("b")]), json!({}));
    h.poll("a");
    h.fail("a");
    assert_eq!(h.status(), WorkflowStatus::Failed);
    assert_eq!(h.shape(), shape(&[("a", TaskStatus::Failed)]));
    assert_eq!(
        h.effects,
        vec![Effect::Finished],
        "no failure workflow configured"
    );
}

#[test]
fn domains_come_from_task_to_domain() {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let s = StartInput {
        priority: 5,
        task_to_domain: [("*".to_string(), "blue".to_string())]
            .into_iter()
            .collect(),
        ..StartInput::new(wf_id(), def_of(vec![simple("a")]), Json::new())
    };
    let rec = start(s, T0, &mut rng)
        .expect("starts")
        .record
        .expect("record");
    let ready = ready_tasks(&rec.workflow);
    assert_eq!(
        (ready[0].domain.as_deref(), ready[0].priority),
        (Some("blue"), 5)
    );
}

#[test]
fn start_is_deterministic_for_a_seed() {
    let a = H::start(fixture("fork_join_integration_test.json"), json!({}));
    let b = H::start(fixture("fork_join_integration_test.json"), json!({}));
    assert_eq!(a.rec, b.rec);
}

#[test]
fn start_rejects_invalid_definitions() {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let s = StartInput::new(wf_id(), def_of(vec![]), Json::new());
    assert!(matches!(start(s, T0, &mut rng), Err(Error::Invalid(_))));
}

/// A QUIC worker's result quotes the lease it got the task with; once that lease has ended (the
/// attempt timed out or failed, or the task was leased again after a callback), the result is
/// refused and changes nothing, where an HTTP result for a terminal task is quietly absorbed.
#[test]
fn a_fenced_result_needs_its_lease_to_hold() {
    let mut h = harness();
    h.poll("t1");
    let t1 = h.task("t1").clone();
    let lease = proto::worker::Lease::of(&t1);
    let result = |status, callback| TaskResult {
        workflow_instance_id: t1.workflow_instance_id.as_str().into(),
        task_id: t1.task_id.as_str().into(),
        status,
        callback_after_seconds: callback,
        ..Default::default()
    };
    let leased = |result, lease: &proto::worker::Lease| Input::LeasedResult {
        result,
        lease: lease.clone(),
    };
    // A heartbeat (IN_PROGRESS) under the lease is taken; the lease still holds after it.
    assert!(h.ok(leased(result(TaskResultStatus::InProgress, 0), &lease)));
    // A lease naming another type is refused as invalid (a worker may not borrow a grant).
    let mut other = lease.clone();
    other.task_type = "another_type".into();
    assert!(matches!(
        h.apply(leased(result(TaskResultStatus::Completed, 0), &other)),
        Err(Error::Invalid(_))
    ));
    // Requeued by a callback and leased again: the first lease has ended.
    assert!(h.ok(leased(result(TaskResultStatus::InProgress, 5), &lease)));
    h.advance_ms(5_000);
    h.poll("t1");
    let version = h.rec.version;
    assert!(matches!(
        h.apply(leased(result(TaskResultStatus::Completed, 0), &lease)),
        Err(Error::Conflict(m)) if m.contains("leased again")
    ));
    assert_eq!(h.rec.version, version, "a refused result changes nothing");
    let current = proto::worker::Lease::of(h.task("t1"));
    assert!(h.ok(leased(result(TaskResultStatus::Completed, 0), &current)));
    // The same result sent again (its acknowledgement was lost) is acknowledged and changes
    // nothing; another outcome under the ended lease is stale.
    assert!(!h.ok(leased(result(TaskResultStatus::Completed, 0), &current)));
    assert!(matches!(
        h.apply(leased(result(TaskResultStatus::Failed, 0), &current)),
        Err(Error::Conflict(m)) if m.contains("COMPLETED")
    ));
}

#[test]
fn lease_all_leases_every_ready_task_in_one_decision_and_skips_the_rest() {
    let fork = WorkflowTask {
        name: "fork".into(),
        task_reference_name: "fork".into(),
        task_type: "FORK_JOIN".into(),
        fork_tasks: vec![
            vec![WorkflowTask {
                task_definition: Some(TaskDef {
                    retry_count: 1,
                    retry_delay_seconds: 0,
                    ..TaskDef::named("task_a")
                }),
                ..simple("a")
            }],
            vec![simple("b")],
        ],
        ..Default::default()
    };
    let join = WorkflowTask {
        name: "join".into(),
        task_reference_name: "join".into(),
        task_type: "JOIN".into(),
        join_on: vec!["a".into(), "b".into()],
        ..Default::default()
    };
    let mut h = H::start(def_of(vec![fork, join]), json!({}));
    let (a, b) = (h.task("a").task_id.clone(), h.task("b").task_id.clone());
    let version = h.rec.version;
    assert!(h.ok(Input::LeaseAll {
        task_ids: vec![a.clone(), b.clone()],
        worker_id: Some("w".into()),
        permit_until: None,
    }));
    assert_eq!(h.rec.version, version + 1, "one decision, one version");
    assert_eq!(
        (h.st("a"), h.st("b")),
        (TaskStatus::InProgress, TaskStatus::InProgress)
    );
    let delivered: Vec<_> = h
        .effects
        .iter()
        .filter_map(|e| match e {
            Effect::Deliver(t) => Some(t.task_id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(delivered, vec![a.clone(), b.clone()]);

    // Both leased already: refused, nothing changes. One of them ready again: only it is leased.
    assert!(matches!(
        h.apply(Input::LeaseAll {
            task_ids: vec![a.clone(), b.clone()],
            worker_id: None,
            permit_until: None,
        }),
        Err(Error::Conflict(_))
    ));
    h.fail("a");
    let retry = h.task("a").task_id.clone();
    assert_ne!(retry, a);
    assert!(h.ok(Input::LeaseAll {
        task_ids: vec![b, retry.clone()],
        worker_id: None,
        permit_until: None,
    }));
    assert_eq!(
        h.effects,
        vec![Effect::Deliver(Box::new(h.task("a").clone()))]
    );
    assert_eq!(h.task("a").task_id, retry);
}

#[test]
fn a_lease_under_a_lapsed_permit_is_refused_and_changes_nothing() {
    let mut h = H::start(def_of(vec![simple("a")]), json!({}));
    let a = h.task("a").task_id.clone();
    let version = h.rec.version;
    let lapsed = Input::LeaseAll {
        task_ids: vec![a.clone()],
        worker_id: None,
        permit_until: Some(h.now - 1),
    };
    assert!(matches!(h.apply(lapsed), Err(Error::Conflict(_))));
    assert_eq!((h.rec.version, h.st("a")), (version, TaskStatus::Scheduled));
    assert!(h.ok(Input::LeaseAll {
        task_ids: vec![a],
        worker_id: None,
        permit_until: Some(h.now),
    }));
    assert_eq!(h.st("a"), TaskStatus::InProgress);
    assert_eq!(crate::in_progress_tasks(h.wf()).len(), 1);
}

#[test]
fn a_result_then_lease_hands_the_workers_next_task_of_its_type_in_the_same_decision() {
    let same_type = |r: &str| WorkflowTask {
        name: "task_x".into(),
        ..simple(r)
    };
    let mut h = H::start(
        def_of(vec![same_type("a"), same_type("b"), simple("c")]),
        json!({}),
    );
    h.poll("a");
    let version = h.rec.version;
    let report = |h: &H, r: &str| TaskResult {
        workflow_instance_id: h.wf().workflow_id.as_str().into(),
        task_id: h.task(r).task_id.as_str().into(),
        status: TaskResultStatus::Completed,
        worker_id: Some("w9".into()),
        ..Default::default()
    };
    assert!(h.ok(Input::TaskResultThenLease(report(&h, "a"))));
    assert_eq!(h.rec.version, version + 1, "one decision");
    assert_eq!(
        (h.st("a"), h.st("b")),
        (TaskStatus::Completed, TaskStatus::InProgress)
    );
    assert_eq!(h.task("b").worker_id.as_deref(), Some("w9"));
    assert_eq!(
        h.effects,
        vec![Effect::Deliver(Box::new(h.task("b").clone()))]
    );

    // The next task is of another type: it stays in the queue for its own workers.
    assert!(h.ok(Input::TaskResultThenLease(report(&h, "b"))));
    assert_eq!(h.st("c"), TaskStatus::Scheduled);
    assert!(h.effects.is_empty());
}
