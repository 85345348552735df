//! DSL instances driven input by input through the engine (every step's patch checked against
//! its encoding by the test driver), among them the conformance kit's offline scenarios.

use crate::testing::H;
use crate::{Input, TimerKey, TimerKind};
use proto::model::{TaskStatus, WorkflowStatus};
use serde_json::{json, Value};

/// Every task type is registered: a `call` of any name is a worker's function.
struct Workers;

impl crate::Catalog for Workers {
    fn task_def(&self, name: &str) -> Option<proto::model::TaskDef> {
        Some(crate::testing::harness_task_def(name))
    }
}

fn start(yaml: &str, input: Value) -> H {
    let doc = crate::dsl::load_with(yaml, &Workers).unwrap_or_else(|e| panic!("{e}"));
    let def = crate::dsl::workflow_def(&doc);
    H::try_start_with(def, input, std::sync::Arc::new(Workers)).expect("starts")
}

fn doc(body: &str) -> String {
    format!("document:\n  dsl: '1.0.3'\n  namespace: test\n  name: t\n  version: '1.0.0'\n{body}")
}

fn output(h: &H) -> Value {
    h.wf()
        .dsl
        .as_ref()
        .and_then(|r| r.output.clone())
        .unwrap_or_default()
}

fn error(h: &H) -> Value {
    h.wf()
        .dsl
        .as_ref()
        .and_then(|r| r.error.clone())
        .unwrap_or_default()
}

/// The tasks that ran, by name, in the order they started.
fn ran(h: &H) -> Vec<String> {
    h.wf()
        .tasks
        .iter()
        .map(|t| t.workflow_task.name.clone())
        .collect()
}

/// Fires the WAIT task at `at` after moving the clock past it.
fn fire_wait(h: &mut H, at: &str) {
    let t = h.task(at).clone();
    h.now = h.now.max(t.wait_timeout);
    h.ok(Input::Timer(TimerKey {
        kind: TimerKind::Wait,
        task_id: Some(t.task_id),
    }));
}

#[test]
fn sequences_follow_then_directives() {
    let h = start(
        &doc("do:\n  - setRed:\n      set:\n        colors: '${ .colors + [\"red\"] }'\n      then: setGreen\n  - setBlue:\n      set:\n        colors: '${ .colors + [\"blue\"] }'\n      then: end\n  - setGreen:\n      set:\n        colors: '${ .colors + [\"green\"] }'\n      then: setBlue\n"),
        json!({}),
    );
    assert_eq!(h.status(), WorkflowStatus::Completed);
    assert_eq!(output(&h), json!({"colors": ["red", "green", "blue"]}));
    assert_eq!(ran(&h), ["setRed", "setGreen", "setBlue"]);
    assert_eq!(crate::dsl::phase(h.wf()), "completed");
}

const SWITCH: &str = "do:\n  - switchColor:\n      switch:\n        - red:\n            when: '.color == \"red\"'\n            then: setRed\n        - other:\n            then: setOther\n  - setRed:\n      set:\n        colors: '${ .colors + [ \"red\" ] }'\n      then: end\n  - setOther:\n      set:\n        colors: '${ .colors + [ $input.color ] }'\n";

#[test]
fn switch_takes_the_first_matching_case_or_the_default() {
    let h = start(&doc(SWITCH), json!({"color": "red"}));
    assert_eq!(output(&h), json!({"colors": ["red"]}));
    assert_eq!(ran(&h), ["switchColor", "setRed"]);
    let h = start(&doc(SWITCH), json!({"color": "yellow"}));
    assert_eq!(output(&h), json!({"colors": ["yellow"]}));
    assert_eq!(ran(&h), ["switchColor", "setOther"]);
}

#[test]
fn for_binds_each_item_and_index_and_data_flows_between_iterations() {
    let h = start(
        &doc("do:\n  - loopColors:\n      for:\n        each: color\n        in: '.colors'\n      do:\n        - markProcessed:\n            set:\n              processed: '${ { colors: (.processed.colors + [ $color ]), indexes: (.processed.indexes + [ $index ])} }'\n"),
        json!({"colors": ["red", "green", "blue"]}),
    );
    assert_eq!(
        output(&h),
        json!({"processed": {"colors": ["red", "green", "blue"], "indexes": [0, 1, 2]}})
    );
}

#[test]
fn raise_faults_with_the_error_where_it_was_raised() {
    let h = start(
        &doc("do:\n  - raiseError:\n      raise:\n        error:\n          status: 400\n          type: https://serverlessworkflow.io/errors/types/compliance\n          title: Compliance Error\n"),
        json!({}),
    );
    assert_eq!(h.status(), WorkflowStatus::Failed);
    assert_eq!(crate::dsl::phase(h.wf()), "faulted");
    let e = error(&h);
    assert_eq!(e["instance"], "/do/0/raiseError");
    assert_eq!(
        (e["status"].clone(), e["title"].clone()),
        (json!(400), json!("Compliance Error"))
    );
}

