//! The seeded workload: definitions (sequential, fork/join nested with optional and permissive
//! branches, retrying, timing-out, a DO_WHILE loop, a SUB_WORKFLOW beside a task, an EVENT task
//! whose message an event handler turns into another workflow, and a Serverless Workflow document
//! that loops, forks, listens for an event it emits and retries: `dsl_doc`), clients that start
//! workflows with an idempotency key and retry
//! on timeouts, and workers that poll every node and sometimes die mid-task, answer late, fail, or
//! send their result twice. The client oracle ([`Oracle`]) records only what was acknowledged; a
//! request that timed out is unknown, never failed.

use crate::client::{Reply, Request};
use crate::counters::{Counter, Counters};
use crate::net::Net;
use proto::model::{
    EventHandler, StartWorkflowRequest, TaskDef, TaskResult, TaskResultStatus, WorkflowDef,
};
use proto::NodeId;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// How long a client waits for any answer.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(3);

/// The task types and their definitions.
pub fn task_defs() -> Vec<TaskDef> {
    let def = |v: serde_json::Value| -> TaskDef {
        serde_json::from_value(v).unwrap_or_else(|e| panic!("sim task definition: {e}"))
    };
    vec![
        def(
            json!({"name": "sim_work", "retryCount": 2, "retryLogic": "FIXED",
            "retryDelaySeconds": 1, "responseTimeoutSeconds": 4, "timeoutSeconds": 12,
            "timeoutPolicy": "RETRY"}),
        ),
        def(
            json!({"name": "sim_flaky", "retryCount": 3, "retryLogic": "EXPONENTIAL_BACKOFF",
            "retryDelaySeconds": 1, "responseTimeoutSeconds": 3, "timeoutSeconds": 10,
            "timeoutPolicy": "RETRY"}),
        ),
        def(
            json!({"name": "sim_slow", "retryCount": 1, "retryLogic": "LINEAR_BACKOFF",
            "retryDelaySeconds": 1, "responseTimeoutSeconds": 2, "timeoutSeconds": 5,
            "timeoutPolicy": "RETRY"}),
        ),
    ]
}

/// The task type a run's `--concurrency-limit` applies to.
pub const LIMITED_TYPE: &str = "sim_work";

/// The workflow definitions.
pub fn workflow_defs() -> Vec<WorkflowDef> {
    let def = |v: serde_json::Value| -> WorkflowDef {
        serde_json::from_value(v).unwrap_or_else(|e| panic!("sim workflow definition: {e}"))
    };
    let simple = |name: &str, reference: &str| json!({"name": name, "taskReferenceName": reference, "type": "SIMPLE"});
    vec![
        def(
            json!({"name": "sim_sequential", "version": 1, "schemaVersion": 2, "tasks": [
            simple("sim_work", "s1"), simple("sim_flaky", "s2"), simple("sim_work", "s3")]}),
        ),
        def(
            json!({"name": "sim_fork", "version": 1, "schemaVersion": 2, "tasks": [
            {"name": "fork", "taskReferenceName": "fork", "type": "FORK_JOIN", "forkTasks": [
                [simple("sim_work", "a1"), simple("sim_flaky", "a2")],
                [{"name": "sim_flaky", "taskReferenceName": "b1", "type": "SIMPLE", "optional": true}],
                [{"name": "inner", "taskReferenceName": "inner", "type": "FORK_JOIN", "forkTasks": [
                    [simple("sim_work", "c1")],
                    [{"name": "sim_slow", "taskReferenceName": "c2", "type": "SIMPLE", "permissive": true}]]},
                 {"name": "inner_join", "taskReferenceName": "inner_join", "type": "JOIN",
                  "joinOn": ["c1", "c2"]}]]},
            {"name": "join", "taskReferenceName": "join", "type": "JOIN",
             "joinOn": ["a2", "b1", "inner_join"]},
            simple("sim_work", "after")]}),
        ),
        def(
            json!({"name": "sim_retry", "version": 1, "schemaVersion": 2, "tasks": [
            simple("sim_flaky", "r1"), simple("sim_flaky", "r2")]}),
        ),
        def(
            json!({"name": "sim_timeout", "version": 1, "schemaVersion": 2, "tasks": [
            simple("sim_slow", "t1"), simple("sim_work", "t2")]}),
        ),
        // A loop of three iterations (its condition runs in the node's script sandbox).
        def(
            json!({"name": "sim_loop", "version": 1, "schemaVersion": 2, "tasks": [
            {"name": "loop", "taskReferenceName": "loop", "type": "DO_WHILE",
             "loopCondition": "$.loop['iteration'] < 3",
             "loopOver": [simple("sim_work", "l1"), simple("sim_flaky", "l2")]},
            simple("sim_work", "l_after")]}),
        ),
        // A sub-workflow (a sim_sequential, usually on another partition) beside a task.
        def(
            json!({"name": "sim_parent", "version": 1, "schemaVersion": 2, "tasks": [
            {"name": "fork", "taskReferenceName": "fork", "type": "FORK_JOIN", "forkTasks": [
                [{"name": "child", "taskReferenceName": "child", "type": "SUB_WORKFLOW",
                  "subWorkflowParam": {"name": "sim_sequential", "version": 1}}],
                [simple("sim_work", "p1")]]},
            {"name": "join", "taskReferenceName": "join", "type": "JOIN", "joinOn": ["child", "p1"]}]}),
        ),
        // An EVENT task whose message starts a sim_sequential through [`event_handler`].
        def(
            json!({"name": EVENT_WORKFLOW, "version": 1, "schemaVersion": 2, "tasks": [
            {"name": "emit", "taskReferenceName": "emit", "type": "EVENT", "sink": "conductor"},
            simple("sim_work", "e2")]}),
        ),
    ]
}

