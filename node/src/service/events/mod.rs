//! Event handlers: validated here and replicated through the meta group, like definitions.

mod consumers;
mod dead_letters;
mod lifecycle;
mod listeners;
pub(crate) use dead_letters::dead_letters_in;
mod outbox;
mod perform;
mod status;

use super::follow::follow;
use super::{Loops, Secrets, Tasks, Workflows};
use crate::error::{Error, Result};
use crate::events::eval::{self, condition_holds};
use crate::events::http::HttpCaller;
use crate::events::pool::ScriptPool;
use crate::events::process::ProcessRunner;
use crate::events::script::ScriptError;
use crate::events::{bus, GateEvent, Providers, CONDUCTOR};
use crate::host::{through_failover, Host};
use crate::partition::WorkflowOp;
use crate::partition::{keys, Partition};
use engine::{Effect, Input, PendingEvent};
use proto::limits::{EVENT_QUEUE_MAX, EXECUTIONS_MAX, NAME_LEN_MAX};
use proto::model::split_event;
use proto::model::{
    execution_id, Action, ActionType, EventExecution, EventHandler, ExecutionStatus, Json,
    StartWorkflowRequest, TaskDetails, TaskResult, TaskResultStatus,
};
use proto::peer::{Reply, Request};
use proto::record::{
    self, Dedup, EventSource, MetaCommand, MetaOutcome, PartitionCommand, PartitionOutcome,
    QueueMessage,
};
use proto::{PartitionId, TaskId, WorkflowId};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

/// Checks that `provider:queue` names a provider this node has enabled and a queue its broker
/// accepts (event handlers, and the sinks of EVENT tasks); `what` names the requester in errors.
pub(crate) fn check_event_target(
    providers: &Providers,
    what: &str,
    provider: &str,
    queue: &str,
) -> Result<()> {
    let broker = providers
        .check(provider)
        .map_err(|m| Error::Invalid(format!("{what}: {m}")))?;
    if let Some(b) = broker {
        crate::events::brokers::validate_queue(b, queue)
            .map_err(|e| Error::Invalid(format!("{what}: {e}")))?;
    }
    Ok(())
}

/// Checks that a handler's script condition parses (in a script host).
async fn check_handler_condition(h: &EventHandler, scripts: &ScriptPool) -> Result<()> {
    let scripted = h.evaluator_type.as_deref() != Some(eval::VALUE_PARAM);
    match h.condition.as_deref() {
        Some(c) if scripted && !c.trim().is_empty() => eval::check_condition(scripts, c)
            .await
            .map_err(|m| Error::Invalid(format!("event handler '{}': condition: {m}", h.name))),
        _ => Ok(()),
    }
}

/// Checks a handler before it is stored (its condition apart, see
/// [`check_handler_condition`]): every message names what is wrong.
pub(crate) fn check_handler(h: &EventHandler, providers: &Providers) -> Result<()> {
    let bad = |m: String| Err(Error::Invalid(m));
    if h.name.trim().is_empty() {
        return bad("Missing event handler name".into());
    }
    proto::check::name("event handler name", &h.name)?;
    let Some((provider, queue)) = h.provider_and_queue() else {
        return bad(format!(
            "event handler '{}': event '{}' is not of the form provider:queue",
            h.name, h.event
        ));
    };
    check_event_target(
        providers,
        &format!("event handler '{}'", h.name),
        provider,
        queue,
    )?;
    if h.actions.is_empty() {
        return bad(format!(
            "event handler '{}': No actions specified. Please specify at least one action",
            h.name
        ));
    }
    if let Some(e) = h.evaluator_type.as_deref() {
        if !eval::EVALUATORS.contains(&e) {
            return bad(format!(
                "event handler '{}': evaluatorType '{e}' is not supported; Baton supports {}",
                h.name,
                eval::EVALUATORS.join(", ")
            ));
        }
    }
    for (i, a) in h.actions.iter().enumerate() {
        let missing = |what: &str| {
            Err(Error::Invalid(format!(
                "event handler '{}': action {i} ({}) {what}",
                h.name,
                a.action.name()
            )))
        };
        match a.action {
            ActionType::StartWorkflow => match &a.start_workflow {
                None => return missing("has no start_workflow details"),
                Some(s) if s.name.trim().is_empty() => return missing("names no workflow"),
                Some(_) => {}
            },
            ActionType::CompleteTask | ActionType::FailTask => {
                let details = if a.action == ActionType::CompleteTask {
                    &a.complete_task
                } else {
                    &a.fail_task
                };
                match details {
                    None => return missing("has no task details"),
                    Some(d)
                        if d.task_id.is_none()
                            && (d.workflow_id.is_none() || d.task_ref_name.is_none()) =>
                    {
                        return missing("needs taskId, or workflowId and taskRefName")
                    }
                    Some(_) => {}
                }
            }
            ActionType::TerminateWorkflow => match &a.terminate_workflow {
                Some(t) if !t.workflow_id.trim().is_empty() => {}
                _ => return missing("needs terminate_workflow.workflowId"),
            },
            ActionType::UpdateWorkflowVariables => match &a.update_workflow_variables {
                Some(u) if !u.workflow_id.trim().is_empty() => {}
                _ => return missing("needs update_workflow_variables.workflowId"),
            },
        }
    }
    Ok(())
}

