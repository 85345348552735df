//! NATS JetStream: `nats:SUBJECT` events.
//!
//! The subject's messages are kept in a JetStream stream: the one that already captures the
//! subject if there is one (e.g. created by the user), else `BATON_<subject>` (file storage,
//! created here, characters other than `[A-Za-z0-9_-]` replaced by `_`). Every Baton node shares
//! one durable pull consumer per subject, `baton_<subject>`, with explicit acks: a message not
//! acked within the ack wait ([`ACK_WAIT`]) goes to whichever node pulls next. Acks and nacks wait
//! for the server's reply, so an acked message is one the server recorded as acked.
//!
//! The NATS client reconnects by itself after a connection failure, so one client lives as long
//! as the [`Brokers`](super::Brokers) that opened it; requests made while it is disconnected
//! fail with [`BrokerError::Unavailable`] or [`BrokerError::Receive`].

use super::{check_message_id, redact, BrokerError, Delivery, Provider, CONNECT_TIMEOUT};
use async_nats::jetstream::{self, consumer, message::Acker, stream, AckKind};
use futures::StreamExt;
use std::collections::BTreeMap;
use std::time::Duration;

/// How long a delivered message may stay unacked before JetStream redelivers it.
pub const ACK_WAIT: Duration = Duration::from_secs(30);
/// How long after a nack JetStream waits before redelivering.
pub const NAK_DELAY: Duration = Duration::from_millis(500);
/// Unacked messages the shared consumer may have out across all nodes before it stops delivering.
pub const ACK_PENDING_MAX: i64 = 256;
/// Messages one pull asks for; they wait in this node's buffer until
/// [`Consumer::next`](super::Consumer::next) hands them out, and count against
/// [`ACK_PENDING_MAX`] meanwhile.
pub const PULL_BATCH_MAX: usize = 32;
/// Longest subject accepted: stream and consumer names derive from it and the server limits
/// those to 255 characters.
pub const SUBJECT_LEN_MAX: usize = 200;
/// Subjects whose stream is remembered, so a publish does not look it up every time.
const STREAM_CACHE_MAX: usize = 1024;

const BROKER: &str = "NATS";

/// The NATS client, connected on first use, and the streams found for subjects so far.
pub(super) struct Nats {
    url: String,
    /// The ack wait of consumers created here; [`ACK_WAIT`] but in tests.
    ack_wait: Duration,
    client: tokio::sync::Mutex<Option<async_nats::Client>>,
    /// Subject -> the stream capturing it. Bounded by [`STREAM_CACHE_MAX`]; an entry is dropped
    /// when publishing through it fails, so a deleted stream is looked up (or created) again.
    streams: std::sync::Mutex<BTreeMap<String, String>>,
}

impl Nats {
    pub(super) fn new(url: String, ack_wait: Duration) -> Self {
        Self {
            url,
            ack_wait,
            client: tokio::sync::Mutex::new(None),
            streams: std::sync::Mutex::new(BTreeMap::new()),
        }
    }

    async fn client(&self) -> Result<async_nats::Client, BrokerError> {
        let mut client = self.client.lock().await;
        if let Some(c) = client.as_ref() {
            return Ok(c.clone());
        }
        let connect = async_nats::ConnectOptions::new()
            .name("baton")
            .connection_timeout(CONNECT_TIMEOUT)
            .connect(self.url.as_str());
        let failed = |reason: String| BrokerError::Connect {
            broker: BROKER,
            url: redact(&self.url),
            reason,
        };
        // The client's own timeout covers one attempt; this bounds name resolution and
        // handshakes too.
        let c = match tokio::time::timeout(CONNECT_TIMEOUT, connect).await {
            Err(_) => {
                return Err(failed(format!(
                    "timed out after {} s",
                    CONNECT_TIMEOUT.as_secs()
                )))
            }
            Ok(Err(e)) if e.kind() == async_nats::ConnectErrorKind::ServerParse => {
                return Err(BrokerError::InvalidUrl {
                    broker: BROKER,
                    url: redact(&self.url),
                    reason: e.to_string(),
                })
            }
            Ok(Err(e)) => return Err(failed(e.to_string())),
            Ok(Ok(c)) => c,
        };
        tracing::info!(broker = BROKER, url = %redact(&self.url), "connected");
        *client = Some(c.clone());
        Ok(c)
    }

