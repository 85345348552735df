//! Why a Serverless Workflow document is refused: a typed [`Error`] whose [`Problem`]s each name
//! the offending node by its JSON pointer, and its rendering as the RFC 7807 problem details the
//! DSL uses for errors ([`ProblemDetails`]).

use proto::limits::DSL_PROBLEMS_MAX;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The DSL's error type for a document that is not valid (schema or rules).
pub const VALIDATION_TYPE: &str = "https://serverlessworkflow.io/spec/1.0.0/errors/validation";
/// The DSL's error type for a document this runtime cannot take as configured (its DSL version).
pub const CONFIGURATION_TYPE: &str =
    "https://serverlessworkflow.io/spec/1.0.0/errors/configuration";

/// One thing wrong with a document: where (a JSON pointer into the document, `""` for the whole
/// of it) and what.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Problem {
    pub pointer: String,
    pub message: String,
}

impl Problem {
    pub fn new(pointer: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            pointer: pointer.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = if self.pointer.is_empty() {
            "/"
        } else {
            &self.pointer
        };
        write!(f, "{at}: {}", self.message)
    }
}

/// Where a syntax error is in the text, both counted from 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    pub line: usize,
    pub column: usize,
}

/// Why a document was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("the document is {bytes} bytes, over the limit of {max} bytes")]
    TooLarge { bytes: usize, max: usize },
    #[error("the document is not valid YAML or JSON{}: {message}", at(.location))]
    Syntax {
        location: Option<Location>,
        message: String,
    },
    #[error("the document is written for DSL version {0}; this runtime reads 1.0.0 to 1.0.3")]
    Version(String),
    #[error("the document does not follow the DSL's schema: {}", List(.0))]
    Schema(Problems),
    #[error("the document breaks the DSL's rules: {}", List(.0))]
    Rules(Problems),
    #[error("the document asks for what this runtime does not do: {}", List(.0))]
    Unsupported(Problems),
}

/// The problems of a refused document: at most [`DSL_PROBLEMS_MAX`], sorted, and how many more
/// there were.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problems {
    pub listed: Vec<Problem>,
    pub more: usize,
}

impl Problems {
    /// Sorts and deduplicates `all`, then keeps the first [`DSL_PROBLEMS_MAX`].
    pub fn new(mut all: Vec<Problem>) -> Self {
        all.sort();
        all.dedup();
        let more = all.len().saturating_sub(DSL_PROBLEMS_MAX);
        all.truncate(DSL_PROBLEMS_MAX);
        Self { listed: all, more }
    }
}

fn at(location: &Option<Location>) -> String {
    match location {
        Some(l) => format!(" at line {}, column {}", l.line, l.column),
        None => String::new(),
    }
}

struct List<'a>(&'a Problems);

impl fmt::Display for List<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, problem) in self.0.listed.iter().enumerate() {
            let sep = if i == 0 { "" } else { "; " };
            write!(f, "{sep}{problem}")?;
        }
        if self.0.more > 0 {
            write!(f, "; and {} more", self.0.more)?;
        }
        Ok(())
    }
}

/// An error as RFC 7807 problem details, in the shape of the DSL's `error`: `instance` is the
/// JSON pointer of the (first) offending node; `errors` lists every problem found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProblemDetails {
    #[serde(rename = "type")]
    pub kind: String,
    pub status: u16,
    pub title: String,
    pub detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<Problem>,
}

impl Error {
    /// Where and what: one problem for an error about the whole text, each one found otherwise.
    pub fn problems(&self) -> Vec<Problem> {
        match self {
            Error::Schema(p) | Error::Rules(p) | Error::Unsupported(p) => p.listed.clone(),
            Error::Version(_) => vec![Problem::new("/document/dsl", self.to_string())],
            Error::TooLarge { .. } | Error::Syntax { .. } => {
                vec![Problem::new("", self.to_string())]
            }
        }
    }

    /// The error as the DSL reports errors: a configuration error (status 400) for a DSL version
    /// or a feature this runtime does not have, a validation error (status 400) for everything
    /// else.
    pub fn problem_details(&self) -> ProblemDetails {
        let (kind, title) = match self {
            Error::Version(_) => (CONFIGURATION_TYPE, "Unsupported DSL version"),
            Error::Unsupported(_) => (CONFIGURATION_TYPE, "Unsupported by this runtime"),
            _ => (VALIDATION_TYPE, "Invalid workflow document"),
        };
        let errors = self.problems();
        ProblemDetails {
            kind: kind.to_owned(),
            status: 400,
            title: title.to_owned(),
            detail: self.to_string(),
            instance: errors.first().map(|p| p.pointer.clone()),
            errors,
        }
    }
}
