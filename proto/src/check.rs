//! The checks every request passes at the door, before anything is stored: names, texts, numbers,
//! payloads and whole definitions, each against the one named maximum in [`crate::limits`] that
//! the engine and the stores also rely on. What passes can always be stored, replicated, read
//! back and decoded; what does not is refused with a [`Violation`] that says which field broke
//! which limit, and nothing is changed.
//!
//! Every door uses these functions (HTTP, the QUIC worker gateway, event actions, triggers), so a
//! limit is checked once, in one place, with one number. Pure functions: no I/O, no clock.

use crate::limits::{
    CORRELATION_ID_LEN_MAX, DEF_BYTES_MAX, DESCRIPTION_LEN_MAX, DURATION_SECONDS_MAX, NAME_LEN_MAX,
    PAYLOAD_BYTES_MAX, PAYLOAD_DEPTH_MAX, REASON_LEN_MAX, RETRY_COUNT_MAX, SCHEMA_BYTES_MAX,
};
use crate::model::{
    Json, SchemaDef, SchemaRef, StartWorkflowRequest, TaskDef, TaskResult, WorkflowDef,
    WorkflowTask,
};
use serde_json::Value;

/// Why a request was refused at the door.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Violation {
    /// A field is malformed or out of its range (HTTP 400).
    #[error("{0}")]
    Invalid(String),
    /// A field or payload is larger than its limit (HTTP 413).
    #[error("{0}")]
    TooLarge(String),
}

/// What every check answers.
pub type Checked = Result<(), Violation>;

fn invalid(message: String) -> Checked {
    Err(Violation::Invalid(message))
}

/// How deeply a JSON value nests: 0 for a scalar, 1 for `{}` or `[]`, one more per level inside.
/// Iterative, so a value of any depth is measured without recursion.
pub fn json_depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut pending = vec![(value, 0usize)];
    while let Some((v, above)) = pending.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match v {
            Value::Array(items) => Box::new(items.iter()),
            Value::Object(map) => Box::new(map.values()),
            _ => {
                deepest = deepest.max(above);
                continue;
            }
        };
        deepest = deepest.max(above + 1);
        pending.extend(children.map(|c| (c, above + 1)));
    }
    deepest
}

/// The depth of a map as a payload (the map itself is one level).
pub fn map_depth(map: &Json) -> usize {
    1 + map.values().map(json_depth).max().unwrap_or(0)
}

/// A payload (workflow input, task output, variables): at most [`PAYLOAD_DEPTH_MAX`] levels deep
/// and [`PAYLOAD_BYTES_MAX`] bytes of JSON.
pub fn payload(what: &str, map: &Json) -> Checked {
    sized(what, map_depth(map), json_len(map))
}

/// [`payload`] for any JSON value (an event's payload).
pub fn value(what: &str, v: &Value) -> Checked {
    sized(what, json_depth(v), json_len(v))
}

fn sized(what: &str, depth: usize, bytes: usize) -> Checked {
    if depth > PAYLOAD_DEPTH_MAX {
        return invalid(format!(
            "{what} nests {depth} levels deep, over the limit of {PAYLOAD_DEPTH_MAX}"
        ));
    }
    if bytes > PAYLOAD_BYTES_MAX {
        return Err(Violation::TooLarge(format!(
            "{what} is {bytes} bytes, over the limit of {PAYLOAD_BYTES_MAX} bytes; store large payloads elsewhere and pass a reference"
        )));
    }
    Ok(())
}

