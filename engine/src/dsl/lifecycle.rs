//! The DSL's lifecycle CloudEvents (`io.serverlessworkflow.workflow.*.v1` and
//! `io.serverlessworkflow.task.*.v1`), derived from what one decision changed: the committed
//! record before it and the record it leads to. When the runtime records them
//! ([`crate::Catalog::lifecycle_events`]), they are appended to the new record's
//! [`LifecycleOutbox`], which the leader publishes from (see `proto::record::lifecycle`).
//!
//! Workflow events: `started` (its first record), `suspended`, `resumed`, `completed` (with the
//! output), `faulted` (with the error), `cancelled`, and `correlation-started` /
//! `correlation-completed` when a `listen` begins to wait for events and when it has consumed
//! what it waited for (with the correlation keys its events resolved). Task events, per task
//! record: `created`, `started`, `completed`, `faulted` (with the error), `cancelled`,
//! `retried` for a task created as another try of one that failed, and `suspended` /
//! `resumed` for every task not ended when the instance is suspended or resumed.

use super::instance::{instance_error, is_dsl};
use super::run::{iso8601, LISTEN_TASK_TYPE};
use crate::{Decision, NowMs};
use proto::model::{Task, TaskStatus, Workflow, WorkflowStatus};
use proto::record::WorkflowRecord;
use proto::TaskId;
use serde_json::{json, Value};
use std::collections::BTreeMap;

const WORKFLOW: &str = "io.serverlessworkflow.workflow";
const TASK: &str = "io.serverlessworkflow.task";

/// Appends to the decided record the lifecycle events of the change from `before` (`None`: a
/// start) to it, when the runtime records them; `correlated` holds the correlation keys of the
/// `listen` tasks the decision completed, by task.
pub(crate) fn note(
    before: Option<&WorkflowRecord>,
    decision: &mut Decision,
    now: NowMs,
    catalog: &dyn crate::Catalog,
    correlated: &BTreeMap<TaskId, Value>,
) {
    let Some(after) = decision.record.as_mut() else {
        return;
    };
    if !is_dsl(&after.workflow) || !catalog.lifecycle_events() {
        return;
    }
    let events = changes(
        before.map(|r| &r.workflow),
        &after.workflow,
        now,
        correlated,
    );
    if events.is_empty() {
        return;
    }
    let instance = after.workflow.workflow_id.to_string();
    let outbox = after.lifecycle.get_or_insert_with(Default::default);
    for event in events {
        outbox.push(&instance, event);
    }
}

/// The events of the change from `before` to `after`, in order: the start, the tasks', the end.
fn changes(
    before: Option<&Workflow>,
    after: &Workflow,
    now: NowMs,
    correlated: &BTreeMap<TaskId, Value>,
) -> Vec<Value> {
    let envelope = Envelope::of(after, now);
    let mut out = Vec::new();
    let was = before.map(|w| w.status);
    let status = after.status;
    if was.is_none() || (was.is_some_and(|s| s.is_terminal()) && !status.is_terminal()) {
        out.push(envelope.workflow("started", json!({"startedAt": envelope.time})));
    }
    for (from, to, kind) in [
        (WorkflowStatus::Running, WorkflowStatus::Paused, "suspended"),
        (WorkflowStatus::Paused, WorkflowStatus::Running, "resumed"),
    ] {
        if was == Some(from) && status == to {
            let field = format!("{kind}At");
            out.push(envelope.workflow(kind, json!({ field.clone(): envelope.time })));
            let open = after.tasks.iter().filter(|t| !t.status.is_terminal());
            for task in open {
                let data = json!({ field.clone(): envelope.time });
                out.push(envelope.task(kind, &task.reference_task_name, data));
            }
        }
    }
    for task in &after.tasks {
        let prior = before.and_then(|b| b.tasks.iter().find(|t| t.task_id == task.task_id));
        let retried = prior.is_none() && follows_a_fault(&after.tasks, task);
        task_changes(&envelope, prior, task, retried, &mut out);
        if task.task_type == LISTEN_TASK_TYPE {
            correlation(&envelope, prior, task, correlated, &mut out);
        }
    }
    if status.is_terminal() && was.is_none_or(|s| !s.is_terminal()) {
        out.push(end_event(&envelope, after));
    }
    out
}

