//! The Serverless Workflow conformance kit (CTK, Gherkin) against a running node: every scenario
//! of `engine/tests/data/serverless-workflow/ctk/*.feature` registers its document, starts an
//! instance with its input, waits for it to end and checks what the scenario says (phase,
//! output, error, which tasks ran in which order). The scenarios that call public hosts
//! (petstore.swagger.io, httpbin.org) call a server on loopback instead, which answers as those
//! hosts do for the requests the scenarios make.
//!
//! A scenario this runtime does not support yet must be refused when its document is
//! registered, with the place it asks for it; [`NOT_YET`] names them, so each one is checked to
//! be refused until it is supported, and then fails here until it is moved out of the list.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use gherkin::{Feature, GherkinEnv, Step};
use harness::upstream::{Answer, Seen, Upstream};
use harness::{wait_for, workspace_root, Api, Server};
use serde_json::{json, Value};

/// Longest an instance of a scenario may take to end.
const WAIT: Duration = Duration::from_secs(30);
/// The hosts the scenarios call, answered by the loopback server.
const PUBLIC_HOSTS: [&str; 2] = ["https://petstore.swagger.io", "https://httpbin.org"];
/// Scenarios this runtime refuses at registration for now (what they need is not built).
const NOT_YET: [&str; 0] = [];

fn features() -> Vec<Feature> {
    let dir = workspace_root().join("engine/tests/data/serverless-workflow/ctk");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("the conformance kit's features")
        .map(|e| e.expect("a feature file").path())
        .filter(|p| p.extension().is_some_and(|e| e == "feature"))
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|p| Feature::parse_path(p, GherkinEnv::default()).expect("a Gherkin feature"))
        .collect()
}

/// The public hosts' answers to the scenarios' requests.
fn public_hosts(seen: &Seen) -> Answer {
    let path = seen.path.as_str();
    let json = |status, body: Value| {
        let mut answer = Answer::new(status, &body.to_string());
        answer.headers.push(("content-type", "application/json"));
        answer
    };
    if let Some(rest) = path.strip_prefix("/v2/pet/findByStatus?status=") {
        return json(
            "200 OK",
            json!([{"id": 10, "name": "Milou", "status": rest}]),
        );
    }
    if path.starts_with("/v2/pet/getPetByName/") {
        return json(
            "404 Not Found",
            json!({"code": 404, "message": "not found"}),
        );
    }
    if let Some(id) = path
        .strip_prefix("/v2/pet/")
        .and_then(|id| id.parse::<u64>().ok())
    {
        return json(
            "200 OK",
            json!({"id": id, "name": "Milou", "status": "available"}),
        );
    }
    if path == "/v2/swagger.json" {
        let host = seen.headers.get("host").cloned().unwrap_or_default();
        return json("200 OK", petstore_swagger(&host));
    }
    if let Some(credentials) = path.strip_prefix("/basic-auth/") {
        let (user, password) = credentials.split_once('/').unwrap_or_default();
        let expected = format!("Basic {}", base64(&format!("{user}:{password}")));
        if seen.headers.get("authorization") == Some(&expected) {
            return json("200 OK", json!({"authenticated": true, "user": user}));
        }
        return Answer::new("401 Unauthorized", "");
    }
    Answer::new("404 Not Found", "")
}

/// The petstore's Swagger 2.0 document, cut to the operations the scenarios call, as served
/// from `host`.
fn petstore_swagger(host: &str) -> Value {
    let param = |name: &str, place: &str| json!({"name": name, "in": place, "required": true, "type": "string"});
    json!({
        "swagger": "2.0",
        "info": {"title": "Swagger Petstore", "version": "1.0.7"},
        "host": host,
        "basePath": "/v2",
        "schemes": ["https", "http"],
        "paths": {
            "/pet/findByStatus": {"get": {"operationId": "findPetsByStatus",
                "parameters": [param("status", "query")]}},
            "/pet/{petId}": {"get": {"operationId": "getPetById",
                "parameters": [param("petId", "path")]}},
        },
    })
}

