//! Brokers: the clients of the external brokers Baton's event handlers consume from, NATS
//! JetStream ([`nats`]) and RabbitMQ over AMQP 0.9.1 ([`amqp`]).
//!
//! An event handler's `event` is `provider:queue`; [`Provider`] names the provider and the queue
//! string is handed over as written, Conductor's `?param=value&...` suffix included. Delivery is at
//! least once: a [`Consumer`] hands out [`Delivery`]s, the caller processes each one and then acks
//! it (done) or nacks it (redeliver later). Nothing is acked automatically, and a delivery that is
//! neither acked nor nacked is redelivered by the broker's own rules (JetStream's ack wait, AMQP's
//! unacked messages returning when their channel closes), so a crash mid-processing loses nothing.
//! A message can therefore arrive more than once; [`Delivery::message_id`] is stable across
//! redeliveries of one broker message and the caller deduplicates on it.
//!
//! What this is not: it keeps no state of its own (no offsets, no dedup records; the execution
//! records in `service::events` do that), and it does not retry on its own beyond the brokers'
//! redelivery: errors are returned, marked [`BrokerError::is_transient`] when a retry may help.

pub mod amqp;
pub mod nats;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// How long opening a broker connection may take before it fails with [`BrokerError::Connect`].
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Where the brokers are. URLs may carry credentials (`amqp://user:pass@host/vhost`); errors and
/// logs show them with the password replaced by `***`.
#[derive(Clone, PartialEq, Eq)]
pub struct BrokerConfig {
    /// NATS server with JetStream enabled, e.g. `nats://127.0.0.1:4222`.
    pub nats_url: String,
    /// RabbitMQ, e.g. `amqp://guest:guest@127.0.0.1:5672/%2f` (`%2f` is the default vhost `/`).
    pub amqp_url: String,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        Self {
            nats_url: "nats://127.0.0.1:4222".to_string(),
            amqp_url: "amqp://guest:guest@127.0.0.1:5672/%2f".to_string(),
        }
    }
}

impl fmt::Debug for BrokerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BrokerConfig")
            .field("nats_url", &redact(&self.nats_url))
            .field("amqp_url", &redact(&self.amqp_url))
            .finish()
    }
}

/// An external event provider, the part of an event handler's `event` before the first `:`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    /// `nats:SUBJECT`: a JetStream stream capturing the subject.
    Nats,
    /// `amqp_queue:QUEUE?durable=..&exclusive=..&autoDelete=..`: a RabbitMQ queue.
    AmqpQueue,
    /// `amqp_exchange:EXCHANGE?exchangeType=..&routingKey=..&bindQueueName=..`: a RabbitMQ
    /// exchange, consumed through a queue bound to it.
    AmqpExchange,
}

impl Provider {
    /// The provider called `name` (`nats`, `amqp_queue`, `amqp_exchange`), if Baton knows it.
    pub fn parse(name: &str) -> Option<Provider> {
        match name {
            "nats" => Some(Provider::Nats),
            "amqp_queue" => Some(Provider::AmqpQueue),
            "amqp_exchange" => Some(Provider::AmqpExchange),
            _ => None,
        }
    }