    async fn jetstream(&self) -> Result<jetstream::Context, BrokerError> {
        Ok(jetstream::new(self.client().await?))
    }

    fn unavailable(&self, subject: &str, reason: impl ToString) -> BrokerError {
        BrokerError::Unavailable {
            broker: BROKER,
            url: redact(&self.url),
            provider: Provider::Nats,
            queue: subject.to_string(),
            reason: reason.to_string(),
        }
    }

    fn refused(&self, subject: &str, reason: impl ToString) -> BrokerError {
        BrokerError::Refused {
            broker: BROKER,
            url: redact(&self.url),
            provider: Provider::Nats,
            queue: subject.to_string(),
            reason: reason.to_string(),
        }
    }

    fn cached_stream(&self, subject: &str) -> Option<String> {
        let streams = self.streams.lock().unwrap_or_else(|e| e.into_inner());
        streams.get(subject).cloned()
    }

    fn forget_stream(&self, subject: &str) {
        let mut streams = self.streams.lock().unwrap_or_else(|e| e.into_inner());
        streams.remove(subject);
    }

    /// The name of the stream capturing `subject`: the cached one (if `cached`), else an
    /// existing one, else a new `BATON_` stream.
    async fn stream_for(
        &self,
        js: &jetstream::Context,
        subject: &str,
        cached: bool,
    ) -> Result<String, BrokerError> {
        if let Some(name) = self.cached_stream(subject).filter(|_| cached) {
            return Ok(name);
        }
        use jetstream::context::GetStreamByNameErrorKind as K;
        let name = match js.stream_by_subject(subject).await {
            Ok(name) => name,
            Err(e) if e.kind() == K::NotFound => {
                let name = stream_name(subject);
                let config = stream::Config {
                    name: name.clone(),
                    subjects: vec![subject.to_string()],
                    storage: stream::StorageType::File,
                    description: Some(format!("Baton: messages of nats:{subject}")),
                    ..Default::default()
                };
                let created = js.get_or_create_stream(config).await.map_err(|e| {
                    use jetstream::context::CreateStreamErrorKind as C;
                    match e.kind() {
                        C::JetStream(_) | C::InvalidStreamName | C::EmptyStreamName => {
                            self.refused(subject, format!("creating stream {name}: {e}"))
                        }
                        _ => self.unavailable(subject, format!("creating stream {name}: {e}")),
                    }
                })?;
                // Sanitising can map two subjects to one name (`a.b`, `a_b`): do not consume
                // another subject's stream.
                if !created
                    .cached_info()
                    .config
                    .subjects
                    .iter()
                    .any(|s| s == subject)
                {
                    return Err(self.refused(
                        subject,
                        format!(
                            "stream {name} exists but captures {:?}, not this subject; rename one \
                             of the subjects or create a stream capturing it",
                            created.cached_info().config.subjects
                        ),
                    ));
                }
                tracing::info!(broker = BROKER, %subject, stream = %name, "stream ready");
                name
            }
            Err(e) if e.kind() == K::InvalidSubject => {
                return Err(invalid(subject, "not a valid NATS subject"))
            }
            Err(e) => return Err(self.unavailable(subject, format!("looking up its stream: {e}"))),
        };
        let mut streams = self.streams.lock().unwrap_or_else(|e| e.into_inner());
        if streams.len() >= STREAM_CACHE_MAX {
            streams.clear();
        }
        streams.insert(subject.to_string(), name.clone());
        Ok(name)
    }

