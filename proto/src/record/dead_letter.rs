//! What a partition keeps about messages whose handling keeps failing: the attempts begun on a
//! message (counted before each handling, so that a node crashing during one still counts it)
//! and, once a message failed [`EVENT_ATTEMPTS_MAX`](crate::limits::EVENT_ATTEMPTS_MAX) times,
//! its dead letter: the message set aside with the reason, instead of blocking its queue.

use crate::model::EpochMs;
use serde::{Deserialize, Serialize};

/// The attempts begun on one message (of one event) that has not been handled yet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Attempts {
    /// Handlings begun, the current one included.
    pub attempts: u32,
    /// When the first began.
    pub first: EpochMs,
    /// Why the one before the current failed, when the node that ran it lived to say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// A message set aside after its handling failed too often.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeadLetter {
    pub message_id: String,
    /// `provider:queue`.
    pub event: String,
    pub payload: serde_json::Value,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub trace_id: String,
    /// Handlings begun.
    pub attempts: u32,
    /// Why it was set aside (the last failure, when known).
    pub reason: String,
    /// When its first handling began.
    pub first_attempt: EpochMs,
    /// When it was set aside.
    pub created: EpochMs,
}
