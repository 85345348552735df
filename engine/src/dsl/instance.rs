//! A DSL instance as the rest of Baton sees it: the workflow definition that carries a document
//! (so an instance starts, is stored, replicated, searched and shown like any workflow), and the
//! instance's view in the DSL's own terms (phases, output, `$context`, per-task state, errors).

use super::Document;
use proto::model::{task_type, Task, TaskStatus, Workflow, WorkflowDef, WorkflowStatus};
use serde_json::{json, Value};
use std::sync::Arc;

/// The workflow definition an instance of `doc` runs under: the document's name, the document
/// itself, and its `timeout` as the workflow's own.
pub fn workflow_def(doc: &Document) -> WorkflowDef {
    let header = doc.header();
    let timeout_ms = doc
        .json()
        .pointer("/timeout/after")
        .and_then(|d| super::duration::millis(d).ok())
        .unwrap_or(0);
    WorkflowDef {
        name: header.name.clone(),
        description: header.summary.clone().or_else(|| header.title.clone()),
        version: 1,
        timeout_seconds: u64::try_from((timeout_ms + 999) / 1000).unwrap_or(0),
        dsl: Some(Arc::new(doc.json().clone())),
        ..WorkflowDef::default()
    }
}

/// The workflow input key that holds an instance's input when it is not a JSON object (a
/// workflow's input is an object); an object input may not use it.
pub const INPUT_KEY: &str = "$dslInput";

/// An instance's input (any JSON value) as its workflow's input, or why it cannot be one.
pub fn stored_input(input: Value) -> Result<proto::model::Json, String> {
    match input {
        Value::Object(input) if input.contains_key(INPUT_KEY) => Err(format!(
            "the input of a workflow instance may not hold the key '{INPUT_KEY}': it carries an input that is not an object"
        )),
        Value::Object(input) => Ok(input),
        other => Ok(proto::model::Json::from_iter([(INPUT_KEY.to_owned(), other)])),
    }
}

/// An instance's input as it was given: [`stored_input`] undone.
pub fn instance_input(workflow_input: &proto::model::Json) -> Value {
    match workflow_input.get(INPUT_KEY) {
        Some(input) if workflow_input.len() == 1 => input.clone(),
        _ => Value::Object(workflow_input.clone()),
    }
}

/// The workflow output key that holds an instance's output when it is not a JSON object.
pub const OUTPUT_KEY: &str = "$dslOutput";

/// An instance's output (any JSON value) as its workflow's output (Conductor's view, and what a
/// parent's SUB_WORKFLOW task receives).
pub fn stored_output(output: &Value) -> proto::model::Json {
    match output {
        Value::Object(map) => map.clone(),
        other => proto::model::Json::from_iter([(OUTPUT_KEY.to_owned(), other.clone())]),
    }
}

/// An instance's output as it gave it: [`stored_output`] undone.
pub fn instance_output(workflow_output: &proto::model::Json) -> Value {
    match workflow_output.get(OUTPUT_KEY) {
        Some(output) if workflow_output.len() == 1 => output.clone(),
        _ => Value::Object(workflow_output.clone()),
    }
}

/// Whether `workflow` runs a DSL document.
pub fn is_dsl(workflow: &Workflow) -> bool {
    workflow.workflow_definition.dsl.is_some()
}

/// The DSL's phase of a workflow.
pub fn phase(workflow: &Workflow) -> &'static str {
    match workflow.status {
        WorkflowStatus::Completed => "completed",
        WorkflowStatus::Failed | WorkflowStatus::TimedOut => "faulted",
        WorkflowStatus::Terminated => "cancelled",
        WorkflowStatus::Paused => "suspended",
        WorkflowStatus::Running => {
            let open: Vec<&Task> = workflow
                .tasks
                .iter()
                .filter(|t| !t.status.is_terminal() && !is_composite(t))
                .collect();
            if !open.is_empty() && open.iter().all(|t| is_waiting(t)) {
                "waiting"
            } else {
                "running"
            }
        }
    }
}

/// A task that only groups others (`do`, `for`, `fork`, `try`).
fn is_composite(t: &Task) -> bool {
    matches!(
        t.task_type.as_str(),
        "dsl/do" | "dsl/for" | "dsl/fork" | "dsl/try"
    )
}

/// A task waiting for time or an event rather than working.
fn is_waiting(t: &Task) -> bool {
    t.task_type == task_type::WAIT || t.task_type == super::run::LISTEN_TASK_TYPE
}

/// The DSL phase of one task.
fn task_phase(t: &Task) -> &'static str {
    match t.status {
        TaskStatus::Completed | TaskStatus::CompletedWithErrors | TaskStatus::Skipped => {
            "completed"
        }
        TaskStatus::Canceled => "cancelled",
        TaskStatus::Failed | TaskStatus::FailedWithTerminalError | TaskStatus::TimedOut => {
            "faulted"
        }
        TaskStatus::Scheduled => "pending",
        TaskStatus::InProgress if is_waiting(t) => "waiting",
        TaskStatus::InProgress => "running",
    }
}

/// The error a faulted instance ended with (the workflow's timeout's when it timed out).
pub(crate) fn instance_error(workflow: &Workflow) -> Option<Value> {
    let run = workflow.dsl.as_deref();
    run.and_then(|r| r.error.clone()).or_else(|| {
        (workflow.status == WorkflowStatus::TimedOut).then(|| {
            super::run::timeout_error(
                "/",
                workflow.reason_for_incompletion.as_deref().unwrap_or(""),
            )
        })
    })
}

/// The instance in the DSL's terms, or `None` when `workflow` is not a DSL instance.
pub fn view(workflow: &Workflow) -> Option<Value> {
    let doc = workflow.workflow_definition.dsl.as_deref()?;
    let run = workflow.dsl.as_deref();
    let tasks: Vec<Value> = workflow.tasks.iter().map(task_view).collect();
    let output = run.and_then(|r| r.output.clone());
    let error = instance_error(workflow);
    Some(json!({
        "id": workflow.workflow_id.as_str(),
        "document": doc.get("document"),
        "phase": phase(workflow),
        "input": instance_input(&workflow.input),
        "output": output,
        "context": run.map(|r| r.context.clone()).unwrap_or(Value::Null),
        "error": error,
        "startedAt": workflow.start_time,
        "endedAt": (workflow.end_time > 0).then_some(workflow.end_time),
        "tasks": tasks,
    }))
}

/// A task's name in the document: the last token of its pointer.
fn dsl_name(reference: &str) -> String {
    let last = reference.rsplit('/').next().unwrap_or(reference);
    last.replace("~1", "/").replace("~0", "~")
}

fn task_view(t: &Task) -> Value {
    json!({
        "name": dsl_name(&t.reference_task_name),
        "reference": t.reference_task_name,
        "taskId": t.task_id.as_str(),
        "type": t.task_type,
        "phase": task_phase(t),
        "input": t.input_data,
        "output": t.output_data,
        "reason": t.reason_for_incompletion,
        "startedAt": (t.start_time > 0).then_some(t.start_time),
        "endedAt": (t.end_time > 0).then_some(t.end_time),
    })
}
