//! Orkes' schemas: a start's input refused, a task failed at scheduling or by its result's
//! output (and retried per its definition), a completed workflow's output failing it.

use super::*;
use crate::schema::{Compiled, Side};
use proto::model::{SchemaDef, SchemaRef, SchemaType};
use std::collections::BTreeMap;
use std::sync::Arc;
use TaskStatus::*;

/// Schemas by name (one version each) and no task definitions.
struct Registry(BTreeMap<String, Arc<Compiled>>);

impl Catalog for Registry {
    fn task_def(&self, _name: &str) -> Option<TaskDef> {
        None
    }
    fn schema(&self, name: &str, version: Option<u32>) -> Option<Arc<Compiled>> {
        let s = self.0.get(name)?;
        version.is_none_or(|v| v == s.version()).then(|| s.clone())
    }
}

fn schema(name: &str, data: Value) -> SchemaDef {
    SchemaDef {
        name: name.into(),
        data: obj(data),
        ..Default::default()
    }
}

/// `order`: an integer `id` is required; `receipt`: a string `ok` is required.
fn registry() -> Arc<dyn Catalog + Send + Sync> {
    let defs = [
        schema(
            "order",
            json!({"type": "object", "required": ["id"], "properties": {"id": {"type": "integer"}}}),
        ),
        schema(
            "receipt",
            json!({"type": "object", "required": ["ok"], "properties": {"ok": {"type": "string"}}}),
        ),
    ];
    let map = defs
        .iter()
        .map(|d| (d.name.clone(), Arc::new(Compiled::new(d))))
        .collect();
    Arc::new(Registry(map))
}

fn named(name: &str) -> Option<SchemaRef> {
    Some(SchemaRef {
        name: name.into(),
        ..Default::default()
    })
}

fn enforcing(mut def: WorkflowDef, input: &str, output: &str) -> WorkflowDef {
    def.enforce_schema = true;
    def.input_schema = named(input);
    def.output_schema = named(output);
    def
}

#[test]
fn a_start_whose_input_does_not_match_is_refused_with_the_errors() {
    let def = enforcing(def_of(vec![simple("a")]), "order", "receipt");
    let Err(Error::Invalid(m)) = H::try_start_with(def.clone(), json!({"id": "x"}), registry())
    else {
        panic!("refused")
    };
    assert!(
        m.starts_with("workflow input does not match schema 'order' version 1"),
        "{m}"
    );
    assert!(m.contains("/id: \"x\" is not of type \"integer\""), "{m}");
    let h = H::try_start_with(def, json!({"id": 7}), registry()).expect("starts");
    assert_eq!(h.st("a"), Scheduled);
}

#[test]
fn a_schema_not_enforced_or_not_registered() {
    let mut def = enforcing(def_of(vec![simple("a")]), "order", "receipt");
    def.enforce_schema = false;
    assert!(H::try_start_with(def.clone(), json!({}), registry()).is_ok());
    let def = enforcing(def, "gone", "receipt");
    let Err(Error::Invalid(m)) = H::try_start_with(def, json!({}), registry()) else {
        panic!("refused")
    };
    assert_eq!(
        m,
        "workflow input cannot be checked: schema 'gone' is not registered"
    );
}

#[test]
fn a_completed_workflows_output_that_does_not_match_fails_it() {
    let mut def = enforcing(def_of(vec![simple("a")]), "order", "receipt");
    def.output_parameters = obj(json!({"ok": "${a.output.ok}"}));
    let mut h = H::try_start_with(def.clone(), json!({"id": 1}), registry()).expect("starts");
    h.poll("a");
    h.complete("a", json!({"ok": 5}));
    assert_eq!(h.status(), WorkflowStatus::Failed);
    let reason = h.wf().reason_for_incompletion.clone().unwrap_or_default();
    assert!(
        reason.starts_with("workflow output does not match schema 'receipt' version 1"),
        "{reason}"
    );
    assert_eq!(h.wf().output, obj(json!({"ok": 5})));

    let mut h = H::try_start_with(def, json!({"id": 1}), registry()).expect("starts");
    h.poll("a");
    h.complete("a", json!({"ok": "yes"}));
    assert_eq!(h.status(), WorkflowStatus::Completed);
}

