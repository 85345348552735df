//! Serverless Workflow (DSL 1.0) documents end to end: every example of the specification is
//! registered; the specification's invalid documents and further broken ones are refused as
//! problem details naming the offending node; documents are read as JSON and YAML, listed,
//! protected from silent overwrites, deleted, and kept across a restart; an instance is
//! started, read in the DSL's terms and cancelled; `batonctl dsl apply` registers a file or
//! prints its problems.

use std::path::{Path, PathBuf};
use std::time::Duration;

use harness::{wait_for, Api, Reply, Server};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(30);

fn corpus(dir: &str) -> Vec<PathBuf> {
    let root = harness::workspace_root().join("engine/tests/data/serverless-workflow");
    let mut files: Vec<PathBuf> = std::fs::read_dir(root.join(dir))
        .expect("the corpus directory")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "json"))
        .collect();
    files.sort();
    files
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).expect("a readable document")
}

/// A document of namespace `test` with the given tasks (YAML, indented as under `do:`).
fn document(name: &str, version: &str, tasks: &str) -> String {
    format!(
        "document:\n  dsl: '1.0.3'\n  namespace: test\n  name: {name}\n  version: '{version}'\ndo:\n{tasks}"
    )
}

/// POSTs a document as YAML; answers the status, the content type and the body.
fn register(api: &Api, text: &str, query: &str) -> (u16, String, Value) {
    let resp = reqwest::blocking::Client::new()
        .post(api.url(&format!("/api/dsl/workflows{query}")))
        .header("Content-Type", "application/yaml")
        .body(text.to_owned())
        .send()
        .expect("POST a document");
    let status = resp.status().as_u16();
    let content_type = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = resp.json().unwrap_or(Value::Null);
    (status, content_type, body)
}

/// Asserts a refusal as problem details; answers its `instance` pointer.
fn problem(api: &Api, text: &str, what: &str) -> String {
    let (status, content_type, body) = register(api, text, "");
    assert_eq!(status, 400, "{what}: {body}");
    assert_eq!(content_type, "application/problem+json", "{what}");
    assert_eq!(body["status"], 400, "{what}: {body}");
    assert!(
        body["type"].as_str().is_some_and(|t| t.contains("errors")),
        "{what}: {body}"
    );
    let errors = body["errors"].as_array().expect("errors listed");
    assert!(!errors.is_empty(), "{what}: {body}");
    assert_eq!(body["instance"], errors[0]["pointer"], "{what}: {body}");
    body["instance"].as_str().expect("an instance").to_owned()
}

/// POSTs a document to the check that stores nothing.
fn validate(api: &Api, text: &str) -> (u16, Value) {
    let resp = reqwest::blocking::Client::new()
        .post(api.url("/api/dsl/validate"))
        .header("Content-Type", "application/yaml")
        .body(text.to_owned())
        .send()
        .expect("POST a document to validate");
    let status = resp.status().as_u16();
    (status, resp.json().unwrap_or(Value::Null))
}