#[test]
fn input_from_output_as_and_export_as_shape_the_data_and_context() {
    let h = start(
        &doc("do:\n  - setPlayerId:\n      input:\n        from: .user.claims.subject\n      set:\n        playerId: ${ . }\n      export:\n        as: '$context + {player: .playerId}'\n  - show:\n      set:\n        fromContext: ${ $context.player }\n      output:\n        as: .fromContext\n"),
        json!({"user": {"claims": {"subject": "6Asn"}}}),
    );
    assert_eq!(output(&h), json!("6Asn"));
    assert_eq!(
        h.wf().dsl.as_ref().map(|r| r.context.clone()),
        Some(json!({"player": "6Asn"}))
    );
    assert_eq!(
        h.wf().output[crate::dsl::OUTPUT_KEY],
        json!("6Asn"),
        "Conductor's view wraps a non-object"
    );
    assert_eq!(crate::dsl::instance_output(&h.wf().output), json!("6Asn"));
}

#[test]
fn a_competing_fork_takes_the_first_branch_and_cancels_the_rest() {
    let h = start(
        &doc("do:\n  - race:\n      fork:\n        compete: true\n        branches:\n          - slow:\n              call: slowFn\n          - setRed:\n              set:\n                colors: ${ .colors + [\"red\"] }\n"),
        json!({}),
    );
    assert_eq!(output(&h), json!({"colors": ["red"]}));
    assert_eq!(
        h.st("/do/0/race/fork/branches/0/slow"),
        TaskStatus::Canceled
    );
}

#[test]
fn a_fork_waits_for_every_branch_and_lists_their_outputs() {
    let mut h = start(
        &doc("do:\n  - both:\n      fork:\n        branches:\n          - a:\n              call: fnA\n          - b:\n              call: fnB\n              with:\n                x: ${ .x }\n"),
        json!({"x": 5}),
    );
    let (a, b) = (
        "/do/0/both/fork/branches/0/a",
        "/do/0/both/fork/branches/1/b",
    );
    assert_eq!(h.task(b).task_type, "fnB");
    assert_eq!(h.task(b).input_data["x"], json!(5));
    assert_eq!(
        crate::ready_tasks(h.wf()).len(),
        2,
        "both functions are ready for workers"
    );
    h.poll(b);
    h.complete(b, json!({"b": 2}));
    assert_eq!(h.status(), WorkflowStatus::Running);
    h.poll(a);
    h.complete(a, json!({"a": 1}));
    assert_eq!(output(&h), json!([{"a": 1}, {"b": 2}]));
}

const TRY_HTTP: &str = "do:\n  - tryGetPet:\n      try:\n        - getPet:\n            call: http\n            with:\n              method: get\n              endpoint:\n                uri: http://pets.test/pet/{petName}\n      catch:\n        errors:\n          with:\n            type: https://serverlessworkflow.io/dsl/errors/types/communication\n            status: 404\n        as: err\n        do:\n          - setError:\n              set:\n                error: ${ $err }\n";

#[test]
fn an_http_error_the_catch_filters_is_handled_by_catch_do() {
    let mut h = start(&doc(TRY_HTTP), json!({"petName": "Milou"}));
    let call = "/do/0/tryGetPet/try/0/getPet";
    match h.work(call) {
        Some(crate::Work::Http(request)) => {
            assert_eq!(request.uri, "http://pets.test/pet/Milou");
            assert_eq!(request.method, "GET");
        }
        other => panic!("an HTTP call: {other:?}"),
    }
    let answer =
        json!({"response": {"statusCode": 404, "body": "no pet", "reasonPhrase": "Not Found"}});
    h.perform(call, Ok(answer));
    assert_eq!(h.status(), WorkflowStatus::Completed);
    let out = output(&h);
    assert_eq!(out["error"]["instance"], call);
    assert_eq!(out["error"]["status"], 404);
    assert_eq!(
        out["error"]["type"],
        "https://serverlessworkflow.io/spec/1.0.0/errors/communication"
    );
}

#[test]
fn an_http_error_the_catch_does_not_filter_faults_the_instance() {
    let mut h = start(
        &doc(&TRY_HTTP.replace("status: 404", "status: 503")),
        json!({"petName": "x"}),
    );
    let answer = json!({"response": {"statusCode": 404, "body": {}}});
    h.perform("/do/0/tryGetPet/try/0/getPet", Ok(answer));
    assert_eq!(h.status(), WorkflowStatus::Failed);
    assert_eq!(error(&h)["status"], 404);
}

#[test]
fn an_http_call_answers_its_content_through_output_as() {
    let mut h = start(
        &doc("do:\n  - getPet:\n      call: http\n      with:\n        method: get\n        endpoint:\n          uri: http://pets.test/pet/{petId}\n      output:\n        as: .id\n"),
        json!({"petId": 1}),
    );
    h.perform(
        "/do/0/getPet",
        Ok(json!({"response": {"statusCode": 200, "body": {"id": 1}}})),
    );
    assert_eq!(output(&h), json!(1));
}

