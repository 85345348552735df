//! `try`: its tasks run; an error they raise that `catch` filters (`errors.with`, `when`,
//! `exceptWhen`) is caught. A caught error is retried while the retry policy allows (after a
//! delay that is a WAIT task, so a durable timer), then handled by `catch.do` with the error
//! bound to `catch.as`; the try's output is then `catch.do`'s. Without `catch.do`, a caught
//! error is swallowed (the try's output is its input), unless a retry policy gave up on it.

use super::errors::{self, same_type};
use super::{seq, Outcome, Runner};
use proto::model::dsl::{Body, Frame};
use serde_json::Value;
use std::collections::BTreeMap;

impl Runner<'_, '_> {
    /// Moves a `try` on.
    pub(super) fn try_task(
        &mut self,
        frame: &mut Frame,
        vars: &BTreeMap<String, Value>,
    ) -> Outcome {
        let def = self.doc.pointer(&frame.at).cloned().unwrap_or_default();
        let catch = def.get("catch").cloned().unwrap_or_default();
        let Frame {
            at, input, body, ..
        } = frame;
        let Body::Try {
            attempt,
            seq,
            catching,
            delay,
            error,
            started_ms,
        } = body
        else {
            return Outcome::Pending;
        };
        loop {
            if let Some(waiting) = delay.clone() {
                if !self.task(&waiting).is_some_and(|t| t.status.is_terminal()) {
                    return Outcome::Pending;
                }
                *delay = None;
                *error = None;
                *attempt += 1;
                *seq = seq::new(&format!("{at}/try"), input.clone(), vars.clone());
            }
            let raised = match self.seq(seq) {
                Outcome::Fault(raised) if !*catching => raised,
                other => return other,
            };
            let as_name = catch.get("as").and_then(Value::as_str).unwrap_or("error");
            let mut bound = vars.clone();
            bound.insert(as_name.to_owned(), raised.clone());
            match self.catches(&catch, &raised, &bound, at) {
                Ok(true) => {}
                Ok(false) => return Outcome::Fault(raised),
                Err(e) => return Outcome::Fault(e),
            }
            match self.retry_delay(&catch, &raised, *attempt, *started_ms, &bound, at) {
                Ok(Some(wait_ms)) => {
                    let due = self.ctx.now.saturating_add(wait_ms);
                    let retry_at = format!("{at}/catch/retry");
                    *delay = Some(self.open_wait(&retry_at, "retry", due, &raised));
                    *error = Some(raised);
                    return Outcome::Pending;
                }
                Ok(None) => {}
                Err(e) => return Outcome::Fault(e),
            }
            match catch.get("do") {
                // Retries spent and nothing to handle the error with: it stands.
                None if catch.get("retry").is_some() => return Outcome::Fault(raised),
                None => return Outcome::done(input.clone()),
                Some(_) => {}
            }
            *catching = true;
            *seq = seq::new(&format!("{at}/catch/do"), input.clone(), bound);
        }
    }

    /// Whether `catch` takes `raised`: its `errors.with` filter matches, `when` holds and
    /// `exceptWhen` does not (both see the error as their input and under `catch.as`).
    fn catches(
        &self,
        catch: &Value,
        raised: &Value,
        bound: &BTreeMap<String, Value>,
        at: &str,
    ) -> Result<bool, Value> {
        if let Some(filter) = catch.pointer("/errors/with").and_then(Value::as_object) {
            for (key, expected) in filter {
                let found = raised.get(key).unwrap_or(&Value::Null);
                let matches = match (key.as_str(), expected, found) {
                    ("type", Value::String(e), Value::String(f)) => same_type(e, f),
                    _ => expected == found,
                };
                if !matches {
                    return Ok(false);
                }
            }
        }
        let scope = self.scope(bound, raised, None);
        for (field, wanted) in [("when", true), ("exceptWhen", false)] {
            if let Some(condition) = catch.get(field) {
                let holds = scope
                    .condition(condition, raised)
                    .map_err(|e| errors::expression_error(&format!("{at}/catch/{field}"), &e))?;
                if holds != wanted {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    /// How long to wait before retrying attempt `attempt`, or `None` when the retry policy
    /// (inline or under `use.retries`) does not retry: its `when`/`exceptWhen` refuse the error,
    /// or its limits are reached.
    fn retry_delay(
        &mut self,
        catch: &Value,
        raised: &Value,
        attempt: u32,
        started_ms: i64,
        bound: &BTreeMap<String, Value>,
        at: &str,
    ) -> Result<Option<i64>, Value> {
        let policy = match catch.get("retry") {
            Some(Value::String(name)) => {
                let declared = crate::dsl::rules::child("/use/retries", name);
                self.doc.pointer(&declared).cloned()
            }
            other => other.cloned(),
        };
        let Some(policy) = policy else {
            return Ok(None);
        };
        let retry_at = format!("{at}/catch/retry");
        if !self.catches(&policy, raised, bound, &retry_at)? {
            return Ok(None);
        }
        let count = policy
            .pointer("/limit/attempt/count")
            .and_then(Value::as_u64);
        if count.is_some_and(|count| u64::from(attempt) > count) {
            return Ok(None);
        }
        let duration = |pointer: &str| -> Result<i64, Value> {
            match policy.pointer(pointer) {
                Some(d) => crate::dsl::millis(d)
                    .map_err(|e| errors::configuration_error(&format!("{retry_at}{pointer}"), &e)),
                None => Ok(0),
            }
        };
        let delay = backoff(&policy, duration("/delay")?, attempt);
        let (from, to) = (duration("/jitter/from")?, duration("/jitter/to")?);
        let jitter = if to > from {
            from + (self.ctx.rng.next_u64() % u64::try_from(to - from).unwrap_or(1)) as i64
        } else {
            from
        };
        let wait = delay.saturating_add(jitter);
        if policy.pointer("/limit/duration").is_some() {
            let limit = duration("/limit/duration")?;
            if self.ctx.now.saturating_add(wait) - started_ms > limit {
                return Ok(None);
            }
        }
        Ok(Some(wait))
    }
}

/// The delay before retry `attempt` (1 for the first): constant, linear (the delay once more
/// per attempt) or exponential (doubling, or by `factor`).
fn backoff(policy: &Value, delay: i64, attempt: u32) -> i64 {
    let n = i64::from(attempt.max(1));
    if policy.pointer("/backoff/linear").is_some() {
        return delay.saturating_mul(n);
    }
    if let Some(exponential) = policy.pointer("/backoff/exponential") {
        let factor = exponential
            .get("factor")
            .and_then(Value::as_f64)
            .unwrap_or(2.0);
        let grown = (delay as f64) * factor.powi(i32::try_from(n - 1).unwrap_or(i32::MAX));
        return grown.min(i64::MAX as f64) as i64;
    }
    delay
}