    /// The name event handlers use for this provider.
    pub fn name(self) -> &'static str {
        match self {
            Provider::Nats => "nats",
            Provider::AmqpQueue => "amqp_queue",
            Provider::AmqpExchange => "amqp_exchange",
        }
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What talking to a broker can fail with. Messages name the broker (URL without password) or
/// the queue, and say what happens to the message where that matters.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    /// The queue string (name or `?param=value` suffix) is invalid; nothing was sent.
    #[error("invalid {provider} queue '{queue}': {reason}")]
    InvalidQueue {
        provider: Provider,
        queue: String,
        reason: String,
    },
    /// The message cannot be published as given (e.g. an id the broker cannot carry); nothing
    /// was sent.
    #[error("cannot publish to {provider} queue '{queue}': {reason}")]
    InvalidMessage {
        provider: Provider,
        queue: String,
        reason: String,
    },
    /// The broker URL is malformed or uses a scheme this build does not support.
    #[error("invalid {broker} URL '{url}': {reason}")]
    InvalidUrl {
        broker: &'static str,
        url: String,
        reason: String,
    },
    /// No connection could be opened within [`CONNECT_TIMEOUT`] (refused, unreachable, bad
    /// credentials).
    #[error("cannot connect to {broker} at {url}: {reason}")]
    Connect {
        broker: &'static str,
        url: String,
        reason: String,
    },
    /// The broker refused to set up what the queue names (a stream, consumer, exchange, queue or
    /// binding that exists with other settings, overlapping subjects, missing permissions).
    /// Retrying will not help until the queue string or the broker's configuration changes.
    #[error("{broker} at {url} refused to set up {provider} queue '{queue}': {reason}")]
    Refused {
        broker: &'static str,
        url: String,
        provider: Provider,
        queue: String,
        reason: String,
    },
    /// A request to the broker failed or timed out (connection lost, JetStream unavailable).
    #[error("{broker} at {url} is unavailable for {provider} queue '{queue}': {reason}")]
    Unavailable {
        broker: &'static str,
        url: String,
        provider: Provider,
        queue: String,
        reason: String,
    },
    /// The broker did not confirm a publication: the message may or may not be stored.
    #[error("publishing to {provider} queue '{queue}' was not confirmed: {reason}")]
    Publish {
        provider: Provider,
        queue: String,
        reason: String,
    },
    /// Receiving failed but the consumer may recover (missed heartbeats, a failed pull);
    /// [`Consumer::next`] may be called again.
    #[error("receiving from {provider} queue '{queue}' failed: {reason}")]
    Receive {
        provider: Provider,
        queue: String,
        reason: String,
    },
    /// The consumer has ended (connection or channel closed, consumer or queue deleted); open a
    /// new one with [`Brokers::consume`]. Its unacked deliveries will be redelivered.
    #[error("consumer of {provider} queue '{queue}' has ended: {reason}; open a new consumer")]
    Closed {
        provider: Provider,
        queue: String,
        reason: String,
    },
    /// An ack or nack was not recorded; the broker will redeliver the message.
    #[error("{op} of message '{message_id}' failed: {reason}; the broker will redeliver it")]
    Ack {
        op: &'static str,
        message_id: String,
        reason: String,
    },
}

impl BrokerError {
    /// Whether the same call may succeed later without any change to the queue string or the
    /// broker's configuration (the broker was unreachable or a connection failed).
    pub fn is_transient(&self) -> bool {
        match self {
            BrokerError::InvalidQueue { .. }
            | BrokerError::InvalidMessage { .. }
            | BrokerError::InvalidUrl { .. }
            | BrokerError::Refused { .. } => false,
            BrokerError::Connect { .. }
            | BrokerError::Unavailable { .. }
            | BrokerError::Publish { .. }
            | BrokerError::Receive { .. }
            | BrokerError::Closed { .. }
            | BrokerError::Ack { .. } => true,
        }
    }
}

/// Checks `queue` for `provider` without contacting the broker: the name, and for AMQP the
/// `?param=value` suffix. [`Brokers::consume`] and [`Brokers::publish`] check the same.
pub fn validate_queue(provider: Provider, queue: &str) -> Result<(), BrokerError> {
    match provider {
        Provider::Nats => nats::check_subject(queue).map(|_| ()),
        Provider::AmqpQueue | Provider::AmqpExchange => {
            amqp::Target::parse(provider, queue).map(|_| ())
        }
    }
}

/// One message handed to the caller; ack or nack it exactly once (dropping it without either
/// leaves it for redelivery by the broker's rules).
pub struct Delivery {
    /// Stable across redeliveries of the same broker message; the caller deduplicates on it.
    /// NATS: the `Nats-Msg-Id` header, else `<stream>:<stream sequence>`. AMQP: the `message_id`
    /// property, else `sha256:<hex of the body's SHA-256>` (so two distinct messages with equal
    /// bodies and no id share an id, and the second counts as a duplicate).
    pub message_id: String,
    /// The message body as published.
    pub payload: Vec<u8>,
    /// The subject (NATS) or routing key (AMQP) it was published under: a consumer of a
    /// wildcard (an AMQP `#` binding) hears several.
    pub subject: String,
    /// The broker has delivered this message before (JetStream: delivery count above 1; AMQP:
    /// the `redelivered` flag).
    pub redelivered: bool,
    acker: Acker,
}

/// How a delivery is settled; one variant per broker.
enum Acker {
    Nats(nats::NatsAcker),
    Amqp(amqp::AmqpAcker),
}

impl Delivery {
    /// Marks the message done. For JetStream this waits for the server to confirm it recorded
    /// the ack; AMQP has no ack confirmation, so the ack is only known to have been sent (if the
    /// connection fails before the broker reads it, the message comes back).
    pub async fn ack(self) -> Result<(), BrokerError> {
        match self.acker {
            Acker::Nats(a) => a.ack(&self.message_id).await,
            Acker::Amqp(a) => a.ack(&self.message_id).await,
        }
    }

