//! What simulated clients and workers ask a node, and how a node's host serves it (through the
//! node's public operations, exactly as its HTTP API does).

use proto::model::{
    EventHandler, StartWorkflowRequest, Task, TaskDef, TaskResult, Workflow, WorkflowDef,
};

/// A client or worker request.
#[derive(Debug, Clone)]
pub enum Request {
    Define {
        tasks: Vec<TaskDef>,
        workflows: Vec<WorkflowDef>,
    },
    Start(Box<StartWorkflowRequest>),
    Poll {
        task_type: String,
        worker: String,
    },
    Update(TaskResult),
    Workflow(String),
    AddHandler(Box<EventHandler>),
    /// Registers a Serverless Workflow document (its text).
    DefineDsl(String),
    /// Starts an instance of the registered document `namespace/name/version`.
    StartDsl {
        key: (String, String, String),
        request: Box<StartWorkflowRequest>,
    },
}

/// Its answer (errors as the node's message).
#[derive(Debug)]
pub enum Reply {
    Defined(Result<(), String>),
    /// Definitions stored by a node whose cluster version was this one before it wrote them
    /// (from version 2, a bulk update is one `PutWorkflowDefs`).
    DefinedAt(Result<proto::version::ClusterVersion, String>),
    Started(Result<String, String>),
    Polled(Result<Vec<Task>, String>),
    Updated(Result<String, String>),
    Workflow(Result<Box<Workflow>, String>),
    HandlerAdded(Result<(), String>),
}

/// Serves one request on a node.
pub async fn serve(node: &node::Node, request: Request) -> Reply {
    match request {
        Request::Define { tasks, workflows } => {
            let defined = async {
                let (version, _) = node.upgrade.served();
                node.definitions.put_task_defs(tasks).await?;
                let workflows = workflows
                    .into_iter()
                    .map(|w| node.definitions.prepare_workflow_def(w, true))
                    .collect::<Result<Vec<_>, _>>()?;
                node.definitions.put_workflow_defs(workflows).await?;
                Ok::<_, node::Error>(version)
            };
            Reply::DefinedAt(defined.await.map_err(|e| e.to_string()))
        }
        Request::Start(r) => Reply::Started(
            node.workflows
                .start_workflow(*r)
                .await
                .map_err(|e| e.to_string()),
        ),
        Request::Poll { task_type, worker } => {
            let poll = node::service::PollRequest {
                task_type,
                worker_id: Some(worker),
                domain: None,
                count: 1,
                wait_ms: 0,
            };
            Reply::Polled(node.tasks.poll(poll).await.map_err(|e| e.to_string()))
        }
        Request::Update(r) => {
            Reply::Updated(node.tasks.update_task(r).await.map_err(|e| e.to_string()))
        }
        Request::AddHandler(h) => Reply::HandlerAdded(
            node.events
                .put_event_handler(*h, true)
                .await
                .map_err(|e| e.to_string()),
        ),
        Request::DefineDsl(text) => Reply::Defined(
            node.definitions
                .put_dsl(&text, true)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string()),
        ),
        Request::StartDsl { key, request } => {
            let key = (key.0.as_str(), key.1.as_str(), key.2.as_str());
            Reply::Started(
                node.workflows
                    .start_dsl_with(key, *request)
                    .await
                    .map_err(|e| e.to_string()),
            )
        }
        Request::Workflow(id) => Reply::Workflow(
            node.workflows
                .workflow(&id, true)
                .await
                .map(Box::new)
                .map_err(|e| e.to_string()),
        ),
    }
}
