//! A task's `timeout` (inline, or named under `use.timeouts`): a WAIT task due when it runs out,
//! opened when the task starts and cancelled when it ends. Once it fired, the task and
//! everything running inside it stop, and the task raises the timeout error (408).

use super::{errors, Outcome, Runner};
use proto::model::dsl::Frame;
use proto::model::TaskStatus;
use proto::TaskId;
use serde_json::Value;

impl Runner<'_, '_> {
    /// The WAIT task that stands for the task's `timeout`, if it has one.
    pub(super) fn deadline(&mut self, at: &str, def: &Value) -> Result<Option<TaskId>, Value> {
        let Some(ms) = self.timeout_ms(at, def)? else {
            return Ok(None);
        };
        let due = self.ctx.now.saturating_add(ms);
        let timeout_at = format!("{at}/timeout");
        Ok(Some(self.open_wait(
            &timeout_at,
            "timeout",
            due,
            &Value::Null,
        )))
    }

    /// How long the task may run by its `timeout`, if it has one.
    pub(super) fn timeout_ms(&self, at: &str, def: &Value) -> Result<Option<i64>, Value> {
        let timeout = match def.get("timeout") {
            Some(Value::String(name)) => {
                let declared = crate::dsl::rules::child("/use/timeouts", name);
                self.doc.pointer(&declared).cloned()
            }
            other => other.cloned(),
        };
        let Some(after) = timeout.as_ref().and_then(|t| t.get("after")) else {
            return Ok(None);
        };
        crate::dsl::millis(after)
            .map(Some)
            .map_err(|e| errors::configuration_error(&format!("{at}/timeout"), &e))
    }

    /// The task ran out of time: what runs inside it stops, its own task times out.
    pub(super) fn timed_out(&mut self, frame: &mut Frame) -> Option<Outcome> {
        let deadline = frame.deadline.as_ref()?;
        let fired = self
            .task(deadline)
            .is_some_and(|t| t.status == TaskStatus::Completed);
        if !fired {
            return None;
        }
        self.cancel_inside(frame);
        frame.deadline = None;
        let detail = format!("the task '{}' ran out of time", frame.name);
        let error = errors::timeout_error(&frame.at, &detail);
        let reason = super::reason_of(&error);
        self.end_task(&frame.task_id, TaskStatus::TimedOut, &error, Some(reason));
        Some(Outcome::Fault(error))
    }
}
