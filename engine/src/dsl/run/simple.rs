//! The tasks decided from the task's input: `switch` (which task is next) and `raise` (an error)
//! at once, `emit` (a CloudEvent, published after the commit).

use super::{errors, Outcome, Runner};
use proto::model::dsl::Frame;
use proto::model::task_type;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// The provider of an `emit`'s sink: the event bus of the runtime, which names the broker.
pub const EVENT_BUS: &str = "dsl";

impl Runner<'_, '_> {
    /// `switch`: the first case whose `when` holds (a case without one always does) names the
    /// next task with its `then`; the data passes through. No case: the switch's own `then`.
    pub(super) fn switch(
        &mut self,
        frame: &Frame,
        def: &Value,
        vars: &BTreeMap<String, Value>,
    ) -> Outcome {
        let cases = def.get("switch").and_then(Value::as_array);
        let scope = self.scope(vars, &frame.input, None);
        for (i, item) in cases.into_iter().flatten().enumerate() {
            for (name, case) in item.as_object().into_iter().flatten() {
                let holds = match case.get("when") {
                    Some(when) => scope.condition(when, &frame.input),
                    None => Ok(true),
                };
                match holds {
                    Ok(false) => {}
                    Ok(true) => {
                        let then = case.get("then").and_then(Value::as_str).map(str::to_owned);
                        return Outcome::Done {
                            output: frame.input.clone(),
                            then,
                        };
                    }
                    Err(e) => {
                        let at = format!("{}/switch/{i}/{name}/when", frame.at);
                        return Outcome::Fault(errors::expression_error(&at, &e));
                    }
                }
            }
        }
        Outcome::done(frame.input.clone())
    }

    /// `raise`: the error defined inline or under `use.errors`, its expressions evaluated,
    /// raised here unless it names its own instance.
    pub(super) fn raise(
        &mut self,
        frame: &Frame,
        def: &Value,
        vars: &BTreeMap<String, Value>,
    ) -> Outcome {
        let error = def.pointer("/raise/error").cloned().unwrap_or_default();
        let error = match &error {
            Value::String(name) => {
                let declared = crate::dsl::rules::child("/use/errors", name);
                self.doc.pointer(&declared).cloned().unwrap_or_default()
            }
            _ => error,
        };
        let scope = self.scope(vars, &frame.input, None);
        match scope.deep(&error, &frame.input) {
            Ok(error) => Outcome::Fault(errors::raised(error, &frame.at)),
            Err(e) => {
                let at = format!("{}/raise/error", frame.at);
                Outcome::Fault(errors::expression_error(&at, &e))
            }
        }
    }

    /// `emit`: the event's attributes evaluated and completed as a CloudEvent 1.0 (`id`,
    /// `time`, `specversion`), published as an EVENT task's message to the event bus under the
    /// event's type (the sink `dsl:{type}`, [`EVENT_BUS`]: the runtime resolves it to the bus
    /// its operator chose); published once (the message id is the task's), the task's output
    /// is the event.
    pub(super) fn start_emit(
        &mut self,
        at: &str,
        name: &str,
        def: &Value,
        input: Value,
        vars: &BTreeMap<String, Value>,
    ) -> Result<Frame, Value> {
        let attributes = def.pointer("/emit/event/with").cloned().unwrap_or_default();
        let evaluated = self.scope(vars, &input, None).deep(&attributes, &input);
        let mut event = match evaluated {
            Ok(Value::Object(map)) => map,
            Ok(_) => Map::new(),
            Err(e) => {
                let at = format!("{at}/emit/event/with");
                return Err(errors::expression_error(&at, &e));
            }
        };
        let id = self.ctx.new_task_id().to_string();
        event.entry("id").or_insert_with(|| id.into());
        event.entry("specversion").or_insert_with(|| "1.0".into());
        let time = super::time_arg(self.ctx.now)["iso8601"].clone();
        event.entry("time").or_insert(time);
        let kind = event.get("type").and_then(Value::as_str).unwrap_or("dsl");
        let sink = format!("{EVENT_BUS}:{kind}");
        let event = Value::Object(event);
        let task_id = self.open_task(at, name, task_type::EVENT, "", &event);
        if let Some(i) = self.ctx.index_of(&task_id) {
            self.ctx.wf.tasks[i].workflow_task.sink = Some(sink);
        }
        Ok(super::call::external(at, name, task_id, input))
    }
}
