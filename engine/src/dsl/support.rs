//! What a valid document may ask that this runtime does not do yet, found before it is
//! registered, so that such a document is refused with the place it asks for it instead of
//! faulting when an instance reaches it: `run` of a container (no container runtime is
//! configured in Baton), of a script in a language other than `js` (`javascript`) and `python`
//! or given by `source`, and a `run` not awaited, calls of grpc, asyncapi and mcp, calls of
//! cataloged or URI functions, a function that runs a shell or a script, schemas given by
//! `resource`, authentication other than basic, bearer and oauth2 (its `client_credentials` and
//! `password` grants, on `http` calls). A schedule's `every` or `after` under
//! [`DSL_SCHEDULE_INTERVAL_MIN_MS`] is refused as well.
//!
//! [`processes`] lists the `run`s that start a process on the node (a shell command, a python
//! script): a node runs them only when its operator allowed it, so the node refuses them itself.

use super::error::{Error, Problem, Problems};
use super::rules::child;
use super::run::{kind_of, NO_CONTAINERS, UNSUPPORTED_CALLS};
use super::Document;
use crate::process::ProcessKind;
use proto::limits::DSL_SCHEDULE_INTERVAL_MIN_MS;
use serde_json::Value;

/// Refuses a document that asks for something this runtime does not do yet.
pub fn check_supported(doc: &Document) -> Result<(), Error> {
    let problems = survey(doc).problems;
    if problems.is_empty() {
        return Ok(());
    }
    Err(Error::Unsupported(Problems::new(problems)))
}

/// A `run` that starts a process on the node, at the pointer of its `shell` or `script`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessUse {
    pub at: String,
    pub kind: ProcessKind,
}

/// Every `run` of the document that starts a process on the node (see the module's header).
pub fn processes(doc: &Document) -> Vec<ProcessUse> {
    survey(doc).processes
}

/// What one walk of a document found.
#[derive(Default)]
struct Survey {
    problems: Vec<Problem>,
    processes: Vec<ProcessUse>,
}

fn survey(doc: &Document) -> Survey {
    let json = doc.json();
    let mut found = Survey::default();
    for key in ["every", "after"] {
        let at = format!("/schedule/{key}");
        let ms = json.pointer(&at).and_then(|d| super::millis(d).ok());
        if ms.is_some_and(|ms| ms < DSL_SCHEDULE_INTERVAL_MIN_MS) {
            let detail =
                format!("a schedule's '{key}' is at least {DSL_SCHEDULE_INTERVAL_MIN_MS} ms");
            found.problems.push(Problem::new(at, detail));
        }
    }
    for side in ["input", "output"] {
        schema_resource(json.get(side), &format!("/{side}"), &mut found.problems);
    }
    list(json.get("do"), "/do", &mut found);
    let declared = json
        .pointer("/use/authentications")
        .and_then(Value::as_object);
    for (name, policy) in declared.into_iter().flatten() {
        let at = child("/use/authentications", name);
        authentication(policy, &at, true, &mut found.problems);
    }
    let functions = json.pointer("/use/functions").and_then(Value::as_object);
    for (name, function) in functions.into_iter().flatten() {
        task(function, &child("/use/functions", name), &mut found);
    }
    found
}

fn not_yet(at: &str, what: &str) -> Problem {
    Problem::new(at, format!("{what} is not supported by this runtime yet"))
}

fn list(list: Option<&Value>, at: &str, found: &mut Survey) {
    let items = list.and_then(Value::as_array);
    for (i, item) in items.into_iter().flatten().enumerate() {
        for (name, def) in item.as_object().into_iter().flatten() {
            task(def, &child(&child(at, &i.to_string()), name), found);
        }
    }
}

fn task(def: &Value, at: &str, found: &mut Survey) {
    for side in ["input", "output", "export"] {
        schema_resource(def.get(side), &child(at, side), &mut found.problems);
    }
    let kind = kind_of(def);
    let problems = &mut found.problems;
    match kind {
        "listen" => {
            list(
                def.pointer("/foreach/do"),
                &format!("{at}/foreach/do"),
                found,
            );
        }
        "run" => run(def, at, found),
        "call" => call(def, at, problems),
        "do" => list(def.get("do"), &child(at, "do"), found),
        "for" => list(def.get("do"), &child(at, "do"), found),
        "fork" => list(
            def.pointer("/fork/branches"),
            &format!("{at}/fork/branches"),
            found,
        ),
        "try" => {
            list(def.get("try"), &child(at, "try"), found);
            list(def.pointer("/catch/do"), &format!("{at}/catch/do"), found);
        }
        _ => {}
    }
}

/// A `run` of a workflow, awaited, is supported, and so is one of a shell command or of a
/// script in `js` (`javascript`) or `python` given as `code` (those that start a process are
/// listed in `found.processes`); a container is not.
fn run(def: &Value, at: &str, found: &mut Survey) {
    let run = def.get("run").unwrap_or(&Value::Null);
    let run_at = child(at, "run");
    if run.get("await") == Some(&Value::Bool(false)) {
        found
            .problems
            .push(not_yet(&child(&run_at, "await"), "a run not awaited"));
    }
    if run.get("container").is_some() {
        let detail = NO_CONTAINERS.to_owned();
        found
            .problems
            .push(Problem::new(child(&run_at, "container"), detail));
    }
    let function = at.starts_with("/use/functions");
    let process = ["shell", "script"]
        .into_iter()
        .find(|k| run.get(*k).is_some());
    match process {
        Some(key) if function => {
            let what = format!("a function that runs a {key}");
            found.problems.push(not_yet(&child(&run_at, key), &what));
        }
        Some("shell") => found.processes.push(ProcessUse {
            at: child(&run_at, "shell"),
            kind: ProcessKind::Shell,
        }),
        Some(_) => script(
            run.get("script").unwrap_or(&Value::Null),
            &child(&run_at, "script"),
            found,
        ),
        None => {}
    }
}

