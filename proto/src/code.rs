//! [`ErrorCode`]: the stable code of every error a request can end with, the same on the HTTP API
//! (Conductor's `ErrorResponse.code`) and between nodes (`crate::peer`).
//!
//! Each code has a fixed number (what travels between nodes) and a fixed name (what clients read);
//! neither ever changes meaning. A code a node does not know (a newer build's) reads as
//! [`ErrorCode::Internal`].

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "u16", into = "u16")]
pub enum ErrorCode {
    /// The named thing does not exist.
    NotFound,
    /// The request conflicts with the current state (pausing a finished workflow, an id taken).
    Conflict,
    /// The request is malformed or invalid; nothing was changed.
    Invalid,
    /// A field, a payload or the workflow it would make is over its limit; nothing was changed.
    TooLarge,
    /// The request could not be authenticated.
    Unauthorized,
    /// The node cannot serve this now (no leader, a queue full, shutting down): retry later.
    Unavailable,
    /// A replica could not decode a command (a newer format or damage); nothing was written.
    Undecodable,
    /// A broken invariant or a storage failure.
    Internal,
}

impl ErrorCode {
    /// Every code, for tests and documentation.
    pub const ALL: [ErrorCode; 8] = [
        ErrorCode::NotFound,
        ErrorCode::Conflict,
        ErrorCode::Invalid,
        ErrorCode::TooLarge,
        ErrorCode::Unauthorized,
        ErrorCode::Unavailable,
        ErrorCode::Undecodable,
        ErrorCode::Internal,
    ];

    /// The number that travels between nodes.
    pub const fn number(self) -> u16 {
        match self {
            ErrorCode::NotFound => 1,
            ErrorCode::Conflict => 2,
            ErrorCode::Invalid => 3,
            ErrorCode::TooLarge => 4,
            ErrorCode::Unauthorized => 5,
            ErrorCode::Unavailable => 6,
            ErrorCode::Undecodable => 7,
            ErrorCode::Internal => 8,
        }
    }

    /// The name clients read (`ErrorResponse.code`): the HTTP reason phrase of its status, as
    /// Conductor spells it, or a name of its own where no status says it.
    pub const fn name(self) -> &'static str {
        match self {
            ErrorCode::NotFound => "NOT_FOUND",
            ErrorCode::Conflict => "CONFLICT",
            ErrorCode::Invalid => "BAD_REQUEST",
            ErrorCode::TooLarge => "PAYLOAD_TOO_LARGE",
            ErrorCode::Unauthorized => "UNAUTHORIZED",
            ErrorCode::Unavailable => "SERVICE_UNAVAILABLE",
            ErrorCode::Undecodable => "UNDECODABLE_COMMAND",
            ErrorCode::Internal => "INTERNAL_SERVER_ERROR",
        }
    }

    /// The HTTP status it answers with.
    pub const fn http_status(self) -> u16 {
        match self {
            ErrorCode::NotFound => 404,
            ErrorCode::Conflict => 409,
            ErrorCode::Invalid => 400,
            ErrorCode::TooLarge => 413,
            ErrorCode::Unauthorized => 401,
            ErrorCode::Unavailable => 503,
            ErrorCode::Undecodable | ErrorCode::Internal => 500,
        }
    }

    /// Whether the same request may succeed later.
    pub const fn retryable(self) -> bool {
        matches!(self, ErrorCode::Unavailable)
    }
}

impl From<ErrorCode> for u16 {
    fn from(code: ErrorCode) -> u16 {
        code.number()
    }
}

impl From<u16> for ErrorCode {
    fn from(number: u16) -> ErrorCode {
        ErrorCode::ALL
            .into_iter()
            .find(|c| c.number() == number)
            .unwrap_or(ErrorCode::Internal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_names_are_unique_and_read_back() {
        let numbers: std::collections::BTreeSet<u16> =
            ErrorCode::ALL.iter().map(|c| c.number()).collect();
        let names: std::collections::BTreeSet<&str> =
            ErrorCode::ALL.iter().map(|c| c.name()).collect();
        assert_eq!(numbers.len(), ErrorCode::ALL.len());
        assert_eq!(names.len(), ErrorCode::ALL.len());
        for code in ErrorCode::ALL {
            assert_eq!(ErrorCode::from(code.number()), code);
        }
    }

    /// The numbers are part of the peer protocol: changing one is a new format version.
    #[test]
    fn numbers_are_fixed() {
        let fixed: Vec<(u16, &str)> = ErrorCode::ALL
            .iter()
            .map(|c| (c.number(), c.name()))
            .collect();
        assert_eq!(
            fixed,
            [
                (1, "NOT_FOUND"),
                (2, "CONFLICT"),
                (3, "BAD_REQUEST"),
                (4, "PAYLOAD_TOO_LARGE"),
                (5, "UNAUTHORIZED"),
                (6, "SERVICE_UNAVAILABLE"),
                (7, "UNDECODABLE_COMMAND"),
                (8, "INTERNAL_SERVER_ERROR"),
            ]
        );
    }

    #[test]
    fn an_unknown_number_reads_as_internal() {
        assert_eq!(ErrorCode::from(999), ErrorCode::Internal);
    }
}
