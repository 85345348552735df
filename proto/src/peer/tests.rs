use super::*;
use crate::input::{Input, StartInput};
use crate::model::{TaskDef, TaskResult, Workflow, WorkflowDef};
use serde_json::json;

pub(crate) fn wid() -> WorkflowId {
    WorkflowId::new(PartitionId(3), 0x1234_5678_9abc_def0_1122_3344_5566_7788)
}

pub(crate) fn tid() -> TaskId {
    TaskId::new(PartitionId(3), 0x0bad_cafe_0000_0000_0000_0000_0000_0001)
}

/// A workflow with one task, numbers that must survive exactly, and nested inputs.
pub(crate) fn workflow() -> Workflow {
    let id = wid().to_string();
    let task = json!({
        "taskType": "t", "status": "IN_PROGRESS", "inputData": {"deep": [true, {"x": 0.1}]},
        "referenceTaskName": "t1", "retryCount": 0, "seq": 1, "pollCount": 1,
        "taskDefName": "t", "scheduledTime": 1, "startTime": 1, "endTime": 0, "updateTime": 2,
        "startDelayInSeconds": 0, "retried": false, "executed": false, "callbackFromWorker": true,
        "responseTimeoutSeconds": 10, "workflowInstanceId": id, "workflowType": "orders",
        "taskId": tid().to_string(), "callbackAfterSeconds": 0, "workerId": "wk",
        "outputData": {}, "workflowTask": {"name": "t", "taskReferenceName": "t1"},
        "workflowPriority": 0, "iteration": 0, "firstScheduledTime": 1
    });
    serde_json::from_value(json!({
        "workflowId": id, "workflowName": "orders", "workflowVersion": 1, "status": "RUNNING",
        "createTime": 1, "updateTime": 1, "startTime": 1, "endTime": 0, "tasks": [task],
        "input": {"amount": 111111.11111111111_f64, "nested": {"list": [1, "two", null]}},
        "output": {}, "taskToDomain": {}, "failedReferenceTaskNames": [], "failedTaskNames": [],
        "workflowDefinition": {"name": "orders"}, "priority": 0, "variables": {}, "lastRetriedTime": 0
    }))
    .expect("test workflow parses")
}

pub(crate) fn record() -> WorkflowRecord {
    WorkflowRecord {
        version: 7,
        workflow: workflow(),
        task_logs: Default::default(),
        applied: vec!["k1".into()],
        status_notice: None,
        lifecycle: None,
    }
}