impl Events {
    /// `POST /api/event` (`create`) and `PUT /api/event`.
    pub async fn put_event_handler(&self, handler: EventHandler, create: bool) -> Result<()> {
        check_handler(&handler, &self.providers)?;
        check_handler_condition(&handler, &self.scripts).await?;
        let name = handler.name.clone();
        match self
            .host
            .propose_meta(MetaCommand::PutEventHandler {
                handler: Box::new(handler),
                create,
            })
            .await?
        {
            MetaOutcome::Applied => Ok(()),
            MetaOutcome::Exists => Err(Error::Conflict(format!(
                "EventHandler with name {name} already exists!"
            ))),
            // `propose_meta` answers an undecodable command as an error.
            _ => Err(Error::NotFound(format!(
                "EventHandler with name {name} not found!"
            ))),
        }
    }

    pub async fn delete_event_handler(&self, name: &str) -> Result<()> {
        match self
            .host
            .propose_meta(MetaCommand::DeleteEventHandler {
                name: name.to_owned(),
            })
            .await?
        {
            MetaOutcome::Applied => Ok(()),
            _ => Err(Error::NotFound(format!(
                "EventHandler with name {name} not found!"
            ))),
        }
    }

    pub async fn event_handlers(&self) -> Result<Vec<EventHandler>> {
        self.host.catch_up_meta().await?;
        Ok(self.host.defs.event_handlers())
    }

    /// The handlers of one event (`provider:queue`), only the active ones when `active_only`.
    pub async fn event_handlers_for(
        &self,
        event: &str,
        active_only: bool,
    ) -> Result<Vec<EventHandler>> {
        self.host.catch_up_meta().await?;
        Ok(self
            .host
            .defs
            .event_handlers()
            .into_iter()
            .filter(|h| h.event == event && (h.active || !active_only))
            .collect())
    }
}

/// The events service: event handlers (replicated through the meta group, like definitions),
/// the event gate, the consumers of Baton's own queues and the brokers' (`consumers`), dead
/// letters, and the outbox of effects a workflow addresses outside itself (`outbox`).
pub struct Events {
    pub(crate) host: Arc<Host>,
    workflows: Arc<Workflows>,
    tasks: Arc<Tasks>,
    pub(crate) providers: Providers,
    pub(crate) scripts: ScriptPool,
    /// HTTP tasks' calls.
    http: HttpCaller,
    /// The secrets HTTP tasks' calls name.
    secrets: Arc<Secrets>,
    /// The DSL's `run` processes.
    processes: ProcessRunner,
    /// Why the last handling of a message failed, by (event, message id), until its next
    /// attempt records it (see `dead_letters`).
    failures: Mutex<BTreeMap<(String, String), String>>,
    loops: Loops,
}

/// What the events service is made of.
pub(crate) struct Parts {
    pub host: Arc<Host>,
    pub workflows: Arc<Workflows>,
    pub tasks: Arc<Tasks>,
    pub providers: Providers,
    pub scripts: ScriptPool,
    pub http: HttpCaller,
    pub secrets: Arc<Secrets>,
    pub processes: ProcessRunner,
}