    /// Hands the message back for redelivery: JetStream after a short delay
    /// ([`nats::NAK_DELAY`]), AMQP requeued at once.
    pub async fn nack(self) -> Result<(), BrokerError> {
        match self.acker {
            Acker::Nats(a) => a.nack(&self.message_id).await,
            Acker::Amqp(a) => a.nack(&self.message_id).await,
        }
    }
}

impl fmt::Debug for Delivery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Delivery")
            .field("message_id", &self.message_id)
            .field("payload_bytes", &self.payload.len())
            .field("redelivered", &self.redelivered)
            .finish_non_exhaustive()
    }
}

/// Shared connections (one NATS client, one AMQP connection, opened lazily, re-opened after they
/// fail). Cheap to clone; clones share the connections.
#[derive(Clone)]
pub struct Brokers {
    inner: Arc<Inner>,
}

struct Inner {
    nats: nats::Nats,
    amqp: amqp::Amqp,
}

impl Brokers {
    /// Clients for the brokers in `config`; nothing is connected until first use.
    pub fn new(config: BrokerConfig) -> Self {
        Self::with_nats_ack_wait(config, nats::ACK_WAIT)
    }

    /// As [`Brokers::new`], with the ack wait of the JetStream consumers this creates (tests use a
    /// short one to see unacked messages come back quickly). A consumer that already exists keeps
    /// its own.
    fn with_nats_ack_wait(config: BrokerConfig, ack_wait: Duration) -> Self {
        Self {
            inner: Arc::new(Inner {
                nats: nats::Nats::new(config.nats_url, ack_wait),
                amqp: amqp::Amqp::new(config.amqp_url),
            }),
        }
    }

    /// A consumer of `queue` for Baton's durable consumer group (every Baton node that opens the
    /// same queue shares the deliveries: JetStream durable pull consumer / AMQP competing
    /// consumers). Creates the stream and consumer, or the exchange, queue and binding, if they do
    /// not exist.
    pub async fn consume(&self, provider: Provider, queue: &str) -> Result<Consumer, BrokerError> {
        let inner = match provider {
            Provider::Nats => ConsumerInner::Nats(self.inner.nats.consume(queue).await?),
            Provider::AmqpQueue | Provider::AmqpExchange => {
                let target = amqp::Target::parse(provider, queue)?;
                ConsumerInner::Amqp(self.inner.amqp.consume(&target).await?)
            }
        };
        Ok(Consumer { inner })
    }

    /// Publishes one message (used by tests and by an action that publishes); `message_id`
    /// becomes the NATS `Nats-Msg-Id` header / AMQP message_id property. Returns once the broker
    /// has confirmed it stored the message (JetStream PubAck / AMQP publisher confirm). A NATS
    /// publication with an id the stream saw within its duplicate window is confirmed but not
    /// stored again.
    pub async fn publish(
        &self,
        provider: Provider,
        queue: &str,
        message_id: Option<&str>,
        payload: &[u8],
    ) -> Result<(), BrokerError> {
        match provider {
            Provider::Nats => self.inner.nats.publish(queue, message_id, payload).await,
            Provider::AmqpQueue | Provider::AmqpExchange => {
                let target = amqp::Target::parse(provider, queue)?;
                self.inner.amqp.publish(&target, message_id, payload).await
            }
        }
    }
}

/// The receiving end of one queue. Dropping it stops receiving; deliveries it handed out can
/// still be acked or nacked, and those never settled are redelivered.
pub struct Consumer {
    inner: ConsumerInner,
}

enum ConsumerInner {
    Nats(nats::NatsConsumer),
    Amqp(amqp::AmqpConsumer),
}

impl Consumer {
    /// Waits for the next message. Cancel-safe: dropping the future (e.g. in `select!` with a
    /// shutdown signal) loses no message. After [`BrokerError::Closed`] every call fails; open a
    /// new consumer.
    pub async fn next(&mut self) -> Result<Delivery, BrokerError> {
        match &mut self.inner {
            ConsumerInner::Nats(c) => c.next().await,
            ConsumerInner::Amqp(c) => c.next().await,
        }
    }

    /// Stops receiving. AMQP: closes the consumer's channel and waits for the broker to confirm,
    /// which requeues at once every message it holds unacked, prefetched ones and unsettled
    /// deliveries alike (acking those then fails). JetStream: the same as dropping; unacked
    /// messages return after the ack wait.
    pub async fn close(self) {
        match self.inner {
            ConsumerInner::Nats(c) => drop(c),
            ConsumerInner::Amqp(c) => c.close().await,
        }
    }
}

/// Longest message id [`Brokers::publish`] accepts: an AMQP short string.
pub const MESSAGE_ID_LEN_MAX: usize = 255;