fn object(value: serde_json::Value) -> crate::model::Json {
    match value {
        serde_json::Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

pub(crate) fn requests() -> Vec<Request> {
    let p = PartitionId(3);
    let start = StartInput {
        workflow_id: wid(),
        def: WorkflowDef {
            name: "orders".into(),
            ..Default::default()
        },
        input: object(json!({"a": [1, {"b": null}]})),
        correlation_id: Some("c".into()),
        priority: 5,
        task_to_domain: [("t".to_string(), "d".to_string())].into(),
        parent_workflow_id: None,
        parent_workflow_task_id: None,
        re_run_from_workflow_id: None,
        event: None,
    };
    let result = TaskResult {
        workflow_instance_id: wid().to_string(),
        task_id: tid().to_string(),
        output_data: object(json!({"x": 1.5})),
        ..Default::default()
    };
    vec![
        Request::Workflow {
            id: wid(),
            op: WorkflowOp::Start(Box::new(start)),
        },
        Request::Workflow {
            id: wid(),
            op: WorkflowOp::Input(Box::new(Input::TaskResult(result))),
        },
        Request::Workflow {
            id: wid(),
            op: WorkflowOp::AddLog(tid(), "line".into()),
        },
        Request::Workflow {
            id: wid(),
            op: WorkflowOp::Remove,
        },
        Request::Read { id: wid() },
        Request::Wait {
            id: wid(),
            task_refs: vec!["a".into()],
            wait_ms: 10,
        },
        Request::TaskOwner { task: tid() },
        Request::Poll {
            task_type: "t".into(),
            worker_id: Some("w".into()),
            domain: None,
            count: 4,
        },
        Request::Backlog {
            wanted: vec![Wanted {
                task_type: "t".into(),
                domain: Some("d".into()),
            }],
            wait_ms: 5,
        },
        Request::Meta(MetaCommand::PutTaskDefs(vec![TaskDef {
            name: "t".into(),
            ..Default::default()
        }])),
        Request::MetaReadIndex,
        Request::Join(NodeEntry {
            id: NodeId(2),
            addr: "127.0.0.1:1".into(),
            draining: false,
            binary: Some(crate::version::Binary {
                release: "0.1.0".into(),
                supports: crate::version::VersionRange {
                    min: crate::version::ClusterVersion(1),
                    max: crate::version::ClusterVersion(1),
                },
            }),
        }),
        Request::Groups,
        Request::Locate { partition: p },
        Request::Host { partition: p },
        Request::Unhost { partition: p },
        Request::AddReplica {
            partition: p,
            node: NodeId(4),
            addr: "a:1".into(),
        },
        Request::RemoveReplica {
            partition: p,
            node: NodeId(4),
        },
        Request::StepDown { partition: p },
        Request::Search {
            query: SearchQuery {
                workflow_name: Some("orders".into()),
                status: Some(WorkflowStatus::Running),
                size: 10,
                ..Default::default()
            },
            partitions: vec![p],
        },
        Request::Running {
            name: "orders".into(),
            version: Some(2),
            partitions: vec![p],
        },
        Request::HoldElections {
            partition: p,
            ms: 9,
        },
        Request::Elect {
            partition: p,
            leaving: NodeId(1),
            last_log: 7,
        },
        Request::Promote {
            partition: p,
            node: NodeId(1),
        },
        Request::Partition {
            partition: p,
            command: PartitionCommand::MarkSchedule {
                name: "s".into(),
                time: 42,
            },
        },
        Request::Executions {
            partitions: vec![p],
            handler: Some("h".into()),
            limit: 3,
        },
        Request::DeadLetters {
            partitions: vec![p],
            limit: 3,
        },
        Request::QueueSizes {
            types: vec!["t".into()],
            domain: QueueDomain::Only(Some("d".into())),
            partitions: vec![p],
        },
        Request::QueueSizes {
            types: vec![],
            domain: QueueDomain::Every,
            partitions: vec![p],
        },
        Request::Permits {
            task_type: "t".into(),
            task_ids: vec![workflow().tasks[0].task_id.clone()],
        },
        Request::InProgress {
            task_type: "t".into(),
            partitions: vec![p],
            pending: vec![workflow().tasks[0].task_id.clone()],
        },
        Request::Listening {
            event_type: "com.example.ready".into(),
            partitions: vec![p],
        },
        Request::WaitSettled {
            id: wid(),
            task_refs: vec!["a".into()],
            wait_ms: 10,
        },
    ]
}

pub(crate) fn replies() -> Vec<Result<Reply, Failure>> {
    let status = GroupStatus {
        name: "p3".into(),
        node: NodeId(1),
        role: "Leader".into(),
        term: 4,
        leader: Some(NodeId(1)),
        last_log_index: Some(10),
        last_applied_index: Some(9),
        snapshot_index: None,
        purged_index: None,
        voters: vec![NodeId(1), NodeId(2)],
        learners: vec![],
        matched: [(NodeId(2), Some(8)), (NodeId(3), None)].into(),
        stopped: None,
    };
    let summary = WorkflowSummary {
        workflow_id: wid().to_string(),
        ..Default::default()
    };
    let ok = [
        Reply::Tasks(workflow().tasks),
        Reply::Record(Some(Box::new(record()))),
        Reply::Record(None),
        Reply::Owner(wid()),
        Reply::Backlog(vec![Wanted {
            task_type: "t".into(),
            domain: None,
        }]),
        Reply::Meta(MetaOutcome::Exists),
        Reply::Index(77),
        Reply::Joined {
            partitions: 8,
            members: vec![],
        },
        Reply::Groups(vec![status]),
        Reply::Leader(Some(NodeId(2))),
        Reply::Found {
            total: 1,
            hits: vec![(5, summary)],
        },
        Reply::Ids(vec!["x".into()]),
        Reply::Done,
        Reply::Outcome(PartitionOutcome::Published { seq: 3 }),
        Reply::Executions(vec![]),
        Reply::DeadLetters(vec![]),
        Reply::Sizes([("t".to_owned(), 3)].into()),
        Reply::Permits(PermitGrant {
            granted: vec![workflow().tasks[0].task_id.clone()],
            valid_ms: 1_000,
            retry_in_ms: 200,
        }),
        Reply::InProgress(InProgressTasks {
            running: vec![(workflow().tasks[0].task_id.clone(), 42)],
            ended: vec![workflow().tasks[0].task_id.clone()],
        }),
    ];
    let failures = ErrorCode::ALL.map(|code| {
        Err(Failure {
            code,
            message: format!("{code:?}"),
        })
    });
    ok.into_iter().map(Ok).chain(failures).collect()
}

#[test]
fn every_request_reads_back_as_written() {
    for (hops, request) in requests().into_iter().enumerate() {
        let envelope = Envelope {
            hops: hops as u8,
            request,
        };
        let bytes = encode_request(&envelope);
        assert_eq!(bytes[0], FORMAT_VERSION);
        assert_eq!(decode_request(&bytes).expect("decodes"), envelope);
    }
}

#[test]
fn every_reply_reads_back_as_written() {
    for reply in replies() {
        let bytes = encode_reply(&reply);
        assert_eq!(decode_reply(&bytes).expect("decodes"), reply, "{reply:?}");
    }
}

#[test]
fn another_format_version_is_refused_by_name() {
    let mut bytes = encode_request(&Envelope {
        hops: 0,
        request: Request::Groups,
    });
    bytes[0] = FORMAT_VERSION + 1;
    assert_eq!(
        decode_request(&bytes),
        Err(DecodeError::Version(FORMAT_VERSION + 1))
    );
    assert_eq!(decode_reply(&[]), Err(DecodeError::Empty));
}

#[test]
fn truncated_or_padded_messages_are_malformed() {
    let bytes = encode_reply(&Ok(Reply::Record(Some(Box::new(record())))));
    for cut in [1, 2, bytes.len() / 2, bytes.len() - 1] {
        assert!(
            matches!(decode_reply(&bytes[..cut]), Err(DecodeError::Body(_))),
            "cut at {cut}"
        );
    }
    let mut padded = bytes.clone();
    padded.push(0);
    assert!(matches!(decode_reply(&padded), Err(DecodeError::Body(_))));
}
