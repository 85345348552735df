//! `Node`: the cheap, cloneable handle through which the HTTP API (and later the QUIC gateway) reach
//! the node's partitions and definitions. Every method is one user-visible operation; writes resolve
//! only after the change is committed and flushed.

use crate::error::Result;
use proto::model::Json;
use proto::model::{
    RerunWorkflowRequest, SearchResult, SkipTaskRequest, StartWorkflowRequest, Task, TaskDef,
    TaskExecLog, TaskResult, TaskStatus, Workflow, WorkflowDef, WorkflowSummary,
};
use std::collections::BTreeMap;

pub use proto::peer::SearchQuery;

/// A batch poll.
#[derive(Debug, Clone, PartialEq)]
pub struct PollRequest {
    pub task_type: String,
    pub worker_id: Option<String>,
    pub domain: Option<String>,
    pub count: usize,
    pub wait_ms: u64,
}

/// Node health.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Health {
    pub healthy: bool,
    pub partitions: usize,
    pub partitions_led: usize,
    /// Partitions led here whose actors could not start, with why: none of their workflows
    /// run, so the node is not healthy while any is listed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub partitions_stopped: Vec<StoppedPartition>,
}

/// A partition led here that cannot run (see [`Health`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StoppedPartition {
    pub partition: u16,
    pub reason: String,
}

/// A quarantined workflow as `GET /api/admin/quarantine` lists it.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QuarantineEntry {
    pub partition: u16,
    pub workflow_id: String,
    pub reason: String,
    /// When it was set aside (epoch ms).
    pub time: i64,
    /// Size of the stored row set aside.
    pub bytes: usize,
}

#[derive(Clone)]
pub struct Node {
    pub(crate) inner: std::sync::Arc<crate::server::Inner>,
}

impl Node {
    /// This node's id.
    pub fn id(&self) -> proto::NodeId {
        self.inner.node
    }