/// The workflow's correlation events of a `listen` task: `correlation-started` when it is
/// created, `correlation-completed` when it completes, with the keys its events resolved.
fn correlation(
    envelope: &Envelope,
    prior: Option<&Task>,
    task: &Task,
    correlated: &BTreeMap<TaskId, Value>,
    out: &mut Vec<Value>,
) {
    if prior.is_none() {
        out.push(envelope.workflow("correlation-started", json!({"startedAt": envelope.time})));
    }
    let completes = task.status == TaskStatus::Completed;
    if completes && prior.is_none_or(|t| t.status != TaskStatus::Completed) {
        let keys = correlated.get(&task.task_id).cloned();
        let data =
            json!({"completedAt": envelope.time, "correlationKeys": keys.unwrap_or(json!({}))});
        out.push(envelope.workflow("correlation-completed", data));
    }
}

/// Whether `task` is another run of a task whose earlier run faulted: a `try`'s retry, a
/// worker task's retry.
fn follows_a_fault(tasks: &[Task], task: &Task) -> bool {
    tasks.iter().any(|t| {
        t.reference_task_name == task.reference_task_name
            && (t.iteration, t.retry_count) < (task.iteration, task.retry_count)
            && matches!(
                t.status,
                TaskStatus::Failed | TaskStatus::FailedWithTerminalError | TaskStatus::TimedOut
            )
    })
}

/// A task's events from its state `prior` (`None`: created by this decision, `retried` when it
/// runs again what faulted) to `task`.
fn task_changes(
    envelope: &Envelope,
    prior: Option<&Task>,
    task: &Task,
    retried: bool,
    out: &mut Vec<Value>,
) {
    let at = task.reference_task_name.as_str();
    let was = prior.map(|t| t.status);
    if was.is_none() {
        let (kind, field) = if retried {
            ("retried", "retriedAt")
        } else {
            ("created", "createdAt")
        };
        out.push(envelope.task(kind, at, json!({ field: envelope.time })));
    }
    let started = |s: TaskStatus| s != TaskStatus::Scheduled;
    if was.is_none_or(|s| !started(s))
        && started(task.status)
        && task.status != TaskStatus::Canceled
    {
        out.push(envelope.task("started", at, json!({"startedAt": envelope.time})));
    }
    if task.status.is_terminal() && was.is_none_or(|s| !s.is_terminal()) {
        let (kind, data) = match task.status {
            TaskStatus::Canceled => ("cancelled", json!({"cancelledAt": envelope.time})),
            TaskStatus::Failed | TaskStatus::FailedWithTerminalError | TaskStatus::TimedOut => {
                let error = Value::Object(task.output_data.clone());
                (
                    "faulted",
                    json!({"faultedAt": envelope.time, "error": error}),
                )
            }
            _ => ("completed", json!({"completedAt": envelope.time})),
        };
        out.push(envelope.task(kind, at, data));
    }
}

/// The terminal workflow's event.
fn end_event(envelope: &Envelope, wf: &Workflow) -> Value {
    match wf.status {
        WorkflowStatus::Completed => {
            let run = wf.dsl.as_deref();
            let output = run.and_then(|r| r.output.clone()).unwrap_or(Value::Null);
            envelope.workflow(
                "completed",
                json!({"completedAt": envelope.time, "output": output}),
            )
        }
        WorkflowStatus::Terminated => {
            envelope.workflow("cancelled", json!({"cancelledAt": envelope.time}))
        }
        _ => {
            let error = instance_error(wf).unwrap_or(Value::Null);
            envelope.workflow(
                "faulted",
                json!({"faultedAt": envelope.time, "error": error}),
            )
        }
    }
}

/// What every event of one decision shares: the instance, its document and the time.
struct Envelope {
    instance: String,
    /// The qualified name of the instance: `{name}-{id}.{namespace}`.
    qualified: String,
    /// `/dsl/{namespace}/{name}/{version}`: the CloudEvent `source`.
    source: String,
    definition: Value,
    time: String,
}