#[test]
fn a_retried_function_waits_its_backoff_as_a_durable_timer() {
    let mut h = start(
        &doc("do:\n  - attempt:\n      try:\n        - charge:\n            call: chargeCard\n      catch:\n        retry:\n          delay:\n            seconds: 2\n          backoff:\n            exponential: {}\n          limit:\n            attempt:\n              count: 2\n"),
        json!({}),
    );
    let charge = "/do/0/attempt/try/0/charge";
    h.poll(charge);
    h.fail(charge);
    let retry = "/do/0/attempt/catch/retry";
    assert_eq!(h.task(retry).wait_timeout, h.now + 2_000);
    assert_eq!(crate::dsl::phase(h.wf()), "waiting");
    fire_wait(&mut h, retry);
    assert_eq!(h.attempts(charge).len(), 2);
    h.poll(charge);
    h.fail(charge);
    assert_eq!(
        h.task(retry).wait_timeout,
        h.now + 4_000,
        "exponential backoff"
    );
    fire_wait(&mut h, retry);
    h.poll(charge);
    h.fail(charge);
    assert_eq!(
        h.status(),
        WorkflowStatus::Failed,
        "two retries, then the error stands"
    );
    assert_eq!(h.attempts(charge).len(), 3);
}

#[test]
fn wait_completes_when_its_timer_fires() {
    let mut h = start(&doc("do:\n  - pause:\n      wait:\n        seconds: 5\n  - after:\n      set:\n        done: true\n"), json!({}));
    assert_eq!(crate::dsl::phase(h.wf()), "waiting");
    let timers = crate::timers(h.wf());
    assert_eq!(timers.len(), 1);
    fire_wait(&mut h, "/do/0/pause");
    assert_eq!(output(&h), json!({"done": true}));
}

#[test]
fn a_run_time_expression_error_faults_the_instance_with_the_expression_error() {
    let h = start(
        &doc("do:\n  - bad:\n      set:\n        n: ${ .a + 1 }\n"),
        json!({"a": "text"}),
    );
    assert_eq!(h.status(), WorkflowStatus::Failed);
    let e = error(&h);
    assert_eq!(
        e["type"],
        "https://serverlessworkflow.io/spec/1.0.0/errors/expression"
    );
    assert_eq!(e["instance"], "/do/0/bad/set");
}

#[test]
fn emit_publishes_a_cloud_event_through_the_event_gate() {
    let mut h = start(
        &doc("do:\n  - emitEvent:\n      emit:\n        event:\n          with:\n            source: https://fake-source.com\n            type: com.fake-source.user.greeted.v1\n            data:\n              greetings: ${ \"Hello \\(.user.firstName)!\" }\n"),
        json!({"user": {"firstName": "John"}}),
    );
    let pending = crate::pending_events(h.wf());
    assert_eq!(pending.len(), 1, "the event waits for its publication");
    let event = &pending[0];
    assert_eq!(event.sink, "dsl:com.fake-source.user.greeted.v1");
    assert_eq!(event.payload["data"], json!({"greetings": "Hello John!"}));
    for key in ["id", "specversion", "time", "source", "type"] {
        assert!(event.payload.get(key).is_some(), "{key}");
    }
    assert!(
        event.payload.get("workflowInstanceId").is_none(),
        "the message is the event as it is"
    );
    let payload = Value::Object(event.payload.clone());
    let task_id = event.task_id.clone();
    h.ok(Input::EventPublished {
        task_id,
        error: None,
    });
    assert_eq!(output(&h), payload);
}

#[test]
fn conductors_retry_and_rerun_are_refused() {
    let mut h = start(&doc("do:\n  - bad:\n      raise:\n        error:\n          type: https://x.test/e\n          status: 500\n"), json!({}));
    assert!(h.apply(Input::Retry).is_err());
    assert!(
        h.apply(Input::Terminate { reason: None }).is_err(),
        "already ended"
    );
}

#[test]
fn a_task_that_runs_out_of_time_raises_the_timeout_error() {
    let mut h = start(
        &doc("do:\n  - slow:\n      call: slowFn\n      timeout:\n        after:\n          seconds: 3\n"),
        json!({}),
    );
    let (slow, timeout) = ("/do/0/slow", "/do/0/slow/timeout");
    assert_eq!(h.task(timeout).wait_timeout, h.now + 3_000);
    h.poll(slow);
    fire_wait(&mut h, timeout);
    assert_eq!(h.status(), WorkflowStatus::Failed);
    assert_eq!(error(&h)["status"], 408);
    assert_eq!(h.st(slow), TaskStatus::TimedOut);
    assert!(
        !h.result(slow, proto::model::TaskResultStatus::Completed, json!({})),
        "a late result changes nothing"
    );
}

#[test]
fn a_task_that_ends_in_time_cancels_its_timeout() {
    let mut h = start(
        &doc("do:\n  - quick:\n      call: quickFn\n      timeout:\n        after: PT1M\n"),
        json!({}),
    );
    h.poll("/do/0/quick");
    h.complete("/do/0/quick", json!({"ok": true}));
    assert_eq!(output(&h), json!({"ok": true}));
    assert_eq!(h.st("/do/0/quick/timeout"), TaskStatus::Canceled);
}