/// The workflow whose EVENT task feeds [`event_handler`].
pub const EVENT_WORKFLOW: &str = "sim_event";

/// The correlation id of the workflow the handler starts for an EVENT_WORKFLOW run.
pub fn event_child_key(workflow_id: &str) -> String {
    format!("evt-{workflow_id}")
}

/// Starts a sim_sequential for every message of EVENT_WORKFLOW's EVENT task, correlated to the
/// run that sent it (once per message, across redelivery, crashes, failover).
/// No condition: scripts run on a real thread (`spawn_blocking`), outside simulated time.
pub fn event_handler() -> EventHandler {
    serde_json::from_value(json!({
        "name": "sim_event_handler",
        "event": format!("conductor:{EVENT_WORKFLOW}:emit"),
        "active": true,
        "actions": [{"action": "start_workflow", "start_workflow": {
            "name": "sim_sequential", "version": 1,
            "correlationId": event_child_key("${workflowInstanceId}")}}]
    }))
    .unwrap_or_else(|e| panic!("sim event handler: {e}"))
}

/// What clients and workers were told (the only facts an invariant may rely on).
#[derive(Default)]
pub struct Facts {
    /// Idempotency key -> the workflow id a start was acknowledged with.
    pub started: BTreeMap<String, String>,
    /// Starts sent whose outcome is unknown (timed out), by key.
    pub unknown_starts: Vec<String>,
    /// Acknowledged results: (task id, workflow id, status, simulated ms when acknowledged).
    pub results: Vec<(String, String, TaskResultStatus, u64)>,
    /// Tasks handed to workers and not answered (yet): task id -> workflow id.
    pub in_flight: BTreeMap<String, String>,
    /// Starts that were never acknowledged after every retry (the client gave up).
    pub abandoned: u64,
}

/// The shared record of acknowledgements.
#[derive(Default)]
pub struct Oracle {
    facts: Mutex<Facts>,
}

impl Oracle {
    pub fn facts(&self) -> MutexGuard<'_, Facts> {
        self.facts.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Everything the client runtime needs.
#[derive(Clone)]
pub struct Workload {
    pub net: Arc<Net>,
    pub nodes: Vec<NodeId>,
    pub workflows: usize,
    /// Starts are spread over this many simulated milliseconds...
    pub start_window_ms: u64,
    /// ...except the last `late_starts`, spread over this window of simulated time (after the
    /// faults healed, so that timers are checked in a healed cluster too).
    pub late_starts: usize,
    pub late_window_ms: (u64, u64),
    pub oracle: Arc<Oracle>,
    pub counters: Arc<Counters>,
    pub rng: Arc<Mutex<ChaCha8Rng>>,
    /// Set when the run ends: workers stop.
    pub stop: Arc<AtomicBool>,
    /// Worker misbehaviour rates (zero in the liveness phase).
    pub chaos: Arc<AtomicBool>,
    /// `concurrentExecLimit` of [`LIMITED_TYPE`], if the run sets one.
    pub concurrency_limit: Option<u32>,
    /// Whether the run upgrades its nodes (then the definitions are stored again afterwards).
    pub upgrades: bool,
}

impl Workload {
    fn rng(&self) -> MutexGuard<'_, ChaCha8Rng> {
        self.rng.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn pick_node(&self) -> NodeId {
        let i = self.rng().gen_range(0..self.nodes.len());
        self.nodes[i]
    }