/// How deeply encoded JSON nests (brackets outside strings), read from its bytes without
/// parsing: what a parser's recursion limit counts. Several values one after another (a chain)
/// count as the deepest of them. (What `record::write::encode_json_measured` measures while it
/// writes; this is the reference its tests hold it to.)
#[cfg(test)]
pub(crate) fn encoded_depth(json: &[u8]) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for &b in json {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// Serialized size of a JSON value in bytes.
pub fn json_len<T: serde::Serialize + ?Sized>(value: &T) -> usize {
    let mut counter = ByteCounter(0);
    match serde_json::to_writer(&mut counter, value) {
        Ok(()) => counter.0,
        Err(_) => usize::MAX,
    }
}

/// Counts bytes written without keeping them.
struct ByteCounter(usize);

impl std::io::Write for ByteCounter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 = self.0.saturating_add(buf.len());
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Characters no name or text may hold: control characters (NUL among them) and the invisible
/// format characters that reorder or hide text (bidirectional overrides, zero-width marks).
fn is_hidden(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{00AD}' | '\u{061C}' | '\u{180E}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{206F}' | '\u{FEFF}' | '\u{FFF9}'..='\u{FFFB}')
}

/// A name (workflow, task type, reference name, handler, schedule, webhook, worker id): not
/// empty, at most [`NAME_LEN_MAX`] bytes, printable, without surrounding spaces, and without
/// `/` or `\` (names appear in URL paths).
pub fn name(kind: &str, s: &str) -> Checked {
    if s.trim().is_empty() {
        return invalid(format!("{kind} must not be empty"));
    }
    if s.len() > NAME_LEN_MAX {
        return invalid(format!(
            "{kind} is {} bytes long, over the limit of {NAME_LEN_MAX}",
            s.len()
        ));
    }
    if s.trim() != s {
        return invalid(format!(
            "{kind} '{}' begins or ends with a space",
            s.escape_debug()
        ));
    }
    if let Some(c) = s.chars().find(|&c| is_hidden(c) || c == '/' || c == '\\') {
        return invalid(format!(
            "{kind} '{}' holds the character {:?} (U+{:04X}); names are printable and hold no '/' or '\\'",
            s.escape_debug(),
            c,
            u32::from(c)
        ));
    }
    Ok(())
}

/// A free text (correlation id, reason, description): at most `max` bytes and printable (line
/// breaks and tabs allowed).
pub fn text(what: &str, s: &str, max: usize) -> Checked {
    if s.len() > max {
        return invalid(format!(
            "{what} is {} bytes long, over the limit of {max}",
            s.len()
        ));
    }
    if let Some(c) = s
        .chars()
        .find(|&c| is_hidden(c) && !matches!(c, '\n' | '\r' | '\t'))
    {
        return invalid(format!(
            "{what} holds the unprintable character U+{:04X}",
            u32::from(c)
        ));
    }
    Ok(())
}

fn optional_text(what: &str, s: Option<&str>, max: usize) -> Checked {
    s.map_or(Ok(()), |s| text(what, s, max))
}

/// A duration in seconds: at most [`DURATION_SECONDS_MAX`] (ten years).
pub fn seconds(what: &str, value: u64) -> Checked {
    if value > DURATION_SECONDS_MAX {
        return invalid(format!(
            "{what} is {value} seconds, over the limit of {DURATION_SECONDS_MAX} (ten years)"
        ));
    }
    Ok(())
}

/// A retry count: at most [`RETRY_COUNT_MAX`].
pub fn retry_count(what: &str, value: u32) -> Checked {
    if value > RETRY_COUNT_MAX {
        return invalid(format!(
            "{what} is {value}, over the limit of {RETRY_COUNT_MAX}"
        ));
    }
    Ok(())
}

/// A task definition: its name, texts and every duration and count in range.
pub fn task_def(def: &TaskDef) -> Checked {
    name("TaskDef name", &def.name)?;
    let what = |field: &str| format!("TaskDef {} {field}", def.name);
    optional_text(
        &what("description"),
        def.description.as_deref(),
        DESCRIPTION_LEN_MAX,
    )?;
    retry_count(&what("retryCount"), def.retry_count)?;
    for (field, value) in [
        ("timeoutSeconds", def.timeout_seconds),
        ("retryDelaySeconds", def.retry_delay_seconds),
        ("responseTimeoutSeconds", def.response_timeout_seconds),
        ("pollTimeoutSeconds", def.poll_timeout_seconds.unwrap_or(0)),
        ("maxRetryDelaySeconds", def.max_retry_delay_seconds),
        ("totalTimeoutSeconds", def.total_timeout_seconds),
        ("backoffJitterMs / 1000", def.backoff_jitter_ms / 1000),
    ] {
        seconds(&what(field), value)?;
    }
    schema_refs(
        &what(""),
        def.input_schema.as_ref(),
        def.output_schema.as_ref(),
    )?;
    if def.backoff_scale_factor > RETRY_COUNT_MAX {
        return invalid(format!(
            "{} is {}, over the limit of {RETRY_COUNT_MAX}",
            what("backoffScaleFactor"),
            def.backoff_scale_factor
        ));
    }
    payload(&what("inputTemplate"), &def.input_template)
}

/// A workflow definition's limits: names, texts, numbers and the nesting of its templates, every
/// task through forks and cases, and its size as a whole ([`DEF_BYTES_MAX`]). The engine checks
/// its meaning (types, references) separately.
pub fn workflow_def(def: &WorkflowDef) -> Checked {
    name("workflow name", &def.name)?;
    optional_text(
        "workflow description",
        def.description.as_deref(),
        DESCRIPTION_LEN_MAX,
    )?;
    seconds("workflow timeoutSeconds", def.timeout_seconds)?;
    if let Some(f) = def.failure_workflow.as_deref().filter(|f| !f.is_empty()) {
        name("failureWorkflow", f)?;
    }
    if let Some(sink) = def.workflow_status_listener_sink.as_deref() {
        text("workflowStatusListenerSink", sink, NAME_LEN_MAX)?;
    }
    for param in &def.input_parameters {
        text("inputParameters entry", param, NAME_LEN_MAX)?;
    }
    payload("workflow outputParameters", &def.output_parameters)?;
    payload("workflow variables", &def.variables)?;
    payload("workflow inputTemplate", &def.input_template)?;
    let what = format!("workflow {} ", def.name);
    schema_refs(&what, def.input_schema.as_ref(), def.output_schema.as_ref())?;
    for task in def.all_tasks() {
        workflow_task(task)?;
    }
    let bytes = json_len(def);
    if bytes > DEF_BYTES_MAX {
        return Err(Violation::TooLarge(format!(
            "workflow definition {} is {bytes} bytes, over the limit of {DEF_BYTES_MAX}",
            def.name
        )));
    }
    Ok(())
}

/// One task of a workflow definition (not its children: [`WorkflowDef::all_tasks`] lists them).
fn workflow_task(t: &WorkflowTask) -> Checked {
    name("taskReferenceName", &t.task_reference_name)?;
    let r = &t.task_reference_name;
    name(&format!("task '{r}' name"), &t.name)?;
    payload(&format!("task '{r}' inputParameters"), &t.input_parameters)?;
    seconds(&format!("task '{r}' startDelay"), t.start_delay)?;
    if let Some(n) = t.retry_count {
        retry_count(&format!("task '{r}' retryCount"), n)?;
    }
    for join_on in &t.join_on {
        name(&format!("task '{r}' joinOn entry"), join_on)?;
    }
    if let Some(d) = &t.task_definition {
        task_def(d)?;
    }
    Ok(())
}

/// A definition's `inputSchema` and `outputSchema`: names and versions (whether they exist is
/// the registry's question, asked where definitions are stored).
fn schema_refs(what: &str, input: Option<&SchemaRef>, output: Option<&SchemaRef>) -> Checked {
    for (field, r) in [("inputSchema", input), ("outputSchema", output)] {
        if let Some(r) = r {
            name(&format!("{what}{field} name"), &r.name)?;
            if r.version == Some(0) {
                return invalid(format!("{what}{field} version must be at least 1"));
            }
        }
    }
    Ok(())
}

/// A schema of the registry: its name, a version from 1, its `externalRef`, and its `data` at
/// most [`PAYLOAD_DEPTH_MAX`] levels deep and [`SCHEMA_BYTES_MAX`] bytes. (Whether a JSON
/// schema's data is a valid JSON Schema is the engine's question.)
pub fn schema_def(def: &SchemaDef) -> Checked {
    name("schema name", &def.name)?;
    if def.version == 0 {
        return invalid(format!("schema {} version must be at least 1", def.name));
    }
    let what = format!("schema {} data", def.name);
    optional_text(
        &format!("schema {} externalRef", def.name),
        def.external_ref.as_deref(),
        DESCRIPTION_LEN_MAX,
    )?;
    let (depth, bytes) = (map_depth(&def.data), json_len(&def.data));
    if depth > PAYLOAD_DEPTH_MAX {
        return invalid(format!(
            "{what} nests {depth} levels deep, over the limit of {PAYLOAD_DEPTH_MAX}"
        ));
    }
    if bytes > SCHEMA_BYTES_MAX {
        return Err(Violation::TooLarge(format!(
            "{what} is {bytes} bytes, over the limit of {SCHEMA_BYTES_MAX}"
        )));
    }
    Ok(())
}

/// A start request: name, correlation id, input, domains and an inline definition.
pub fn start_request(request: &StartWorkflowRequest) -> Checked {
    if request.workflow_def.is_none() {
        name("workflow name", &request.name)?;
    }
    optional_text(
        "correlationId",
        request.correlation_id.as_deref(),
        CORRELATION_ID_LEN_MAX,
    )?;
    payload("workflow input", &request.input)?;
    for (task, domain) in &request.task_to_domain {
        if task != "*" {
            name("taskToDomain task name", task)?;
        }
        name("taskToDomain domain", domain)?;
    }
    match &request.workflow_def {
        Some(def) => workflow_def(def),
        None => Ok(()),
    }
}

/// A worker's result: its output, logs, reason and worker id.
pub fn task_result(result: &TaskResult) -> Checked {
    payload("task output", &result.output_data)?;
    optional_text(
        "reasonForIncompletion",
        result.reason_for_incompletion.as_deref(),
        REASON_LEN_MAX,
    )?;
    if let Some(worker) = result.worker_id.as_deref().filter(|w| !w.is_empty()) {
        name("workerId", worker)?;
    }
    seconds("callbackAfterSeconds", result.callback_after_seconds)?;
    for line in &result.logs {
        text("log line", &line.log, PAYLOAD_BYTES_MAX)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn nested(levels: usize) -> Json {
        let mut v = json!(1);
        for _ in 1..levels {
            v = json!({ "a": v });
        }
        let Value::Object(map) = json!({ "a": v }) else {
            unreachable!()
        };
        map
    }

    #[test]
    fn depth_counts_levels_without_recursion() {
        assert_eq!(json_depth(&json!(1)), 0);
        assert_eq!(json_depth(&json!({})), 1);
        assert_eq!(json_depth(&json!([[], {"a": [1]}])), 3);
        assert_eq!(map_depth(&nested(5)), 5);
        // Far deeper than any parser would take, measured without touching the stack.
        let mut deep = json!(null);
        for _ in 0..100_000 {
            deep = Value::Array(vec![deep]);
        }
        assert_eq!(json_depth(&deep), 100_000);
        std::mem::forget(deep); // dropping it would recurse
    }

    #[test]
    fn encoded_depth_counts_brackets_outside_strings() {
        assert_eq!(encoded_depth(b"1"), 0);
        assert_eq!(encoded_depth(br#"{"a":[1,{"b":"[[[{"}]}"#), 3);
        assert_eq!(encoded_depth(br#"{"a":"\"[["}{"b":{}}"#), 2);
        let deep = serde_json::to_vec(&Value::Object(nested(40))).expect("encodes");
        assert_eq!(encoded_depth(&deep), 40);
    }

    #[test]
    fn payloads_are_bounded_in_depth_and_bytes() {
        assert_eq!(payload("input", &nested(PAYLOAD_DEPTH_MAX)), Ok(()));
        let Err(Violation::Invalid(m)) = payload("input", &nested(PAYLOAD_DEPTH_MAX + 1)) else {
            panic!("too deep")
        };
        assert_eq!(m, "input nests 65 levels deep, over the limit of 64");
        let mut big = Json::new();
        big.insert("x".into(), json!("y".repeat(PAYLOAD_BYTES_MAX)));
        assert!(matches!(
            payload("input", &big),
            Err(Violation::TooLarge(_))
        ));
        assert_eq!(json_len(&json!({"a": [1, 2]})), 11);
    }

    #[test]
    fn names_are_printable_and_pathless() {
        for ok in ["w", "order_flow-2", "Bestellung ä", "a.b:c"] {
            assert_eq!(name("name", ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "  ",
            " w",
            "a\0b",
            "evil\u{202E}gpj.exe",
            "zero\u{200B}width",
            "../etc",
            "a\\b",
            "tab\there",
        ] {
            assert!(name("name", bad).is_err(), "{bad:?}");
        }
        assert!(name("name", &"x".repeat(NAME_LEN_MAX + 1)).is_err());
    }

    #[test]
    fn texts_and_numbers_have_ranges() {
        assert_eq!(text("reason", "line 1\nline 2\ttab", 100), Ok(()));
        assert!(text("reason", "nul\0", 100).is_err());
        assert!(text("correlationId", &"c".repeat(101), 100).is_err());
        assert_eq!(seconds("t", DURATION_SECONDS_MAX), Ok(()));
        assert!(seconds("t", i64::MAX as u64).is_err());
        assert!(retry_count("r", 1_000_000_000).is_err());
        let def = TaskDef {
            name: "t".into(),
            retry_count: 1_000_000_000,
            ..TaskDef::default()
        };
        let Err(Violation::Invalid(m)) = task_def(&def) else {
            panic!("retry count")
        };
        assert!(m.starts_with("TaskDef t retryCount is 1000000000"), "{m}");
    }

    #[test]
    fn start_requests_check_every_field() {
        let ok = StartWorkflowRequest {
            name: "w".into(),
            correlation_id: Some("order-7".into()),
            ..Default::default()
        };
        assert_eq!(start_request(&ok), Ok(()));
        let long = StartWorkflowRequest {
            correlation_id: Some("c".repeat(CORRELATION_ID_LEN_MAX + 1)),
            ..ok.clone()
        };
        assert!(start_request(&long).is_err());
        let deep = StartWorkflowRequest {
            input: nested(126),
            ..ok.clone()
        };
        assert!(start_request(&deep).is_err());
        let nul = StartWorkflowRequest {
            name: "w\0".into(),
            ..ok
        };
        assert!(start_request(&nul).is_err());
    }

    #[test]
    fn schemas_are_checked_for_name_version_and_size() {
        let ok = SchemaDef {
            name: "item".into(),
            ..Default::default()
        };
        assert_eq!(schema_def(&ok), Ok(()));
        let zero = SchemaDef {
            version: 0,
            ..ok.clone()
        };
        assert!(schema_def(&zero).is_err());
        let mut big = ok.clone();
        big.data
            .insert("x".into(), "a".repeat(SCHEMA_BYTES_MAX).into());
        assert!(matches!(schema_def(&big), Err(Violation::TooLarge(_))));
        let slash = SchemaDef {
            name: "a/b".into(),
            ..ok
        };
        assert!(schema_def(&slash).is_err());
        let def = TaskDef {
            input_schema: Some(SchemaRef {
                name: String::new(),
                ..Default::default()
            }),
            ..TaskDef::named("t")
        };
        let Err(Violation::Invalid(m)) = task_def(&def) else {
            panic!("empty schema name")
        };
        assert!(m.contains("inputSchema name"), "{m}");
    }
}
