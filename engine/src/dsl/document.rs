//! A Serverless Workflow document that passed every check: its header (`document`) read into
//! fields, and the whole document as JSON, as submitted.

use super::error::{Error, Problem, Problems};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The `document` section: what names and versions a workflow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    /// The DSL version the document is written for (1.0.0 to 1.0.3).
    pub dsl: String,
    pub namespace: String,
    pub name: String,
    /// The workflow's own version (semantic versioning).
    pub version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

/// A valid document. Built only by [`super::load`], so its JSON follows the schema and rules.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    header: Header,
    json: Value,
}

impl Document {
    /// Reads the header of a document that follows the schema.
    pub(super) fn new(json: Value) -> Result<Self, Error> {
        let section = json.get("document").cloned().unwrap_or(Value::Null);
        let header = serde_json::from_value(section).map_err(|e| {
            Error::Schema(Problems::new(vec![Problem::new(
                "/document",
                e.to_string(),
            )]))
        })?;
        Ok(Self { header, json })
    }

    /// A document [`super::load`] accepted before, as it was stored (its JSON form): only its
    /// header is read again.
    pub fn from_stored(json: Value) -> Result<Self, Error> {
        Self::new(json)
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The whole document as JSON.
    pub fn json(&self) -> &Value {
        &self.json
    }
}
