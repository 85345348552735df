//! Attempts and dead letters: no queue blocks behind one message.
//!
//! Before each handling of a message its attempt is counted durably
//! (`PartitionCommand::BeginAttempt`, on the partition of hash(messageId), like its execution
//! records), so a node that crashes during the handling still counts it. A message whose handling
//! failed, timed out ([`EVENT_HANDLING_MS_MAX`]) or never finished [`EVENT_ATTEMPTS_MAX`] times
//! is set aside as a dead letter with the reason (`PartitionCommand::PutDeadLetter`) and
//! acknowledged, instead of being delivered forever. Between attempts the pause doubles
//! ([`retry_pause`]). Operators list dead letters (`GET
//! /api/admin/dead-letters`), remove them, or queue them again.

use super::Events;
use super::{Message, Verdict};
use crate::error::{Error, Result};
use crate::events::GateEvent;
use crate::host::through_failover;
use crate::partition::{keys, Partition};
use proto::limits::{DEAD_LETTERS_MAX, EVENT_ATTEMPTS_MAX, EVENT_HANDLING_MS_MAX};
use proto::model::split_event;
use proto::peer::{Reply, Request};
use proto::record::dead_letter::{Attempts, DeadLetter};
use proto::record::{self, EventSource, PartitionCommand, PartitionOutcome};
use std::sync::Arc;
use std::time::Duration;

impl Events {
    /// Handles one delivery of a message, its attempt counted first; sets it aside once it
    /// has failed [`EVENT_ATTEMPTS_MAX`] times. `Ack` also when it was set aside. Answers the
    /// verdict with how long to wait before a delivery again.
    pub(crate) async fn consume_message(&self, message: &Message) -> (Verdict, Duration) {
        let last_error = self.take_failure(message);
        let attempts = match self.begin_attempt(message, last_error).await {
            Ok(a) => a,
            Err(e) => {
                let reason = format!("could not count the attempt: {e}");
                return (Verdict::Retry(reason), retry_pause(1));
            }
        };
        let verdict = self.attempt(message, &attempts).await;
        (verdict, retry_pause(attempts.attempts))
    }

    /// One counted handling of a message.
    async fn attempt(&self, message: &Message, attempts: &Attempts) -> Verdict {
        // The attempt is counted: a crash from here on (a test aborts here) still counts.
        crate::failpoint::hit("event-handling");
        if attempts.attempts > EVENT_ATTEMPTS_MAX {
            // Every earlier attempt failed or never finished (the node stopped during it).
            let last = attempts.last_error.clone().unwrap_or_else(|| {
                "it did not finish (the node handling it stopped during it)".into()
            });
            let reason = format!(
                "{} handlings failed; the last: {last}",
                attempts.attempts - 1
            );
            return self.set_aside(message, attempts, reason).await;
        }
        let handling = self.handle_message(message);
        let verdict = tokio::time::timeout(Duration::from_millis(EVENT_HANDLING_MS_MAX), handling)
            .await
            .unwrap_or_else(|_| {
                Verdict::Retry(format!(
                    "handling took longer than {EVENT_HANDLING_MS_MAX} ms"
                ))
            });
        match verdict {
            Verdict::Ack => {
                self.end_attempts(message).await;
                Verdict::Ack
            }
            Verdict::Retry(reason) if attempts.attempts >= EVENT_ATTEMPTS_MAX => {
                let reason = format!("{} handlings failed; the last: {reason}", attempts.attempts);
                self.set_aside(message, attempts, reason).await
            }
            Verdict::Retry(reason) => {
                self.remember_failure(message, reason.clone());
                Verdict::Retry(reason)
            }
        }
    }

    async fn begin_attempt(&self, m: &Message, last_error: Option<String>) -> Result<Attempts> {
        let command = PartitionCommand::BeginAttempt {
            event: m.event.clone(),
            message_id: m.id.clone(),
            now: self.host.clock.now_ms(),
            last_error,
        };
        match self
            .host
            .partition_command(self.message_partition(&m.id), command)
            .await?
        {
            PartitionOutcome::Attempts(a) => Ok(*a),
            other => Err(Error::Internal(format!(
                "unexpected attempt outcome {other:?}"
            ))),
        }
    }

    /// Forgets a handled message's attempts; a failure only leaves a row behind.
    async fn end_attempts(&self, m: &Message) {
        let command = PartitionCommand::EndAttempts {
            event: m.event.clone(),
            message_id: m.id.clone(),
        };
        let partition = self.message_partition(&m.id);
        if let Err(e) = self.host.partition_command(partition, command).await {
            tracing::debug!(message = %m.id, error = %e, "could not forget a handled message's attempts");
        }
    }

    /// Writes the message's dead letter; `Ack` once it is written.
    async fn set_aside(&self, m: &Message, attempts: &Attempts, reason: String) -> Verdict {
        tracing::warn!(message = %m.id, event = %m.event, %reason, "message set aside as a dead letter");
        let letter = DeadLetter {
            message_id: m.id.clone(),
            event: m.event.clone(),
            payload: m.payload.clone(),
            trace_id: m.trace_id.clone(),
            attempts: attempts.attempts,
            reason: reason.clone(),
            first_attempt: attempts.first,
            created: self.host.clock.now_ms(),
        };
        let command = PartitionCommand::PutDeadLetter {
            letter: Box::new(letter),
        };
        match self
            .host
            .partition_command(self.message_partition(&m.id), command)
            .await
        {
            Ok(_) => Verdict::Ack,
            Err(e) => Verdict::Retry(format!("could not set it aside ({e}); {reason}")),
        }
    }

