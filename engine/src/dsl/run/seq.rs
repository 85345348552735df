//! A task list, run one task after another: `if` decides whether a task runs, a finished task's
//! transformed output is the next one's input, and `then` says which task is next (`continue`,
//! `exit`, `end`, or a task of the same list).

use super::{errors, Outcome, Runner};
use proto::limits::WORKFLOW_TASKS_MAX;
use proto::model::dsl::Seq;
use serde_json::Value;
use std::collections::BTreeMap;

/// A list at `at` that starts with `data`, its expressions seeing `vars`.
pub(super) fn new(at: &str, data: Value, vars: BTreeMap<String, Value>) -> Seq {
    Seq {
        at: at.to_owned(),
        index: 0,
        data,
        vars,
        current: None,
    }
}

/// The items of the list at `at` as (name, definition, pointer).
pub(super) fn entries(doc: &Value, at: &str) -> Vec<(String, Value, String)> {
    let items = doc.pointer(at).and_then(Value::as_array);
    let mut out = Vec::new();
    for (i, item) in items.into_iter().flatten().enumerate() {
        for (name, task) in item.as_object().into_iter().flatten() {
            let pointer = crate::dsl::rules::child(&format!("{at}/{i}"), name);
            out.push((name.clone(), task.clone(), pointer));
        }
    }
    out
}

impl Runner<'_, '_> {
    /// Runs the list as far as it goes.
    pub(super) fn seq(&mut self, seq: &mut Seq) -> Outcome {
        let list = entries(&self.doc, &seq.at);
        loop {
            if let Some(frame) = seq.current.as_mut() {
                let (output, directive) = match self.frame(frame, &seq.vars) {
                    Outcome::Pending => return Outcome::Pending,
                    Outcome::Done { output, then } => (output, then),
                    other => {
                        let frame = seq.current.take();
                        self.close(frame.as_deref(), &other);
                        return other;
                    }
                };
                // The task finished: transform, export, and go where its `then` says.
                let Some(frame) = seq.current.take() else {
                    continue;
                };
                match self.finish(&frame, output, &seq.vars) {
                    Ok(data) => seq.data = data,
                    Err(error) => return Outcome::Fault(error),
                }
                let def = self.doc.pointer(&frame.at);
                let own = def.and_then(|d| d.get("then")).and_then(Value::as_str);
                match directive.as_deref().or(own).unwrap_or("continue") {
                    "continue" => seq.index += 1,
                    "exit" => return Outcome::done(seq.data.clone()),
                    "end" => return Outcome::End(seq.data.clone()),
                    name => match list.iter().position(|(n, _, _)| n == name) {
                        Some(i) => seq.index = i,
                        None => {
                            let detail = format!("then names '{name}', not a task of this list");
                            return Outcome::Fault(errors::runtime_error(&frame.at, &detail));
                        }
                    },
                }
            }
            let Some((name, def, at)) = list.get(seq.index) else {
                return Outcome::done(seq.data.clone());
            };
            if self.ctx.wf.tasks.len() >= WORKFLOW_TASKS_MAX {
                let detail = format!("the instance ran more than {WORKFLOW_TASKS_MAX} tasks");
                return Outcome::Fault(errors::runtime_error(at, &detail));
            }
            match self.runs(def, &seq.data, &seq.vars, at) {
                Ok(true) => {}
                Ok(false) => {
                    seq.index += 1;
                    continue;
                }
                Err(error) => return Outcome::Fault(error),
            }
            match self.start(at, name, def, seq.data.clone(), &seq.vars) {
                Ok(frame) => seq.current = Some(Box::new(frame)),
                Err(error) => return Outcome::Fault(error),
            }
        }
    }

    /// Whether a task runs: its `if` holds on the data it would start with.
    fn runs(
        &mut self,
        def: &Value,
        data: &Value,
        vars: &BTreeMap<String, Value>,
        at: &str,
    ) -> Result<bool, Value> {
        let Some(condition) = def.get("if") else {
            return Ok(true);
        };
        let scope = self.scope(vars, data, None);
        scope
            .condition(condition, data)
            .map_err(|e| errors::expression_error(&format!("{at}/if"), &e))
    }
}