/// Checks a message id to publish: non-empty, at most [`MESSAGE_ID_LEN_MAX`] bytes, no control
/// characters (a NATS header value cannot hold a line break).
fn check_message_id(provider: Provider, queue: &str, id: &str) -> Result<(), BrokerError> {
    let reason = if id.is_empty() {
        "the message id is empty".to_string()
    } else if id.len() > MESSAGE_ID_LEN_MAX {
        format!("the message id is longer than {MESSAGE_ID_LEN_MAX} bytes")
    } else if id.chars().any(char::is_control) {
        "the message id contains control characters".to_string()
    } else {
        return Ok(());
    };
    Err(BrokerError::InvalidMessage {
        provider,
        queue: queue.to_string(),
        reason,
    })
}

/// `url` with the password (or a lone token) in its user info replaced by `***`, for errors and
/// logs.
fn redact(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_string();
    };
    let rest = &url[scheme_end + 3..];
    let authority_len = rest.find('/').unwrap_or(rest.len());
    let Some(at) = rest[..authority_len].rfind('@') else {
        return url.to_string();
    };
    let user_info = &rest[..at];
    let shown = match user_info.find(':') {
        Some(colon) => format!("{}:***", &user_info[..colon]),
        None => "***".to_string(),
    };
    format!("{}{shown}{}", &url[..scheme_end + 3], &rest[at..])
}

/// Test bodies both brokers run, each from a thin `#[tokio::test]` in the broker's file that adds
/// the broker's own checks and cleans up: what a [`Consumer`] promises whatever the broker
/// (deliveries settled one by one, unsettled ones redelivered, ids stable across redelivery) and
/// how an unreachable server fails; and the helpers they share.
#[cfg(test)]
mod contract {
    use super::*;

    /// Generous bound for one broker round trip in a test; reaching it fails the test.
    pub(super) const WAIT: Duration = Duration::from_secs(20);
    /// An address nothing listens on.
    pub(super) const NOWHERE: &str = "127.0.0.1:1";

    /// Clients of the local brokers, the one behind `provider` started if need be.
    pub(super) fn brokers(provider: Provider) -> Brokers {
        let broker = match provider {
            Provider::Nats => harness::brokers::Broker::Nats,
            Provider::AmqpQueue | Provider::AmqpExchange => harness::brokers::Broker::RabbitMq,
        };
        harness::brokers::ensure_running(broker).expect("the local broker");
        Brokers::new(BrokerConfig::default())
    }

    /// A consumer of `queue`.
    pub(super) async fn consume(brokers: &Brokers, provider: Provider, queue: &str) -> Consumer {
        let consumer = brokers.consume(provider, queue).await;
        consumer.unwrap_or_else(|e| panic!("consume {provider}:{queue}: {e}"))
    }

    /// Publishes one message, the broker confirming.
    pub(super) async fn publish(
        brokers: &Brokers,
        provider: Provider,
        queue: &str,
        id: Option<&str>,
        payload: &[u8],
    ) {
        let published = brokers.publish(provider, queue, id, payload).await;
        published.unwrap_or_else(|e| panic!("publish {id:?} to {provider}:{queue}: {e}"));
    }

    /// The next delivery, within [`WAIT`].
    pub(super) async fn next(consumer: &mut Consumer) -> Delivery {
        tokio::time::timeout(WAIT, consumer.next())
            .await
            .expect("a delivery within the deadline")
            .expect("a delivery")
    }

    /// Publishes message `id` to `queue` and acks it as `consumer` receives it, body intact.
    pub(super) async fn round_trip(
        brokers: &Brokers,
        provider: Provider,
        queue: &str,
        consumer: &mut Consumer,
        id: &str,
        payload: &[u8],
    ) {
        publish(brokers, provider, queue, Some(id), payload).await;
        let delivery = next(consumer).await;
        assert_eq!(
            (delivery.message_id.as_str(), delivery.payload.as_slice()),
            (id, payload)
        );
        delivery.ack().await.expect("ack");
    }