#[test]
fn data_that_breaks_a_schema_raises_the_validation_error() {
    let schema = "      input:\n        schema:\n          format: json\n          document:\n            type: object\n            required: [ id ]\n";
    let h = start(
        &doc(&format!(
            "do:\n  - check:\n{schema}      set:\n        ok: true\n"
        )),
        json!({}),
    );
    let e = error(&h);
    assert_eq!(
        e["type"],
        "https://serverlessworkflow.io/spec/1.0.0/errors/validation"
    );
    assert_eq!(e["instance"], "/do/0/check/input/schema");
    let h = start(
        &doc(&format!(
            "do:\n  - check:\n{schema}      set:\n        ok: true\n"
        )),
        json!({"id": 1}),
    );
    assert_eq!(output(&h), json!({"ok": true}));
}

/// A registry of one child document besides the registered task types.
struct WithChild;

impl crate::Catalog for WithChild {
    fn task_def(&self, name: &str) -> Option<proto::model::TaskDef> {
        Some(crate::testing::harness_task_def(name))
    }

    fn dsl_document(&self, namespace: &str, name: &str, version: &str) -> Option<Value> {
        let child = doc("do:\n  - double:\n      set:\n        n: ${ .n * 2 }\n").replace(
            "namespace: test\n  name: t",
            "namespace: kids\n  name: doubler",
        );
        let json = crate::dsl::load(&child)
            .expect("a valid child")
            .json()
            .clone();
        ((namespace, name, version) == ("kids", "doubler", "1.0.0")).then_some(json)
    }
}

#[test]
fn run_workflow_starts_a_child_instance_and_takes_its_output() {
    let yaml = doc("do:\n  - child:\n      run:\n        workflow:\n          namespace: kids\n          name: doubler\n          version: '1.0.0'\n          input:\n            n: ${ .x }\n");
    let doc = crate::dsl::load_with(&yaml, &WithChild).expect("valid");
    let def = crate::dsl::workflow_def(&doc);
    let mut h =
        H::try_start_with(def, json!({"x": 21}), std::sync::Arc::new(WithChild)).expect("starts");
    let start = match h.work("/do/0/child") {
        Some(crate::Work::Start(start)) => start,
        other => panic!("a child's start: {other:?}"),
    };
    assert_eq!(start.input, crate::testing::obj(json!({"n": 21})));
    let child_def = start.definition.expect("the child's definition, inline");
    assert!(child_def.dsl.is_some(), "the child runs its document");
    let child = start.workflow_id.clone();
    h.perform("/do/0/child", Ok(json!({"workflowId": child.as_str()})));
    let task_id = h.task("/do/0/child").task_id.clone();
    h.ok(Input::ChildEnded {
        task_id,
        child,
        status: WorkflowStatus::Completed,
        output: crate::testing::obj(json!({"n": 42})),
        reason: None,
    });
    assert_eq!(output(&h), json!({"n": 42}));
}

#[test]
fn run_of_a_document_not_registered_faults_with_a_runtime_error() {
    let yaml = doc("do:\n  - child:\n      run:\n        workflow:\n          namespace: kids\n          name: missing\n          version: '1.0.0'\n");
    let h = start(&yaml, json!({}));
    assert_eq!(error(&h)["instance"], "/do/0/child/run/workflow");
    assert_eq!(h.status(), WorkflowStatus::Failed);
}

#[test]
fn expressions_see_their_task_and_workflow() {
    let h = start(
        &doc("do:\n  - who:\n      input:\n        from: '{ from: $task.name }'\n      set:\n        me: ${ $task.name }\n        from: ${ .from }\n        at: ${ $task.reference }\n        kind: ${ $task.definition | has(\"set\") }\n        id: ${ $workflow.id }\n        runtime: ${ $runtime.name }\n"),
        json!({}),
    );
    let out = output(&h);
    assert_eq!(out["me"], "who");
    assert_eq!(out["from"], "who", "input.from sees its own task");
    assert_eq!(out["at"], "/do/0/who");
    assert_eq!(out["kind"], true);
    assert_eq!(out["id"], h.wf().workflow_id.as_str());
    assert_eq!(out["runtime"], "baton");
}

/// Offers a CloudEvent of `event_type` carrying `data` under the message id `id`; answers
/// whether the instance changed.
fn offer(h: &mut H, id: &str, event_type: &str, data: Value) -> bool {
    let event = json!({"specversion": "1.0", "id": id, "source": "test", "type": event_type,
        "roomid": data.get("room").cloned().unwrap_or_default(), "data": data});
    h.ok(Input::Listened {
        message_id: id.to_owned(),
        event,
    })
}

const LISTEN_ONE: &str = "do:\n  - waitForStart:\n      listen:\n        to:\n          one:\n            with:\n              type: com.example.started\n              data: '${ .go == true }'\n  - after:\n      set:\n        got: '${ .[0].n }'\n";