/// Standard base64 with padding.
fn base64(text: &str) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in text.as_bytes().chunks(3) {
        let n = chunk.iter().fold(0u32, |n, b| (n << 8) | u32::from(*b)) << (8 * (3 - chunk.len()));
        for i in 0..4 {
            let sextet = (n >> (18 - 6 * i)) & 63;
            let c = if i <= chunk.len() {
                ALPHABET[sextet as usize] as char
            } else {
                '='
            };
            out.push(c);
        }
    }
    out
}

/// A step's docstring without the content type the parser leaves on its first line
/// (`"""yaml`).
fn docstring(step: &Step) -> Option<String> {
    let text = step.docstring.as_deref()?;
    Some(match text.split_once('\n') {
        Some((first, rest)) if !first.contains(':') && !first.trim().is_empty() => rest.to_owned(),
        _ => text.to_owned(),
    })
}

fn yaml(text: &str) -> Value {
    serde_yaml_ng::from_str(text).unwrap_or_else(|e| panic!("YAML in a scenario: {e}\n{text}"))
}

/// One scenario's run: its document and input, then the instance it ended as.
#[derive(Default)]
struct Run {
    document: String,
    input: Value,
    instance: Value,
}

/// `a.b.c` in `value`.
fn at<'v>(value: &'v Value, path: &str) -> Option<&'v Value> {
    path.split('.').try_fold(value, |v, key| v.get(key))
}

