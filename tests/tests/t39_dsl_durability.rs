//! A Serverless Workflow instance survives `kill -9` of its node: an instance that exported to
//! `$context`, then forked a durable `wait`, a worker's function and a `listen` for an event,
//! is killed with the function leased and the listen waiting; after the restart the timer still
//! fires, the event published then reaches the listen, the worker's result is taken, the
//! instance completes with its `$context` intact, and the function ran once. In a 3-node
//! cluster, the same holds when the instance's partition leader dies instead.

use std::time::Duration;

use harness::{task_def, wait_for, Api, Server};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(30);
const FUNCTION: &str = "dsl_charge";

const DOCUMENT: &str = r#"document:
  dsl: '1.0.3'
  namespace: durable
  name: charge-after-pause
  version: '1.0.0'
do:
  - prepare:
      set:
        order: ${ .order }
      export:
        as: '{ order: .order }'
  - both:
      fork:
        branches:
          - pause:
              wait: PT2S
          - charge:
              call: dsl_charge
              with:
                order: ${ .order }
          - approval:
              listen:
                to:
                  one:
                    with:
                      type: durable.approved
                    correlate:
                      order:
                        from: .data.order
                        expect: ${ .order }
  - finish:
      set:
        order: ${ $context.order }
        charged: ${ .[1].charged }
        approvedBy: ${ .[2][0].by }
"#;

/// The event type the instance listens for.
const APPROVED: &str = "durable.approved";

/// Publishes the approval of `order` to Baton's own queue of its type, retrying while the
/// queue's partition has no leader; then another order's, which the instance must not take.
fn approve(api: &Api, order: u64) {
    for (id, order) in [("other", order + 1), ("mine", order)] {
        let message = format!("approval-{order}-{id}");
        let event = json!({"specversion": "1.0", "id": message, "source": "test",
            "type": APPROVED, "data": {"order": order, "by": "ops"}});
        let path = format!("/api/event/publish/{APPROVED}?messageId={message}");
        wait_for(WAIT, "the approval to be published", || {
            let sent = api.try_post_json(&path, &event).ok()?;
            sent.is_success().then_some(())
        });
    }
}

/// Waits for the instance to end, and checks it completed with its `$context` intact and its
/// function run once.
fn completed_once(api: &Api, id: &str, order: u64) {
    let done = wait_for(WAIT, "the instance to end", || {
        let view: Value = api.get(&format!("/api/dsl/instances/{id}")).json();
        (view["phase"] == "completed" || view["phase"] == "faulted").then_some(view)
    });
    assert_eq!(done["phase"], "completed", "{done:#}");
    assert_eq!(
        done["output"],
        json!({"order": order, "charged": true, "approvedBy": "ops"})
    );
    assert_eq!(done["context"], json!({"order": order}));
    let tasks = done["tasks"].as_array().expect("tasks");
    let charges = tasks.iter().filter(|t| t["name"] == "charge").count();
    assert_eq!(charges, 1, "the function ran once: {done:#}");
}

#[test]
fn an_instance_that_waits_and_forks_survives_kill_9() {
    let mut server = Server::start();
    let api = server.api().clone();
    register(&api);
    let started = api
        .post_json(
            "/api/dsl/workflows/durable/charge-after-pause/1.0.0/instances",
            &json!({"order": 42}),
        )
        .expect_ok("start")
        .json();
    let id = started["id"].as_str().expect("id").to_owned();
    let leased = api.poll_until(FUNCTION, "w1", WAIT);
    assert_eq!(leased["inputData"]["order"], 42);

    server.kill9();
    server.restart();
    approve(&api, 42);

    let result = json!({"workflowInstanceId": id, "taskId": leased["taskId"],
                        "status": "COMPLETED", "outputData": {"charged": true}});
    api.update_task(&result)
        .expect_ok("the worker's result after the restart");
    completed_once(&api, &id, 42);
    assert!(api.poll(FUNCTION, "w2").is_none(), "nothing left to poll");
}

/// Registers the function and the document through `api`.
fn register(api: &Api) {
    api.register_task_defs(&[task_def(FUNCTION, json!({}))]);
    let registered = reqwest::blocking::Client::new()
        .post(api.url("/api/dsl/workflows?overwrite=true"))
        .header("Content-Type", "application/yaml")
        .body(DOCUMENT)
        .send()
        .expect("register");
    assert_eq!(registered.status().as_u16(), 200);
}

#[test]
fn an_instance_that_waits_and_forks_completes_after_its_leader_dies() {
    use harness::cluster::{partition_of, Cluster};
    let mut c = Cluster::start(3);
    let n1 = c.api(1);
    register(&n1);
    let started = n1
        .post_json(
            "/api/dsl/workflows/durable/charge-after-pause/1.0.0/instances",
            &json!({"order": 7}),
        )
        .expect_ok("start")
        .json();
    let id = started["id"].as_str().expect("id").to_owned();
    let leader = wait_for(WAIT, "the instance's partition to have a leader", || {
        c.leader_of_partition(partition_of(&id, c.partitions()))
    });
    // Everything after goes through a node that survives.
    let survivor = c
        .ids()
        .into_iter()
        .find(|n| *n != leader)
        .expect("a survivor");
    let api = c.api(survivor);
    let leased = wait_for(WAIT, "the instance's function", || {
        let task = api.poll(FUNCTION, "w1")?;
        if task["workflowInstanceId"] == id.as_str() {
            return Some(task);
        }
        let other = json!({"workflowInstanceId": task["workflowInstanceId"], "taskId": task["taskId"],
                           "status": "COMPLETED", "outputData": {"charged": false}});
        api.update_task(&other)
            .expect_ok("another instance's function");
        None
    });
    c.kill9(leader);
    approve(&api, 7);
    let result = json!({"workflowInstanceId": id, "taskId": leased["taskId"],
                        "status": "COMPLETED", "outputData": {"charged": true}});
    wait_for(WAIT, "the new leader to take the result", || {
        api.update_task(&result).is_success().then_some(())
    });
    completed_once(&api, &id, 7);
}