#[test]
fn every_example_validates_and_broken_documents_answer_where_they_are_wrong() {
    let server = Server::start();
    let api = server.api();
    let examples = corpus("examples");
    assert_eq!(examples.len(), 66, "the specification's examples");
    // Every example is valid; those asking for what this runtime does not do yet are refused
    // at registration with where they ask it. Several examples share a namespace, name and
    // version with different documents: each replaces the one before.
    let mut keys = std::collections::BTreeSet::new();
    let mut unsupported = 0;
    for path in &examples {
        let text = read(path);
        let (status, checked) = validate(api, &text);
        assert_eq!(status, 200, "{}: {checked}", path.display());
        let (status, _, body) = register(api, &text, "?overwrite=true");
        if checked["supported"] == true {
            assert_eq!(status, 200, "{}: {body}", path.display());
            keys.insert(format!(
                "{}/{}/{}",
                body["namespace"], body["name"], body["version"]
            ));
        } else {
            unsupported += 1;
            assert_eq!(status, 400, "{}: {body}", path.display());
            assert_eq!(
                body["title"],
                "Unsupported by this runtime",
                "{}",
                path.display()
            );
            assert_eq!(body["instance"], checked["unsupported"][0]["pointer"]);
        }
    }
    assert!(
        !keys.is_empty() && unsupported > 0,
        "{} registered, {unsupported} refused",
        keys.len()
    );
    let invalid = corpus("invalid");
    assert_eq!(invalid.len(), 3);
    for path in &invalid {
        let at = problem(api, &read(path), &path.display().to_string());
        // A text that is not YAML at all is wrong as a whole: its pointer is the root, "".
        if !path.ends_with("listen-any-until-any-until.yaml") {
            assert!(!at.is_empty(), "{}", path.display());
        }
    }

    let cases = [
        ("unknown task kind", "  - a:\n      teleport: {to: mars}\n", "/do/0/a"),
        (
            "then into another list",
            "  - outer:\n      do:\n        - inner:\n            set: {a: 1}\n            then: last\n  - last:\n      set: {b: 2}\n",
            "/do/0/outer/do/0/inner/then",
        ),
        (
            "jq that does not compile",
            "  - a:\n      set:\n        broken: ${ .a | }\n",
            "/do/0/a/set/broken",
        ),
        (
            "two default cases",
            "  - pick:\n      switch:\n        - one:\n            then: done\n        - two:\n            then: exit\n  - done:\n      set: {x: 1}\n",
            "/do/0/pick/switch/1/two",
        ),
        (
            "a negative wait",
            "  - pause:\n      wait:\n        seconds: -1\n",
            "/do/0/pause/wait",
        ),
    ];
    for (what, tasks, pointer) in cases {
        let at = problem(api, &document("broken", "1.0.0", tasks), what);
        assert_eq!(at, pointer, "{what}");
    }
    // Nothing refused was stored.
    let all = api.get("/api/dsl/workflows").expect_ok("list").json();
    assert_eq!(all.as_array().map(Vec::len), Some(keys.len()));
    api.get("/api/dsl/workflows/test/broken")
        .assert_error_response(404, "a refused document");
}

fn get_as(api: &Api, path: &str, accept: &str) -> (String, String) {
    let resp = reqwest::blocking::Client::new()
        .get(api.url(path))
        .header("Accept", accept)
        .send()
        .expect("GET");
    assert_eq!(resp.status().as_u16(), 200, "{path}");
    let content_type = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    (content_type, resp.text().expect("a body"))
}

fn versions(reply: Reply) -> Vec<String> {
    reply
        .json()
        .as_array()
        .expect("a list")
        .iter()
        .map(|d| {
            format!(
                "{}/{}",
                d["name"].as_str().unwrap_or(""),
                d["version"].as_str().unwrap_or("")
            )
        })
        .collect()
}

#[test]
fn documents_are_read_listed_kept_from_overwrites_deleted_and_survive_a_restart() {
    let mut server = Server::start();
    let api = server.api();
    let one = document("greet", "1.0.0", "  - hello:\n      set: {greeting: hi}\n");
    let two = document(
        "greet",
        "1.10.0",
        "  - hello:\n      set: {greeting: hello}\n",
    );
    let other = document("greet", "1.0.0", "  - hello:\n      set: {greeting: bye}\n");
    for text in [&one, &two] {
        assert_eq!(register(api, text, "").0, 200);
    }
    assert_eq!(
        register(
            api,
            &document("farewell", "2.0.0", "  - bye:\n      set: {a: 1}\n"),
            ""
        )
        .0,
        200
    );
    assert_eq!(register(api, &one, "").0, 200, "the same document again");
    let (status, _, body) = register(api, &other, "");
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["code"], "CONFLICT");
    let (json_type, text) = get_as(
        api,
        "/api/dsl/workflows/test/greet/1.0.0",
        "application/json",
    );
    assert!(json_type.starts_with("application/json"));
    let stored: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(
        stored["do"][0]["hello"]["set"]["greeting"], "hi",
        "unchanged by the 409"
    );
    let (status, _, _) = register(api, &other, "?overwrite=true");
    assert_eq!(status, 200);
    let (yaml_type, yaml) = get_as(
        api,
        "/api/dsl/workflows/test/greet/1.0.0",
        "application/yaml",
    );
    assert_eq!(yaml_type, "application/yaml");
    assert!(yaml.contains("greeting: bye"), "{yaml}");
    assert!(yaml.contains("namespace: test"), "{yaml}");

    assert_eq!(
        versions(
            api.get("/api/dsl/workflows/test/greet")
                .expect_ok("versions")
        ),
        ["greet/1.0.0", "greet/1.10.0"]
    );
    assert_eq!(
        api.get("/api/dsl/workflows")
            .expect_ok("all")
            .json()
            .as_array()
            .map(Vec::len),
        Some(3)
    );

    api.delete("/api/dsl/workflows/test/greet/1.10.0")
        .expect_ok("delete");
    api.get("/api/dsl/workflows/test/greet/1.10.0")
        .assert_error_response(404, "deleted");
    api.delete("/api/dsl/workflows/test/greet/1.10.0")
        .assert_error_response(404, "deleted twice");

    server.restart();
    let api = server.api();
    assert_eq!(
        versions(
            api.get("/api/dsl/workflows")
                .expect_ok("all after a restart")
        ),
        ["farewell/2.0.0", "greet/1.0.0"]
    );
    let (_, text) = get_as(api, "/api/dsl/workflows/test/greet/1.0.0", "*/*");
    assert!(text.contains("bye"), "{text}");
}