    // ---- metadata ----
    /// Creates or replaces task definitions (`POST` and `PUT /api/metadata/taskdefs`).
    pub async fn put_event_handler(
        &self,
        handler: proto::model::EventHandler,
        create: bool,
    ) -> Result<()> {
        self.inner.put_event_handler(handler, create).await
    }
    pub async fn delete_event_handler(&self, name: &str) -> Result<()> {
        self.inner.delete_event_handler(name).await
    }
    pub async fn event_handlers(&self) -> Result<Vec<proto::model::EventHandler>> {
        self.inner.event_handlers().await
    }
    pub async fn event_handlers_for(
        &self,
        event: &str,
        active_only: bool,
    ) -> Result<Vec<proto::model::EventHandler>> {
        self.inner.event_handlers_for(event, active_only).await
    }
    pub async fn dead_letters(
        &self,
        limit: usize,
    ) -> Result<Vec<proto::record::dead_letter::DeadLetter>> {
        self.inner.dead_letters(limit).await
    }
    pub async fn remove_dead_letter(&self, event: &str, message_id: &str) -> Result<()> {
        self.inner.remove_dead_letter(event, message_id).await
    }
    pub async fn requeue_dead_letter(&self, event: &str, message_id: &str) -> Result<()> {
        self.inner.requeue_dead_letter(event, message_id).await
    }
    pub async fn event_executions(
        &self,
        handler: Option<&str>,
        limit: usize,
    ) -> Result<Vec<proto::model::EventExecution>> {
        self.inner.event_executions(handler, limit).await
    }
    /// Queues a message on Baton's own `conductor:{queue}`; answers its id. `traceparent` is
    /// the sender's W3C trace context, if any.
    pub async fn publish_event(
        &self,
        queue: &str,
        message_id: Option<String>,
        payload: serde_json::Value,
        traceparent: Option<&str>,
    ) -> Result<String> {
        self.inner
            .publish_event(queue, message_id, payload, traceparent)
            .await
    }
    pub async fn put_webhook(&self, webhook: proto::model::Webhook) -> Result<()> {
        self.inner.put_webhook(webhook).await
    }
    pub async fn webhooks(&self) -> Result<Vec<proto::model::Webhook>> {
        self.inner.webhooks().await
    }
    pub async fn delete_webhook(&self, name: &str) -> Result<()> {
        self.inner.delete_webhook(name).await
    }
    /// A signed webhook delivery; answers the message id and whether it was queued (not a
    /// replay the event gate dropped).
    pub async fn receive_webhook(
        &self,
        name: &str,
        timestamp: Option<&str>,
        signature: Option<&str>,
        delivery: Option<&str>,
        traceparent: Option<&str>,
        body: &[u8],
    ) -> Result<(String, bool)> {
        self.inner
            .receive_webhook(name, timestamp, signature, delivery, traceparent, body)
            .await
    }
    pub async fn put_schedule(&self, schedule: proto::model::WorkflowSchedule) -> Result<()> {
        self.inner.put_schedule(schedule).await
    }
    pub async fn schedules(&self) -> Result<Vec<proto::model::WorkflowSchedule>> {
        self.inner.schedules().await
    }
    pub async fn schedule(&self, name: &str) -> Result<proto::model::WorkflowSchedule> {
        self.inner.schedule(name).await
    }
    pub async fn set_schedule_paused(&self, name: &str, paused: bool) -> Result<()> {
        self.inner.set_schedule_paused(name, paused).await
    }
    pub async fn delete_schedule(&self, name: &str) -> Result<()> {
        self.inner.delete_schedule(name).await
    }
    pub async fn put_task_defs(&self, defs: Vec<TaskDef>) -> Result<()> {
        self.inner.put_task_defs(defs).await
    }
    pub fn task_def(&self, name: &str) -> Result<TaskDef> {
        self.inner.task_def(name)
    }
    pub fn task_defs(&self) -> Vec<TaskDef> {
        self.inner.task_defs()
    }
    pub async fn delete_task_def(&self, name: &str) -> Result<()> {
        self.inner.delete_task_def(name).await
    }
    /// Registers a workflow definition; with `overwrite` false an existing (name, version) is a 409.
    pub async fn put_workflow_def(&self, def: WorkflowDef, overwrite: bool) -> Result<()> {
        self.inner.put_workflow_def(def, overwrite).await
    }
    /// The given version, or the latest when `version` is None.
    pub fn workflow_def(&self, name: &str, version: Option<u32>) -> Result<WorkflowDef> {
        self.inner.workflow_def(name, version)
    }
    pub fn workflow_defs(&self) -> Vec<WorkflowDef> {
        self.inner.workflow_defs()
    }
    pub async fn delete_workflow_def(&self, name: &str, version: u32) -> Result<()> {
        self.inner.delete_workflow_def(name, version).await
    }

