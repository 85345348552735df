//! Rules about which tasks go where and which definitions and starts are accepted, end to end:
//! a poll of a domain gets only that domain's tasks; queue sizes count the whole cluster, per
//! domain on request; an EVENT task's sink must name a provider this cluster has; a task
//! definition's `inputTemplate` fills what the task's own inputs leave out; a start's
//! idempotency key follows the strategy it names.

use std::time::Duration;

use harness::cluster::Cluster;
use harness::{task_def, wait_for, wait_until, Api, Reply, Server};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(30);

/// A one-task workflow `name` whose task is of type `task_type`.
fn one_task_workflow(api: &Api, name: &str, task_type: &str) {
    api.register_task_defs(&[task_def(task_type, json!({ "retryCount": 0 }))]);
    api.register_workflow_def(&json!({
        "name": name,
        "version": 1,
        "schemaVersion": 2,
        "ownerEmail": "test@harness.com",
        "tasks": [{ "name": task_type, "taskReferenceName": "t", "type": "SIMPLE" }],
    }));
}

/// Starts `name` with `taskToDomain` `domains` (none when empty).
fn start_in(api: &Api, name: &str, domains: Value) -> String {
    api.start_workflow_request(&json!({ "name": name, "input": {}, "taskToDomain": domains }))
}

/// One poll of `task_type` in `domain` (none when empty) that does not wait.
fn poll_in(api: &Api, task_type: &str, domain: &str) -> Option<Value> {
    let path =
        format!("/api/tasks/poll/batch/{task_type}?workerid=w&count=5&timeout=0&domain={domain}");
    let tasks = api.get(&path).expect_status(200, "batch poll").json();
    let tasks = tasks.as_array().expect("a list of tasks").clone();
    assert!(
        tasks.len() <= 1,
        "one task of each domain is queued: {tasks:?}"
    );
    tasks.into_iter().next()
}

/// `GET /api/tasks/queue/size` of `task_type`, of `domain` when given.
fn queue_size(api: &Api, task_type: &str, domain: Option<&str>) -> u64 {
    let domain = domain.map(|d| format!("&domain={d}")).unwrap_or_default();
    let reply = api.get(&format!(
        "/api/tasks/queue/size?taskType={task_type}{domain}"
    ));
    reply
        .expect_status(200, "queue size")
        .json()
        .as_u64()
        .expect("a count")
}

