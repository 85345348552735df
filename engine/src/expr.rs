//! Parameter resolution: Conductor's `${...}` placeholders in `inputParameters` and
//! `outputParameters`, evaluated against a workflow's state.
//!
//! `${workflow.input.x}`, `${workflow.output.x}`, `${workflow.variables.v}`, `${workflow.workflowId}`,
//! `${ref.output.y}`, `${ref.input.y}`, `${ref.status}` ... with nested paths such as `a.b[0].c` or
//! `a['b c']`. A string that is exactly one placeholder keeps the JSON type of what it names; a
//! placeholder embedded in a longer string is interpolated as text. Anything missing is `null`.
//! `$${` escapes a literal `${`. `${workflow.secrets.NAME}` stays as it is: the node fills it
//! in an HTTP task's headers as it makes the call, so no secret enters a decision or a record. Wildcards, deep scans, filters, slices and unions go to
//! [`jsonpath`](super::jsonpath) and answer the list of what they match.

use proto::model::{Json, Task, Workflow};
use serde_json::Value;

/// What placeholders are resolved against.
pub(crate) struct Scope<'a> {
    pub wf: &'a Workflow,
    /// The id of the task being created (Conductor's `${CPEWF_TASK_ID}`).
    pub task_id: Option<&'a str>,
}

impl<'a> Scope<'a> {
    pub fn new(wf: &'a Workflow) -> Self {
        Self { wf, task_id: None }
    }
}

/// Resolves every placeholder in a parameter map.
pub(crate) fn resolve_map(params: &Json, scope: &Scope<'_>) -> Json {
    params
        .iter()
        .map(|(k, v)| (k.clone(), resolve(v, scope)))
        .collect()
}

/// Resolves every placeholder in a JSON value, recursing into objects and arrays.
pub(crate) fn resolve(value: &Value, scope: &Scope<'_>) -> Value {
    interpolate(value, &|path| lookup(path, scope))
}

/// Resolves every `${path}` in `value` against a JSON document's root (event payloads:
/// `${orderId}`, `${$.order.items[0]}`), with the same rules as workflow parameters.
pub fn resolve_in(value: &Value, root: &Value) -> Value {
    interpolate(value, &|path| {
        let path = path.strip_prefix('$').unwrap_or(path);
        match parse_path(path) {
            Some(segs) => secret_placeholder(path, &segs).unwrap_or_else(|| walk(root, &segs)),
            None => Value::Null,
        }
    })
}

/// `${workflow.secrets.NAME}` as it is written, for the path of one: a secret is named, never
/// resolved, so the name travels (into a task's input, a started workflow's input) to the
/// HTTP call that is filled with its value at the edge.
fn secret_placeholder(path: &str, segs: &[Seg]) -> Option<Value> {
    match segs {
        [Seg::Key(root), Seg::Key(field), Seg::Key(_)]
            if root == "workflow" && field == "secrets" =>
        {
            Some(Value::String(format!("${{{path}}}")))
        }
        _ => None,
    }
}