/// How many failure reasons [`Events`] keeps for messages awaiting their next attempt; past it
/// they are forgotten (a dead letter then says the last reason is unknown).
const FAILURES_REMEMBERED: usize = 4_096;

impl Events {
    /// The service; it starts its consumers (following leadership) and the outbox.
    pub(crate) fn start(parts: Parts, outbox: mpsc::Receiver<Effect>) -> Arc<Self> {
        let events = Arc::new(Self {
            host: parts.host,
            workflows: parts.workflows,
            tasks: parts.tasks,
            providers: parts.providers,
            scripts: parts.scripts,
            http: parts.http,
            secrets: parts.secrets,
            processes: parts.processes,
            failures: Mutex::default(),
            loops: Loops::default(),
        });
        let weak = Arc::downgrade(&events);
        events.loops.add(tokio::spawn(follow(weak.clone())));
        events.loops.add(tokio::spawn(outbox::run(weak, outbox)));
        events
    }

    /// Stops the scripts first (one still running must hold nothing below up), then the loops.
    pub(crate) fn shutdown(&self) {
        self.scripts.shutdown();
        self.loops.stop();
    }

    /// Remembers why a message's handling failed, for its next attempt.
    pub(crate) fn remember_failure(&self, message: &Message, reason: String) {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        if failures.len() >= FAILURES_REMEMBERED {
            failures.clear();
        }
        failures.insert((message.event.clone(), message.id.clone()), reason);
    }

    /// Why a message's last handling failed, if this node remembers.
    pub(crate) fn take_failure(&self, message: &Message) -> Option<String> {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        failures.remove(&(message.event.clone(), message.id.clone()))
    }

    pub(crate) fn dedup_window_ms(&self) -> i64 {
        self.providers.dedup_window_ms()
    }
}

/// One message for the handlers of its event, whatever provider it came from.
#[derive(Debug, Clone)]
pub(crate) struct Message {
    /// Stable across redelivery.
    pub id: String,
    /// `provider:queue`.
    pub event: String,
    /// The subject or routing key a broker delivered it under (none from Baton's own queues).
    pub subject: Option<String>,
    pub payload: Value,
    /// W3C trace id; recorded with every execution.
    pub trace_id: String,
}

/// What to tell the provider about a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Every action reached a final record (or the message was set aside): acknowledge.
    Ack,
    /// Some action failed transiently (or its record could not be written): deliver again.
    /// Says why.
    Retry(String),
}

/// Whether an action's error may go away on a retry.
fn transient(e: &Error) -> bool {
    matches!(e, Error::Unavailable(_) | Error::Internal(_))
}

/// Execution records in these replicas, oldest partition first, at most `limit`.
pub(crate) fn executions_in(
    replicas: &[Arc<Partition>],
    handler: Option<&str>,
    limit: usize,
) -> Result<Vec<EventExecution>> {
    let prefix = match handler {
        Some(h) => keys::execution(h, ""),
        None => keys::EXECUTION_PREFIX.to_vec(),
    };
    let mut out = Vec::new();
    for p in replicas {
        for kv in p.state().scan_prefix(&prefix) {
            let (_, v) = kv.map_err(crate::host::storage)?;
            if let Ok(e) = record::decode::<EventExecution>(&v) {
                out.push(e);
            }
            if out.len() >= limit {
                return Ok(out);
            }
        }
    }
    Ok(out)
}

impl Events {
    /// The partition that holds a message's execution records (and its queue row, unless the
    /// event gate placed it by fingerprint).
    pub(crate) fn message_partition(&self, message_id: &str) -> PartitionId {
        self.host
            .key_partition(proto::hash::stable_hash(message_id.as_bytes()))
    }

    /// Queues a message on one of Baton's own queues (`conductor:{queue}`); answers its id.
    /// `traceparent` is the sender's W3C trace context, if any.
    pub async fn publish_event(
        &self,
        queue: &str,
        message_id: Option<String>,
        payload: Value,
        traceparent: Option<&str>,
    ) -> Result<String> {
        if queue.trim().is_empty() || queue.len() > NAME_LEN_MAX {
            return Err(Error::Invalid(format!(
                "queue name must be 1 to {NAME_LEN_MAX} characters"
            )));
        }
        let event = GateEvent {
            source: EventSource::Queue,
            event: format!("{CONDUCTOR}:{queue}"),
            id: message_id,
            payload,
            trace_id: traceparent.and_then(crate::events::trace_id_of),
            dedup_window_ms: None,
        };
        self.admit(event).await.map(|(id, _)| id)
    }