/// Asserts that `reply` is a 400 whose message says `want`.
fn refused(reply: Reply, want: &str) {
    reply.assert_error_response(400, want);
    let message = reply.json()["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(message.contains(want), "{want:?} not in {message:?}");
}

#[test]
fn a_poll_of_a_domain_gets_only_that_domains_tasks() {
    let server = Server::start();
    let api = server.api();
    one_task_workflow(api, "rules_dom_wf", "rules_dom");
    let blue = start_in(api, "rules_dom_wf", json!({ "*": "blue" }));
    let plain = start_in(api, "rules_dom_wf", json!({}));
    wait_until(WAIT, "both tasks queued", || {
        queue_size(api, "rules_dom", Some("blue")) == 1 && queue_size(api, "rules_dom", None) == 2
    });

    assert!(
        poll_in(api, "rules_dom", "green").is_none(),
        "no task of domain green"
    );
    let got = poll_in(api, "rules_dom", "blue").expect("the blue task");
    assert_eq!(
        (got["workflowInstanceId"].as_str(), got["domain"].as_str()),
        (Some(&*blue), Some("blue"))
    );
    assert!(
        poll_in(api, "rules_dom", "blue").is_none(),
        "the plain task is not blue's"
    );
    let got = poll_in(api, "rules_dom", "").expect("the plain task");
    assert_eq!(got["workflowInstanceId"], json!(plain));
    assert_eq!(got["domain"], Value::Null);
}

#[test]
fn a_parked_poll_of_a_domain_is_not_handed_a_plain_task() {
    let server = Server::start();
    let api = server.api();
    one_task_workflow(api, "rules_park_wf", "rules_park");
    let api_for_poll = Api::new(api.base_url());
    let parked = std::thread::spawn(move || {
        let path = "/api/tasks/poll/batch/rules_park?workerid=w&count=1&timeout=3000&domain=blue";
        api_for_poll
            .get(path)
            .expect_status(200, "parked poll")
            .json()
    });
    wait_until(WAIT, "the poll to park", || {
        api.get("/api/admin/waits").json()["parkedPolls"].as_u64() == Some(1)
    });
    let plain = start_in(api, "rules_park_wf", json!({}));
    let handed = parked.join().expect("the poll answers");
    assert_eq!(handed, json!([]), "a blue poll takes no plain task");
    let got = wait_for(WAIT, "the plain task", || poll_in(api, "rules_park", ""));
    assert_eq!(got["workflowInstanceId"], json!(plain));
}

#[test]
fn queue_sizes_count_every_node_of_the_cluster() {
    const PER_NODE: usize = 2;
    let c = Cluster::start(3);
    let n1 = c.api(1);
    one_task_workflow(&n1, "rules_size_wf", "rules_size");
    let mut started = 0;
    for id in c.ids() {
        let api = c.api(id);
        wait_until(WAIT, "the definition on every node", || {
            api.get("/api/metadata/workflow/rules_size_wf").status == 200
        });
        // An unkeyed start lands on a partition the receiving node leads.
        for _ in 0..PER_NODE {
            start_in(&api, "rules_size_wf", json!({}));
            started += 1;
        }
        start_in(&api, "rules_size_wf", json!({ "rules_size": "red" }));
    }
    let all = (started + c.ids().len()) as u64;
    for id in c.ids() {
        let api = c.api(id);
        wait_until(
            WAIT,
            &format!("node {id} to count the whole cluster"),
            || {
                let sizes = api.queue_sizes(&["rules_size"]);
                sizes["rules_size"] == json!(all)
                    && queue_size(&api, "rules_size", Some("red")) == c.ids().len() as u64
                    && api.get("/api/tasks/queue/all").json()["rules_size"] == json!(all)
            },
        );
    }
}

#[test]
fn an_event_sink_on_a_provider_this_cluster_lacks_is_refused_at_registration() {
    let server = Server::start();
    let api = server.api();
    let event = |sink: &str| json!({ "name": "e", "taskReferenceName": "e", "type": "EVENT", "sink": sink });
    let workflow = |name: &str, task: Value| json!({ "name": name, "version": 1, "schemaVersion": 2, "ownerEmail": "test@harness.com", "tasks": [task] });
    let inline = |task: Value| {
        json!({ "name": "s", "taskReferenceName": "s", "type": "SUB_WORKFLOW",
            "subWorkflowParam": { "name": "rules_inner", "workflowDefinition": workflow("rules_inner", task) } })
    };
    let cases = [
        (
            workflow("rules_sqs", event("sqs:queue")),
            "EVENT task 'e': unknown event provider 'sqs'",
        ),
        (
            workflow("rules_nats", event("nats:x")),
            "start the nodes with --nats",
        ),
        (
            workflow("rules_sub", inline(event("sqs:queue"))),
            "inlined by task 's'",
        ),
    ];
    for (def, want) in cases {
        refused(api.post_json("/api/metadata/workflow", &def), want);
        let name = def["name"].as_str().expect("a name");
        let stored = api.get(&format!("/api/metadata/workflow/{name}"));
        assert_eq!(stored.status, 404, "nothing stored for {name}");
        let start = json!({ "name": name, "workflowDef": def });
        refused(api.post_json("/api/workflow", &start), want);
    }
    let ok = workflow("rules_sink_ok", inline(event("conductor:rules_q")));
    api.post_json("/api/metadata/workflow", &ok)
        .expect_ok("a sink on Baton's own queues");
}

#[test]
fn a_task_definitions_input_template_fills_what_the_task_leaves_out() {
    let server = Server::start();
    let api = server.api();
    let template = json!({ "region": "eu", "user": "${workflow.input.user}", "limit": 5 });
    api.register_task_defs(&[task_def("rules_tpl", json!({ "inputTemplate": template }))]);
    api.register_workflow_def(&json!({
        "name": "rules_tpl_wf",
        "version": 1,
        "schemaVersion": 2,
        "ownerEmail": "test@harness.com",
        "tasks": [{ "name": "rules_tpl", "taskReferenceName": "t", "type": "SIMPLE",
            "inputParameters": { "region": "us", "own": 1 } }],
    }));
    let id = api.start_workflow("rules_tpl_wf", &json!({ "user": "ann" }));
    let task = api.poll_until("rules_tpl", "w", WAIT);
    assert_eq!(task["workflowInstanceId"], json!(id));
    assert_eq!(
        task["inputData"],
        json!({ "region": "us", "user": "ann", "limit": 5, "own": 1 })
    );
}

/// `POST /api/workflow` of `name` under idempotency key `key` with `strategy` (none when empty).
fn start_keyed(api: &Api, name: &str, key: &str, strategy: &str) -> Reply {
    let mut request = json!({ "name": name, "input": {}, "idempotencyKey": key });
    if !strategy.is_empty() {
        request["idempotencyStrategy"] = json!(strategy);
    }
    api.post_json("/api/workflow", &request)
}

#[test]
fn an_idempotency_key_follows_the_strategy_its_start_names() {
    let server = Server::start();
    let api = server.api();
    one_task_workflow(api, "rules_key_wf", "rules_key");
    let wf = "rules_key_wf";

    // Without a strategy, and with RETURN_EXISTING: the first run's id, nothing new.
    let first = start_keyed(api, wf, "k-plain", "")
        .expect_ok("first start")
        .id();
    assert_eq!(
        start_keyed(api, wf, "k-plain", "").expect_ok("again").id(),
        first
    );
    let existing = start_keyed(api, wf, "k-plain", "RETURN_EXISTING").expect_ok("return existing");
    assert_eq!(existing.id(), first);

    // FAIL: a second start is refused, whatever the run's state.
    let failing = start_keyed(api, wf, "k-fail", "FAIL")
        .expect_ok("first FAIL start")
        .id();
    start_keyed(api, wf, "k-fail", "FAIL").expect_status(409, "a second FAIL start");
    api.delete(&format!("/api/workflow/{failing}?reason=done"))
        .expect_ok("terminate");
    api.wait_workflow_status(&failing, "TERMINATED", WAIT);
    start_keyed(api, wf, "k-fail", "FAIL").expect_status(409, "FAIL after the run ended");

    // FAIL_ON_RUNNING: refused while the run runs, a new run once it ended.
    let run0 = start_keyed(api, wf, "k-run", "FAIL_ON_RUNNING")
        .expect_ok("run 0")
        .id();
    start_keyed(api, wf, "k-run", "FAIL_ON_RUNNING").expect_status(409, "run 0 is running");
    api.put_empty(&format!("/api/workflow/{run0}/pause"))
        .expect_ok("pause");
    start_keyed(api, wf, "k-run", "FAIL_ON_RUNNING").expect_status(409, "run 0 is paused");
    api.delete(&format!("/api/workflow/{run0}?reason=done"))
        .expect_ok("terminate run 0");
    api.wait_workflow_status(&run0, "TERMINATED", WAIT);
    let run1 = start_keyed(api, wf, "k-run", "FAIL_ON_RUNNING")
        .expect_ok("run 1")
        .id();
    assert_ne!(run1, run0, "a new run once the first ended");
    assert_eq!(api.workflow_status(&run1), "RUNNING");
    start_keyed(api, wf, "k-run", "FAIL_ON_RUNNING").expect_status(409, "run 1 is running");
    let newest = start_keyed(api, wf, "k-run", "RETURN_EXISTING").expect_ok("newest");
    assert_eq!(newest.id(), run1, "RETURN_EXISTING answers the newest run");
    api.delete(&format!("/api/workflow/{run1}?reason=done"))
        .expect_ok("terminate run 1");
    api.wait_workflow_status(&run1, "TERMINATED", WAIT);
    let run2 = start_keyed(api, wf, "k-run", "FAIL_ON_RUNNING")
        .expect_ok("run 2")
        .id();
    assert!(run2 != run0 && run2 != run1, "a third run");

    let bad = start_keyed(api, wf, "k-bad", "SOMETIMES");
    assert_eq!(bad.status, 400, "an unknown strategy: {bad:?}");
    // A FAIL start would be refused had the refused one stored a run.
    start_keyed(api, wf, "k-bad", "FAIL").expect_ok("nothing stored for the refused start");
}