    pub(super) async fn consume(&self, subject: &str) -> Result<NatsConsumer, BrokerError> {
        check_subject(subject)?;
        let js = self.jetstream().await?;
        // Looked up afresh: consuming is rare, and a stale name would fail as if refused.
        let stream_name = self.stream_for(&js, subject, false).await?;
        let ours = stream_name == self::stream_name(subject);
        let durable = consumer_name(subject);
        let config = consumer::pull::Config {
            durable_name: Some(durable.clone()),
            description: Some(format!("Baton: event handlers on nats:{subject}")),
            ack_policy: consumer::AckPolicy::Explicit,
            ack_wait: self.ack_wait,
            max_ack_pending: ACK_PENDING_MAX,
            // Baton's stream captures only this subject; a user's stream may capture more. (The
            // client puts the filter into the API subject, so it is left out where not needed.)
            filter_subject: if ours {
                String::new()
            } else {
                subject.to_string()
            },
            ..Default::default()
        };
        let setup = |e: &dyn std::fmt::Display| format!("consumer {durable} on {stream_name}: {e}");
        let stream = js
            .get_stream_no_info(&stream_name)
            .await
            .map_err(|e| self.unavailable(subject, setup(&e)))?;
        let pull: consumer::PullConsumer = stream
            .get_or_create_consumer(&durable, config)
            .await
            .map_err(|e| {
                use async_nats::jetstream::stream::ConsumerErrorKind as C;
                match e.kind() {
                    C::JetStream(_) | C::InvalidConsumerType | C::InvalidName => {
                        self.refused(subject, setup(&e))
                    }
                    _ => self.unavailable(subject, setup(&e)),
                }
            })?;
        let messages = pull
            .stream()
            .max_messages_per_batch(PULL_BATCH_MAX)
            .messages()
            .await
            .map_err(|e| self.unavailable(subject, setup(&e)))?;
        Ok(NatsConsumer {
            subject: subject.to_string(),
            messages,
        })
    }

    pub(super) async fn publish(
        &self,
        subject: &str,
        message_id: Option<&str>,
        payload: &[u8],
    ) -> Result<(), BrokerError> {
        check_subject(subject)?;
        if subject.split('.').any(|t| t == "*" || t == ">") {
            return Err(invalid(
                subject,
                "a message cannot be published to a wildcard subject",
            ));
        }
        if let Some(id) = message_id {
            check_message_id(Provider::Nats, subject, id)?;
        }
        let js = self.jetstream().await?;
        self.stream_for(&js, subject, true).await?;
        let mut headers = async_nats::HeaderMap::new();
        if let Some(id) = message_id {
            headers.insert(async_nats::header::NATS_MESSAGE_ID, id);
        }
        let failed = |reason: String| {
            // The stream may have been deleted: look it up again next time.
            self.forget_stream(subject);
            BrokerError::Publish {
                provider: Provider::Nats,
                queue: subject.to_string(),
                reason,
            }
        };
        let ack = js
            .publish_with_headers(subject.to_string(), headers, payload.to_vec().into())
            .await
            .map_err(|e| failed(e.to_string()))?;
        ack.await.map_err(|e| failed(e.to_string()))?;
        Ok(())
    }
}

/// One subject's share of the durable consumer.
pub(super) struct NatsConsumer {
    subject: String,
    messages: consumer::pull::Stream,
}

impl NatsConsumer {
    pub(super) async fn next(&mut self) -> Result<Delivery, BrokerError> {
        use consumer::pull::MessagesErrorKind as K;
        let closed = |reason: String| BrokerError::Closed {
            provider: Provider::Nats,
            queue: self.subject.clone(),
            reason,
        };
        let message = match self.messages.next().await {
            None => return Err(closed("the message stream ended".to_string())),
            Some(Err(e)) => {
                return Err(match e.kind() {
                    K::ConsumerDeleted | K::PushBasedConsumer => closed(e.to_string()),
                    _ => BrokerError::Receive {
                        provider: Provider::Nats,
                        queue: self.subject.clone(),
                        reason: e.to_string(),
                    },
                })
            }
            Some(Ok(m)) => m,
        };
        let (stream_sequence, delivered, stream) = match message.info() {
            Ok(info) => (
                info.stream_sequence,
                info.delivered,
                info.stream.to_string(),
            ),
            Err(e) => {
                // Not a JetStream delivery (cannot happen on a pull consumer's inbox); it is not
                // acked, so the server redelivers it if it was one after all.
                return Err(BrokerError::Receive {
                    provider: Provider::Nats,
                    queue: self.subject.clone(),
                    reason: format!("message without JetStream metadata: {e}"),
                });
            }
        };
        let header_id = message
            .headers
            .as_ref()
            .and_then(|h| h.get(async_nats::header::NATS_MESSAGE_ID))
            .map(|v| v.as_str().to_string())
            .filter(|id| !id.is_empty());
        let message_id = header_id.unwrap_or_else(|| format!("{stream}:{stream_sequence}"));
        let (message, acker) = message.split();
        Ok(Delivery {
            message_id,
            payload: message.payload.to_vec(),
            subject: message.subject.to_string(),
            redelivered: delivered > 1,
            acker: super::Acker::Nats(NatsAcker(acker)),
        })
    }
}

