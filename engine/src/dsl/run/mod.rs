//! Running a DSL instance: the decider that moves an instance through its document. It takes the
//! place of Conductor's advance loop for a workflow whose definition carries a document; every
//! other part of a decision (leases, results, timers, work performed, pause and terminate) is
//! the engine's, shared with Conductor's workflows.
//!
//! The instance's place in the document is a tree ([`proto::model::dsl`]): the top-level `do`
//! as a [`Seq`], the task running in it as a [`Frame`], and so on down. [`advance`] walks the
//! tree after every input and moves every part that can move: a task whose Conductor task ended
//! finishes (its output transformed, `$context` exported), the next task of its list starts, a
//! composite task ends when its tasks did. What waits on the world (a worker's function, an HTTP
//! call, a timer) is a Conductor task of the workflow, so pollers, timers and work see it as
//! they see any task; every task that runs is one too, so the instance's history is its task
//! list.

mod a2a;
mod a2a_dialect;
mod auth;
mod call;
mod child;
mod composite;
mod errors;
mod expr;
mod foreach;
mod frame;
mod listen;
mod openapi;
mod process;
mod schemas;
mod seq;
mod simple;
mod timeout;
mod tries;

pub(crate) use call::UNSUPPORTED_CALLS;
pub use errors::{timeout_error, STANDARD_TYPES};
pub(crate) use frame::kind_of;
pub(crate) use listen::{
    any_type_filters, event_matches, filters as listen_filters, keep, types as listened_types,
    waiting, ExprFault, Offer, Strategy, Take,
};
pub use listen::{ANY_TYPE, LISTEN_TASK_TYPE};
pub(crate) use process::NO_CONTAINERS;
pub use simple::EVENT_BUS;

use crate::state::Ctx;
pub(crate) use expr::Scope;
use proto::model::dsl::DslRun;
use proto::model::{Json, WorkflowStatus};
use serde_json::Value;
use std::sync::Arc;

/// How far a part of the tree got.
pub(super) enum Outcome {
    /// It waits on the world.
    Pending,
    /// It ended with this output; `then` is the flow directive that overrides the task's own
    /// (a `switch` case's).
    Done { output: Value, then: Option<String> },
    /// It raised this error (problem details).
    Fault(Value),
    /// A `then: end` was reached: the workflow completes with this data.
    End(Value),
}

impl Outcome {
    fn done(output: Value) -> Self {
        Outcome::Done { output, then: None }
    }
}

/// One walk of the tree: the decision's context, the document, and `$context` while it is
/// changed.
pub(super) struct Runner<'c, 'r> {
    pub ctx: &'c mut Ctx<'r>,
    pub doc: Arc<Value>,
    pub context: Value,
    /// The task whose expressions are being evaluated (`$task`): its pointer, name and
    /// Conductor task.
    pub task: Option<(String, String, Option<proto::TaskId>)>,
    /// The event offered to the instance's `listen` tasks in this walk.
    pub delivery: Option<listen::Delivery>,
}

/// Starts a new instance: its input through the document's `input.from`, then its first tasks.
pub(crate) fn begin(ctx: &mut Ctx<'_>) {
    let Some(doc) = ctx.wf.workflow_definition.dsl.clone() else {
        return;
    };
    let raw = crate::dsl::instance_input(&ctx.wf.input);
    let vars = Default::default();
    let scope = Scope::new(&vars)
        .with("workflow", workflow_arg(ctx, &doc))
        .loose(is_loose(&doc));
    if let Err(error) = schemas::check("/input/schema", doc.pointer("/input/schema"), &raw) {
        ctx.wf.dsl = Some(Box::default());
        return fault(ctx, error);
    }
    let data = match doc.pointer("/input/from") {
        Some(from) => scope.expression(from, &raw),
        None => Ok(raw),
    };
    ctx.changed = true;
    match data {
        Ok(data) => {
            ctx.wf.dsl = Some(Box::new(DslRun {
                context: Value::Object(Json::new()),
                root: Some(seq::new("/do", data, Default::default())),
                ..DslRun::default()
            }));
            advance(ctx);
        }
        Err(e) => {
            ctx.wf.dsl = Some(Box::default());
            fault(ctx, errors::expression_error("/input/from", &e));
        }
    }
}

/// Moves every part of the instance that can move (see the module's header).
pub(crate) fn advance(ctx: &mut Ctx<'_>) {
    walk(ctx, None);
}

/// Offers an event to the instance's running `listen` tasks (see [`listen`]), and moves on
/// what that lets move. An instance that is not running ignores it.
pub(crate) fn listened(
    ctx: &mut Ctx<'_>,
    message_id: &str,
    event: &Value,
) -> Result<(), crate::Error> {
    if ctx.wf.workflow_definition.dsl.is_none() {
        let detail = "only a Serverless Workflow instance listens for events";
        return Err(crate::Error::Conflict(detail.into()));
    }
    let delivery = listen::Delivery {
        message_id: message_id.to_owned(),
        event: event.clone(),
    };
    walk(ctx, Some(delivery));
    Ok(())
}

