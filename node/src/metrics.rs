//! The node's Prometheus metrics, named in one place, and `GET /metrics`'s text.
//!
//! The `baton` binary installs the recorder at start ([`install`]); without it (a node embedded
//! in a test or the simulator) every metric is a no-op and `/metrics` answers 404. Counters and
//! histograms are recorded where things happen; gauges of state the node holds (queues, parked
//! polls, Raft groups, quarantined workflows, stopped partitions) are read when scraped, so they
//! cannot drift from what the admin endpoints show. The Raft layer's metrics are named in
//! `cluster::metrics`.
//!
//! Labels are bounded sets: definition names (workflow, task type, schedule), routes as
//! declared, statuses, outcomes, partitions, groups; never an id of an instance.

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use proto::model::{TaskStatus, Workflow};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// Workflows started (label `workflow`: the definition's name).
pub const WORKFLOWS_STARTED: &str = "baton_workflows_started_total";
/// Workflows that ended (labels `workflow`, `status`: COMPLETED, FAILED, TIMED_OUT, TERMINATED).
pub const WORKFLOWS_FINISHED: &str = "baton_workflows_finished_total";
/// From a task's scheduling to its start by a worker (label `task_type`).
pub const TASK_QUEUE_SECONDS: &str = "baton_task_queue_seconds";
/// From a task's start to its end (label `task_type`).
pub const TASK_RUN_SECONDS: &str = "baton_task_run_seconds";
/// Tasks queued on this node for pollers (label `task_type`).
pub const QUEUE_DEPTH: &str = "baton_queue_depth";
/// Polls parked on this node waiting for a task (label `task_type`).
pub const PARKED_POLLS: &str = "baton_parked_polls";
/// QUIC workers connected to this node.
pub const QUIC_WORKERS: &str = "baton_quic_workers_connected";
/// Credit QUIC workers have given this node and it has not used yet.
pub const QUIC_CREDIT: &str = "baton_quic_worker_credit";
/// QUIC workers' results refused as stale (the attempt ended or was leased again).
pub const QUIC_STALE_RESULTS: &str = "baton_quic_stale_results_total";
/// Events offered to the event gate (labels `source`, `outcome`: queued or duplicate).
pub const EVENT_MESSAGES: &str = "baton_event_messages_total";
/// Event-handler actions run (labels `action`, `outcome`: completed, failed, retried, skipped).
pub const EVENT_ACTIONS: &str = "baton_event_actions_total";
/// Workflows started by schedules (label `schedule`).
pub const SCHEDULES_FIRED: &str = "baton_schedules_fired_total";
/// HTTP requests answered (labels `method`, `route` as declared, `status`).
pub const HTTP_REQUESTS: &str = "baton_http_requests_total";
/// Time to answer an HTTP request (labels `method`, `route`).
pub const HTTP_SECONDS: &str = "baton_http_request_seconds";
/// HTTP requests refused because a bound was full (label `kind`: `connections` open, `requests`,
/// or `waits` for polls and executes); see `api::admission`.
pub const HTTP_REFUSED: &str = "baton_http_refused_total";
/// Operations refused because a bound was full (label `bound`: `parked_polls`,
/// `partition_calls`).
pub const BOUNDS_FULL: &str = "baton_bounds_full_total";
/// Workflows of a partition hosted here whose stored record could not be decoded and was set
/// aside (label `partition`); see `GET /api/admin/quarantine`.
pub const QUARANTINED_WORKFLOWS: &str = "baton_quarantined_workflows";
/// Partitions whose replica here does not run (label `partition`, value 1): led here with actors
/// that cannot start, or stopped after its group failed until it is reopened; see `/health`.
pub const PARTITION_STOPPED: &str = "baton_partition_stopped";
/// Times a partition's group failed here and its replica was stopped to be reopened (label
/// `partition`).
pub const REPLICA_FAILURES: &str = "baton_replica_failures_total";
/// Proposals of a spell of leadership that had ended (labels `partition`, `outcome`): `refused`,
/// one for each made after its spell ended; `awaited`, one each time a new spell had to wait for
/// the last spell's proposals in flight before recovering. Either keeps an old actor's write from
/// landing unpublished; a steady rise means leadership flaps.
pub const STALE_PROPOSALS: &str = "baton_stale_proposals_total";
/// Raft commands a replica here could not read and skipped (label `group`: `meta` or
/// `partition`): a format newer than this binary reads reached it, so its replica no longer
/// matches the others'. Zero under the cluster-version gate; anything else is worth an alert.
pub const UNDECODABLE_COMMANDS: &str = "baton_undecodable_commands_total";