fn task_enforcing(r: &str, retries: u32) -> WorkflowTask {
    let mut t = simple(r);
    t.input_parameters = obj(json!({"id": "${workflow.input.id}"}));
    t.task_definition = Some(TaskDef {
        retry_count: retries,
        retry_delay_seconds: 0,
        enforce_schema: true,
        input_schema: named("order"),
        output_schema: named("receipt"),
        ..TaskDef::named(r)
    });
    t
}

#[test]
fn a_task_whose_input_does_not_match_fails_terminally_when_scheduled() {
    let def = def_of(vec![task_enforcing("a", 3)]);
    let h = H::try_start_with(def, json!({"id": "seven"}), registry()).expect("starts");
    assert_eq!(h.st("a"), FailedWithTerminalError);
    assert_eq!(h.attempts("a").len(), 1, "no retry");
    assert_eq!(h.status(), WorkflowStatus::Failed);
    let reason = h
        .task("a")
        .reason_for_incompletion
        .clone()
        .unwrap_or_default();
    assert!(
        reason.starts_with("input of task 'a' does not match schema 'order'"),
        "{reason}"
    );
}

#[test]
fn a_completed_result_whose_output_does_not_match_fails_the_task_and_it_retries() {
    let def = def_of(vec![task_enforcing("a", 1)]);
    let mut h = H::try_start_with(def, json!({"id": 3}), registry()).expect("starts");
    h.poll("a");
    h.complete("a", json!({"ok": false}));
    let first = h.attempts("a")[0].clone();
    assert_eq!(first.status, Failed);
    let reason = first.reason_for_incompletion.unwrap_or_default();
    assert!(
        reason.starts_with("output of task 'a' does not match schema 'receipt'"),
        "{reason}"
    );
    assert_eq!(
        first.output_data,
        obj(json!({"ok": false})),
        "the output is kept"
    );
    assert_eq!(h.st("a"), Scheduled, "the retry");
    h.poll("a");
    h.complete("a", json!({"ok": "fine"}));
    assert_eq!(h.st("a"), Completed);
    assert_eq!(h.status(), WorkflowStatus::Completed);
}

#[test]
fn errors_are_sorted_and_capped() {
    let props: serde_json::Map<String, Value> = (0..15)
        .map(|i| (format!("k{i:02}"), json!({"type": "string"})))
        .collect();
    let s = schema("many", json!({"type": "object", "properties": props}));
    let value = obj(Value::Object(
        (0..15).map(|i| (format!("k{i:02}"), json!(i))).collect(),
    ));
    let errors = Compiled::new(&s).errors(&value);
    assert_eq!(errors.len(), proto::limits::SCHEMA_ERRORS_MAX + 1);
    assert!(
        errors[0].starts_with("/k00: 0 is not of type"),
        "{errors:?}"
    );
    assert_eq!(errors.last().map(String::as_str), Some("and 5 more"));
    let one = Registry([("many".to_owned(), Arc::new(Compiled::new(&s)))].into());
    let mut def = TaskDef::named("t");
    def.enforce_schema = true;
    def.output_schema = named("many");
    let reason = crate::schema::violation(&one, &def, Side::Output, "x", &value);
    assert!(reason.is_some_and(|r| r.contains("; and 5 more")));
}

#[test]
fn only_valid_json_schemas_register() {
    assert!(crate::schema::check(&schema("ok", json!({"type": "object"}))).is_ok());
    let Err(Error::Invalid(m)) = crate::schema::check(&schema("bad", json!({"type": 12}))) else {
        panic!("refused")
    };
    assert!(
        m.starts_with("schema 'bad' is not a valid JSON Schema"),
        "{m}"
    );
    let remote = schema("remote", json!({"$ref": "https://example.com/s.json"}));
    assert!(
        crate::schema::check(&remote).is_err(),
        "no remote $ref is fetched"
    );
    let avro = SchemaDef {
        schema_type: SchemaType::Avro,
        ..schema("avro", json!({"type": 12}))
    };
    assert!(
        crate::schema::check(&avro).is_ok(),
        "stored, never compiled"
    );
    let errors = Compiled::new(&avro).errors(&obj(json!({})));
    assert_eq!(
        errors,
        ["schema 'avro' is of type AVRO; only JSON schemas can be enforced"]
    );
}