    // ---- workflows ----
    pub async fn start_workflow(&self, request: StartWorkflowRequest) -> Result<String> {
        self.inner.start_workflow(request).await
    }
    /// Starts a workflow and answers it once it finished, reached `until` or `wait` passed.
    pub async fn execute_workflow(
        &self,
        request: StartWorkflowRequest,
        until: &crate::server::wait::Until,
        wait: std::time::Duration,
    ) -> Result<Workflow> {
        self.inner.execute_workflow(request, until, wait).await
    }
    pub async fn workflow(&self, id: &str, include_tasks: bool) -> Result<Workflow> {
        self.inner.workflow(id, include_tasks).await
    }
    pub async fn pause(&self, id: &str) -> Result<()> {
        self.inner.command(id, engine::Input::Pause).await
    }
    pub async fn resume(&self, id: &str) -> Result<()> {
        self.inner.command(id, engine::Input::Resume).await
    }
    pub async fn terminate(&self, id: &str, reason: Option<String>) -> Result<()> {
        if let Some(r) = &reason {
            proto::check::text("reason", r, proto::limits::REASON_LEN_MAX)?;
        }
        self.inner
            .command(id, engine::Input::Terminate { reason })
            .await
    }
    pub async fn retry(&self, id: &str) -> Result<()> {
        self.inner.command(id, engine::Input::Retry).await
    }
    pub async fn restart(&self, id: &str, use_latest_definition: bool) -> Result<()> {
        self.inner.restart(id, use_latest_definition).await
    }
    /// Reruns in place; answers the workflow id.
    pub async fn rerun(&self, id: &str, request: RerunWorkflowRequest) -> Result<String> {
        self.inner
            .command(id, engine::Input::Rerun(request))
            .await?;
        Ok(id.to_owned())
    }
    pub async fn skip_task(
        &self,
        id: &str,
        reference: &str,
        request: SkipTaskRequest,
    ) -> Result<()> {
        let input = engine::Input::SkipTask {
            reference: reference.to_owned(),
            request,
        };
        self.inner.command(id, input).await
    }
    pub async fn decide(&self, id: &str) -> Result<()> {
        self.inner.command(id, engine::Input::Decide).await
    }
    /// Removes a workflow and its history (`DELETE /api/workflow/{id}/remove`).
    pub async fn remove(&self, id: &str) -> Result<()> {
        self.inner.remove(id).await
    }
    /// Ids of RUNNING workflows of a name (and version, if given).
    pub async fn running(&self, name: &str, version: Option<u32>) -> Result<Vec<String>> {
        self.inner.running(name, version).await
    }
    pub async fn search(&self, query: SearchQuery) -> Result<SearchResult<WorkflowSummary>> {
        self.inner.search(query).await
    }
    /// Workflows of a name with a correlation id (`GET /api/workflow/{name}/correlated/{id}`).
    pub async fn correlated(
        &self,
        name: &str,
        correlation_id: &str,
        include_closed: bool,
        include_tasks: bool,
    ) -> Result<Vec<Workflow>> {
        self.inner
            .correlated(name, correlation_id, include_closed, include_tasks)
            .await
    }