/// A script in `js` (or `javascript`) runs in the node's sandbox; one in `python` is a process.
fn script(script: &Value, at: &str, found: &mut Survey) {
    if script.get("source").is_some() {
        let what = "a script given by 'source'";
        found.problems.push(not_yet(&child(at, "source"), what));
    }
    match script.get("language").and_then(Value::as_str) {
        Some("js" | "javascript") => {}
        Some("python") => found.processes.push(ProcessUse {
            at: at.to_owned(),
            kind: ProcessKind::Python,
        }),
        language => {
            let detail = format!(
                "the script language '{}' is not supported: Baton runs 'js' (also 'javascript') and 'python'",
                language.unwrap_or_default()
            );
            found
                .problems
                .push(Problem::new(child(at, "language"), detail));
        }
    }
}

fn call(def: &Value, at: &str, problems: &mut Vec<Problem>) {
    let target = def.get("call").and_then(Value::as_str).unwrap_or_default();
    let foreign = target.contains(':') || target.contains('@');
    if UNSUPPORTED_CALLS.contains(&target) || foreign {
        problems.push(not_yet(&child(at, "call"), &format!("'call: {target}'")));
    }
    if target == "a2a" && at.starts_with("/use/functions") {
        problems.push(not_yet(&child(at, "call"), "a function that calls a2a"));
    } else if target == "a2a" {
        a2a(
            def.get("with").unwrap_or(&Value::Null),
            &child(at, "with"),
            problems,
        );
    }
    if let Some(policy) = def.pointer("/with/endpoint/authentication") {
        authentication(
            policy,
            &format!("{at}/with/endpoint/authentication"),
            target == "http",
            problems,
        );
    }
}

/// An A2A call names its method and where the agent is (`agentCard` or `server`).
fn a2a(with: &Value, at: &str, problems: &mut Vec<Problem>) {
    if with.get("method").and_then(Value::as_str).is_none() {
        problems.push(Problem::new(at, "an a2a call needs a 'method'".to_owned()));
    }
    if with.get("agentCard").is_none() && with.get("server").is_none() {
        let detail = "an a2a call needs an 'agentCard' or a 'server'".to_owned();
        problems.push(Problem::new(at, detail));
    }
    for key in ["agentCard/endpoint/authentication", "server/authentication"] {
        if let Some(policy) = with.pointer(&format!("/{key}")) {
            authentication(policy, &format!("{at}/{key}"), false, problems);
        }
    }
}

/// Basic and bearer authentication are supported (inline, or a name of use.authentications),
/// and OAuth2 (`oauth2` is an `http` call's, or a declared policy's) with the
/// `client_credentials` or `password` grant, the client authenticating by
/// `client_secret_post`, `client_secret_basic` or `none`, the request form-encoded.
fn authentication(policy: &Value, at: &str, oauth2_here: bool, problems: &mut Vec<Problem>) {
    if policy.get("use").is_some() {
        return;
    }
    if let Some(oauth2) = policy.get("oauth2") {
        if !oauth2_here {
            problems.push(not_yet(
                &child(at, "oauth2"),
                "oauth2 on a call other than http",
            ));
        } else if oauth2.get("use").is_none() {
            oauth2_grant(oauth2, &child(at, "oauth2"), problems);
        }
        return;
    }
    let supported = policy.get("basic").is_some() || policy.get("bearer").is_some();
    if !supported {
        problems.push(not_yet(
            at,
            "authentication other than basic, bearer and oauth2",
        ));
    }
}

/// What of an `oauth2` policy this runtime does.
fn oauth2_grant(oauth2: &Value, at: &str, problems: &mut Vec<Problem>) {
    let text = |pointer: &str| oauth2.pointer(pointer).and_then(Value::as_str);
    let checks = [
        (
            "/grant",
            Some("client_credentials"),
            &["client_credentials", "password"][..],
        ),
        (
            "/client/authentication",
            Some("client_secret_post"),
            &["client_secret_post", "client_secret_basic", "none"][..],
        ),
        (
            "/request/encoding",
            Some("application/x-www-form-urlencoded"),
            &["application/x-www-form-urlencoded"][..],
        ),
    ];
    for (pointer, default, known) in checks {
        let given = text(pointer).or(default);
        if given.is_some_and(|g| !known.contains(&g)) {
            let what = format!("oauth2 '{}' {}", &pointer[1..], given.unwrap_or_default());
            problems.push(not_yet(&format!("{at}{pointer}"), &what));
        }
    }
}

fn schema_resource(side: Option<&Value>, at: &str, problems: &mut Vec<Problem>) {
    if side.and_then(|s| s.pointer("/schema/resource")).is_some() {
        let pointer = format!("{at}/schema/resource");
        problems.push(not_yet(&pointer, "a schema given by resource"));
    }
}