    async fn call(&self, request: Request) -> Option<Reply> {
        let node = self.pick_node();
        self.net.client_call(node, request, CLIENT_TIMEOUT).await
    }

    /// Stores the task and workflow definitions, retrying until a node acknowledges them;
    /// answers the cluster version that node wrote them at.
    async fn put_definitions(&self) -> proto::version::ClusterVersion {
        loop {
            let reply = self
                .call(Request::Define {
                    tasks: self.task_defs(),
                    workflows: workflow_defs(),
                })
                .await;
            if let Some(Reply::DefinedAt(Ok(version))) = reply {
                return version;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// In an upgrade seed, once the late starts begin (the upgrades are done by then, and the
    /// new version activated unless faults held it back), stores the same definitions again: a
    /// version-2 cluster writes them as one `PutWorkflowDefs`, which the invariant on
    /// undecodable commands then watches every replica apply.
    async fn redefine_after_upgrades(self) {
        let wait = self.late_window_ms.0.saturating_sub(crate::net::now_ms());
        tokio::time::sleep(Duration::from_millis(wait)).await;
        if self.put_definitions().await > proto::version::ClusterVersion::FIRST {
            self.counters.bump(Counter::DefinedAfterActivation);
        }
    }

    /// Registers the definitions, retrying until a node acknowledges them.
    async fn define(&self) {
        self.put_definitions().await;
        // After the task types: the document calls them as functions.
        loop {
            let reply = self
                .call(Request::DefineDsl(crate::dsl_doc::DOCUMENT.to_owned()))
                .await;
            if let Some(Reply::Defined(Ok(()))) = reply {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        loop {
            match self
                .call(Request::AddHandler(Box::new(event_handler())))
                .await
            {
                // A retry after a lost answer finds the handler added.
                Some(Reply::HandlerAdded(Ok(()))) => return,
                Some(Reply::HandlerAdded(Err(e))) if e.contains("already exists") => return,
                _ => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }

    /// [`task_defs`], with the run's limit on [`LIMITED_TYPE`].
    fn task_defs(&self) -> Vec<TaskDef> {
        let mut defs = task_defs();
        for def in defs.iter_mut().filter(|d| d.name == LIMITED_TYPE) {
            def.concurrent_exec_limit = self.concurrency_limit;
        }
        defs
    }

    /// The client runtime: definitions, workers, then the starts.
    pub async fn run(self) -> turmoil::Result {
        self.define().await;
        let redefine = self
            .upgrades
            .then(|| tokio::spawn(self.clone().redefine_after_upgrades()));
        let mut workers = Vec::new();
        for task_type in ["sim_work", "sim_flaky", "sim_slow"] {
            for n in 0..3 {
                let w = self.clone();
                let name = format!("{task_type}-worker-{n}");
                workers.push(tokio::spawn(w.worker(task_type, name)));
            }
        }
        let mut names: Vec<String> = workflow_defs().into_iter().map(|d| d.name).collect();
        names.push(crate::dsl_doc::NAME.to_owned());
        let mut starts = Vec::new();
        let early = self.workflows.saturating_sub(self.late_starts);
        let gap = self.start_window_ms / early.max(1) as u64;
        let (late_from, late_to) = self.late_window_ms;
        let late_gap = late_to.saturating_sub(late_from) / self.late_starts.max(1) as u64;
        for i in 0..self.workflows {
            if i == early {
                let wait = late_from.saturating_sub(crate::net::now_ms());
                tokio::time::sleep(Duration::from_millis(wait)).await;
            }
            let name = names[self.rng().gen_range(0..names.len())].clone();
            let w = self.clone();
            starts.push(tokio::spawn(w.start(i, name)));
            let gap = if i < early { gap } else { late_gap };
            let jitter = self.rng().gen_range(0..=gap.max(1));
            tokio::time::sleep(Duration::from_millis(jitter)).await;
        }
        for s in starts {
            let _ = s.await;
        }
        for w in workers {
            let _ = w.await;
        }
        if let Some(redefine) = redefine {
            let _ = redefine.await;
        }
        Ok(())
    }

    /// Starts one workflow; a timed-out start is retried with the same idempotency key.
    async fn start(self, i: usize, name: String) {
        let key = format!("sim-{i}");
        for _ in 0..20 {
            if self.stop.load(Ordering::Relaxed) {
                break;
            }
            let request = StartWorkflowRequest {
                name: name.clone(),
                version: Some(1),
                correlation_id: Some(key.clone()),
                input: json_map(json!({"i": i})),
                idempotency_key: Some(key.clone()),
                ..Default::default()
            };
            let request = if name == crate::dsl_doc::NAME {
                let (namespace, name, version) = crate::dsl_doc::KEY;
                Request::StartDsl {
                    key: (namespace.into(), name.into(), version.into()),
                    request: Box::new(request),
                }
            } else {
                Request::Start(Box::new(request))
            };
            match self.call(request).await {
                Some(Reply::Started(Ok(id))) => {
                    self.oracle.facts().started.insert(key, id);
                    return;
                }
                Some(_) => {}
                None => self.oracle.facts().unknown_starts.push(key.clone()),
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        self.oracle.facts().abandoned += 1;
    }

    /// One worker: polls a random node, works, answers (or misbehaves), until the run ends.
    async fn worker(self, task_type: &'static str, name: String) {
        while !self.stop.load(Ordering::Relaxed) {
            let reply = self
                .call(Request::Poll {
                    task_type: task_type.to_owned(),
                    worker: name.clone(),
                })
                .await;
            let task = match reply {
                Some(Reply::Polled(Ok(mut tasks))) if !tasks.is_empty() => tasks.remove(0),
                _ => {
                    let idle = self.rng().gen_range(50..250);
                    tokio::time::sleep(Duration::from_millis(idle)).await;
                    continue;
                }
            };
            let workflow = task.workflow_instance_id.as_str().to_owned();
            let task_id = task.task_id.as_str().to_owned();
            self.oracle
                .facts()
                .in_flight
                .insert(task_id.clone(), workflow.clone());
            let chaos = self.chaos.load(Ordering::Relaxed);
            let roll: f64 = self.rng().gen();
            let slow = task_type == "sim_slow";
            if chaos && roll < 0.05 {
                // Dies mid-task: never answers; the response timeout must retry it.
                self.counters.bump(Counter::WorkerDied);
                continue;
            }
            // A slow worker overruns its timeout now and then even in a healed cluster.
            let late = (chaos && roll < 0.10) || (slow && roll < if chaos { 0.35 } else { 0.20 });
            let work_ms = if late {
                self.counters.bump(Counter::WorkerLate);
                task.response_timeout_seconds * 1_000 + self.rng().gen_range(200..2_000)
            } else {
                self.rng().gen_range(10..400)
            };
            tokio::time::sleep(Duration::from_millis(work_ms)).await;
            let fail = chaos && self.rng().gen_bool(0.15);
            let status = if fail {
                TaskResultStatus::Failed
            } else {
                TaskResultStatus::Completed
            };
            let result = TaskResult {
                workflow_instance_id: workflow.clone(),
                task_id: task_id.clone(),
                status,
                worker_id: Some(name.clone()),
                reason_for_incompletion: fail.then(|| "simulated failure".to_owned()),
                output_data: json_map(json!({"by": name, "ref": task.reference_task_name})),
                ..Default::default()
            };
            let twice = chaos && self.rng().gen_bool(0.05);
            self.answer(result.clone()).await;
            if twice {
                self.counters.bump(Counter::DuplicateCompletion);
                self.answer(result).await;
            }
        }
    }

    /// Sends a result, retrying a few times when the answer is unknown.
    async fn answer(&self, result: TaskResult) {
        for _ in 0..4 {
            match self.call(Request::Update(result.clone())).await {
                Some(Reply::Updated(Ok(_))) => {
                    let at = crate::net::now_ms();
                    let mut facts = self.oracle.facts();
                    facts.in_flight.remove(&result.task_id);
                    facts.results.push((
                        result.task_id.clone(),
                        result.workflow_instance_id.clone(),
                        result.status,
                        at,
                    ));
                    return;
                }
                Some(Reply::Updated(Err(_))) => {
                    self.oracle.facts().in_flight.remove(&result.task_id);
                    return;
                }
                _ => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }
}

/// The retry count of a task type's definition.
pub fn retry_count(task_type: &str) -> u32 {
    task_defs()
        .iter()
        .find(|d| d.name == task_type)
        .map_or(0, |d| d.retry_count)
}

/// A JSON object's map (the model's `Json` type).
fn json_map(v: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
    match v {
        serde_json::Value::Object(m) => m,
        _ => serde_json::Map::new(),
    }
}