/// Most distinct names one kind of label (workflow, task type, schedule) takes: names come from
/// definitions and, for task types, from polls and dynamic tasks, so nothing else bounds them.
/// Names past the limit are counted under [`OTHER`].
pub const LABEL_NAMES_MAX: usize = 500;
/// The label value of every name past [`LABEL_NAMES_MAX`].
pub const OTHER: &str = "_other";

/// Histogram buckets of durations, in seconds: 0.5 ms to 5 minutes.
const SECONDS_BUCKETS: [f64; 16] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 30.0, 60.0,
    300.0,
];
/// Histogram buckets of commands per Raft entry.
const BATCH_BUCKETS: [f64; 10] = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0];

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the Prometheus recorder as the process's metrics recorder (once; later calls and a
/// recorder installed by someone else are left alone).
pub fn install() {
    if HANDLE.get().is_some() {
        return;
    }
    let built = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &SECONDS_BUCKETS)
        .and_then(|b| {
            b.set_buckets_for_metric(
                Matcher::Full(cluster::metrics::BATCH_COMMANDS.into()),
                &BATCH_BUCKETS,
            )
        });
    let recorder = match built {
        Ok(builder) => builder.build_recorder(),
        Err(e) => {
            tracing::warn!(error = %e, "metrics are off: the recorder could not be built");
            return;
        }
    };
    let handle = recorder.handle();
    if metrics::set_global_recorder(recorder).is_ok() {
        let _ = HANDLE.set(handle);
        describe();
        cluster::metrics::describe();
    }
}

fn describe() {
    use metrics::{describe_counter as counter, describe_gauge as gauge};
    use metrics::{describe_histogram as histogram, Unit};
    counter!(WORKFLOWS_STARTED, "workflows started");
    counter!(WORKFLOWS_FINISHED, "workflows that ended, by status");
    let queue = "from a task's scheduling to its start";
    histogram!(TASK_QUEUE_SECONDS, Unit::Seconds, queue);
    histogram!(
        TASK_RUN_SECONDS,
        Unit::Seconds,
        "from a task's start to its end"
    );
    gauge!(QUEUE_DEPTH, "tasks queued for pollers");
    gauge!(PARKED_POLLS, "polls parked waiting for a task");
    gauge!(QUIC_WORKERS, "QUIC workers connected");
    gauge!(QUIC_CREDIT, "credit of QUIC workers not used yet");
    counter!(QUIC_STALE_RESULTS, "QUIC workers' results refused as stale");
    counter!(EVENT_MESSAGES, "events offered to the event gate");
    counter!(EVENT_ACTIONS, "event-handler actions run, by outcome");
    counter!(SCHEDULES_FIRED, "workflows started by schedules");
    counter!(HTTP_REQUESTS, "HTTP requests answered");
    counter!(
        HTTP_REFUSED,
        "HTTP requests refused: every slot of their kind taken"
    );
    counter!(BOUNDS_FULL, "operations refused because a bound was full");
    histogram!(
        HTTP_SECONDS,
        Unit::Seconds,
        "time to answer an HTTP request"
    );
    let quarantined = "workflows set aside because their stored record does not decode";
    gauge!(QUARANTINED_WORKFLOWS, quarantined);
    gauge!(
        PARTITION_STOPPED,
        "1 for a partition led here whose actors cannot start"
    );
    let stale = "proposals of an ended spell of leadership, refused or awaited by the next spell";
    counter!(STALE_PROPOSALS, stale);
    let undecodable = "Raft commands a replica here could not read and skipped";
    counter!(UNDECODABLE_COMMANDS, undecodable);
}

/// Counts a command a replica of `group` (`meta`, `partition`) could not read.
pub(crate) fn undecodable_command(group: &'static str) {
    metrics::counter!(UNDECODABLE_COMMANDS, "group" => group).increment(1);
}

/// The exposition text, or `None` when no recorder is installed.
pub fn render() -> Option<String> {
    HANDLE.get().map(PrometheusHandle::render)
}

/// The kinds of name a label may hold, each with its own [`LABEL_NAMES_MAX`].
#[derive(Clone, Copy)]
pub enum Names {
    Workflow = 0,
    TaskType = 1,
    Schedule = 2,
}

/// `name` as a label value: itself while fewer than [`LABEL_NAMES_MAX`] names of its kind have
/// been seen (or it is one of them), else [`OTHER`].
pub fn label(kind: Names, name: &str) -> String {
    static SEEN: Mutex<[BTreeSet<String>; 3]> =
        Mutex::new([BTreeSet::new(), BTreeSet::new(), BTreeSet::new()]);
    let mut seen = SEEN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let names = &mut seen[kind as usize];
    if names.contains(name) {
        return name.to_owned();
    }
    if names.len() < LABEL_NAMES_MAX {
        names.insert(name.to_owned());
        return name.to_owned();
    }
    OTHER.to_owned()
}