/// The names of the tasks that ran, in the order they started (the scenario's own tasks only).
fn ran(instance: &Value) -> Vec<String> {
    let tasks = instance["tasks"].as_array().cloned().unwrap_or_default();
    tasks
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

/// Registers, starts and waits for the scenario's instance.
fn execute(api: &Api, upstream: &Upstream, run: &mut Run) -> Result<(), String> {
    let mut text = run.document.clone();
    for host in PUBLIC_HOSTS {
        text = text.replace(host, &upstream.url(""));
    }
    let reply = reqwest::blocking::Client::new()
        .post(api.url("/api/dsl/workflows?overwrite=true"))
        .header("Content-Type", "application/yaml")
        .body(text)
        .send()
        .map_err(|e| e.to_string())?;
    let status = reply.status().as_u16();
    let header: Value = reply.json().map_err(|e| e.to_string())?;
    if status != 200 {
        return Err(format!("registration answered {status}: {header}"));
    }
    let key = format!(
        "{}/{}/{}",
        header["namespace"], header["name"], header["version"]
    )
    .replace('"', "");
    let input = if run.input.is_null() {
        json!({})
    } else {
        run.input.clone()
    };
    let started = api
        .post_json(&format!("/api/dsl/workflows/{key}/instances"), &input)
        .expect_ok("start an instance")
        .json();
    let id = started["id"].as_str().ok_or("no instance id")?.to_owned();
    run.instance = wait_for(WAIT, "the instance to end", || {
        let view = api
            .get(&format!("/api/dsl/instances/{id}"))
            .expect_ok("instance")
            .json();
        let ended = ["completed", "faulted", "cancelled"].contains(&view["phase"].as_str()?);
        ended.then_some(view)
    });
    Ok(())
}

/// Checks one `Then`/`And` step against the ended instance.
fn check(step: &Step, run: &Run) -> Result<(), String> {
    let text = step.value.as_str();
    let doc = docstring(step).as_deref().map(yaml);
    let instance = &run.instance;
    let output = &instance["output"];
    let phase = instance["phase"].as_str().unwrap_or_default();
    let expect = |ok: bool, what: String| if ok { Ok(()) } else { Err(what) };
    if let Some(rest) = text.strip_prefix("the workflow should ") {
        let wanted = if rest.starts_with("complete") {
            "completed"
        } else {
            "faulted"
        };
        expect(
            phase == wanted,
            format!("phase {phase}, not {wanted}: {instance}"),
        )?;
        return match (rest, doc) {
            (r, Some(out)) if r.starts_with("complete") => {
                expect(*output == out, format!("output {output}, not {out}"))
            }
            (_, Some(Value::Object(error))) => {
                let found = &instance["error"];
                let all = error.iter().all(|(k, v)| found.get(k) == Some(v));
                expect(all, format!("error {found}, not {error:?}"))
            }
            _ => Ok(()),
        };
    }
    if let Some(list) = text.strip_prefix("the workflow output should have properties ") {
        for name in list.split(", ").map(|n| n.trim_matches('\'')) {
            expect(
                at(output, name).is_some(),
                format!("no '{name}' in {output}"),
            )?;
        }
        return Ok(());
    }
    if let Some(rest) = text.strip_prefix("the workflow output should have a '") {
        let (name, rest) = rest.split_once('\'').unwrap_or_default();
        let found = at(output, name).cloned().unwrap_or_default();
        if let Some(count) = rest.strip_prefix(" property containing ") {
            let n: usize = count
                .split(' ')
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or(usize::MAX);
            let len = found.as_array().map(Vec::len);
            return expect(
                len == Some(n),
                format!("'{name}' is {found}, not {n} items"),
            );
        }
        let value = doc.unwrap_or_default();
        return expect(found == value, format!("'{name}' is {found}, not {value}"));
    }
    order(text, &ran(instance))
}

/// `X should run first|last`, `X should run after Y`.
fn order(text: &str, ran: &[String]) -> Result<(), String> {
    let (task, rest) = text
        .split_once(" should run ")
        .ok_or(format!("unknown step '{text}'"))?;
    let index = |name: &str| ran.iter().position(|r| r == name);
    let ok = match rest {
        "first" => ran.first().map(String::as_str) == Some(task),
        "last" => ran.last().map(String::as_str) == Some(task),
        after => {
            let other = after.strip_prefix("after ").unwrap_or(after);
            matches!((index(task), index(other)), (Some(a), Some(b)) if a > b)
        }
    };
    if ok {
        Ok(())
    } else {
        Err(format!("{text}; the tasks ran as {ran:?}"))
    }
}

/// Runs one scenario; answers why it failed.
fn scenario(api: &Api, upstream: &Upstream, steps: &[Step]) -> Result<(), String> {
    let mut run = Run::default();
    for step in steps {
        let text = step.value.as_str();
        match text {
            "a workflow with definition:" => run.document = docstring(step).unwrap_or_default(),
            "given the workflow input is:" => {
                run.input = yaml(&docstring(step).unwrap_or_default())
            }
            "the workflow is executed" => execute(api, upstream, &mut run)?,
            _ => check(step, &run)?,
        }
    }
    Ok(())
}

#[test]
fn the_conformance_kits_scenarios_pass() {
    let upstream = Upstream::start(public_hosts);
    let server = Server::start();
    let api = server.api();
    let mut results: BTreeMap<String, Result<(), String>> = BTreeMap::new();
    for feature in features() {
        for s in &feature.scenarios {
            let outcome = scenario(api, &upstream, &s.steps);
            let outcome = match (NOT_YET.contains(&s.name.as_str()), outcome) {
                (false, outcome) => outcome,
                (true, Err(why)) if why.contains("Unsupported by this runtime") => Ok(()),
                (true, Err(why)) => Err(format!("not supported yet, but not refused so: {why}")),
                (true, Ok(())) => Err("passes now: take it out of NOT_YET".into()),
            };
            results.insert(format!("{}: {}", feature.name, s.name), outcome);
        }
    }
    assert_eq!(
        results.len(),
        21,
        "the kit's scenarios: {:?}",
        results.keys()
    );
    let failed: Vec<String> = results
        .iter()
        .filter_map(|(name, r)| r.as_ref().err().map(|why| format!("{name}: {why}")))
        .collect();
    assert!(
        failed.is_empty(),
        "{} of 21 scenarios failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
}