#[test]
fn listen_one_consumes_the_first_matching_event() {
    let mut h = start(&doc(LISTEN_ONE), json!({}));
    assert_eq!(h.task("/do/0/waitForStart").status, TaskStatus::InProgress);
    assert_eq!(
        h.wf().dsl.as_ref().map(|r| r.listening()),
        Some(vec!["com.example.started"])
    );
    assert!(!offer(
        &mut h,
        "m1",
        "com.example.other",
        json!({"go": true})
    ));
    assert!(!offer(
        &mut h,
        "m2",
        "com.example.started",
        json!({"go": false})
    ));
    assert_eq!(h.status(), WorkflowStatus::Running);
    assert!(offer(
        &mut h,
        "m3",
        "com.example.started",
        json!({"go": true, "n": 7})
    ));
    assert_eq!(h.status(), WorkflowStatus::Completed);
    assert_eq!(output(&h), json!({"got": 7}));
    assert_eq!(h.task("/do/0/waitForStart").status, TaskStatus::Completed);
    assert!(h
        .wf()
        .dsl
        .as_ref()
        .is_some_and(|r| r.listening().is_empty()));
}

const LISTEN_ALL: &str = "do:\n  - readings:\n      listen:\n        to:\n          all:\n            - with:\n                type: sensor.temperature\n              correlate:\n                roomId:\n                  from: .roomid\n            - with:\n                type: sensor.humidity\n              correlate:\n                roomId:\n                  from: .roomid\n";

#[test]
fn listen_all_takes_one_event_per_filter_that_correlate() {
    let mut h = start(&doc(LISTEN_ALL), json!({}));
    assert!(offer(
        &mut h,
        "t1",
        "sensor.temperature",
        json!({"room": 1, "c": 21})
    ));
    // Another room's reading does not correlate; the same message again is not consumed.
    assert!(!offer(
        &mut h,
        "h2",
        "sensor.humidity",
        json!({"room": 2, "p": 40})
    ));
    assert!(!offer(
        &mut h,
        "t1",
        "sensor.temperature",
        json!({"room": 1, "c": 21})
    ));
    assert!(!offer(
        &mut h,
        "t3",
        "sensor.temperature",
        json!({"room": 1, "c": 22})
    ));
    assert_eq!(h.status(), WorkflowStatus::Running);
    assert!(offer(
        &mut h,
        "h4",
        "sensor.humidity",
        json!({"room": 1, "p": 45})
    ));
    assert_eq!(h.status(), WorkflowStatus::Completed);
    assert_eq!(
        output(&h),
        json!([{"room": 1, "c": 21}, {"room": 1, "p": 45}])
    );
}

const LISTEN_ANY_UNTIL: &str = "do:\n  - gossip:\n      listen:\n        to:\n          any:\n            - with:\n                type: chat.said\n          until: '${ length >= 2 }'\n        read: envelope\n      output:\n        as: '${ map(.id) }'\n";

#[test]
fn listen_any_with_until_consumes_until_the_condition_holds() {
    let mut h = start(&doc(LISTEN_ANY_UNTIL), json!({}));
    assert!(offer(&mut h, "a", "chat.said", json!({})));
    assert!(!offer(&mut h, "a", "chat.said", json!({})));
    assert_eq!(h.status(), WorkflowStatus::Running);
    assert!(offer(&mut h, "b", "chat.said", json!({})));
    assert_eq!(h.status(), WorkflowStatus::Completed);
    assert_eq!(output(&h), json!(["a", "b"]));
}

#[test]
fn a_listen_filter_that_fails_faults_with_an_expression_error() {
    let yaml = LISTEN_ONE.replace(".go == true", ".go + 1");
    let mut h = start(&doc(&yaml), json!({}));
    offer(&mut h, "m1", "com.example.started", json!({"go": "x"}));
    assert_eq!(h.status(), WorkflowStatus::Failed);
    assert_eq!(
        error(&h)["instance"],
        "/do/0/waitForStart/listen/to/one/with/data"
    );
}

#[test]
fn a_listen_in_a_fork_waits_beside_the_other_branch() {
    let yaml = "do:\n  - both:\n      fork:\n        branches:\n          - hear:\n              listen:\n                to:\n                  one:\n                    with:\n                      type: x.ready\n          - pause:\n              wait:\n                milliseconds: 10\n";
    let mut h = start(&doc(yaml), json!({}));
    fire_wait(&mut h, "/do/0/both/fork/branches/1/pause");
    assert_eq!(h.status(), WorkflowStatus::Running);
    assert!(offer(&mut h, "m", "x.ready", json!({"v": 1})));
    assert_eq!(h.status(), WorkflowStatus::Completed);
}

#[test]
fn each_run_of_a_task_is_its_own_iteration() {
    let yaml = "do:\n  - each:\n      for:\n        each: n\n        in: '${ [1, 2, 3] }'\n      do:\n        - double:\n            set:\n              v: '${ $n * 2 }'\n";
    let h = start(&doc(yaml), json!({}));
    assert_eq!(h.status(), WorkflowStatus::Completed);
    let iterations: Vec<u32> = h
        .wf()
        .tasks
        .iter()
        .filter(|t| t.reference_task_name == "/do/0/each/do/0/double")
        .map(|t| t.iteration)
        .collect();
    assert_eq!(iterations, [0, 1, 2]);
}

const SHELL: &str = "do:\n  - greet:\n      run:\n        shell:\n          command: 'echo \"$1 $GREETING\"'\n          arguments: [ '${ .who }' ]\n          environment:\n            GREETING: ${ .greeting }\n          stdin: ${ .who }\n";

