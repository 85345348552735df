//! A `listen`'s `foreach`: each consumed event, in the order it came, runs the iterator's `do`
//! (its input the event as `read` says, `$item` the event and `$index` its place, or the names
//! `item` and `at` give), one at a time; events consumed meanwhile wait in the listen's queue
//! (`Listening::queued`). An iteration's output goes through `foreach.output.as` and
//! `foreach.export.as` (into `$context`), and the list of those outputs is the listen's output
//! and what its `until` condition reads. The listen ends once its strategy is met and every
//! event it consumed was processed.

use super::{errors, seq, Outcome, Runner};
use proto::model::dsl::{Body, Frame};
use serde_json::Value;
use std::collections::BTreeMap;

impl Runner<'_, '_> {
    /// Processes the listen's consumed events as far as they go: `Pending` while an iteration
    /// waits on the world, `Done` once every consumed event was processed.
    pub(super) fn foreach(
        &mut self,
        frame: &mut Frame,
        each: &Value,
        vars: &BTreeMap<String, Value>,
    ) -> Outcome {
        let name = |key: &str, default: &str| {
            let given = each.get(key).and_then(Value::as_str);
            given.unwrap_or(default).to_owned()
        };
        let (item, at_name) = (name("item", "item"), name("at", "index"));
        let at = format!("{}/foreach", frame.at);
        let Body::Listen(listening) = &mut frame.body else {
            return Outcome::Pending;
        };
        loop {
            if let Some(running) = listening.iteration.as_mut() {
                let output = match self.seq(running) {
                    Outcome::Done { output, .. } => output,
                    other => return other,
                };
                let vars = std::mem::take(&mut running.vars);
                listening.iteration = None;
                // The iteration's input: the event, as read.
                let input = vars.get(&item).cloned().unwrap_or_default();
                match self.iterated(&at, each, (&input, output), &vars) {
                    Ok(output) => listening.events.push(output),
                    Err(fault) => return Outcome::Fault(fault),
                }
            }
            if listening.queued.is_empty() {
                return Outcome::done(Value::Null);
            }
            let event = listening.queued.remove(0);
            let mut inner = vars.clone();
            inner.insert(item.clone(), event.clone());
            inner.insert(at_name.clone(), listening.events.len().into());
            listening.iteration = Some(seq::new(&format!("{at}/do"), event, inner));
        }
    }

    /// An iteration's output through the iterator's `output.as`, then its `export.as` into
    /// `$context`; both see the iteration's input as `$input`.
    fn iterated(
        &mut self,
        at: &str,
        each: &Value,
        (input, output): (&Value, Value),
        vars: &BTreeMap<String, Value>,
    ) -> Result<Value, Value> {
        let transformed = match each.pointer("/output/as") {
            Some(filter) => self
                .scope(vars, input, Some(&output))
                .expression(filter, &output)
                .map_err(|e| errors::expression_error(&format!("{at}/output/as"), &e))?,
            None => output,
        };
        if let Some(filter) = each.pointer("/export/as") {
            let context = self
                .scope(vars, input, Some(&transformed))
                .expression(filter, &transformed)
                .map_err(|e| errors::expression_error(&format!("{at}/export/as"), &e))?;
            self.context = context;
        }
        Ok(transformed)
    }
}