    /// The event gate: every event for a provider Baton keeps itself (`conductor`, `webhook`)
    /// comes in here, whatever its source. It checks the event, names it (its id, else a new
    /// one; its trace id, else one derived from the id), drops a gated event whose content
    /// (event and payload) it saw within the dedup window, and queues the rest durably with
    /// their source's priority. Answers the message id and whether it was queued.
    pub(crate) async fn admit(&self, event: GateEvent) -> Result<(String, bool)> {
        proto::check::value("event payload", &event.payload)?;
        let body = serde_json::to_vec(&event.payload).unwrap_or_default();
        let id = match event.id.filter(|m| !m.trim().is_empty()) {
            Some(m) if m.len() > NAME_LEN_MAX => {
                return Err(Error::Invalid(format!(
                    "messageId is longer than {NAME_LEN_MAX} characters"
                )))
            }
            Some(m) => m,
            None => self.workflows.new_workflow_id().to_string(),
        };
        let now = self.host.clock.now_ms();
        let dedup = event.dedup_window_ms.map(|window_ms| Dedup {
            fingerprint: proto::hash::fnv1a(
                proto::hash::stable_hash(event.event.as_bytes()),
                &body,
            ),
            now,
            window_ms,
        });
        // A gated message is queued where its fingerprint is kept, so that copies meet.
        let partition = match &dedup {
            Some(d) => self.host.key_partition(d.fingerprint),
            None => self.message_partition(&id),
        };
        let source = event.source.name();
        let message = QueueMessage {
            trace_id: event
                .trace_id
                .unwrap_or_else(|| crate::events::derived_trace_id(&id)),
            id: id.clone(),
            payload: event.payload,
            published: now,
            source: event.source,
            priority: event.source.priority(),
        };
        let command = PartitionCommand::Publish {
            queue: event.event.clone(),
            message: Box::new(message),
            dedup,
        };
        let outcome = self.host.partition_command(partition, command).await?;
        if let PartitionOutcome::Published { .. } | PartitionOutcome::Duplicate = outcome {
            let queued = matches!(outcome, PartitionOutcome::Published { .. });
            crate::metrics::event_offered(source, queued);
        }
        match outcome {
            PartitionOutcome::Published { .. } => Ok((id, true)),
            PartitionOutcome::Duplicate => Ok((id, false)),
            PartitionOutcome::QueueFull => Err(Error::Unavailable(format!(
                "event queue {} is full ({EVENT_QUEUE_MAX} messages in one partition); retry later",
                event.event
            ))),
            other => Err(Error::Internal(format!(
                "unexpected publish outcome {other:?}"
            ))),
        }
    }

    /// Execution records, from every partition's leader (or local replica), at most `limit`.
    pub async fn event_executions(
        &self,
        handler: Option<&str>,
        limit: usize,
    ) -> Result<Vec<EventExecution>> {
        let limit = limit.clamp(1, EXECUTIONS_MAX);
        through_failover(|| async {
            let mut out = self
                .host
                .list_every_partition(
                    |hosted| executions_in(hosted, handler, limit),
                    |partitions| Request::Executions {
                        partitions,
                        handler: handler.map(str::to_owned),
                        limit,
                    },
                    |reply| match reply {
                        Reply::Executions(e) => Ok(e),
                        other => Err(other),
                    },
                )
                .await?;
            out.truncate(limit);
            Ok(out)
        })
        .await
    }