#[test]
fn a_shell_run_is_work_for_the_runtime_and_outputs_its_stdout() {
    let mut h = start(&doc(SHELL), json!({"who": "world", "greeting": "hi"}));
    let Some(crate::Work::Process(request)) = h.work("/do/0/greet") else {
        panic!("the run's work is a process: {:?}", h.work("/do/0/greet"));
    };
    assert_eq!(request.program, "sh");
    assert_eq!(request.args, ["-c", "echo \"$1 $GREETING\"", "sh", "world"]);
    assert_eq!(request.env.get("GREETING").map(String::as_str), Some("hi"));
    assert_eq!(request.stdin.as_deref(), Some("world"));
    assert_eq!(request.timeout_ms, proto::limits::PROCESS_RUN_MS_DEFAULT);
    let result = json!({"code": 0, "stdout": "world hi\n", "stderr": ""});
    assert!(h.perform("/do/0/greet", Ok(result)));
    assert_eq!(h.status(), WorkflowStatus::Completed);
    assert_eq!(output(&h), json!("world hi\n"));
}

/// A shell run of `exit 3` with `return` set to `mode` (none: the default), reported as such.
fn exited(mode: Option<&str>) -> H {
    let ret = mode
        .map(|m| format!("        return: {m}\n"))
        .unwrap_or_default();
    let text = format!("do:\n  - fail:\n      timeout:\n        after:\n          seconds: 2\n      run:\n        shell:\n          command: 'exit 3'\n{ret}");
    let mut h = start(&doc(&text), json!({}));
    let Some(crate::Work::Process(request)) = h.work("/do/0/fail") else {
        panic!("the run's work is a process");
    };
    assert_eq!(
        request.timeout_ms, 2_000,
        "the task's timeout bounds the process"
    );
    let result = json!({"code": 3, "stdout": "o", "stderr": "e"});
    assert!(h.perform("/do/0/fail", Ok(result)));
    h
}

#[test]
fn return_shapes_a_run_and_a_non_zero_exit_faults_unless_it_shows_the_code() {
    let all = exited(Some("all"));
    assert_eq!(all.status(), WorkflowStatus::Completed);
    assert_eq!(
        output(&all),
        json!({"code": 3, "stdout": "o", "stderr": "e"})
    );
    assert_eq!(output(&exited(Some("code"))), json!(3));
    let none = exited(Some("none"));
    assert_eq!(none.status(), WorkflowStatus::Completed);
    assert_eq!(output(&none), Value::Null);
    for mode in [None, Some("stdout"), Some("stderr")] {
        let h = exited(mode);
        assert_eq!(h.status(), WorkflowStatus::Failed, "{mode:?}");
        let error = error(&h);
        assert_eq!(error["type"], format!("{}runtime", super::STANDARD_TYPES));
        assert_eq!(error["status"], 500);
        assert_eq!(
            error["detail"], "the process exited with code 3: e",
            "{error}"
        );
        assert_eq!(h.task("/do/0/fail").status, TaskStatus::Failed);
    }
}

#[test]
fn a_run_killed_at_its_limit_raises_the_timeout_error() {
    let mut h = start(&doc(SHELL), json!({"who": "w", "greeting": "g"}));
    let killed = json!({"code": null, "stdout": "", "stderr": "", "timedOut": true});
    assert!(h.perform("/do/0/greet", Ok(killed)));
    assert_eq!(h.status(), WorkflowStatus::Failed);
    assert_eq!(error(&h)["status"], 408);
}

#[test]
fn a_js_script_is_sandbox_work_and_a_python_one_a_process() {
    let js = "do:\n  - js:\n      run:\n        script:\n          language: js\n          code: 'console.log(1)'\n          arguments: [ a ]\n";
    let h = start(&doc(js), json!({}));
    let Some(crate::Work::Script { script, root }) = h.work("/do/0/js") else {
        panic!("a js script runs in the sandbox");
    };
    assert!(script.contains("console.log(1)"));
    assert_eq!(root["arguments"], json!(["a"]));
    let py = "do:\n  - py:\n      run:\n        script:\n          language: python\n          code: 'print(1)'\n";
    let h = start(&doc(py), json!({}));
    let Some(crate::Work::Process(request)) = h.work("/do/0/py") else {
        panic!("a python script is a process");
    };
    assert_eq!(request.kind, crate::process::ProcessKind::Python);
    assert_eq!(request.args, ["-c", "print(1)"]);
}