    // ---- tasks ----
    /// Leases up to `count` tasks of a type, waiting up to `wait_ms` for the first.
    pub async fn poll(&self, request: PollRequest) -> Result<Vec<Task>> {
        self.inner.poll(request).await
    }
    /// Records a worker's result; answers the task id.
    pub async fn update_task(&self, result: TaskResult) -> Result<String> {
        self.inner.update_task(result).await
    }
    /// Records a QUIC worker's result under its lease (`Conflict` once the lease has ended).
    pub async fn update_leased(
        &self,
        result: TaskResult,
        lease: proto::worker::Lease,
    ) -> Result<()> {
        self.inner.update_leased(result, lease).await
    }
    /// Records a result and leases the worker's next task of the same type, if one is ready.
    pub async fn update_task_v2(&self, result: TaskResult) -> Result<Option<Task>> {
        self.inner.update_task_v2(result).await
    }
    /// Updates the latest attempt of a reference name (`POST /api/tasks/{wf}/{ref}/{status}`).
    pub async fn update_task_by_ref(
        &self,
        workflow_id: &str,
        reference: &str,
        status: TaskStatus,
        output: Json,
        worker_id: Option<String>,
    ) -> Result<String> {
        self.inner
            .update_task_by_ref(workflow_id, reference, status, output, worker_id)
            .await
    }
    pub async fn task(&self, task_id: &str) -> Result<Task> {
        self.inner.task(task_id).await
    }
    pub async fn task_logs(&self, task_id: &str) -> Result<Vec<TaskExecLog>> {
        self.inner.task_logs(task_id).await
    }
    /// Appends a log line to a task (`POST /api/tasks/{taskId}/log`).
    pub async fn add_task_log(&self, task_id: &str, line: String) -> Result<()> {
        self.inner.add_task_log(task_id, line).await
    }
    /// Ready tasks per type (all types when `types` is empty).
    pub fn queue_sizes(&self, types: &[String]) -> BTreeMap<String, u64> {
        self.inner.queue_sizes(types)
    }
    pub async fn health(&self) -> Health {
        self.inner.health().await
    }
    /// Sets the storage-backed gauges before a scrape (see `crate::metrics`).
    pub fn observe_gauges(&self) {
        self.inner.observe_gauges()
    }
    /// Quarantined workflows of the partitions hosted here (see `partition::stored`).
    pub fn quarantine(&self) -> crate::error::Result<Vec<QuarantineEntry>> {
        self.inner.quarantine()
    }
    /// Deletes a quarantined workflow's entry for good (on its partition's leader).
    pub async fn drop_quarantined(&self, id: &str) -> crate::error::Result<()> {
        self.inner.drop_quarantined(id).await
    }
    /// A digest of every hosted group's state with the applied index it was taken at (replicas at
    /// the same index must agree).
    pub fn digests(&self) -> Vec<(String, Option<u64>, u64)> {
        let mut out = Vec::new();
        let hosted = self.inner.hosted();
        let groups = std::iter::once(&self.inner.meta).chain(hosted.iter().map(|p| &p.group));
        for g in groups {
            if let Ok((applied, digest)) = g.state_digest() {
                out.push((g.name().to_owned(), applied, digest));
            }
        }
        out
    }
    /// Every workflow record in this node's replica of partition `p` (none when it hosts no
    /// replica), read from local state: for the simulator's invariant checks and diagnostics.
    pub fn records(&self, p: u16) -> Vec<proto::record::WorkflowRecord> {
        let Some(partition) = self.inner.partition(proto::PartitionId(p)) else {
            return Vec::new();
        };
        crate::partition::stored::records(partition.state()).collect()
    }
    // ---- cluster administration ----
    /// Members and every group's leader, term, membership and replicas (asks every member).
    pub async fn cluster(&self) -> crate::server::ClusterStatus {
        self.inner.cluster_status().await
    }
    /// Adds a node (reachable at its peer address) to the cluster, as `--join` does.
    pub async fn add_node(&self, id: proto::NodeId, addr: std::net::SocketAddr) -> Result<()> {
        self.inner.add_node(id, addr).await
    }
    /// Drains a member (its replicas and leaderships move off), or makes it active again.
    pub async fn drain(&self, id: proto::NodeId, draining: bool) -> Result<()> {
        self.inner.set_draining(id, draining).await
    }
    /// Forgets a drained member that holds nothing any more.
    pub async fn remove_node(&self, id: proto::NodeId) -> Result<()> {
        self.inner.remove_node(id).await
    }
    /// Moves a partition's leadership to voter `to` (or the voter leading the fewest partitions);
    /// answers the new leader.
    pub async fn transfer(
        &self,
        partition: u16,
        to: Option<proto::NodeId>,
    ) -> Result<proto::NodeId> {
        self.inner.transfer(proto::PartitionId(partition), to).await
    }
    /// Snapshots every group hosted on this node (and compacts their logs).
    pub async fn snapshot(&self) -> Result<()> {
        self.inner.snapshot_all().await
    }
    /// The Raft status of every group on this node: the meta group, then the partitions in order.
    pub fn groups(&self) -> Vec<cluster::GroupStatus> {
        self.inner.group_statuses()
    }

    /// Storage flushes (fsyncs) this node asked for since it started.
    pub fn storage_flushes(&self) -> u64 {
        self.inner.db.flushes()
    }
    /// Workflows requests on this node wait for (execute requests, waits forwarded here).
    pub fn watched_workflows(&self) -> usize {
        self.inner.watched_workflows()
    }
    /// Polls parked on this node, waiting for tasks.
    pub fn parked_polls(&self) -> usize {
        self.inner.queues.parked()
    }
}