    /// Runs every active handler of the message's event on it.
    pub(crate) async fn handle_message(&self, message: &Message) -> Verdict {
        // Every handler written before the message arrived must see it: the local replica of
        // the meta group may lag its leader (a node that just took over a partition).
        if let Err(e) = self.host.catch_up_meta().await {
            tracing::debug!(message = %message.id, error = %e, "handlers not current; the message will be delivered again");
            return Verdict::Retry(format!("the handlers could not be read: {e}"));
        }
        let handlers: Vec<EventHandler> = self
            .host
            .defs
            .event_handlers()
            .into_iter()
            .filter(|h| h.active && h.event == message.event)
            .collect();
        let mut verdict = Verdict::Ack;
        for h in &handlers {
            if let Verdict::Retry(reason) = self.run_handler(h, message).await {
                verdict = Verdict::Retry(format!("handler {}: {reason}", h.name));
            }
        }
        if let Verdict::Retry(reason) = self.offer_to_listeners(message).await {
            verdict = Verdict::Retry(reason);
        }
        verdict
    }

    /// Writes an execution record on the message's partition; answers what is stored.
    async fn record_execution(
        &self,
        handler: &str,
        execution: EventExecution,
        create: bool,
    ) -> Result<EventExecution> {
        let partition = self.message_partition(&execution.message_id);
        let command = PartitionCommand::PutExecution {
            handler: handler.to_owned(),
            execution: Box::new(execution),
            create,
        };
        match self.host.partition_command(partition, command).await? {
            PartitionOutcome::Execution(e) => Ok(*e),
            other => Err(Error::Internal(format!(
                "unexpected execution outcome {other:?}"
            ))),
        }
    }

    /// The execution record of action `index` of `h` for `message`.
    fn execution(
        &self,
        h: &EventHandler,
        message: &Message,
        index: usize,
        (status, action): (ExecutionStatus, ActionType),
        mut output: Json,
    ) -> EventExecution {
        output.insert("traceId".into(), message.trace_id.clone().into());
        EventExecution {
            id: execution_id(&message.id, index),
            message_id: message.id.clone(),
            name: h.name.clone(),
            event: message.event.clone(),
            created: self.host.clock.now_ms(),
            status,
            action,
            output,
        }
    }

    async fn run_handler(&self, h: &EventHandler, message: &Message) -> Verdict {
        let first = h
            .actions
            .first()
            .map_or(ActionType::StartWorkflow, |a| a.action);
        // As in Conductor, the condition sees the payload with its inline JSON expanded.
        let expanded = eval::expand_inline_json(&message.payload);
        let evaluator = h.evaluator_type.as_deref();
        let scripts = &self.scripts;
        let holds = condition_holds(scripts, evaluator, h.condition.as_deref(), &expanded).await;
        let skip = match holds {
            Ok(true) => None,
            Ok(false) => Some((ExecutionStatus::Skipped, Json::new())),
            // Not the script's fault (no host could run it): deliver again.
            Err(e @ ScriptError::HostFailed(_)) => {
                tracing::warn!(handler = %h.name, message = %message.id, error = %e, "condition not evaluated; the message will be delivered again");
                return Verdict::Retry(format!("condition: {e}"));
            }
            // A condition that cannot be evaluated on this payload never will be.
            Err(e) => Some((ExecutionStatus::Failed, error_output(&e.to_string()))),
        };
        if let Some((status, output)) = skip {
            return self.record_skip(h, message, (status, first), output).await;
        }
        let mut verdict = Verdict::Ack;
        for (index, action) in h.actions.iter().enumerate() {
            if let Err(retry) = self.run_recorded(h, message, index, action).await {
                verdict = retry;
            }
        }
        verdict
    }

    /// Records that the handler did not run its actions on `message` (its condition was false, or
    /// failed on this payload).
    async fn record_skip(
        &self,
        h: &EventHandler,
        message: &Message,
        (status, first): (ExecutionStatus, ActionType),
        output: Json,
    ) -> Verdict {
        let outcome = match status {
            ExecutionStatus::Skipped => "skipped",
            _ => "failed",
        };
        crate::metrics::event_action(first.name(), outcome);
        let skipped = self.execution(h, message, 0, (status, first), output);
        match self.record_execution(&h.name, skipped, true).await {
            Ok(_) => Verdict::Ack,
            Err(e) => {
                tracing::warn!(handler = %h.name, message = %message.id, error = %e, "could not record a skipped message");
                Verdict::Retry(format!("could not record the execution: {e}"))
            }
        }
    }