#[test]
fn an_instance_is_started_read_in_the_dsl_terms_and_cancelled() {
    let server = Server::start();
    let api = server.api();
    let waits = document("sleeper", "1.0.0", "  - nap:\n      wait: PT1H\n");
    assert_eq!(register(api, &waits, "").0, 200);
    let start = "/api/dsl/workflows/test/sleeper/1.0.0/instances";
    api.post_json(start, &json!({"$dslInput": [1, 2]}))
        .assert_error_response(400, "an input holding the key that carries other inputs");
    // An input that is not an object is the instance's input as it is.
    let listed = api
        .post_json(start, &json!([1, 2]))
        .expect_ok("start")
        .json();
    let view = api
        .get(&format!(
            "/api/dsl/instances/{}",
            listed["id"].as_str().unwrap_or("")
        ))
        .expect_ok("view")
        .json();
    assert_eq!(view["input"], json!([1, 2]), "{view:#}");
    api.post_json(
        "/api/dsl/workflows/test/nothing/1.0.0/instances",
        &json!({}),
    )
    .assert_error_response(404, "an unknown document");

    let id = api
        .post_json(start, &json!({"who": "me"}))
        .expect_ok("start")
        .json()["id"]
        .as_str()
        .expect("an id")
        .to_owned();
    let view = wait_for(WAIT, "the instance waits", || {
        let v = api
            .get(&format!("/api/dsl/instances/{id}"))
            .expect_ok("view")
            .json();
        ["running", "waiting"]
            .contains(&v["phase"].as_str().unwrap_or(""))
            .then_some(v)
    });
    assert_eq!(view["id"], id.as_str());
    assert_eq!(view["input"], json!({"who": "me"}));
    api.post_empty(&format!("/api/dsl/instances/{id}/cancel"))
        .expect_ok("cancel");
    let view = api
        .get(&format!("/api/dsl/instances/{id}"))
        .expect_ok("view")
        .json();
    assert_eq!(view["phase"], "cancelled", "{view}");
    api.post_empty(&format!("/api/dsl/instances/{id}/suspend"))
        .assert_error_response(409, "suspending a cancelled instance");
    api.get("/api/dsl/instances/not-an-id")
        .assert_error_response(400, "a malformed id");
}

#[test]
fn batonctl_applies_a_file_or_prints_its_problems() {
    let server = Server::start();
    let batonctl = harness::baton_bin().with_file_name("batonctl");
    let run = |file: &Path| {
        std::process::Command::new(&batonctl)
            .args(["--url", &server.base_url(), "dsl", "apply"])
            .arg(file)
            .output()
            .expect("batonctl runs")
    };
    let example = corpus("examples")
        .into_iter()
        .find(|p| p.ends_with("wait-duration-inline.yaml"))
        .expect("the example");
    let out = run(&example);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("registered test/wait-duration-inline/0.1.0"),
        "{stdout}"
    );

    let invalid = corpus("invalid")
        .into_iter()
        .find(|p| p.ends_with("extra-property-in-call.yaml"))
        .expect("the invalid document");
    let out = run(&invalid);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("  /do/0/getPet: "), "{stderr}");

    let list = std::process::Command::new(&batonctl)
        .args(["--url", &server.base_url(), "dsl", "list"])
        .output()
        .expect("batonctl runs");
    let stdout = String::from_utf8_lossy(&list.stdout);
    assert!(stdout.contains("wait-duration-inline"), "{stdout}");
}