/// Records what a committed write did to a workflow: its start, its end, and the tasks that
/// started or ended in it (tasks are only appended, so a task keeps its place in the list).
pub fn workflow_written(prev: Option<&Workflow>, next: &Workflow) {
    let name = || label(Names::Workflow, &next.workflow_name);
    if prev.is_none() {
        metrics::counter!(WORKFLOWS_STARTED, "workflow" => name()).increment(1);
    }
    if next.status.is_terminal() && !prev.is_some_and(|p| p.status.is_terminal()) {
        let status = next.status.as_str();
        metrics::counter!(WORKFLOWS_FINISHED, "workflow" => name(), "status" => status)
            .increment(1);
    }
    for (at, task) in next.tasks.iter().enumerate() {
        let before = prev
            .and_then(|p| p.tasks.get(at))
            .filter(|t| t.task_id == task.task_id)
            .map(|t| t.status);
        if before == Some(task.status) {
            continue;
        }
        let since = |from: i64, to: i64| Duration::from_millis((to - from).max(0) as u64);
        let kind = || label(Names::TaskType, &task.task_type);
        if task.status == TaskStatus::InProgress && task.start_time > 0 {
            let waited = since(task.scheduled_time, task.start_time);
            metrics::histogram!(TASK_QUEUE_SECONDS, "task_type" => kind()).record(waited);
        } else if task.status.is_terminal() && task.start_time > 0 && task.end_time > 0 {
            let ran = since(task.start_time, task.end_time);
            metrics::histogram!(TASK_RUN_SECONDS, "task_type" => kind()).record(ran);
        }
    }
}

/// Sets the queue gauges per task type: `depth` and `parked` now. A type seen before and absent
/// now is set to 0, so an emptied queue does not keep its last value.
pub fn observe_queues(depth: &BTreeMap<String, u64>, parked: &BTreeMap<String, u64>) {
    static SEEN: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
    let mut now: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for (task_type, n) in depth {
        now.entry(label(Names::TaskType, task_type)).or_default().0 += n;
    }
    for (task_type, n) in parked {
        now.entry(label(Names::TaskType, task_type)).or_default().1 += n;
    }
    let mut seen = SEEN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    seen.extend(now.keys().cloned());
    for task_type in seen.iter() {
        let (queued, polls) = now.get(task_type).copied().unwrap_or_default();
        metrics::gauge!(QUEUE_DEPTH, "task_type" => task_type.clone()).set(queued as f64);
        metrics::gauge!(PARKED_POLLS, "task_type" => task_type.clone()).set(polls as f64);
    }
}

/// Counts one event offered to the gate from `source`: queued, or dropped as a duplicate.
pub fn event_offered(source: &'static str, queued: bool) {
    let outcome = if queued { "queued" } else { "duplicate" };
    metrics::counter!(EVENT_MESSAGES, "source" => source, "outcome" => outcome).increment(1);
}

/// Counts one event-handler action (`action` as Conductor names it) with its `outcome`.
pub fn event_action(action: &'static str, outcome: &'static str) {
    metrics::counter!(EVENT_ACTIONS, "action" => action, "outcome" => outcome).increment(1);
}

/// Counts one HTTP request refused for want of a slot of `kind` (`connections`, `requests`,
/// `waits`; see [`HTTP_REFUSED`]).
pub fn http_refused(kind: &'static str) {
    metrics::counter!(HTTP_REFUSED, "kind" => kind).increment(1);
}

/// Counts one operation refused because `bound` was full.
pub fn bound_full(bound: &'static str) {
    metrics::counter!(BOUNDS_FULL, "bound" => bound).increment(1);
}

/// Counts one HTTP request answered with `status` after `took`.
pub fn http_answered(method: String, route: String, status: u16, took: Duration) {
    metrics::histogram!(HTTP_SECONDS, "method" => method.clone(), "route" => route.clone())
        .record(took);
    let status = status.to_string();
    metrics::counter!(HTTP_REQUESTS, "method" => method, "route" => route, "status" => status)
        .increment(1);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_past_the_limit_share_one_label() {
        for n in 0..LABEL_NAMES_MAX {
            assert_eq!(label(Names::Schedule, &format!("s{n}")), format!("s{n}"));
        }
        assert_eq!(label(Names::Schedule, "one more"), OTHER);
        assert_eq!(
            label(Names::Schedule, "s7"),
            "s7",
            "a name seen keeps its label"
        );
        assert_eq!(
            label(Names::Workflow, "w"),
            "w",
            "each kind has its own limit"
        );
    }
}