#[test]
fn processes_are_listed_and_containers_and_other_languages_refused() {
    let text = doc("do:\n  - sh:\n      run:\n        shell:\n          command: ls\n  - py:\n      run:\n        script:\n          language: python\n          code: x\n  - js:\n      run:\n        script:\n          language: javascript\n          code: x\n");
    let document = crate::dsl::load_with(&text, &Workers).unwrap_or_else(|e| panic!("{e}"));
    assert!(crate::dsl::check_supported(&document).is_ok());
    let runs: Vec<String> = crate::dsl::processes(&document)
        .into_iter()
        .map(|p| p.at)
        .collect();
    assert_eq!(runs, ["/do/0/sh/run/shell", "/do/1/py/run/script"]);
    for (body, at) in [
        (
            "box:\n      run:\n        container:\n          image: alpine\n",
            "/do/0/box/run/container",
        ),
        (
            "rb:\n      run:\n        script:\n          language: ruby\n          code: x\n",
            "/do/0/rb/run/script/language",
        ),
        (
            "bg:\n      run:\n        shell:\n          command: ls\n        await: false\n",
            "/do/0/bg/run/await",
        ),
    ] {
        let text = doc(&format!("do:\n  - {body}"));
        let document = crate::dsl::load_with(&text, &Workers).unwrap_or_else(|e| panic!("{e}"));
        let refused = crate::dsl::check_supported(&document).expect_err("refused");
        assert_eq!(refused.problems()[0].pointer, at, "{refused}");
    }
}

const OAUTH2_CALL: &str = "do:\n  - get:\n      call: http\n      with:\n        method: get\n        endpoint:\n          uri: https://api.example.com/x\n          authentication:\n            oauth2:\n              authority: https://auth.example.com/\n              grant: GRANT\n              client:\n                id: app\n                secret: s\n              scopes:\n                - read\n";

#[test]
fn an_oauth2_call_asks_the_runtime_for_a_token_and_other_grants_are_refused() {
    let h = start(
        &doc(&OAUTH2_CALL.replace("GRANT", "client_credentials")),
        json!({}),
    );
    let input = &h.task("/do/0/get").input_data;
    let grant = &input["http_request"]["oauth2"];
    assert_eq!(grant["tokenUri"], "https://auth.example.com/oauth2/token");
    assert_eq!(grant["clientAuthentication"], "client_secret_post");
    assert_eq!(grant["scopes"], json!(["read"]));
    assert!(input["http_request"]["headers"]
        .get("Authorization")
        .is_none());

    let text = doc(&OAUTH2_CALL.replace("GRANT", "authorization_code"));
    let document = crate::dsl::load_with(&text, &Workers).unwrap_or_else(|e| panic!("{e}"));
    let refused = crate::dsl::check_supported(&document).expect_err("refused");
    let at = "/do/0/get/with/endpoint/authentication/oauth2/grant";
    assert_eq!(refused.problems()[0].pointer, at, "{refused}");
}

#[test]
fn authorization_describes_what_a_call_sends() {
    let basic = "do:\n  - get:\n      call: http\n      with:\n        method: get\n        endpoint:\n          uri: http://api.test/x\n          authentication:\n            basic:\n              username: app\n              password: pw\n        headers:\n          X-Scheme: ${ $authorization.scheme }\n      output:\n        as: ${ $authorization }\n      export:\n        as: '${ {token: $authorization.parameter} }'\n";
    let mut h = start(&doc(basic), json!({}));
    let request = &h.task("/do/0/get").input_data["http_request"];
    assert_eq!(request["headers"]["X-Scheme"], "Basic", "in the definition");
    assert!(request.get(proto::model::HTTP_SHOW_TOKEN).is_none());
    h.perform(
        "/do/0/get",
        Ok(json!({"response": {"statusCode": 200, "body": {}}})),
    );
    assert_eq!(
        output(&h),
        json!({"scheme": "Basic", "parameter": "YXBwOnB3"}),
        "after the call"
    );
    let context = &h.wf().dsl.as_ref().expect("an instance").context;
    assert_eq!(context["token"], "YXBwOnB3");

    // OAuth2: the runtime shows the token it obtained, only to a task that reads it.
    let oauth2 = OAUTH2_CALL.replace("GRANT", "client_credentials");
    let plain = start(&doc(&oauth2), json!({}));
    let request = &plain.task("/do/0/get").input_data["http_request"];
    assert!(request.get(proto::model::HTTP_SHOW_TOKEN).is_none());
    let reads = format!("{oauth2}      output:\n        as: ${{ $authorization }}\n");
    let mut h = start(&doc(&reads), json!({}));
    let request = &h.task("/do/0/get").input_data["http_request"];
    assert_eq!(request[proto::model::HTTP_SHOW_TOKEN], true);
    let shown = json!({"scheme": "Bearer", "parameter": "t0k"});
    h.perform(
        "/do/0/get",
        Ok(json!({"response": {"statusCode": 200, "body": {}}, "authorization": shown})),
    );
    assert_eq!(output(&h), shown);
}

#[test]
fn the_loose_mode_evaluates_every_string_and_keeps_those_that_are_no_expression() {
    let body = "do:\n  - note:\n      set:\n        total: .a + .b\n        label: hello world\n        url: https://example.com/x\n        strict: ${ .a }\n";
    let loose = start(
        &doc(&format!("evaluate:\n  mode: loose\n{body}")),
        json!({"a": 1, "b": 2}),
    );
    assert_eq!(
        output(&loose),
        json!({"total": 3, "label": "hello world", "url": "https://example.com/x", "strict": 1})
    );
    let strict = start(&doc(body), json!({"a": 1, "b": 2}));
    assert_eq!(
        output(&strict)["total"],
        ".a + .b",
        "strict: a string without ${{}} is text"
    );
}