    /// Runs action `index` between its two execution records: the claim (an action whose record
    /// is already final is not run again) and its end. `Err`: the message must be delivered again.
    async fn run_recorded(
        &self,
        h: &EventHandler,
        message: &Message,
        index: usize,
        action: &Action,
    ) -> Result<(), Verdict> {
        let claim = (ExecutionStatus::InProgress, action.action);
        let claim = self.execution(h, message, index, claim, Json::new());
        match self.record_execution(&h.name, claim, true).await {
            Ok(stored) if stored.status.is_final() => return Ok(()),
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(handler = %h.name, message = %message.id, error = %e, "could not record an action; the message will be delivered again");
                return Err(Verdict::Retry(format!(
                    "action {index}: could not record it: {e}"
                )));
            }
        }
        let key = format!("event:{}:{}", h.name, execution_id(&message.id, index));
        let name = action.action.name();
        let (status, output) = match self.run_action(h, action, message, &key).await {
            Ok(output) => {
                crate::failpoint::hit("event-after-action");
                crate::metrics::event_action(name, "completed");
                (ExecutionStatus::Completed, output)
            }
            Err(e) if transient(&e) => {
                tracing::info!(handler = %h.name, message = %message.id, error = %e, "action failed for now; the message will be delivered again");
                crate::metrics::event_action(name, "retried");
                return Err(Verdict::Retry(format!("action {index}: {e}")));
            }
            Err(e) => {
                crate::metrics::event_action(name, "failed");
                (ExecutionStatus::Failed, error_output(&e.to_string()))
            }
        };
        let done = self.execution(h, message, index, (status, action.action), output);
        if let Err(e) = self.record_execution(&h.name, done, false).await {
            tracing::warn!(handler = %h.name, message = %message.id, error = %e, "could not record an action's end; the message will be delivered again");
            return Err(Verdict::Retry(format!(
                "action {index}: could not record its end: {e}"
            )));
        }
        Ok(())
    }

    /// Performs one action; `key` (the record's name) makes a repeat harmless.
    async fn run_action(
        &self,
        h: &EventHandler,
        action: &Action,
        message: &Message,
        key: &str,
    ) -> Result<Json> {
        let expanded;
        let payload = if action.expand_inline_json {
            expanded = eval::expand_inline_json(&message.payload);
            &expanded
        } else {
            &message.payload
        };
        match action.action {
            ActionType::StartWorkflow => {
                self.start_from_event(h, action, message, payload, key)
                    .await
            }
            ActionType::CompleteTask | ActionType::FailTask => {
                self.update_from_event(h, action, message, payload).await
            }
            ActionType::TerminateWorkflow => self.terminate_from_event(h, action, payload).await,
            ActionType::UpdateWorkflowVariables => {
                let details = action.update_workflow_variables.as_ref().ok_or_else(|| {
                    Error::Invalid("update_workflow_variables details are missing".into())
                })?;
                let u = eval::resolve_details(details, payload).map_err(Error::Invalid)?;
                let input = Input::UpdateVariables {
                    variables: u.variables,
                    append_array: u.append_array,
                    key: key.to_owned(),
                };
                self.workflows.command(&u.workflow_id, input).await?;
                Ok(Json::from_iter([(
                    "workflowId".into(),
                    u.workflow_id.into(),
                )]))
            }
        }
    }

    /// `start_workflow`: starts the workflow once per action (the key is its idempotency key).
    async fn start_from_event(
        &self,
        h: &EventHandler,
        action: &Action,
        message: &Message,
        payload: &serde_json::Value,
        key: &str,
    ) -> Result<Json> {
        let details = action
            .start_workflow
            .as_ref()
            .ok_or_else(|| Error::Invalid("start_workflow details are missing".into()))?;
        let mut s = eval::resolve_details(details, payload).map_err(Error::Invalid)?;
        add_event_fields(&mut s.input, message);
        let request = StartWorkflowRequest {
            name: s.name,
            version: s.version,
            correlation_id: s.correlation_id,
            input: s.input,
            task_to_domain: s.task_to_domain,
            idempotency_key: Some(idempotency_key(key)),
            ..Default::default()
        };
        let id = self
            .workflows
            .start_workflow_from(request, Some(&h.event))
            .await?;
        Ok(Json::from_iter([("workflowId".into(), id.into())]))
    }

    /// `complete_task` / `fail_task`: updates the task the details name.
    async fn update_from_event(
        &self,
        h: &EventHandler,
        action: &Action,
        message: &Message,
        payload: &serde_json::Value,
    ) -> Result<Json> {
        let (details, status) = if action.action == ActionType::CompleteTask {
            (&action.complete_task, TaskResultStatus::Completed)
        } else {
            (&action.fail_task, TaskResultStatus::Failed)
        };
        let details = details
            .as_ref()
            .ok_or_else(|| Error::Invalid("task details are missing".into()))?;
        let mut d = eval::resolve_details(details, payload).map_err(Error::Invalid)?;
        add_event_fields(&mut d.output, message);
        let (workflow_id, task_id) = self.event_task(&d).await?;
        let result = TaskResult {
            workflow_instance_id: workflow_id.clone(),
            task_id: task_id.clone(),
            status,
            output_data: d.output,
            reason_for_incompletion: d.reason_for_incompletion,
            worker_id: Some(format!("event:{}", h.name)),
            ..Default::default()
        };
        self.tasks.update_task(result).await?;
        Ok(Json::from_iter([
            ("workflowId".into(), workflow_id.into()),
            ("taskId".into(), task_id.into()),
        ]))
    }

    /// `terminate_workflow`; a workflow already finished (perhaps by this very action before a
    /// crash) is left as it is.
    async fn terminate_from_event(
        &self,
        h: &EventHandler,
        action: &Action,
        payload: &serde_json::Value,
    ) -> Result<Json> {
        let details = action
            .terminate_workflow
            .as_ref()
            .ok_or_else(|| Error::Invalid("terminate_workflow details are missing".into()))?;
        let t = eval::resolve_details(details, payload).map_err(Error::Invalid)?;
        let reason = t
            .termination_reason
            .or_else(|| Some(format!("terminated by event handler {}", h.name)));
        match self
            .workflows
            .command(&t.workflow_id, Input::Terminate { reason })
            .await
        {
            Ok(()) | Err(Error::Conflict(_)) => {}
            Err(e) => return Err(e),
        }
        Ok(Json::from_iter([(
            "workflowId".into(),
            t.workflow_id.into(),
        )]))
    }

    /// The workflow and task an action's task details name.
    async fn event_task(&self, d: &TaskDetails) -> Result<(String, String)> {
        if let Some(task_id) = d.task_id.as_deref().filter(|t| !t.is_empty()) {
            let task = TaskId::parse(task_id).map_err(|e| Error::Invalid(e.to_string()))?;
            let workflow = self.host.task_owner(&task).await?;
            return Ok((workflow.to_string(), task_id.to_owned()));
        }
        let (Some(w), Some(r)) = (d.workflow_id.as_deref(), d.task_ref_name.as_deref()) else {
            return Err(Error::Invalid(
                "the action needs taskId, or workflowId and taskRefName".into(),
            ));
        };
        let id = super::workflows::parse_workflow_id(w)?;
        let record = self.host.record(&id).await?;
        let task = super::tasks::task_by_ref(&record.workflow, r)?;
        Ok((w.to_owned(), task.task_id.to_string()))
    }
}