/// One walk of the tree, offering `delivery` to the `listen` tasks it passes.
fn walk(ctx: &mut Ctx<'_>, delivery: Option<listen::Delivery>) {
    if ctx.wf.status != WorkflowStatus::Running {
        return;
    }
    let Some(doc) = ctx.wf.workflow_definition.dsl.clone() else {
        return;
    };
    let Some(mut run) = ctx.wf.dsl.take() else {
        return;
    };
    let Some(mut root) = run.root.take() else {
        ctx.wf.dsl = Some(run);
        return;
    };
    let before = root.clone();
    let mut runner = Runner {
        ctx,
        doc,
        context: run.context.clone(),
        task: None,
        delivery,
    };
    let outcome = runner.seq(&mut root);
    let Runner {
        ctx, doc, context, ..
    } = runner;
    if context != run.context {
        ctx.changed = true;
    }
    run.context = context;
    match outcome {
        Outcome::Pending => {
            ctx.changed |= root != before;
            run.root = Some(root);
            ctx.wf.dsl = Some(run);
        }
        Outcome::Done { output, .. } | Outcome::End(output) => {
            ctx.wf.dsl = Some(run);
            complete(ctx, &doc, output);
        }
        Outcome::Fault(error) => {
            ctx.wf.dsl = Some(run);
            fault(ctx, error);
        }
    }
}

/// The instance completes with `data` through the document's `output.as`.
fn complete(ctx: &mut Ctx<'_>, doc: &Value, data: Value) {
    let output = match doc.pointer("/output/as") {
        Some(filter) => {
            let vars = Default::default();
            let context = ctx.wf.dsl.as_ref().map(|r| r.context.clone());
            let scope = Scope::new(&vars)
                .with("context", context.unwrap_or_default())
                .with("workflow", workflow_arg(ctx, doc))
                .loose(is_loose(doc));
            match scope.expression(filter, &data) {
                Ok(output) => output,
                Err(e) => return fault(ctx, errors::expression_error("/output/as", &e)),
            }
        }
        None => data,
    };
    if let Err(error) = schemas::check("/output/schema", doc.pointer("/output/schema"), &output) {
        return fault(ctx, error);
    }
    let view = crate::dsl::stored_output(&output);
    if let Some(run) = ctx.wf.dsl.as_mut() {
        // A null output is kept as none: its JSON would read back as none anyway.
        run.output = Some(output).filter(|o| !o.is_null());
    }
    ctx.end_with_output(WorkflowStatus::Completed, None, None, true, Some(view));
}

/// The instance faults with `error`: FAILED, the error's title and detail as the reason.
pub(super) fn fault(ctx: &mut Ctx<'_>, error: Value) {
    end_with_error(ctx, WorkflowStatus::Failed, error);
}

/// The document's `timeout` ran out (the workflow's timeout timer fired): the instance faults
/// with the timeout error, TIMED_OUT in Conductor's terms.
pub(crate) fn timed_out(ctx: &mut Ctx<'_>) {
    let error = errors::timeout_error("/", "the workflow ran out of time");
    end_with_error(ctx, WorkflowStatus::TimedOut, error);
}

/// Ends the instance `status` with `error` (its title and detail as Conductor's reason).
fn end_with_error(ctx: &mut Ctx<'_>, status: WorkflowStatus, error: Value) {
    let reason = reason_of(&error);
    if let Some(run) = ctx.wf.dsl.as_mut() {
        run.root = None;
        run.error = Some(error);
    }
    ctx.end_with_output(status, Some(reason), None, true, Some(Json::new()));
}

/// An error's title and detail, as one line.
pub(super) fn reason_of(error: &Value) -> String {
    let text = |k: &str| error.get(k).and_then(Value::as_str).unwrap_or_default();
    let (title, detail) = (text("title"), text("detail"));
    match (title.is_empty(), detail.is_empty()) {
        (false, false) => format!("{title}: {detail}"),
        (false, true) => title.to_owned(),
        (true, false) => detail.to_owned(),
        (true, true) => error.get("type").map(Value::to_string).unwrap_or_default(),
    }
}

/// `$workflow`: the instance's id, document, input and start.
fn workflow_arg(ctx: &Ctx<'_>, doc: &Value) -> Value {
    serde_json::json!({
        "id": ctx.wf.workflow_id.as_str(),
        "definition": doc,
        "input": crate::dsl::instance_input(&ctx.wf.input),
        "startedAt": time_arg(ctx.wf.start_time),
    })
}

/// A time as the DSL's arguments show it.
fn time_arg(ms: i64) -> Value {
    let iso = iso8601(ms);
    serde_json::json!({"iso8601": iso, "epoch": {"seconds": ms / 1000, "milliseconds": ms}})
}

/// Whether the document asks for the loose evaluation of expressions (`evaluate.mode`).
fn is_loose(doc: &Value) -> bool {
    doc.pointer("/evaluate/mode").and_then(Value::as_str) == Some("loose")
}

/// A time as RFC 3339 in UTC with milliseconds.
pub(crate) fn iso8601(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_default()
}

/// Whether `input` may act on a DSL instance: Conductor's retry, rerun, restart and skip
/// reshape a task list the DSL's decider owns.
pub(crate) fn refuses(input: &crate::Input) -> Option<String> {
    use crate::Input;
    let what = match input {
        Input::Retry | Input::RetryResumingSubworkflows => "retried",
        Input::Restart { .. } => "restarted",
        Input::Rerun(_) => "rerun",
        Input::SkipTask { .. } => "have tasks skipped",
        _ => return None,
    };
    Some(format!(
        "a Serverless Workflow instance cannot be {what}; start a new instance"
    ))
}

#[cfg(test)]
mod a2a_tests;
#[cfg(test)]
mod tests;
