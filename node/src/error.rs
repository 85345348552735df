//! `node::Error`: what a request can fail with. Each variant has one stable [`ErrorCode`], which the
//! HTTP API answers as Conductor's `ErrorResponse` and peers exchange as a [`Failure`].

use proto::peer::{DecodeError, Failure};
use proto::ErrorCode;
use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Error {
    /// The named thing does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The request conflicts with the current state (e.g. pausing a finished workflow).
    #[error("{0}")]
    Conflict(String),
    /// The request is malformed or invalid; nothing was changed.
    #[error("{0}")]
    Invalid(String),
    /// A field or payload is larger than its limit, or the change would make a workflow larger
    /// than it may grow; nothing was changed.
    #[error("{0}")]
    TooLarge(String),
    /// The request could not be authenticated (a webhook's signature or timestamp).
    #[error("{0}")]
    Unauthorized(String),
    /// The node cannot serve this now (no leader, shutting down); the client may retry.
    #[error("{0}")]
    Unavailable(String),
    /// A replica or a peer could not decode what it was sent (a newer format, or damage); nothing
    /// was written.
    #[error("{0}")]
    Undecodable(String),
    /// A broken invariant or storage failure.
    #[error("{0}")]
    Internal(String),
}

impl Error {
    /// The stable code of this error.
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::NotFound(_) => ErrorCode::NotFound,
            Error::Conflict(_) => ErrorCode::Conflict,
            Error::Invalid(_) => ErrorCode::Invalid,
            Error::TooLarge(_) => ErrorCode::TooLarge,
            Error::Unauthorized(_) => ErrorCode::Unauthorized,
            Error::Unavailable(_) => ErrorCode::Unavailable,
            Error::Undecodable(_) => ErrorCode::Undecodable,
            Error::Internal(_) => ErrorCode::Internal,
        }
    }

    /// The error as a peer receives it.
    pub fn failure(&self) -> Failure {
        Failure {
            code: self.code(),
            message: self.to_string(),
        }
    }
}

impl From<Failure> for Error {
    fn from(f: Failure) -> Self {
        let m = f.message;
        match f.code {
            ErrorCode::NotFound => Error::NotFound(m),
            ErrorCode::Conflict => Error::Conflict(m),
            ErrorCode::Invalid => Error::Invalid(m),
            ErrorCode::TooLarge => Error::TooLarge(m),
            ErrorCode::Unauthorized => Error::Unauthorized(m),
            ErrorCode::Unavailable => Error::Unavailable(m),
            ErrorCode::Undecodable => Error::Undecodable(m),
            ErrorCode::Internal => Error::Internal(m),
        }
    }
}

/// A peer's message this build cannot read.
impl From<DecodeError> for Error {
    fn from(e: DecodeError) -> Self {
        Error::Undecodable(e.to_string())
    }
}

impl From<engine::Error> for Error {
    fn from(e: engine::Error) -> Self {
        Error::from(Failure {
            code: e.code(),
            message: e.to_string(),
        })
    }
}

impl From<proto::check::Violation> for Error {
    fn from(v: proto::check::Violation) -> Self {
        use proto::check::Violation as V;
        match v {
            V::Invalid(m) => Error::Invalid(m),
            V::TooLarge(m) => Error::TooLarge(m),
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_crosses_to_a_peer_and_back_unchanged() {
        let all = [
            Error::NotFound("a".into()),
            Error::Conflict("b".into()),
            Error::Invalid("c".into()),
            Error::TooLarge("d".into()),
            Error::Unauthorized("e".into()),
            Error::Unavailable("f".into()),
            Error::Undecodable("g".into()),
            Error::Internal("h".into()),
        ];
        let codes: std::collections::BTreeSet<u16> =
            all.iter().map(|e| e.code().number()).collect();
        assert_eq!(codes.len(), ErrorCode::ALL.len(), "one code per variant");
        for e in all {
            assert_eq!(Error::from(e.failure()), e);
        }
    }

    #[test]
    fn an_unreadable_peer_message_is_undecodable_not_a_conflict() {
        let e = Error::from(proto::peer::decode_reply(&[99]).expect_err("version 99 is unknown"));
        assert_eq!(e.code(), ErrorCode::Undecodable);
    }
}
