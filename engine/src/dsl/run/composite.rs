//! The tasks made of tasks that run beside `do` and `try`: `for` (its `do` once per item, the
//! data flowing from one iteration to the next) and `fork` (every branch at once; with
//! `compete`, the first to finish wins and the others are cancelled).

use super::{errors, seq, Outcome, Runner};
use proto::model::dsl::{Body, Branch, Frame};
use serde_json::Value;
use std::collections::BTreeMap;

impl Runner<'_, '_> {
    /// `for`: the collection `for.in` gives, evaluated once when the task starts.
    pub(super) fn start_for(
        &mut self,
        at: &str,
        def: &Value,
        input: &Value,
        vars: &BTreeMap<String, Value>,
    ) -> Result<Body, Value> {
        let collection = def.pointer("/for/in").unwrap_or(&Value::Null);
        let items = self
            .scope(vars, input, None)
            .expression(collection, input)
            .map_err(|e| errors::expression_error(&format!("{at}/for/in"), &e))?;
        let items = match items {
            Value::Array(items) => items,
            Value::Null => Vec::new(),
            other => {
                let detail = format!("for.in gave {other}, not a list");
                return Err(errors::expression_error(&format!("{at}/for/in"), &detail));
            }
        };
        Ok(Body::For {
            items,
            index: 0,
            data: input.clone(),
            seq: None,
        })
    }

    /// Runs the iterations of a `for` as far as they go; `while` is checked before each.
    pub(super) fn for_loop(
        &mut self,
        frame: &mut Frame,
        vars: &BTreeMap<String, Value>,
    ) -> Outcome {
        let def = self.doc.pointer(&frame.at).cloned().unwrap_or_default();
        let each = def
            .pointer("/for/each")
            .and_then(Value::as_str)
            .unwrap_or("item");
        let at_name = def
            .pointer("/for/at")
            .and_then(Value::as_str)
            .unwrap_or("index");
        let Body::For {
            items,
            index,
            data,
            seq,
        } = &mut frame.body
        else {
            return Outcome::Pending;
        };
        loop {
            if let Some(running) = seq.as_mut() {
                match self.seq(running) {
                    Outcome::Done { output, .. } => {
                        *data = output;
                        *index += 1;
                        *seq = None;
                    }
                    other => return other,
                }
            }
            let Some(item) = items.get(*index) else {
                return Outcome::done(data.clone());
            };
            let mut inner = vars.clone();
            inner.insert(each.to_owned(), item.clone());
            inner.insert(at_name.to_owned(), (*index).into());
            if let Some(condition) = def.get("while") {
                match self.scope(&inner, data, None).condition(condition, data) {
                    Ok(true) => {}
                    Ok(false) => return Outcome::done(data.clone()),
                    Err(e) => {
                        let at = format!("{}/while", frame.at);
                        return Outcome::Fault(errors::expression_error(&at, &e));
                    }
                }
            }
            *seq = Some(seq::new(&format!("{}/do", frame.at), data.clone(), inner));
        }
    }

    /// Moves every branch of a `fork` on. Its output is the list of the branches' outputs, in
    /// their order; a competing fork's is the winner's.
    pub(super) fn fork(&mut self, frame: &mut Frame, vars: &BTreeMap<String, Value>) -> Outcome {
        let pointer = format!("{}/fork/compete", frame.at);
        let compete = self.doc.pointer(&pointer).and_then(Value::as_bool) == Some(true);
        let Body::Fork { branches } = &mut frame.body else {
            return Outcome::Pending;
        };
        for i in 0..branches.len() {
            let Branch::Running { frame: branch } = &mut branches[i] else {
                continue;
            };
            let outcome = match self.frame(branch, vars) {
                Outcome::Pending => continue,
                Outcome::Done { output, .. } => match self.finish(branch, output, vars) {
                    Ok(output) if !compete => {
                        branches[i] = Branch::Done { output };
                        continue;
                    }
                    Ok(output) => Outcome::done(output),
                    Err(error) => Outcome::Fault(error),
                },
                other => {
                    self.close(Some(branch), &other);
                    other
                }
            };
            branches[i] = Branch::Done {
                output: Value::Null,
            };
            self.cancel_branches(branches);
            return outcome;
        }
        let mut outputs = Vec::new();
        for branch in branches.iter() {
            match branch {
                Branch::Done { output } => outputs.push(output.clone()),
                Branch::Running { .. } => return Outcome::Pending,
                Branch::Cancelled => {}
            }
        }
        Outcome::done(Value::Array(outputs))
    }

    /// Cancels the branches still running.
    fn cancel_branches(&mut self, branches: &mut [Branch]) {
        for branch in branches.iter_mut() {
            if let Branch::Running { frame } = branch {
                self.cancel(frame);
                *branch = Branch::Cancelled;
            }
        }
    }
}