#[test]
fn a_run_of_a_registered_document_is_a_child_instance() {
    let server = Server::start();
    let api = server.api();
    let child = document(
        "doubler",
        "1.0.0",
        "  - double:\n      set:\n        n: ${ .n * 2 }\n",
    );
    let parent = document(
        "parent",
        "1.0.0",
        "  - child:\n      run:\n        workflow:\n          namespace: test\n          name: doubler\n          version: '1.0.0'\n          input:\n            n: ${ .x }\n",
    );
    for text in [&child, &parent] {
        let (status, _, body) = register(api, text, "");
        assert_eq!(status, 200, "{body}");
    }
    let id = api.start_dsl("test/parent/1.0.0", &json!({"x": 21}));
    let done = api.wait_dsl_ended(&id, WAIT);
    assert_eq!(done["output"], json!({"n": 42}), "{done:#}");
    let child_id = done["tasks"][0]["output"]["subWorkflowId"]
        .as_str()
        .expect("the child's id");
    let child = api
        .get(&format!("/api/dsl/instances/{child_id}"))
        .expect_ok("child")
        .json();
    assert_eq!(child["phase"], "completed");
    assert_eq!(child["output"], json!({"n": 42}));
}

/// A child's input and output that are not objects pass as they are, both ways.
#[test]
fn a_child_takes_and_gives_values_that_are_not_objects() {
    let server = Server::start();
    let api = server.api();
    let child = document(
        "adder",
        "1.0.0",
        "  - add:\n      set:\n        s: ${ add }\n      output:\n        as: .s\n",
    );
    let parent = document(
        "pair",
        "1.0.0",
        "  - child:\n      input:\n        from: ${ [.x, .x] }\n      run:\n        workflow:\n          namespace: test\n          name: adder\n          version: '1.0.0'\n  - twice:\n      set:\n        sum: ${ . }\n",
    );
    for text in [&child, &parent] {
        let (status, _, body) = register(api, text, "");
        assert_eq!(status, 200, "{body}");
    }
    let id = api.start_dsl("test/pair/1.0.0", &json!({"x": 21}));
    let done = api.wait_dsl_ended(&id, WAIT);
    assert_eq!(done["output"], json!({"sum": 42}), "{done:#}");
}

#[test]
fn an_emitted_event_reaches_event_handlers_through_batons_own_queue() {
    let server = Server::start();
    let api = server.api();
    api.register_workflow_def(&json!({
        "name": "on_greeted", "version": 1, "schemaVersion": 2,
        "tasks": [{"name": "keep", "taskReferenceName": "keep", "type": "SET_VARIABLE",
                   "inputParameters": {"who": "${workflow.input.who}"}}]
    }));
    let handler = json!({
        "name": "greeted", "event": "conductor:com.example.greeted.v1", "active": true,
        "actions": [{"action": "start_workflow", "start_workflow": {
            "name": "on_greeted", "correlationId": "${id}", "input": {"who": "${data.who}"}}}]
    });
    api.post_json("/api/event", &handler)
        .expect_ok("add the handler");
    let emitter = document(
        "emitter",
        "1.0.0",
        "  - greeted:\n      emit:\n        event:\n          with:\n            source: https://example.com\n            type: com.example.greeted.v1\n            data:\n              who: ${ .who }\n",
    );
    let (status, _, body) = register(api, &emitter, "");
    assert_eq!(status, 200, "{body}");
    let id = api.start_dsl("test/emitter/1.0.0", &json!({"who": "Ada"}));
    let done = api.wait_dsl_ended(&id, WAIT);
    assert_eq!(done["phase"], "completed", "{done:#}");
    let event_id = done["output"]["id"]
        .as_str()
        .expect("the event's id")
        .to_owned();
    let started = wait_for(Duration::from_secs(30), "the handler's workflow", || {
        let found = api
            .get(&format!(
                "/api/workflow/on_greeted/correlated/{event_id}?includeClosed=true"
            ))
            .expect_ok("correlated")
            .json();
        found.as_array().and_then(|runs| runs.first().cloned())
    });
    assert_eq!(started["input"]["who"], "Ada", "{started:#}");
}