    /// Publishes `m-1` and `m-2`, acks the first and nacks the second, which comes back
    /// redelivered with its id and body and is acked. Returns the consumer.
    pub(super) async fn ack_and_nack(
        brokers: &Brokers,
        provider: Provider,
        queue: &str,
    ) -> Consumer {
        let mut consumer = consume(brokers, provider, queue).await;
        publish(brokers, provider, queue, Some("m-1"), b"one").await;
        publish(brokers, provider, queue, Some("m-2"), b"two").await;

        let first = next(&mut consumer).await;
        let second = next(&mut consumer).await;
        assert_eq!(
            (first.message_id.as_str(), first.payload.as_slice()),
            ("m-1", &b"one"[..])
        );
        assert_eq!(
            (second.message_id.as_str(), second.payload.as_slice()),
            ("m-2", &b"two"[..])
        );
        assert!(!first.redelivered && !second.redelivered);
        first.ack().await.expect("ack m-1");
        second.nack().await.expect("nack m-2");

        let again = next(&mut consumer).await;
        assert_eq!(again.message_id, "m-2");
        assert_eq!(again.payload, b"two");
        assert!(again.redelivered);
        again.ack().await.expect("ack m-2");
        consumer
    }

    /// Message `id` is received through `first`, then the delivery, its consumer and `first` are
    /// dropped unsettled, as in a crash; a consumer on `second` gets it again, redelivered, and
    /// acks it.
    pub(super) async fn unacked_is_redelivered(
        first: Brokers,
        second: &Brokers,
        provider: Provider,
        queue: &str,
        id: &str,
    ) {
        let mut consumer = consume(&first, provider, queue).await;
        publish(&first, provider, queue, Some(id), b"payload").await;
        let delivery = next(&mut consumer).await;
        assert_eq!(delivery.message_id, id);
        assert!(!delivery.redelivered);
        drop(delivery);
        drop(consumer);
        drop(first);

        let mut consumer = consume(second, provider, queue).await;
        let again = next(&mut consumer).await;
        assert_eq!(again.message_id, id);
        assert_eq!(again.payload, b"payload");
        assert!(again.redelivered);
        again.ack().await.expect("ack");
    }

    /// `payload` published without an id is delivered as `expected`, and nacked comes back
    /// redelivered as `expected` again.
    pub(super) async fn fallback_id_is_stable(
        brokers: &Brokers,
        provider: Provider,
        queue: &str,
        payload: &[u8],
        expected: &str,
    ) {
        let mut consumer = consume(brokers, provider, queue).await;
        publish(brokers, provider, queue, None, payload).await;
        let delivery = next(&mut consumer).await;
        assert_eq!(delivery.message_id, expected);
        delivery.nack().await.expect("nack");
        let again = next(&mut consumer).await;
        assert_eq!(again.message_id, expected);
        assert!(again.redelivered);
        again.ack().await.expect("ack");
    }

    /// Consuming through `config`, whose `provider` URL points at [`NOWHERE`], fails within the
    /// connect timeout, transiently, naming the address. Returns the error.
    pub(super) async fn unreachable_fails_fast(
        config: BrokerConfig,
        provider: Provider,
        queue: &str,
    ) -> BrokerError {
        let brokers = Brokers::new(config);
        let result = tokio::time::timeout(
            CONNECT_TIMEOUT + Duration::from_secs(5),
            brokers.consume(provider, queue),
        )
        .await
        .expect("an answer within the connect timeout");
        let e = result.err().expect("an error");
        assert!(matches!(e, BrokerError::Connect { .. }), "{e:?}");
        assert!(e.is_transient());
        assert!(e.to_string().contains(NOWHERE), "{e}");
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_names_round_trip() {
        for p in [Provider::Nats, Provider::AmqpQueue, Provider::AmqpExchange] {
            assert_eq!(Provider::parse(p.name()), Some(p));
        }
        assert_eq!(Provider::parse("conductor"), None);
        assert_eq!(Provider::parse("sqs"), None);
    }

    #[test]
    fn redact_hides_passwords_and_tokens() {
        let cases = [
            (
                "amqp://guest:guest@127.0.0.1:5672/%2f",
                "amqp://guest:***@127.0.0.1:5672/%2f",
            ),
            ("nats://s3cret@host:4222", "nats://***@host:4222"),
            ("nats://127.0.0.1:4222", "nats://127.0.0.1:4222"),
            ("amqp://host/vhost@x", "amqp://host/vhost@x"),
            ("not a url", "not a url"),
        ];
        for (url, shown) in cases {
            assert_eq!(redact(url), shown, "{url}");
        }
    }

    #[test]
    fn validate_queue_checks_without_a_broker() {
        assert!(validate_queue(Provider::Nats, "orders.created").is_ok());
        assert!(validate_queue(Provider::Nats, "bad subject").is_err());
        assert!(validate_queue(Provider::AmqpQueue, "q?durable=false").is_ok());
        let e = validate_queue(Provider::AmqpQueue, "q?durable=maybe").expect_err("durable=maybe");
        assert!(!e.is_transient());
        assert!(e.to_string().contains("durable"), "{e}");
    }
}
