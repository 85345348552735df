//! `GET /metrics`: scraped before and after running workflows, the exposition parses as
//! Prometheus text (every sample line), and the counters, histograms and gauges moved by exactly
//! what the workflows did.

use std::collections::BTreeMap;
use std::time::Duration;

use harness::{wait_until, Api, Server};
use openmetrics_parser::{prometheus::parse_prometheus, PrometheusValue};
use serde_json::json;

const WF: &str = "integration_test_wf";
const WAIT: Duration = Duration::from_secs(20);

/// One scrape, parsed strictly: every series as (name, labels, value); a histogram gives its
/// `_count` and `_sum`.
struct Metrics(Vec<(String, BTreeMap<String, String>, f64)>);

impl Metrics {
    fn scrape(api: &Api) -> Metrics {
        let text = api.get("/metrics").expect_ok("metrics").body;
        let exposition = parse_prometheus(&text)
            .unwrap_or_else(|e| panic!("the exposition does not parse: {e:?}\n{text}"));
        let mut series = Vec::new();
        for (name, family) in exposition.families {
            for sample in family.iter_samples() {
                let labelset = sample.get_labelset().expect("labels");
                let labels: BTreeMap<String, String> = labelset
                    .iter()
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .collect();
                let mut push =
                    |name: String, value: f64| series.push((name, labels.clone(), value));
                match &sample.value {
                    PrometheusValue::Unknown(v) | PrometheusValue::Gauge(v) => {
                        push(name.clone(), v.as_f64())
                    }
                    PrometheusValue::Counter(c) => push(name.clone(), c.value.as_f64()),
                    PrometheusValue::Histogram(h) => {
                        push(format!("{name}_count"), h.count.unwrap_or(0) as f64);
                        push(
                            format!("{name}_sum"),
                            h.sum.as_ref().map_or(0.0, |s| s.as_f64()),
                        );
                    }
                    PrometheusValue::Summary(_) => panic!("{name}: Baton exports no summaries"),
                }
            }
        }
        Metrics(series)
    }

    /// The value of `name` with (at least) `labels`, summed over the rest; 0 when absent.
    fn get(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.0
            .iter()
            .filter(|(n, l, _)| {
                n == name
                    && labels
                        .iter()
                        .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
            })
            .map(|(_, _, v)| v)
            .sum()
    }

    /// How many series of `name` there are.
    fn series(&self, name: &str) -> usize {
        self.0.iter().filter(|(n, _, _)| n == name).count()
    }
}

/// Runs one workflow: t1 and t2 completed, or t1 completed and the workflow terminated.
fn run(api: &Api, terminate: bool) -> String {
    let id = api.start_workflow(WF, &json!({ "param1": "a", "param2": "b" }));
    let t1 = api.poll_until("integration_task_1", "w", WAIT);
    api.complete(&t1, json!({ "op": "done" }));
    if terminate {
        api.delete(&format!("/api/workflow/{id}?reason=test"));
        api.wait_workflow_status(&id, "TERMINATED", WAIT);
    } else {
        let t2 = api.poll_until("integration_task_2", "w", WAIT);
        api.complete(&t2, json!({}));
        api.wait_workflow_status(&id, "COMPLETED", WAIT);
    }
    id
}

#[test]
fn counters_histograms_and_gauges_move_with_the_work() {
    let server = Server::start();
    let api = server.api();
    api.register_spec_task_defs();
    api.register_fixture("simple_workflow_1_integration_test.json");
    let before = Metrics::scrape(api);

    run(api, false);
    run(api, false);
    run(api, true);
    let after = Metrics::scrape(api);
    let moved =
        |name: &str, labels: &[(&str, &str)]| after.get(name, labels) - before.get(name, labels);

    let wf = [("workflow", WF)];
    assert_eq!(moved("baton_workflows_started_total", &wf), 3.0);
    let completed = [("workflow", WF), ("status", "COMPLETED")];
    assert_eq!(moved("baton_workflows_finished_total", &completed), 2.0);
    let terminated = [("workflow", WF), ("status", "TERMINATED")];
    assert_eq!(moved("baton_workflows_finished_total", &terminated), 1.0);
    // Three t1 and two t2 were polled and completed; the terminated workflow's t2 never started.
    let (t1, t2) = (
        [("task_type", "integration_task_1")],
        [("task_type", "integration_task_2")],
    );
    assert_eq!(moved("baton_task_queue_seconds_count", &t1), 3.0);
    assert_eq!(moved("baton_task_queue_seconds_count", &t2), 2.0);
    assert_eq!(moved("baton_task_run_seconds_count", &t1), 3.0);
    assert_eq!(moved("baton_task_run_seconds_count", &t2), 2.0);
    let starts = [
        ("route", "/api/workflow/{id}"),
        ("method", "POST"),
        ("status", "200"),
    ];
    assert_eq!(moved("baton_http_requests_total", &starts), 3.0);
    assert!(moved("baton_http_request_seconds_count", &starts[..2]) >= 3.0);

    // Raft: every start and step was proposed, committed, synced and applied.
    assert!(moved("baton_raft_proposals_total", &[]) >= 3.0 * 4.0);
    assert!(moved("baton_raft_entries_total", &[]) >= 1.0);
    assert!(moved("baton_raft_commit_seconds_count", &[]) >= 1.0);
    assert!(moved("baton_raft_log_fsync_seconds_count", &[]) >= 1.0);
    assert!(moved("baton_raft_apply_seconds_count", &[]) >= 1.0);
    assert_eq!(after.get("baton_raft_leader", &[("group", "meta")]), 1.0);
    assert!(after.get("baton_raft_term", &[("group", "meta")]) >= 1.0);
    assert!(
        after.series("baton_raft_log_entries") > 1,
        "a series per group"
    );
}

#[test]
fn queue_and_parked_poll_gauges_are_read_when_scraped() {
    let server = Server::start();
    let api = server.api();
    api.register_spec_task_defs();
    api.register_fixture("simple_workflow_1_integration_test.json");
    let t1 = [("task_type", "integration_task_1")];
    api.start_workflow(WF, &json!({ "param1": "a", "param2": "b" }));
    api.start_workflow(WF, &json!({ "param1": "a", "param2": "b" }));
    wait_until(WAIT, "two t1 queued", || {
        Metrics::scrape(api).get("baton_queue_depth", &t1) == 2.0
    });

    // A long poll of a type with nothing queued parks until the scrape sees it.
    let base = api.base_url().to_owned();
    let parked =
        std::thread::spawn(move || Api::new(&base).batch_poll("integration_task_3", "w", 1, 5_000));
    let t3 = [("task_type", "integration_task_3")];
    wait_until(WAIT, "a parked poll", || {
        Metrics::scrape(api).get("baton_parked_polls", &t3) == 1.0
    });
    assert!(parked.join().expect("the poll returns").is_empty());
    wait_until(WAIT, "no parked poll", || {
        Metrics::scrape(api).get("baton_parked_polls", &t3) == 0.0
    });
    for _ in 0..2 {
        let task = api.poll_until("integration_task_1", "w", WAIT);
        api.complete(&task, json!({}));
    }
    wait_until(WAIT, "t1's queue empty", || {
        Metrics::scrape(api).get("baton_queue_depth", &t1) == 0.0
    });
}