const LISTEN_UNTIL_EVENTS: &str = "do:\n  - gather:\n      listen:\n        to:\n          any:\n            - with:\n                type: com.example.item\n          until:\n            all:\n              - with:\n                  type: com.example.closed\n              - with:\n                  type: com.example.paid\n  - count:\n      set:\n        items: '${ length }'\n";

#[test]
fn listen_any_until_events_consumes_until_its_until_strategy_is_met() {
    let mut h = start(&doc(LISTEN_UNTIL_EVENTS), json!({}));
    let mut types = h
        .wf()
        .dsl
        .as_ref()
        .map(|r| r.listening())
        .unwrap_or_default();
    types.sort_unstable();
    assert_eq!(
        types,
        ["com.example.closed", "com.example.item", "com.example.paid"]
    );
    assert!(offer(&mut h, "i1", "com.example.item", json!({"n": 1})));
    assert!(offer(&mut h, "c1", "com.example.closed", json!({})));
    assert_eq!(h.status(), WorkflowStatus::Running, "until waits for both");
    assert!(
        !offer(&mut h, "c1", "com.example.closed", json!({})),
        "a repeat is no news"
    );
    assert!(offer(&mut h, "i2", "com.example.item", json!({"n": 2})));
    assert!(offer(&mut h, "p1", "com.example.paid", json!({})));
    assert_eq!(h.status(), WorkflowStatus::Completed);
    assert_eq!(
        output(&h),
        json!({"items": 2}),
        "until's events are not consumed"
    );
}

const LISTEN_FOREACH: &str = "do:\n  - gather:\n      listen:\n        to:\n          any:\n            - with:\n                type: com.example.item\n          until: '${ length >= 2 }'\n      foreach:\n        item: ev\n        at: i\n        do:\n          - price:\n              call: priceItem\n              with:\n                sku: ${ .sku }\n        output:\n          as: '${ {sku: $ev.sku, price: .price, i: $i, input: $input.sku} }'\n        export:\n          as: '${ {last: .sku} }'\n";

fn listening(h: &H) -> proto::model::dsl::Listening {
    let run = h.wf().dsl.as_ref().expect("an instance");
    let seq = run.root.as_ref().expect("a root");
    match &seq.current.as_ref().expect("a task").body {
        proto::model::dsl::Body::Listen(listening) => (**listening).clone(),
        other => panic!("a listen: {other:?}"),
    }
}

#[test]
fn listen_foreach_processes_each_event_in_turn_and_queues_the_others() {
    let mut h = start(&doc(LISTEN_FOREACH), json!({}));
    let price = "/do/0/gather/foreach/do/0/price";
    assert!(offer(&mut h, "m1", "com.example.item", json!({"sku": "a"})));
    assert_eq!(h.task(price).input_data["sku"], "a");
    assert!(offer(&mut h, "m2", "com.example.item", json!({"sku": "b"})));
    assert_eq!(
        listening(&h).queued,
        [json!({"sku": "b"})],
        "b waits its turn"
    );
    assert_eq!(h.attempts(price).len(), 1, "one event at a time");
    h.poll(price);
    h.complete(price, json!({"price": 3}));
    assert_eq!(h.status(), WorkflowStatus::Running, "until needs two");
    assert_eq!(h.task(price).input_data["sku"], "b");
    h.poll(price);
    h.complete(price, json!({"price": 5}));
    assert_eq!(h.status(), WorkflowStatus::Completed, "{}", error(&h));
    assert_eq!(
        output(&h),
        json!([{"sku": "a", "price": 3, "i": 0, "input": "a"},
            {"sku": "b", "price": 5, "i": 1, "input": "b"}]),
        "output.as sees the iteration's input as $input"
    );
    let context = &h.wf().dsl.as_ref().expect("an instance").context;
    assert_eq!(context["last"], "b", "foreach.export.as");
}

#[test]
fn listen_one_with_foreach_consumes_one_event_only() {
    let one = LISTEN_FOREACH.replace(
        "any:\n            - with:\n                type: com.example.item\n          until: '${ length >= 2 }'\n",
        "one:\n            with:\n              type: com.example.item\n",
    );
    let mut h = start(&doc(&one), json!({}));
    let price = "/do/0/gather/foreach/do/0/price";
    assert!(offer(&mut h, "m1", "com.example.item", json!({"sku": "a"})));
    assert!(!offer(
        &mut h,
        "m2",
        "com.example.item",
        json!({"sku": "b"})
    ));
    h.poll(price);
    h.complete(price, json!({"price": 3}));
    assert_eq!(h.status(), WorkflowStatus::Completed, "{}", error(&h));
    assert_eq!(
        output(&h),
        json!([{"sku": "a", "price": 3, "i": 0, "input": "a"}])
    );
}

#[test]
fn cancelling_a_listen_cancels_its_running_iteration() {
    let mut h = start(&doc(LISTEN_FOREACH), json!({}));
    assert!(offer(&mut h, "m1", "com.example.item", json!({"sku": "a"})));
    h.ok(Input::Terminate { reason: None });
    let price = h.task("/do/0/gather/foreach/do/0/price");
    assert_eq!(price.status, TaskStatus::Canceled);
}