/// How long an EVENT task's publish keeps retrying a broker that does not answer.
const PUBLISH_RETRY_MS: u64 = 30_000;

/// How long one publication of an EVENT task (publish and report) may take in all. One that
/// outlives it is abandoned, so that the node performs the next one (the outbox skips a repeat
/// of a task whose publication is still in flight on this node); the task's `EventPublish`
/// timer repeats it.
const PUBLICATION_MS: u64 = 2 * PUBLISH_RETRY_MS;

impl Events {
    /// Publishes an EVENT task's message and reports the outcome to its workflow, within
    /// [`PUBLICATION_MS`].
    pub(crate) async fn publish_task_event(&self, workflow_id: &WorkflowId, event: PendingEvent) {
        let task = event.task_id.clone();
        let limit = std::time::Duration::from_millis(PUBLICATION_MS);
        if tokio::time::timeout(limit, self.publish_and_report(workflow_id, event))
            .await
            .is_err()
        {
            tracing::warn!(workflow = %workflow_id, %task, "an event's publication timed out; its timer repeats it");
        }
    }

    /// Publishes an EVENT task's message and reports the outcome to its workflow. A broker that
    /// does not answer is retried for a while; a sink that cannot work fails the task.
    async fn publish_and_report(&self, workflow_id: &WorkflowId, event: PendingEvent) {
        let deadline =
            tokio::time::Instant::now() + std::time::Duration::from_millis(PUBLISH_RETRY_MS);
        let error = loop {
            match self.publish_to_sink(&event).await {
                Ok(()) => break None,
                Err(e) if transient(&e) && tokio::time::Instant::now() < deadline => {
                    tracing::debug!(task = %event.task_id, sink = %event.sink, error = %e, "publish failed; retrying");
                    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
                }
                Err(e) => break Some(format!("could not publish to {}: {e}", event.sink)),
            }
        };
        let input = Input::EventPublished {
            task_id: event.task_id.clone(),
            error,
        };
        if let Err(e) = self
            .host
            .route_op(workflow_id, WorkflowOp::Input(Box::new(input)))
            .await
        {
            // The task stays SCHEDULED; the workflow's next write (its `EventPublish` timer
            // makes one) or a new leader publishes again.
            tracing::warn!(workflow = %workflow_id, task = %event.task_id, error = %e, "could not report a published event");
        }
    }