/// Settles one JetStream delivery, waiting for the server's confirmation.
pub(super) struct NatsAcker(Acker);

impl NatsAcker {
    pub(super) async fn ack(self, message_id: &str) -> Result<(), BrokerError> {
        self.0
            .double_ack_with(AckKind::Ack)
            .await
            .map_err(|e| ack_failed("ack", message_id, e))
    }

    pub(super) async fn nack(self, message_id: &str) -> Result<(), BrokerError> {
        self.0
            .double_ack_with(AckKind::Nak(Some(NAK_DELAY)))
            .await
            .map_err(|e| ack_failed("nack", message_id, e))
    }
}

fn ack_failed(op: &'static str, message_id: &str, e: async_nats::Error) -> BrokerError {
    BrokerError::Ack {
        op,
        message_id: message_id.to_string(),
        reason: e.to_string(),
    }
}

fn invalid(subject: &str, reason: &str) -> BrokerError {
    BrokerError::InvalidQueue {
        provider: Provider::Nats,
        queue: subject.to_string(),
        reason: reason.to_string(),
    }
}

/// Checks `subject` is a NATS subject Baton can consume: dot-separated non-empty tokens without
/// whitespace, `>` only as the last token, at most [`SUBJECT_LEN_MAX`] bytes.
pub(super) fn check_subject(subject: &str) -> Result<&str, BrokerError> {
    if subject.is_empty() {
        return Err(invalid(subject, "the subject is empty"));
    }
    if subject.len() > SUBJECT_LEN_MAX {
        return Err(invalid(
            subject,
            &format!("the subject is longer than {SUBJECT_LEN_MAX} bytes"),
        ));
    }
    if subject.chars().any(char::is_whitespace) {
        return Err(invalid(subject, "the subject contains whitespace"));
    }
    let tokens: Vec<&str> = subject.split('.').collect();
    for (i, token) in tokens.iter().enumerate() {
        if token.is_empty() {
            return Err(invalid(
                subject,
                "the subject has an empty token ('..' or an edge '.')",
            ));
        }
        if token.contains('>') && (*token != ">" || i + 1 != tokens.len()) {
            return Err(invalid(subject, "'>' may only be the whole last token"));
        }
        if token.contains('*') && *token != "*" {
            return Err(invalid(subject, "'*' must be a whole token"));
        }
    }
    Ok(subject)
}

