//! jq queries in a script host: compiled once per host and query (a JSON_JQ_TRANSFORM task's
//! query is the same for every workflow of its definition) and run on the task's input.
//! The host's limits apply: the pool's deadline kills a query that runs too long, the host's
//! data limit bounds its memory, and the result is held to the output limit.

use super::script::{Limits, ScriptError};
use serde_json::Value;
use std::collections::BTreeMap;

/// Compiled queries a host keeps; past it the cache starts over.
pub const QUERIES_CACHED_MAX: usize = 256;

/// A host's compiled queries, by their text.
#[derive(Default)]
pub struct Queries {
    compiled: BTreeMap<String, engine::jq::Filter>,
}

impl Queries {
    /// Runs `query` on `input`: the list of its outputs.
    pub fn run(
        &mut self,
        query: &str,
        input: &Value,
        limits: &Limits,
    ) -> Result<Value, ScriptError> {
        if !self.compiled.contains_key(query) {
            let filter = engine::jq::compile(query).map_err(ScriptError::Syntax)?;
            if self.compiled.len() >= QUERIES_CACHED_MAX {
                self.compiled.clear();
            }
            self.compiled.insert(query.to_owned(), filter);
        }
        let filter = &self.compiled[query];
        let outputs = engine::jq::run(filter, input).map_err(ScriptError::Failed)?;
        let value = Value::Array(outputs);
        let bytes = serde_json::to_vec(&value).map_or(usize::MAX, |b| b.len());
        if limits.output_bytes > 0 && bytes > limits.output_bytes {
            return Err(ScriptError::OutputTooLarge {
                limit: limits.output_bytes,
            });
        }
        Ok(value)
    }
}