    async fn publish_to_sink(&self, event: &PendingEvent) -> Result<()> {
        let workflow_id = event
            .payload
            .get("workflowInstanceId")
            .and_then(Value::as_str);
        let id = event.task_id.to_string();
        self.publish_message(&event.sink, id, &event.payload, workflow_id)
            .await
    }

    /// Publishes `payload` under the message id `id` to `sink` (`provider:queue`): Baton's own
    /// queues through the event gate, a broker with a confirmed publish. `workflow_id` is the
    /// workflow it comes from, whose id is the message's trace id.
    async fn publish_message(
        &self,
        sink: &str,
        id: String,
        payload: &Json,
        workflow_id: Option<&str>,
    ) -> Result<()> {
        let (provider, queue) = split_event(sink)
            .ok_or_else(|| Error::Invalid(format!("sink '{sink}' is not provider:queue")))?;
        if provider == bus::BUS_PROVIDER {
            let bus = self.providers.dsl_bus();
            bus.check_type(queue).map_err(Error::Invalid)?;
            let resolved = bus.event(queue);
            return Box::pin(self.publish_message(&resolved, id, payload, workflow_id)).await;
        }
        let payload = Value::Object(payload.clone());
        match self.providers.check(provider).map_err(Error::Invalid)? {
            None => {
                // The workflow's id, without its dashes, is a W3C-shaped trace id.
                let trace_id = workflow_id.map(|w| w.replace('-', ""));
                let gated = GateEvent {
                    source: EventSource::Task,
                    event: format!("{provider}:{queue}"),
                    id: Some(id),
                    payload,
                    trace_id,
                    dedup_window_ms: None,
                };
                self.admit(gated).await.map(|_| ())
            }
            Some(broker) => {
                let bytes = serde_json::to_vec(&payload)
                    .map_err(|e| Error::Internal(format!("event payload: {e}")))?;
                self.providers
                    .brokers
                    .publish(broker, queue, Some(&id), &bytes)
                    .await
                    .map_err(|e| Error::Unavailable(e.to_string()))
            }
        }
    }
}

/// An idempotency key within the start API's limit: the record's name, hashed when too long.
fn idempotency_key(key: &str) -> String {
    if key.len() <= 200 {
        return key.to_owned();
    }
    let hi = proto::hash::stable_hash(key.as_bytes());
    let lo = proto::hash::fnv1a(hi, key.as_bytes());
    format!("event:{hi:016x}{lo:016x}")
}

fn error_output(message: &str) -> Json {
    let mut out = Json::new();
    out.insert("error".into(), message.into());
    out
}

/// The message's id and event name, as Conductor adds them to what an action passes on.
fn add_event_fields(map: &mut Json, message: &Message) {
    map.insert(
        "conductor.event.messageId".into(),
        message.id.clone().into(),
    );
    map.insert("conductor.event.name".into(), message.event.clone().into());
}