/// `subject` with every character outside `[A-Za-z0-9_-]` replaced by `_`, for stream and
/// consumer names.
fn sanitise(subject: &str) -> String {
    subject
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The stream Baton creates for `subject` when no stream captures it.
fn stream_name(subject: &str) -> String {
    format!("BATON_{}", sanitise(subject))
}

/// The durable consumer all Baton nodes share for `subject`.
fn consumer_name(subject: &str) -> String {
    format!("baton_{}", sanitise(subject))
}

#[cfg(test)]
mod tests {
    use super::super::contract::{self, consume, next, publish, NOWHERE};
    use super::super::{BrokerConfig, Brokers};
    use super::*;

    const NATS: Provider = Provider::Nats;

    fn unique(prefix: &str) -> String {
        format!("{prefix}.{:016x}", rand::random::<u64>())
    }

    /// A configuration whose NATS URL points at [`NOWHERE`].
    fn nowhere() -> BrokerConfig {
        BrokerConfig {
            nats_url: format!("nats://{NOWHERE}"),
            ..BrokerConfig::default()
        }
    }

    async fn delete_stream(brokers: &Brokers, name: &str) {
        let js = brokers.inner.nats.jetstream().await.expect("jetstream");
        js.delete_stream(name).await.expect("delete stream");
    }

    #[test]
    fn names_are_sanitised() {
        assert_eq!(stream_name("orders.created"), "BATON_orders_created");
        assert_eq!(consumer_name("a.*.>"), "baton_a____");
        assert_eq!(sanitise("x-y_Z9"), "x-y_Z9");
    }

    #[test]
    fn subjects_are_checked() {
        for ok in ["a", "a.b", "a.*.c", "a.>", "orders-v2.created_at"] {
            assert!(check_subject(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "a..b",
            ".a",
            "a.",
            "a b",
            "a.>.b",
            "a.b*",
            "a>",
            &"x".repeat(201),
        ] {
            let e = check_subject(bad).expect_err(bad);
            assert!(!e.is_transient());
        }
    }

    #[tokio::test]
    async fn publishing_to_a_wildcard_is_refused_before_connecting() {
        // Nothing listens there: an InvalidQueue shows no connection was tried.
        let brokers = Brokers::new(nowhere());
        for subject in ["orders.*", "orders.>"] {
            let e = brokers
                .publish(NATS, subject, None, b"{}")
                .await
                .expect_err(subject);
            assert!(matches!(e, BrokerError::InvalidQueue { .. }), "{e:?}");
        }
    }

    #[tokio::test]
    async fn ack_and_nack_redeliver_the_nacked_message_with_its_id() {
        let brokers = contract::brokers(NATS);
        let subject = unique("baton.test.acknack");
        let _consumer = contract::ack_and_nack(&brokers, NATS, &subject).await;

        // Both acks are confirmed, so the server shows nothing pending or outstanding.
        let js = brokers.inner.nats.jetstream().await.expect("jetstream");
        let stream = js.get_stream(stream_name(&subject)).await.expect("stream");
        let info = stream
            .consumer_info(consumer_name(&subject))
            .await
            .expect("consumer info");
        assert_eq!((info.num_ack_pending, info.num_pending), (0, 0));
        assert_eq!(info.ack_floor.stream_sequence, 2);
        delete_stream(&brokers, &stream_name(&subject)).await;
    }

    /// Uses a 1 s ack wait (a test-only constructor) rather than a nack: the message is received,
    /// then the delivery and the consumer are dropped unsettled, as in a crash.
    #[tokio::test]
    async fn unacked_message_is_redelivered_to_a_new_consumer() {
        let second = contract::brokers(NATS);
        let first = Brokers::with_nats_ack_wait(BrokerConfig::default(), Duration::from_secs(1));
        let subject = unique("baton.test.crash");
        contract::unacked_is_redelivered(first, &second, NATS, &subject, "crash-1").await;
        delete_stream(&second, &stream_name(&subject)).await;
    }

    #[tokio::test]
    async fn id_without_header_is_stream_and_sequence_across_redelivery() {
        let brokers = contract::brokers(NATS);
        let subject = unique("baton.test.noid");
        let expected = format!("{}:1", stream_name(&subject));
        contract::fallback_id_is_stable(&brokers, NATS, &subject, b"{}", &expected).await;
        delete_stream(&brokers, &stream_name(&subject)).await;
    }

    #[tokio::test]
    async fn an_existing_stream_capturing_the_subject_is_used() {
        let brokers = contract::brokers(NATS);
        let prefix = unique("baton.test.user");
        let user_stream = format!("USER_{}", sanitise(&prefix));
        let js = brokers.inner.nats.jetstream().await.expect("jetstream");
        js.create_stream(stream::Config {
            name: user_stream.clone(),
            subjects: vec![format!("{prefix}.>")],
            ..Default::default()
        })
        .await
        .expect("create the user's stream");

        let wanted = format!("{prefix}.wanted");
        let mut consumer = consume(&brokers, NATS, &wanted).await;
        publish(&brokers, NATS, &format!("{prefix}.other"), None, b"other").await;
        publish(&brokers, NATS, &wanted, None, b"wanted").await;
        // Only the consumed subject arrives, numbered in the user's stream.
        let delivery = next(&mut consumer).await;
        assert_eq!(delivery.payload, b"wanted");
        assert_eq!(delivery.message_id, format!("{user_stream}:2"));
        delivery.ack().await.expect("ack");
        let created = js.get_stream(stream_name(&wanted)).await.is_ok();
        assert!(
            !created,
            "no BATON_ stream may be created for a captured subject"
        );
        delete_stream(&brokers, &user_stream).await;
    }

    #[tokio::test]
    async fn unreachable_server_fails_fast_with_its_url() {
        let subject = "baton.test.unreachable";
        contract::unreachable_fails_fast(nowhere(), NATS, subject).await;
    }
}
