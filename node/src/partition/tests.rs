//! The partition's actors in process: a single-node partition on sled in a temporary directory,
//! driven through `Partition::try_call` as the routing drives it. What the supervisor and the
//! workflow actors promise: one writer per workflow (concurrent operations on one workflow are
//! applied one after another, each a version), a start only once, refusals that change nothing,
//! and an answer for every call.

use super::{Partition, WorkflowOp};
use crate::error::Error;
use crate::host::Seams;
use crate::service::open_with;
use crate::testing::start_op;
use crate::Options;
use engine::Input;
use proto::model::{TaskResult, TaskResultStatus};
use proto::{PartitionId, TaskId, WorkflowId};
use std::sync::Arc;

struct Fixture {
    _dir: tempfile::TempDir,
    node: crate::Node,
}

async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("temporary directory");
    let options = Options {
        data_dir: dir.path().to_owned(),
        partitions: 1,
        ..Default::default()
    };
    let seams = Seams {
        seed: Some(7),
        ..Default::default()
    };
    let node = open_with(&options, seams).await.expect("node opens");
    Fixture { _dir: dir, node }
}

impl Fixture {
    /// The partition, once its actors run.
    async fn partition(&self) -> Arc<Partition> {
        let p = self.node.host.partition(PartitionId(0)).expect("hosted");
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
        while !p.is_local_leader().await {
            assert!(tokio::time::Instant::now() < deadline, "never led");
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        p
    }
}

async fn call(p: &Partition, id: &WorkflowId, op: WorkflowOp) -> Result<(), Error> {
    p.try_call(id, op).await.expect("led here").map(drop)
}

fn task_of(p: &Partition, id: &WorkflowId) -> TaskId {
    let record = p.read(id).expect("reads").expect("exists");
    record.workflow.tasks[0].task_id.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_starts_once_and_a_refusal_changes_nothing() {
    let f = fixture().await;
    let p = f.partition().await;
    let id = WorkflowId::new(PartitionId(0), 1 << 64);
    call(&p, &id, start_op(&id)).await.expect("starts");
    let first = p.read(&id).expect("reads").expect("exists");
    assert_eq!(first.version, 1);
    assert!(matches!(
        call(&p, &id, start_op(&id)).await,
        Err(Error::Conflict(_))
    ));
    // Retrying a RUNNING workflow is refused by the engine; nothing is written.
    let retry = WorkflowOp::Input(Box::new(Input::Retry));
    assert!(call(&p, &id, retry).await.is_err());
    assert_eq!(p.read(&id).expect("reads"), Some(first));
    let unknown = WorkflowId::new(PartitionId(0), 2 << 64);
    let pause = WorkflowOp::Input(Box::new(Input::Pause));
    let refused = call(&p, &unknown, pause).await;
    assert!(matches!(refused, Err(Error::NotFound(_))), "{refused:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_operations_on_one_workflow_apply_one_after_another() {
    let f = fixture().await;
    let p = f.partition().await;
    let id = WorkflowId::new(PartitionId(0), 3 << 64);
    call(&p, &id, start_op(&id)).await.expect("starts");
    let task = task_of(&p, &id);
    const LINES: usize = 20;
    let logs = (0..LINES).map(|i| {
        let (p, id, task) = (p.clone(), id.clone(), task.clone());
        async move { call(&p, &id, WorkflowOp::AddLog(task, format!("line {i}"))).await }
    });
    for logged in futures::future::join_all(logs).await {
        logged.expect("every log line is applied");
    }
    let record = p.read(&id).expect("reads").expect("exists");
    assert_eq!(
        record.version,
        1 + LINES as u64,
        "one version per operation"
    );
    let lines = &record.task_logs[&task.to_string()];
    assert_eq!(lines.len(), LINES);
    // The task completes once; a second completion of the same attempt changes nothing.
    let done = TaskResult {
        workflow_instance_id: id.to_string(),
        task_id: task.to_string(),
        status: TaskResultStatus::Completed,
        ..Default::default()
    };
    let complete = || WorkflowOp::Input(Box::new(Input::TaskResult(done.clone())));
    call(&p, &id, complete()).await.expect("completes");
    let finished = p.read(&id).expect("reads").expect("exists");
    assert_eq!(
        finished.workflow.status,
        proto::model::WorkflowStatus::Completed
    );
    let _ = call(&p, &id, complete()).await;
    assert_eq!(p.read(&id).expect("reads"), Some(finished));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_workflow_is_gone_and_can_be_started_again() {
    let f = fixture().await;
    let p = f.partition().await;
    let id = WorkflowId::new(PartitionId(0), 4 << 64);
    call(&p, &id, start_op(&id)).await.expect("starts");
    call(&p, &id, WorkflowOp::Remove).await.expect("removes");
    assert_eq!(p.read(&id).expect("reads"), None);
    assert!(matches!(
        call(&p, &id, WorkflowOp::Remove).await,
        Err(Error::NotFound(_))
    ));
    call(&p, &id, start_op(&id)).await.expect("starts again");
    assert_eq!(p.read(&id).expect("reads").map(|r| r.version), Some(1));
}