/// Replaces every placeholder in `value` by what `lookup` answers for its path.
fn interpolate(value: &Value, lookup: &dyn Fn(&str) -> Value) -> Value {
    match value {
        Value::String(s) => interpolate_str(s, lookup),
        Value::Array(items) => Value::Array(items.iter().map(|v| interpolate(v, lookup)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), interpolate(v, lookup)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn interpolate_str(s: &str, lookup: &dyn Fn(&str) -> Value) -> Value {
    if !s.contains("${") {
        return Value::String(s.to_owned());
    }
    // Exactly one placeholder: keep the JSON type.
    if let Some(inner) = s.strip_prefix("${").and_then(|r| r.strip_suffix('}')) {
        if !inner.contains("${") && !inner.contains('}') {
            return lookup(inner.trim());
        }
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(pos) = rest.find("${") {
        if pos > 0 && rest.as_bytes()[pos - 1] == b'$' {
            // `$${` is a literal `${`.
            out.push_str(&rest[..pos - 1]);
            out.push_str("${");
            rest = &rest[pos + 2..];
            continue;
        }
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 2..];
        match after.find('}') {
            Some(end) => {
                match lookup(after[..end].trim()) {
                    Value::String(v) => out.push_str(&v),
                    other => out.push_str(&other.to_string()),
                }
                rest = &after[end + 1..];
            }
            None => {
                out.push_str(&rest[pos..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    Value::String(out)
}

/// One step of a path: an object key or an array index.
#[derive(Debug, PartialEq)]
enum Seg {
    Key(String),
    Index(usize),
}

/// Splits `a.b[0]['c d'].e` into segments. Returns None when malformed.
fn parse_path(path: &str) -> Option<Vec<Seg>> {
    let mut segs = Vec::new();
    let mut key = String::new();
    let mut chars = path.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '.' => {
                if !key.is_empty() {
                    segs.push(Seg::Key(std::mem::take(&mut key)));
                }
            }
            '[' => {
                if !key.is_empty() {
                    segs.push(Seg::Key(std::mem::take(&mut key)));
                }
                let mut inner = String::new();
                for c in chars.by_ref() {
                    if c == ']' {
                        break;
                    }
                    inner.push(c);
                }
                let inner = inner.trim();
                if let Some(q) = inner.strip_prefix('\'').and_then(|r| r.strip_suffix('\'')) {
                    segs.push(Seg::Key(q.to_owned()));
                } else if let Some(q) = inner.strip_prefix('"').and_then(|r| r.strip_suffix('"')) {
                    segs.push(Seg::Key(q.to_owned()));
                } else {
                    segs.push(Seg::Index(inner.parse().ok()?));
                }
            }
            c => key.push(c),
        }
    }
    if !key.is_empty() {
        segs.push(Seg::Key(key));
    }
    Some(segs)
}

fn walk(mut value: &Value, segs: &[Seg]) -> Value {
    for seg in segs {
        let next = match (seg, value) {
            (Seg::Key(k), Value::Object(m)) => m.get(k),
            (Seg::Index(i), Value::Array(a)) => a.get(*i),
            // `list.length` as Conductor's JSONPath allows.
            (Seg::Key(k), Value::Array(a)) if k == "length" => return Value::from(a.len()),
            _ => None,
        };
        match next {
            Some(v) => value = v,
            None => return Value::Null,
        }
    }
    value.clone()
}

fn walk_json(map: &Json, segs: &[Seg]) -> Value {
    match segs.split_first() {
        None => Value::Object(map.clone()),
        Some((Seg::Key(k), rest)) => map.get(k).map(|v| walk(v, rest)).unwrap_or(Value::Null),
        Some((Seg::Index(_), _)) => Value::Null,
    }
}

/// Resolves the inside of one `${...}`.
fn lookup(path: &str, scope: &Scope<'_>) -> Value {
    if path == "CPEWF_TASK_ID" {
        return scope.task_id.map(Value::from).unwrap_or(Value::Null);
    }
    let path = path.strip_prefix("$.").unwrap_or(path);
    if super::jsonpath::is_query(path) {
        return jsonpath_lookup(path, scope);
    }
    let Some(segs) = parse_path(path) else {
        return Value::Null;
    };
    if let Some(placeholder) = secret_placeholder(path, &segs) {
        return placeholder;
    }
    let Some((Seg::Key(root), rest)) = segs.split_first() else {
        return Value::Null;
    };
    if root == "workflow" {
        return workflow_field(scope.wf, rest);
    }
    match scope
        .wf
        .task_by_ref(root)
        .or_else(|| latest_in_loop(scope.wf, root))
    {
        Some(task) => task_field(task, rest),
        None => Value::Null,
    }
}

/// A task of a DO_WHILE's body named by its reference without the iteration's suffix: its
/// latest iteration's, as in Conductor.
fn latest_in_loop<'a>(wf: &'a Workflow, reference: &str) -> Option<&'a Task> {
    wf.tasks
        .iter()
        .rev()
        .find(|t| t.iteration > 0 && t.workflow_task.task_reference_name == reference)
}

/// A JSONPath query over the workflow (`workflow...`) or a task (`ref...`), as a document of
/// the fields a plain path reads.
fn jsonpath_lookup(path: &str, scope: &Scope<'_>) -> Value {
    let split = path.find(['.', '[']).unwrap_or(path.len());
    let (root, rest) = path.split_at(split);
    let doc = if root == "workflow" {
        serde_json::json!({
            "input": scope.wf.input, "output": scope.wf.output,
            "variables": scope.wf.variables, "workflowId": scope.wf.workflow_id.as_str(),
            "correlationId": scope.wf.correlation_id, "status": scope.wf.status.as_str(),
        })
    } else {
        let task = scope
            .wf
            .task_by_ref(root)
            .or_else(|| latest_in_loop(scope.wf, root));
        let Some(t) = task else {
            return Value::Array(Vec::new());
        };
        serde_json::json!({
            "input": t.input_data, "output": t.output_data,
            "status": t.status.as_str(), "taskId": t.task_id.as_str(),
        })
    };
    super::jsonpath::query(&doc, rest)
}

fn workflow_field(wf: &Workflow, segs: &[Seg]) -> Value {
    let Some((Seg::Key(field), rest)) = segs.split_first() else {
        return Value::Null;
    };
    let scalar = |v: Value| if rest.is_empty() { v } else { Value::Null };
    match field.as_str() {
        "input" => walk_json(&wf.input, rest),
        "output" => walk_json(&wf.output, rest),
        "variables" => walk_json(&wf.variables, rest),
        "workflowId" => scalar(Value::from(wf.workflow_id.as_str())),
        "correlationId" => scalar(
            wf.correlation_id
                .clone()
                .map(Value::from)
                .unwrap_or(Value::Null),
        ),
        "workflowType" => scalar(Value::from(wf.workflow_name.as_str())),
        "version" => scalar(Value::from(wf.workflow_version)),
        "status" => scalar(Value::from(wf.status.as_str())),
        "parentWorkflowId" => scalar(
            wf.parent_workflow_id
                .clone()
                .map(Value::from)
                .unwrap_or(Value::Null),
        ),
        "reasonForIncompletion" => scalar(
            wf.reason_for_incompletion
                .clone()
                .map(Value::from)
                .unwrap_or(Value::Null),
        ),
        "createTime" => scalar(Value::from(wf.create_time)),
        "startTime" => scalar(Value::from(wf.start_time)),
        "schemaVersion" => scalar(Value::from(wf.workflow_definition.schema_version)),
        "taskToDomain" => {
            let m: Json = wf
                .task_to_domain
                .iter()
                .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
                .collect();
            walk_json(&m, rest)
        }
        _ => Value::Null,
    }
}

fn task_field(task: &Task, segs: &[Seg]) -> Value {
    let Some((Seg::Key(field), rest)) = segs.split_first() else {
        return Value::Null;
    };
    match field.as_str() {
        "input" => walk_json(&task.input_data, rest),
        "output" => walk_json(&task.output_data, rest),
        "status" => Value::from(task.status.as_str()),
        "taskId" => Value::from(task.task_id.as_str()),
        other => match serde_json::to_value(task) {
            Ok(Value::Object(m)) => m.get(other).map(|v| walk(v, rest)).unwrap_or(Value::Null),
            _ => Value::Null,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn workflow() -> Workflow {
        let wf = json!({
            "workflowId": "00000000-0000-0000-0000-000000000001",
            "workflowName": "w", "workflowVersion": 1, "status": "RUNNING",
            "createTime": 1, "updateTime": 1, "startTime": 1, "endTime": 0,
            "tasks": [{
                "taskType": "t", "status": "COMPLETED", "inputData": {"i": 1},
                "referenceTaskName": "t1", "retryCount": 0, "seq": 1, "pollCount": 1,
                "taskDefName": "t", "scheduledTime": 1, "startTime": 1, "endTime": 2, "updateTime": 2,
                "startDelayInSeconds": 0, "retried": false, "executed": true, "callbackFromWorker": true,
                "responseTimeoutSeconds": 10, "workflowInstanceId": "00000000-0000-0000-0000-000000000001",
                "workflowType": "w", "taskId": "00000000-0000-0000-0000-000000000002",
                "callbackAfterSeconds": 0, "workerId": "wk",
                "outputData": {"op": "done", "n": 5, "list": [{"c": "x"}, {"c": "y"}], "obj": {"k": true}},
                "workflowTask": {"name": "t", "taskReferenceName": "t1"}, "workflowPriority": 0,
                "iteration": 0, "firstScheduledTime": 1
            }],
            "input": {"param1": "p1 value", "num": 7, "nested": {"a": [1, 2, {"b": "deep"}]}, "sp ace": 1},
            "output": {}, "correlationId": "corr", "taskToDomain": {},
            "failedReferenceTaskNames": [], "failedTaskNames": [],
            "workflowDefinition": {"name": "w"}, "priority": 0, "variables": {"v": [1]},
            "lastRetriedTime": 0
        });
        serde_json::from_value(wf).expect("test workflow parses")
    }

    #[test]
    fn resolves_table() {
        let wf = workflow();
        let scope = Scope {
            wf: &wf,
            task_id: Some("tid"),
        };
        let table: Vec<(Value, Value)> = vec![
            (json!("${workflow.input.param1}"), json!("p1 value")),
            (json!("${workflow.input.num}"), json!(7)),
            (
                json!("${workflow.secrets.api_key}"),
                json!("${workflow.secrets.api_key}"),
            ),
            (
                json!("Bearer ${ workflow.secrets.api_key }"),
                json!("Bearer ${workflow.secrets.api_key}"),
            ),
            (json!("${workflow.input.nested.a[2].b}"), json!("deep")),
            (json!("${workflow.input.nested.a[1]}"), json!(2)),
            (
                json!("${workflow.input.nested.a[*]}"),
                json!([1, 2, {"b": "deep"}]),
            ),
            (json!("${workflow.input..b}"), json!(["deep"])),
            (json!("${t1.output.list[?(@.c == 'y')].c}"), json!(["y"])),
            (json!("${t1.output.list[*].c}"), json!(["x", "y"])),
            (
                json!("${workflow.input.nested}"),
                json!({"a": [1, 2, {"b": "deep"}]}),
            ),
            (json!("${workflow.input['sp ace']}"), json!(1)),
            (json!("${workflow.input.missing}"), Value::Null),
            (json!("${workflow.input.nested.a[9]}"), Value::Null),
            (
                json!("${workflow.workflowId}"),
                json!("00000000-0000-0000-0000-000000000001"),
            ),
            (json!("${workflow.correlationId}"), json!("corr")),
            (json!("${workflow.variables.v}"), json!([1])),
            (json!("${t1.output.op}"), json!("done")),
            (json!("${t1.output.list[1].c}"), json!("y")),
            (json!("${t1.output.list.length}"), json!(2)),
            (json!("${t1.input.i}"), json!(1)),
            (json!("${t1.status}"), json!("COMPLETED")),
            (json!("${t1.workerId}"), json!("wk")),
            (json!("${nope.output.x}"), Value::Null),
            (json!("${CPEWF_TASK_ID}"), json!("tid")),
            (
                json!("a ${t1.output.op} b ${workflow.input.num}"),
                json!("a done b 7"),
            ),
            (json!("x ${workflow.input.missing}"), json!("x null")),
            (json!("x ${t1.output.obj}"), json!("x {\"k\":true}")),
            (json!("$${literal}"), json!("${literal}")),
            (json!("plain"), json!("plain")),
            (
                json!("workflow.input.param1"),
                json!("workflow.input.param1"),
            ),
            (json!(3), json!(3)),
            (Value::Null, Value::Null),
            (
                json!(["${workflow.input.num}", {"k": "${t1.output.n}"}]),
                json!([7, {"k": 5}]),
            ),
        ];
        for (input, want) in table {
            assert_eq!(resolve(&input, &scope), want, "{input}");
        }
    }

    #[test]
    fn paths_parse() {
        assert_eq!(
            parse_path("a.b[0]['c d'].e"),
            Some(vec![
                Seg::Key("a".into()),
                Seg::Key("b".into()),
                Seg::Index(0),
                Seg::Key("c d".into()),
                Seg::Key("e".into())
            ])
        );
        assert_eq!(parse_path("a[x]"), None);
    }
}