impl Envelope {
    fn of(wf: &Workflow, now: NowMs) -> Self {
        let doc = wf.workflow_definition.dsl.as_deref();
        let header = doc
            .and_then(|d| d.get("document"))
            .cloned()
            .unwrap_or_default();
        let field = |k: &str| {
            header
                .get(k)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        let (namespace, name, version) = (field("namespace"), field("name"), field("version"));
        let instance = wf.workflow_id.to_string();
        Envelope {
            qualified: format!("{name}-{instance}.{namespace}"),
            source: format!("/dsl/{namespace}/{name}/{version}"),
            definition: json!({"namespace": namespace, "name": name, "version": version}),
            instance,
            time: iso8601(now),
        }
    }

    fn cloud_event(&self, kind: String, data: Value) -> Value {
        json!({
            "specversion": "1.0",
            "source": self.source,
            "type": kind,
            "subject": self.instance,
            "time": self.time,
            "datacontenttype": "application/json",
            "data": data,
        })
    }

    fn workflow(&self, kind: &str, mut data: Value) -> Value {
        data["name"] = self.qualified.clone().into();
        if kind == "started" {
            data["definition"] = self.definition.clone();
        }
        self.cloud_event(format!("{WORKFLOW}.{kind}.v1"), data)
    }

    fn task(&self, kind: &str, at: &str, mut data: Value) -> Value {
        data["workflow"] = self.qualified.clone().into();
        data["task"] = at.into();
        self.cloud_event(format!("{TASK}.{kind}.v1"), data)
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::H;
    use crate::{Input, TimerKey, TimerKind};
    use serde_json::{json, Value};

    /// Records lifecycle events; every task type is a worker's.
    struct Recording(bool);

    impl crate::Catalog for Recording {
        fn task_def(&self, name: &str) -> Option<proto::model::TaskDef> {
            Some(crate::testing::harness_task_def(name))
        }
        fn lifecycle_events(&self) -> bool {
            self.0
        }
    }

    const DOC: &str = "document:\n  dsl: '1.0.3'\n  namespace: shop\n  name: order\n  version: '1.0.0'\ndo:\n  - note:\n      set:\n        seen: true\n  - pause:\n      wait:\n        seconds: 5\n";

    fn start(recording: bool) -> H {
        let doc = crate::dsl::load_with(DOC, &Recording(recording)).expect("valid");
        let def = crate::dsl::workflow_def(&doc);
        let catalog = std::sync::Arc::new(Recording(recording));
        H::try_start_with(def, json!({}), catalog).expect("starts")
    }

    /// The pending events as (type without its prefix and version, task pointer or "").
    fn pending(h: &H) -> Vec<(String, String)> {
        let outbox = h.rec.lifecycle.clone().unwrap_or_default();
        outbox
            .pending
            .iter()
            .map(|e| {
                let kind = e.event["type"].as_str().unwrap_or_default();
                let kind = kind.trim_start_matches("io.serverlessworkflow.");
                let kind = kind.trim_end_matches(".v1").to_owned();
                let task = e.event["data"]["task"].as_str().unwrap_or("").to_owned();
                (kind, task)
            })
            .collect()
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn a_run_records_its_workflow_and_task_events_in_order() {
        let mut h = start(true);
        assert_eq!(
            pending(&h),
            pairs(&[
                ("workflow.started", ""),
                ("task.created", "/do/0/note"),
                ("task.started", "/do/0/note"),
                ("task.completed", "/do/0/note"),
                ("task.created", "/do/1/pause"),
                ("task.started", "/do/1/pause"),
            ])
        );
        let first = &h.rec.lifecycle.as_ref().expect("events").pending[0].event;
        assert_eq!(first["id"], format!("{}:0", h.wf().workflow_id));
        assert_eq!(first["source"], "/dsl/shop/order/1.0.0");
        assert_eq!(first["subject"], h.wf().workflow_id.as_str());
        let name = format!("order-{}.shop", h.wf().workflow_id);
        assert_eq!(first["data"]["name"], name.as_str());
        assert_eq!(first["data"]["definition"]["namespace"], "shop");

        h.ok(Input::LifecyclePublished { upto: 6 });
        assert!(pending(&h).is_empty(), "reported published");
        let wait = h.task("/do/1/pause").clone();
        h.now = h.now.max(wait.wait_timeout);
        h.ok(Input::Timer(TimerKey {
            kind: TimerKind::Wait,
            task_id: Some(wait.task_id),
        }));
        assert_eq!(
            pending(&h),
            pairs(&[
                ("task.completed", "/do/1/pause"),
                ("workflow.completed", "")
            ])
        );
        let outbox = h.rec.lifecycle.clone().expect("events");
        assert_eq!(outbox.pending[0].seq, 6, "numbers go on");
        assert_eq!(
            outbox.pending[1].event["data"]["output"],
            json!({"seen": true})
        );
        assert!(h.rec.owes_publication(), "a terminal instance owing events");
    }

    #[test]
    fn suspending_resuming_and_cancelling_are_recorded() {
        let mut h = start(true);
        h.ok(Input::LifecyclePublished { upto: 100 });
        h.ok(Input::Pause);
        h.ok(Input::Resume);
        h.ok(Input::Terminate { reason: None });
        assert_eq!(
            pending(&h),
            pairs(&[
                ("workflow.suspended", ""),
                ("task.suspended", "/do/1/pause"),
                ("workflow.resumed", ""),
                ("task.resumed", "/do/1/pause"),
                ("task.cancelled", "/do/1/pause"),
                ("workflow.cancelled", "")
            ])
        );
    }

    #[test]
    fn an_instance_failed_for_its_size_records_its_end() {
        let mut h = start(true);
        h.ok(Input::LifecyclePublished { upto: 100 });
        let catalog = h.catalog.clone();
        let decision =
            crate::fail_oversized(&h.rec, "too large".into(), h.now, &mut h.rng, &*catalog);
        h.rec = decision.expect("fails").record.expect("a record");
        assert_eq!(
            pending(&h),
            pairs(&[("task.cancelled", "/do/1/pause"), ("workflow.faulted", "")])
        );
    }

    #[test]
    fn a_listen_starts_and_completes_a_correlation() {
        let doc = "document:\n  dsl: '1.0.3'\n  namespace: shop\n  name: paid\n  version: '1.0.0'\ndo:\n  - hear:\n      listen:\n        to:\n          one:\n            with:\n              type: com.shop.paid\n            correlate:\n              order:\n                from: ${ .data.order }\n";
        let doc = crate::dsl::load_with(doc, &Recording(true)).expect("valid");
        let def = crate::dsl::workflow_def(&doc);
        let catalog = std::sync::Arc::new(Recording(true));
        let mut h = H::try_start_with(def, json!({}), catalog).expect("starts");
        let kinds = |h: &H| -> Vec<String> { pending(h).into_iter().map(|(k, _)| k).collect() };
        assert!(
            kinds(&h).contains(&"workflow.correlation-started".to_owned()),
            "{:?}",
            kinds(&h)
        );
        h.ok(Input::LifecyclePublished { upto: 100 });
        let event = json!({"specversion": "1.0", "id": "e1", "source": "/shop", "type": "com.shop.paid", "data": {"order": 7}});
        h.ok(Input::Listened {
            message_id: "m1".into(),
            event,
        });
        let outbox = h.rec.lifecycle.clone().expect("events");
        let completed = outbox
            .pending
            .iter()
            .map(|e| &e.event)
            .find(|e| e["type"] == "io.serverlessworkflow.workflow.correlation-completed.v1");
        let completed = completed.unwrap_or_else(|| panic!("{:?}", kinds(&h)));
        assert_eq!(completed["data"]["correlationKeys"], json!({"order": 7}));
    }

    #[test]
    fn nothing_is_recorded_unless_the_runtime_asks() {
        let h = start(false);
        assert_eq!(h.rec.lifecycle, None);
        let value: Value = serde_json::to_value(&h.rec).expect("encodes");
        assert!(
            value.get("lifecycle").is_none(),
            "the record's shape is as before"
        );
    }
}