    /// Dead letters from every partition's leader (or local replica), at most `limit`.
    pub async fn dead_letters(&self, limit: usize) -> Result<Vec<DeadLetter>> {
        let limit = limit.clamp(1, DEAD_LETTERS_MAX);
        through_failover(|| async {
            let mut out = self
                .host
                .list_every_partition(
                    |hosted| dead_letters_in(hosted, limit),
                    |partitions| Request::DeadLetters { partitions, limit },
                    |reply| match reply {
                        Reply::DeadLetters(d) => Ok(d),
                        other => Err(other),
                    },
                )
                .await?;
            out.truncate(limit);
            Ok(out)
        })
        .await
    }

    /// Removes a dead letter.
    pub async fn remove_dead_letter(&self, event: &str, message_id: &str) -> Result<()> {
        let command = PartitionCommand::RemoveDeadLetter {
            event: event.to_owned(),
            message_id: message_id.to_owned(),
        };
        match self
            .host
            .partition_command(self.message_partition(message_id), command)
            .await?
        {
            PartitionOutcome::Applied => Ok(()),
            _ => Err(Error::NotFound(format!(
                "no dead letter of message {message_id} on {event}"
            ))),
        }
    }

    /// Queues a dead letter's message again (same id, so actions that completed are not
    /// repeated) and removes the dead letter.
    pub async fn requeue_dead_letter(&self, event: &str, message_id: &str) -> Result<()> {
        let letter = self
            .find_dead_letter(event, message_id)
            .await?
            .ok_or_else(|| {
                Error::NotFound(format!("no dead letter of message {message_id} on {event}"))
            })?;
        self.publish_again(&letter).await?;
        self.remove_dead_letter(event, message_id).await
    }

    /// A dead letter, read on a replica this node hosts, else through the listing.
    async fn find_dead_letter(&self, event: &str, message_id: &str) -> Result<Option<DeadLetter>> {
        if let Some(p) = self.host.partition(self.message_partition(message_id)) {
            let row = p
                .state()
                .get(keys::dead_letter(event, message_id))
                .map_err(crate::host::storage)?;
            return row
                .map(|r| record::decode::<DeadLetter>(&r))
                .transpose()
                .map_err(|e| Error::Internal(format!("dead letter: {e}")));
        }
        let letters = self.dead_letters(DEAD_LETTERS_MAX).await?;
        Ok(letters
            .into_iter()
            .find(|l| l.event == event && l.message_id == message_id))
    }

    /// Publishes a dead letter's message to its event again.
    async fn publish_again(&self, letter: &DeadLetter) -> Result<()> {
        let (provider, queue) = split_event(&letter.event).ok_or_else(|| {
            Error::Invalid(format!("event '{}' is not provider:queue", letter.event))
        })?;
        match self.providers.check(provider).map_err(Error::Invalid)? {
            None => {
                let event = GateEvent {
                    source: EventSource::Queue,
                    event: letter.event.clone(),
                    id: Some(letter.message_id.clone()),
                    payload: letter.payload.clone(),
                    trace_id: Some(letter.trace_id.clone()).filter(|t| !t.is_empty()),
                    dedup_window_ms: None,
                };
                self.admit(event).await.map(|_| ())
            }
            Some(broker) => {
                let bytes = serde_json::to_vec(&letter.payload)
                    .map_err(|e| Error::Internal(format!("event payload: {e}")))?;
                self.providers
                    .brokers
                    .publish(broker, queue, Some(&letter.message_id), &bytes)
                    .await
                    .map_err(|e| Error::Unavailable(e.to_string()))
            }
        }
    }
}

/// The pause before delivering a message again after its `attempts`-th handling failed:
/// [`RETRY_PAUSE_MS`] doubled for each earlier failure, at most [`RETRY_PAUSE_MAX_MS`], so that
/// a passing outage (a failover) does not use up a message's attempts at once.
pub(crate) fn retry_pause(attempts: u32) -> Duration {
    let doublings = attempts.saturating_sub(1).min(16);
    Duration::from_millis((RETRY_PAUSE_MS << doublings).min(RETRY_PAUSE_MAX_MS))
}

/// The pause before a message is delivered again after its first failed handling.
pub(crate) const RETRY_PAUSE_MS: u64 = 500;
/// The longest pause between two deliveries of a failing message.
pub(crate) const RETRY_PAUSE_MAX_MS: u64 = 30_000;

/// Dead letters in these replicas, at most `limit`.
pub(crate) fn dead_letters_in(
    replicas: &[Arc<Partition>],
    limit: usize,
) -> Result<Vec<DeadLetter>> {
    let mut out = Vec::new();
    for p in replicas {
        for kv in p.state().scan_prefix(keys::DEAD_LETTER_PREFIX) {
            let (_, v) = kv.map_err(crate::host::storage)?;
            if let Ok(letter) = record::decode::<DeadLetter>(&v) {
                out.push(letter);
            }
            if out.len() >= limit {
                return Ok(out);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pause_between_attempts_doubles_up_to_its_maximum() {
        let pauses: Vec<u64> = (1..=5).map(|a| retry_pause(a).as_millis() as u64).collect();
        assert_eq!(pauses, vec![500, 1_000, 2_000, 4_000, 8_000]);
        assert_eq!(retry_pause(0), Duration::from_millis(RETRY_PAUSE_MS));
        assert_eq!(
            retry_pause(u32::MAX),
            Duration::from_millis(RETRY_PAUSE_MAX_MS)
        );
    }
}
