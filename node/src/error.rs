//! `node::Error`: what a request can fail with. Each variant maps to one HTTP status (see `api`).

use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error, serde::Serialize, serde::Deserialize)]
pub enum Error {
    /// 404: the named thing does not exist.
    #[error("{0}")]
    NotFound(String),
    /// 409: the request conflicts with the current state (e.g. pausing a finished workflow).
    #[error("{0}")]
    Conflict(String),
    /// 400: the request is malformed or invalid; nothing was changed.
    #[error("{0}")]
    Invalid(String),
    /// 413: a field or payload is larger than its limit, or the change would make a workflow
    /// larger than it may grow; nothing was changed.
    #[error("{0}")]
    TooLarge(String),
    /// 401: the request could not be authenticated (a webhook's signature or timestamp).
    #[error("{0}")]
    Unauthorized(String),
    /// 503: the node cannot serve this now (no leader, shutting down); the client may retry.
    #[error("{0}")]
    Unavailable(String),
    /// 500: a broken invariant or storage failure.
    #[error("{0}")]
    Internal(String),
}

impl From<engine::Error> for Error {
    fn from(e: engine::Error) -> Self {
        use engine::Error as E;
        match e {
            E::NotFound(m) => Error::NotFound(m),
            E::Conflict(m) => Error::Conflict(m),
            E::Invalid(m) => Error::Invalid(m),
        }
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
