//! RabbitMQ over AMQP 0.9.1: `amqp_queue:` and `amqp_exchange:` events.
//!
//! The queue string follows Conductor: a name, optionally `?param=value&...` (keys are
//! case-insensitive). `amqp_queue:NAME` takes `durable` (default true), `exclusive`, `autoDelete`,
//! `maxPriority` and `deliveryMode` (1 or 2, default 2: persistent; used when publishing).
//! `amqp_exchange:NAME` takes those and `exchangeType` (`topic` (default), `direct`, `fanout`,
//! `headers`), `routingKey` (default `#` for topic exchanges, empty otherwise) and
//! `bindQueueName`. Consuming an exchange declares it, declares the queue `bindQueueName` (default
//! `baton.<exchange>.<routingKey>`) and binds the two, so every Baton node competes on that one
//! queue; publishing to an exchange declares only the exchange and sends with the routing key.
//! Exchanges named `amq.*` are the broker's own and are checked, not declared. Unknown parameters
//! are refused (Conductor ignores them) so a misspelt one is noticed.
//!
//! One connection per [`Brokers`](super::Brokers), reopened on the next call after it fails;
//! one channel per consumer (prefetch [`PREFETCH`], manual acks) and one shared publishing channel
//! with publisher confirms. Unacked messages return to the queue when their channel closes: when
//! the consumer and all its unsettled deliveries are dropped, or the connection fails.

use super::{check_message_id, redact, BrokerError, Delivery, Provider, CONNECT_TIMEOUT};
use futures::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicNackOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions, ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties, ExchangeKind};
use std::sync::Arc;
use std::time::Duration;

/// Unacked messages the broker sends one consumer before waiting for acks.
pub const PREFETCH: u16 = 64;
/// How long declaring, binding or a publisher confirm may take before the call fails.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest queue, exchange or routing-key name: an AMQP short string.
pub const NAME_LEN_MAX: usize = 255;

const BROKER: &str = "RabbitMQ";

/// The AMQP connection, opened on first use and reopened after it fails, and the publishing
/// channel on it.
pub(super) struct Amqp {
    url: String,
    state: tokio::sync::Mutex<Option<Open>>,
}

/// An open connection. Consumers hold their own `Arc` of it, so replacing it here does not close
/// it under them.
struct Open {
    connection: Arc<Connection>,
    /// In confirm mode; recreated when the broker closes it (a failed declaration closes it).
    publish: Option<Channel>,
}

impl Amqp {
    pub(super) fn new(url: String) -> Self {
        Self {
            url,
            state: tokio::sync::Mutex::new(None),
        }
    }

    fn connect_failed(&self, reason: String) -> BrokerError {
        BrokerError::Connect {
            broker: BROKER,
            url: redact(&self.url),
            reason,
        }
    }

    /// The open connection in `state`, opening one if there is none or it failed.
    async fn open<'a>(&self, state: &'a mut Option<Open>) -> Result<&'a mut Open, BrokerError> {
        if let Some(open) = state.take() {
            if open.connection.status().connected() {
                return Ok(state.insert(open));
            }
            let url = redact(&self.url);
            tracing::warn!(broker = BROKER, %url, "connection lost; reconnecting");
        }
        let connection = Arc::new(self.connect().await?);
        tracing::info!(broker = BROKER, url = %redact(&self.url), "connected");
        Ok(state.insert(Open {
            connection,
            publish: None,
        }))
    }

    async fn connect(&self) -> Result<Connection, BrokerError> {
        let invalid_url = |reason: String| BrokerError::InvalidUrl {
            broker: BROKER,
            url: redact(&self.url),
            reason,
        };
        let uri: lapin::uri::AMQPUri = self.url.parse().map_err(invalid_url)?;
        if uri.scheme == lapin::uri::AMQPScheme::AMQPS {
            return Err(invalid_url(
                "amqps:// needs TLS, which this build of Baton leaves out (lapin's rustls \
                 features); use amqp://"
                    .to_string(),
            ));
        }
        let props = ConnectionProperties::default().with_connection_name("baton".into());
        match tokio::time::timeout(CONNECT_TIMEOUT, Connection::connect_uri(uri, props)).await {
            Err(_) => {
                Err(self.connect_failed(format!("timed out after {} s", CONNECT_TIMEOUT.as_secs())))
            }
            Ok(Err(e)) => Err(self.connect_failed(e.to_string())),
            Ok(Ok(c)) => Ok(c),
        }
    }

    async fn connection(&self) -> Result<Arc<Connection>, BrokerError> {
        let mut state = self.state.lock().await;
        Ok(self.open(&mut state).await?.connection.clone())
    }

    async fn publish_channel(&self, target: &Target) -> Result<Channel, BrokerError> {
        let mut state = self.state.lock().await;
        let open = self.open(&mut state).await?;
        if let Some(channel) = open.publish.as_ref().filter(|c| c.status().connected()) {
            return Ok(channel.clone());
        }
        let channel = open
            .connection
            .create_channel()
            .await
            .map_err(|e| self.failed(target, "opening a channel", e))?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .map_err(|e| self.failed(target, "enabling publisher confirms", e))?;
        open.publish = Some(channel.clone());
        Ok(channel)
    }

    /// A lapin error while setting up `target`: a channel-level refusal (not found, precondition
    /// failed, access refused, resource locked) is the broker's answer, anything else a failed
    /// connection.
    fn failed(&self, target: &Target, doing: &str, e: lapin::Error) -> BrokerError {
        let reason = format!("{doing}: {e}");
        if e.is_amqp_soft_error() {
            BrokerError::Refused {
                broker: BROKER,
                url: redact(&self.url),
                provider: target.provider,
                queue: target.queue.clone(),
                reason,
            }
        } else {
            BrokerError::Unavailable {
                broker: BROKER,
                url: redact(&self.url),
                provider: target.provider,
                queue: target.queue.clone(),
                reason,
            }
        }
    }

    fn timed_out(&self, target: &Target, doing: &str) -> BrokerError {
        BrokerError::Unavailable {
            broker: BROKER,
            url: redact(&self.url),
            provider: target.provider,
            queue: target.queue.clone(),
            reason: format!("{doing}: no answer within {} s", REQUEST_TIMEOUT.as_secs()),
        }
    }

    /// A competing consumer of the queue `target` names, declared first.
    pub(super) async fn consume(&self, target: &Target) -> Result<AmqpConsumer, BrokerError> {
        let connection = self.connection().await?;
        let setup = async {
            let channel = connection
                .create_channel()
                .await
                .map_err(|e| self.failed(target, "opening a channel", e))?;
            channel
                .basic_qos(PREFETCH, BasicQosOptions::default())
                .await
                .map_err(|e| self.failed(target, "setting the prefetch", e))?;
            let consumed = self.declare(&channel, target, true).await?;
            let consumer = channel
                .basic_consume(
                    short(target, consumed)?,
                    ShortString::default(),
                    BasicConsumeOptions {
                        no_ack: false,
                        ..BasicConsumeOptions::default()
                    },
                    FieldTable::default(),
                )
                .await
                .map_err(|e| self.failed(target, &format!("consuming queue {consumed}"), e))?;
            Ok::<_, BrokerError>((channel, consumer))
        };
        let (channel, consumer) = tokio::time::timeout(REQUEST_TIMEOUT, setup)
            .await
            .map_err(|_| self.timed_out(target, "setting up the consumer"))??;
        Ok(AmqpConsumer {
            provider: target.provider,
            queue: target.queue.clone(),
            _connection: connection,
            channel,
            consumer,
            ended: None,
        })
    }

    /// Declares what `target` names on `channel`: the queue, or the exchange and, when
    /// `consuming`, the bound queue and its binding. Returns the queue to consume.
    async fn declare<'t>(
        &self,
        channel: &Channel,
        target: &'t Target,
        consuming: bool,
    ) -> Result<&'t str, BrokerError> {
        let mut arguments = FieldTable::default();
        if let Some(p) = target.max_priority {
            arguments.insert("x-max-priority".into(), AMQPValue::LongInt(p));
        }
        let queue_options = QueueDeclareOptions {
            durable: target.durable,
            exclusive: target.exclusive,
            auto_delete: target.auto_delete,
            ..QueueDeclareOptions::default()
        };
        let Some(exchange) = target.exchange.as_ref() else {
            channel
                .queue_declare(short(target, &target.name)?, queue_options, arguments)
                .await
                .map_err(|e| self.failed(target, &format!("declaring queue {}", target.name), e))?;
            return Ok(&target.name);
        };
        // The broker refuses declarations of its own `amq.*` exchanges; check they exist.
        let exchange_options = ExchangeDeclareOptions {
            passive: target.name.starts_with("amq."),
            durable: target.durable,
            auto_delete: target.auto_delete,
            ..ExchangeDeclareOptions::default()
        };
        channel
            .exchange_declare(
                short(target, &target.name)?,
                exchange.kind.clone(),
                exchange_options,
                FieldTable::default(),
            )
            .await
            .map_err(|e| self.failed(target, &format!("declaring exchange {}", target.name), e))?;
        if !consuming {
            return Ok(&exchange.bind_queue);
        }
        channel
            .queue_declare(
                short(target, &exchange.bind_queue)?,
                queue_options,
                arguments,
            )
            .await
            .map_err(|e| {
                let doing = format!("declaring queue {}", exchange.bind_queue);
                self.failed(target, &doing, e)
            })?;
        channel
            .queue_bind(
                short(target, &exchange.bind_queue)?,
                short(target, &target.name)?,
                short(target, &exchange.routing_key)?,
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await
            .map_err(|e| {
                let doing = format!(
                    "binding queue {} to exchange {} with routing key '{}'",
                    exchange.bind_queue, target.name, exchange.routing_key
                );
                self.failed(target, &doing, e)
            })?;
        Ok(&exchange.bind_queue)
    }

    /// Publishes one message to the queue or exchange `target` names, declared first.
    pub(super) async fn publish(
        &self,
        target: &Target,
        message_id: Option<&str>,
        payload: &[u8],
    ) -> Result<(), BrokerError> {
        let mut properties = BasicProperties::default().with_delivery_mode(target.delivery_mode);
        if let Some(id) = message_id {
            check_message_id(target.provider, &target.queue, id)?;
            properties = properties.with_message_id(short(target, id)?);
        }
        let (exchange, routing_key) = match target.exchange.as_ref() {
            None => (ShortString::default(), short(target, &target.name)?),
            Some(e) => (short(target, &target.name)?, short(target, &e.routing_key)?),
        };
        let not_confirmed = |reason: String| BrokerError::Publish {
            provider: target.provider,
            queue: target.queue.clone(),
            reason,
        };
        let channel = self.publish_channel(target).await?;
        let send = async {
            self.declare(&channel, target, false).await?;
            let confirm = channel
                .basic_publish(
                    exchange,
                    routing_key,
                    BasicPublishOptions::default(),
                    payload,
                    properties,
                )
                .await
                .map_err(|e| not_confirmed(e.to_string()))?;
            let confirmation = confirm.await.map_err(|e| not_confirmed(e.to_string()))?;
            if confirmation.is_ack() {
                Ok(())
            } else {
                Err(not_confirmed("the broker nacked it".to_string()))
            }
        };
        tokio::time::timeout(REQUEST_TIMEOUT, send)
            .await
            .map_err(|_| {
                not_confirmed(format!(
                    "no confirmation within {} s",
                    REQUEST_TIMEOUT.as_secs()
                ))
            })?
    }
}

/// `name` as an AMQP short string (at most 255 bytes).
fn short(target: &Target, name: &str) -> Result<ShortString, BrokerError> {
    ShortString::try_new(name).map_err(|e| target.invalid(format!("'{name}': {e}")))
}

/// A competing consumer on one queue, on its own channel.
pub(super) struct AmqpConsumer {
    provider: Provider,
    queue: String,
    /// Keeps the connection open while this consumer lives, even if [`Amqp`] has replaced it.
    _connection: Arc<Connection>,
    channel: Channel,
    consumer: lapin::Consumer,
    /// Why the consumer ended, once it has.
    ended: Option<String>,
}

impl AmqpConsumer {
    pub(super) async fn next(&mut self) -> Result<Delivery, BrokerError> {
        if self.ended.is_none() {
            match self.consumer.next().await {
                Some(Ok(d)) => {
                    let message_id = d
                        .properties
                        .message_id()
                        .as_ref()
                        .map(|id| id.as_str().to_string())
                        .filter(|id| !id.is_empty())
                        .unwrap_or_else(|| body_id(&d.data));
                    return Ok(Delivery {
                        message_id,
                        subject: d.routing_key.to_string(),
                        payload: d.data,
                        redelivered: d.redelivered,
                        acker: super::Acker::Amqp(AmqpAcker {
                            acker: d.acker,
                            _channel: self.channel.clone(),
                        }),
                    });
                }
                // lapin ends the stream after an error: the consumer is gone either way.
                Some(Err(e)) => self.ended = Some(e.to_string()),
                None => {
                    self.ended = Some(if self.channel.status().connected() {
                        "the broker cancelled the consumer (queue deleted?)".to_string()
                    } else {
                        "its channel or connection closed".to_string()
                    })
                }
            }
        }
        Err(BrokerError::Closed {
            provider: self.provider,
            queue: self.queue.clone(),
            reason: self.ended.clone().unwrap_or_default(),
        })
    }

    pub(super) async fn close(self) {
        // Close-Ok means the broker has requeued the channel's unacked messages.
        if let Err(e) = self.channel.close(200, "consumer closed".into()).await {
            let queue = &self.queue;
            tracing::debug!(broker = BROKER, %queue, error = %e, "closing the channel");
        }
    }
}

/// Settles one AMQP delivery. Holds its channel so a delivery can be settled after its consumer
/// is dropped (an ack must go on the channel that received the message).
pub(super) struct AmqpAcker {
    acker: lapin::Acker,
    _channel: Channel,
}

impl AmqpAcker {
    pub(super) async fn ack(self, message_id: &str) -> Result<(), BrokerError> {
        let sent = self.acker.ack(BasicAckOptions::default()).await;
        settled("ack", message_id, sent)
    }

    pub(super) async fn nack(self, message_id: &str) -> Result<(), BrokerError> {
        let options = BasicNackOptions {
            requeue: true,
            ..BasicNackOptions::default()
        };
        let sent = self.acker.nack(options).await;
        settled("nack", message_id, sent)
    }
}

fn settled(
    op: &'static str,
    message_id: &str,
    sent: lapin::Result<bool>,
) -> Result<(), BrokerError> {
    let reason = match sent {
        Ok(true) => return Ok(()),
        // The channel closed (or failed) first; the broker has requeued the message.
        Ok(false) => "its channel is closed".to_string(),
        Err(e) => e.to_string(),
    };
    Err(BrokerError::Ack {
        op,
        message_id: message_id.to_string(),
        reason,
    })
}

/// The id of a message published without one: `sha256:<hex>` of its body. Stable across
/// redeliveries, but equal for equal bodies.
pub fn body_id(body: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digest = Sha256::digest(body);
    let mut id = String::with_capacity(7 + 2 * digest.len());
    id.push_str("sha256:");
    for b in digest.iter() {
        id.push(char::from(HEX[usize::from(b >> 4)]));
        id.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    id
}

/// What an `amqp_queue:` or `amqp_exchange:` queue string names, parameters applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    pub provider: Provider,
    /// The queue string as written, for errors.
    pub queue: String,
    /// The queue or exchange name (before `?`).
    pub name: String,
    pub durable: bool,
    pub exclusive: bool,
    pub auto_delete: bool,
    /// `x-max-priority` of the declared queue.
    pub max_priority: Option<i32>,
    /// 1 transient, 2 persistent: of published messages.
    pub delivery_mode: u8,
    /// Set for `amqp_exchange:`.
    pub exchange: Option<Exchange>,
}

/// The exchange half of an `amqp_exchange:` target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Exchange {
    pub kind: ExchangeKind,
    /// Binding key when consuming, routing key when publishing.
    pub routing_key: String,
    /// The queue consumers share: `bindQueueName`, else `baton.<exchange>.<routingKey>`.
    pub bind_queue: String,
}

impl Target {
    fn invalid(&self, reason: String) -> BrokerError {
        BrokerError::InvalidQueue {
            provider: self.provider,
            queue: self.queue.clone(),
            reason,
        }
    }

    /// Parses Conductor's `NAME?key=value&...` for `provider` (an AMQP one).
    pub(crate) fn parse(provider: Provider, queue: &str) -> Result<Target, BrokerError> {
        let (name, params) = queue.split_once('?').unwrap_or((queue, ""));
        let mut target = Target {
            provider,
            queue: queue.to_string(),
            name: name.to_string(),
            durable: true,
            exclusive: false,
            auto_delete: false,
            max_priority: None,
            delivery_mode: 2,
            exchange: None,
        };
        let what = if target.is_exchange() {
            "exchange name"
        } else {
            "queue name"
        };
        target.check_name(what, name)?;
        let mut exchange = ExchangeParams {
            kind: ExchangeKind::Topic,
            routing_key: None,
            bind_queue: None,
        };
        for pair in params.split('&').map(str::trim).filter(|p| !p.is_empty()) {
            target.apply(pair, &mut exchange)?;
        }
        if target.is_exchange() {
            target.exchange = Some(target.exchange_from(exchange)?);
        }
        Ok(target)
    }

    fn is_exchange(&self) -> bool {
        self.provider == Provider::AmqpExchange
    }

    /// A queue or exchange name must be non-empty and at most `NAME_LEN_MAX` bytes.
    fn check_name(&self, what: &str, n: &str) -> Result<(), BrokerError> {
        if n.is_empty() {
            Err(self.invalid(format!("the {what} is empty")))
        } else if n.len() > NAME_LEN_MAX {
            Err(self.invalid(format!("the {what} is longer than {NAME_LEN_MAX} bytes")))
        } else {
            Ok(())
        }
    }

    /// Applies one `key=value` parameter (keys are case-insensitive); the exchange ones are
    /// collected in `exchange`.
    fn apply(&mut self, pair: &str, exchange: &mut ExchangeParams) -> Result<(), BrokerError> {
        let Some((key, value)) = pair.split_once('=') else {
            return Err(self.invalid(format!("parameter '{pair}' is not key=value")));
        };
        let (key, value) = (key.trim(), value.trim());
        let is_exchange = self.is_exchange();
        match key.to_ascii_lowercase().as_str() {
            "durable" => self.durable = self.flag(key, value)?,
            "exclusive" => self.exclusive = self.flag(key, value)?,
            "autodelete" => self.auto_delete = self.flag(key, value)?,
            "deliverymode" => {
                self.delivery_mode = match value {
                    "1" => 1,
                    "2" => 2,
                    _ => {
                        return Err(
                            self.invalid(format!("deliveryMode must be 1 or 2, not '{value}'"))
                        )
                    }
                }
            }
            "maxpriority" => match value.parse::<i32>() {
                Ok(p) if (1..=255).contains(&p) => self.max_priority = Some(p),
                _ => {
                    return Err(self.invalid(format!(
                        "maxPriority must be a number from 1 to 255, not '{value}'"
                    )))
                }
            },
            "exchangetype" if is_exchange => exchange.kind = self.exchange_kind(value)?,
            "routingkey" if is_exchange => exchange.routing_key = Some(value.to_string()),
            "bindqueuename" if is_exchange => {
                exchange.bind_queue = Some(value.to_string()).filter(|q| !q.is_empty())
            }
            "exchangetype" | "routingkey" | "bindqueuename" => {
                return Err(self.invalid(format!("{key} applies to amqp_exchange, not amqp_queue")))
            }
            _ => {
                let known = if is_exchange {
                    "exchangeType, routingKey, bindQueueName, durable, exclusive, autoDelete, \
                     deliveryMode, maxPriority"
                } else {
                    "durable, exclusive, autoDelete, deliveryMode, maxPriority"
                };
                return Err(self.invalid(format!("unknown parameter '{key}' (known: {known})")));
            }
        }
        Ok(())
    }

    /// A boolean parameter: `true` or `false`, in any case.
    fn flag(&self, key: &str, v: &str) -> Result<bool, BrokerError> {
        match v.to_ascii_lowercase().as_str() {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err(self.invalid(format!("{key} must be true or false, not '{v}'"))),
        }
    }

    /// `exchangeType`: topic, direct, fanout or headers, in any case.
    fn exchange_kind(&self, value: &str) -> Result<ExchangeKind, BrokerError> {
        match value.to_ascii_lowercase().as_str() {
            "topic" => Ok(ExchangeKind::Topic),
            "direct" => Ok(ExchangeKind::Direct),
            "fanout" => Ok(ExchangeKind::Fanout),
            "headers" => Ok(ExchangeKind::Headers),
            _ => Err(self.invalid(format!(
                "exchangeType must be topic, direct, fanout or headers, not '{value}'"
            ))),
        }
    }

    /// The exchange half, defaults applied: routing key `#` for a topic exchange (else empty),
    /// bound queue `baton.<exchange>.<routingKey>`.
    fn exchange_from(&self, params: ExchangeParams) -> Result<Exchange, BrokerError> {
        let kind = params.kind;
        let routing_key = params
            .routing_key
            .unwrap_or_else(|| if kind == ExchangeKind::Topic { "#" } else { "" }.to_string());
        if routing_key.len() > NAME_LEN_MAX {
            return Err(self.invalid(format!(
                "the routing key is longer than {NAME_LEN_MAX} bytes"
            )));
        }
        let name = &self.name;
        let bind_queue = params
            .bind_queue
            .unwrap_or_else(|| format!("baton.{name}.{routing_key}"));
        self.check_name("bound queue name", &bind_queue)?;
        Ok(Exchange {
            kind,
            routing_key,
            bind_queue,
        })
    }
}

/// The `amqp_exchange:` parameters as written, before their defaults apply.
struct ExchangeParams {
    kind: ExchangeKind,
    routing_key: Option<String>,
    bind_queue: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::super::contract::{self, consume, round_trip, NOWHERE};
    use super::super::{BrokerConfig, Brokers};
    use super::*;
    use lapin::options::{ExchangeDeleteOptions, QueueDeleteOptions};

    const QUEUE: Provider = Provider::AmqpQueue;
    const EXCHANGE: Provider = Provider::AmqpExchange;

    fn unique(prefix: &str) -> String {
        format!("{prefix}-{:016x}", rand::random::<u64>())
    }

    async fn channel(brokers: &Brokers) -> Channel {
        let connection = brokers.inner.amqp.connection().await.expect("connection");
        connection.create_channel().await.expect("channel")
    }

    /// Messages ready (not unacked) in `queue`.
    async fn ready(brokers: &Brokers, queue: &str) -> u32 {
        let options = QueueDeclareOptions {
            passive: true,
            ..QueueDeclareOptions::default()
        };
        let q = channel(brokers)
            .await
            .queue_declare(queue.into(), options, FieldTable::default())
            .await
            .expect("queue exists");
        q.message_count()
    }

    async fn delete_queue(brokers: &Brokers, queue: &str) {
        channel(brokers)
            .await
            .queue_delete(queue.into(), QueueDeleteOptions::default())
            .await
            .expect("delete queue");
    }

    async fn delete_exchange(brokers: &Brokers, exchange: &str) {
        channel(brokers)
            .await
            .exchange_delete(exchange.into(), ExchangeDeleteOptions::default())
            .await
            .expect("delete exchange");
    }

    #[test]
    fn queue_strings_parse_like_conductor() {
        let q = Target::parse(Provider::AmqpQueue, "orders").expect("plain");
        assert_eq!(
            (
                q.name.as_str(),
                q.durable,
                q.exclusive,
                q.auto_delete,
                q.delivery_mode
            ),
            ("orders", true, false, false, 2)
        );
        assert_eq!(q.exchange, None);

        let q = Target::parse(
            Provider::AmqpQueue,
            "orders?durable=false& Exclusive = TRUE&autoDelete=true&deliveryMode=1&maxPriority=9",
        )
        .expect("params");
        assert_eq!(
            (
                q.durable,
                q.exclusive,
                q.auto_delete,
                q.delivery_mode,
                q.max_priority
            ),
            (false, true, true, 1, Some(9))
        );

        let cases = [
            ("ex", ExchangeKind::Topic, "#", "baton.ex.#"),
            (
                "ex?exchangeType=direct",
                ExchangeKind::Direct,
                "",
                "baton.ex.",
            ),
            (
                "ex?exchangeType=fanout&bindQueueName=mine",
                ExchangeKind::Fanout,
                "",
                "mine",
            ),
            (
                "ex?routingKey=a.*&bindQueueName=",
                ExchangeKind::Topic,
                "a.*",
                "baton.ex.a.*",
            ),
            (
                "ex?exchangeType=headers&routingKey=k",
                ExchangeKind::Headers,
                "k",
                "baton.ex.k",
            ),
        ];
        for (queue, kind, routing_key, bind_queue) in cases {
            let t = Target::parse(Provider::AmqpExchange, queue).expect(queue);
            let e = t.exchange.expect("an exchange");
            assert_eq!(
                (e.kind, e.routing_key.as_str(), e.bind_queue.as_str()),
                (kind, routing_key, bind_queue),
                "{queue}"
            );
            assert_eq!(t.name, "ex");
        }

        let bad = [
            (Provider::AmqpQueue, "", "empty"),
            (Provider::AmqpQueue, "?durable=true", "empty"),
            (Provider::AmqpQueue, "q?durable=yes", "durable"),
            (Provider::AmqpQueue, "q?deliveryMode=3", "deliveryMode"),
            (Provider::AmqpQueue, "q?maxPriority=0", "maxPriority"),
            (Provider::AmqpQueue, "q?durable", "key=value"),
            (Provider::AmqpQueue, "q?routingKey=x", "amqp_exchange"),
            (
                Provider::AmqpQueue,
                "q?colour=red",
                "unknown parameter 'colour'",
            ),
            (
                Provider::AmqpExchange,
                "ex?exchangeType=x-delayed",
                "exchangeType",
            ),
        ];
        for (provider, queue, said) in bad {
            let e = Target::parse(provider, queue).expect_err(queue);
            assert!(!e.is_transient());
            assert!(e.to_string().contains(said), "{queue}: {e}");
        }
        let long = "q".repeat(256);
        assert!(Target::parse(Provider::AmqpQueue, &long).is_err());
    }

    #[test]
    fn body_id_is_the_sha256_of_the_body() {
        assert_eq!(
            body_id(b"abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[tokio::test]
    async fn ack_and_nack_redeliver_the_nacked_message_with_its_id() {
        let brokers = contract::brokers(QUEUE);
        let queue = unique("baton-test-acknack");
        let consumer = contract::ack_and_nack(&brokers, QUEUE, &queue).await;

        // Closing returns whatever is unacked; both were acked, so nothing is ready again.
        consumer.close().await;
        assert_eq!(ready(&brokers, &queue).await, 0);
        delete_queue(&brokers, &queue).await;
    }

    /// Dropping the delivery and its consumer closes their channel, which returns the message to
    /// the queue; the connection stays.
    #[tokio::test]
    async fn unacked_message_is_redelivered_after_its_consumer_is_dropped() {
        let brokers = contract::brokers(QUEUE);
        let queue = unique("baton-test-dropped");
        let first = brokers.clone();
        contract::unacked_is_redelivered(first, &brokers, QUEUE, &queue, "drop-1").await;
        delete_queue(&brokers, &queue).await;
    }

    /// As a crashed node: its connection goes, with the delivery unsettled.
    #[tokio::test]
    async fn unacked_message_is_redelivered_after_the_connection_closes() {
        let (first, second) = (contract::brokers(QUEUE), contract::brokers(QUEUE));
        let queue = unique("baton-test-crash");
        contract::unacked_is_redelivered(first, &second, QUEUE, &queue, "crash-1").await;
        delete_queue(&second, &queue).await;
    }

    #[tokio::test]
    async fn id_without_property_is_the_body_hash_across_redelivery() {
        let brokers = contract::brokers(QUEUE);
        let queue = unique("baton-test-noid");
        let body = b"{\"n\":1}";
        contract::fallback_id_is_stable(&brokers, QUEUE, &queue, body, &body_id(body)).await;
        delete_queue(&brokers, &queue).await;
    }

    #[tokio::test]
    async fn exchange_binding_delivers_published_messages() {
        let brokers = contract::brokers(EXCHANGE);
        let cases = [
            (
                "exchangeType=topic&routingKey=orders.*",
                "exchangeType=topic&routingKey=orders.created",
            ),
            (
                "exchangeType=fanout&bindQueueName=BIND",
                "exchangeType=fanout",
            ),
            (
                "exchangeType=direct&routingKey=k",
                "exchangeType=direct&routingKey=k",
            ),
        ];
        for (i, (consume_params, publish_params)) in cases.into_iter().enumerate() {
            let exchange = unique("baton-test-ex");
            let bind = unique("baton-test-bound");
            let consume_params = consume_params.replace("BIND", &bind);
            let on = format!("{exchange}?{consume_params}");
            let mut consumer = consume(&brokers, EXCHANGE, &on).await;
            let to = format!("{exchange}?{publish_params}");
            let id = format!("ex-{i}");
            round_trip(&brokers, EXCHANGE, &to, &mut consumer, &id, b"routed").await;
            consumer.close().await;
            let target = Target::parse(EXCHANGE, &on).expect("parse");
            let bound = target.exchange.expect("exchange").bind_queue;
            delete_queue(&brokers, &bound).await;
            delete_exchange(&brokers, &exchange).await;
        }
    }

    #[tokio::test]
    async fn a_failed_connection_is_reopened_on_the_next_call() {
        let brokers = contract::brokers(QUEUE);
        let queue = unique("baton-test-reopen");
        let mut consumer = consume(&brokers, QUEUE, &queue).await;
        round_trip(&brokers, QUEUE, &queue, &mut consumer, "before", b"1").await;

        // The connection fails under the consumer and the publishing channel.
        let connection = brokers.inner.amqp.connection().await.expect("connection");
        connection
            .close(320, "test: connection forced".into())
            .await
            .expect("close");
        let e = tokio::time::timeout(contract::WAIT, consumer.next())
            .await
            .expect("an answer within the deadline")
            .expect_err("the consumer ends with its connection");
        assert!(matches!(e, BrokerError::Closed { .. }), "{e:?}");
        assert!(e.is_transient());

        // Both succeed on a new connection.
        let mut consumer = consume(&brokers, QUEUE, &queue).await;
        round_trip(&brokers, QUEUE, &queue, &mut consumer, "after", b"2").await;
        delete_queue(&brokers, &queue).await;
    }

    #[tokio::test]
    async fn a_conflicting_declaration_is_refused_and_the_connection_survives() {
        let brokers = contract::brokers(QUEUE);
        let queue = unique("baton-test-conflict");
        let mut consumer = consume(&brokers, QUEUE, &queue).await;
        let conflicting = format!("{queue}?durable=false");
        let e = brokers
            .consume(QUEUE, &conflicting)
            .await
            .err()
            .expect("a durable queue cannot be redeclared transient");
        assert!(matches!(e, BrokerError::Refused { .. }), "{e:?}");
        assert!(!e.is_transient());
        assert!(e.to_string().contains(&conflicting), "{e}");

        // The broker closed only the channel of the failed declaration.
        round_trip(&brokers, QUEUE, &queue, &mut consumer, "still", b"ok").await;
        delete_queue(&brokers, &queue).await;
    }

    #[tokio::test]
    async fn unusable_urls_are_refused_before_connecting() {
        for url in ["amqps://guest:guest@127.0.0.1:5671/%2f", "http://[::1"] {
            let brokers = Brokers::new(BrokerConfig {
                amqp_url: url.to_string(),
                ..BrokerConfig::default()
            });
            let e = brokers.consume(QUEUE, "q").await.err().expect(url);
            assert!(matches!(e, BrokerError::InvalidUrl { .. }), "{url}: {e:?}");
            assert!(!e.is_transient());
        }
    }

    #[tokio::test]
    async fn unreachable_server_fails_fast_with_its_url() {
        let config = BrokerConfig {
            amqp_url: format!("amqp://guest:guest@{NOWHERE}/%2f"),
            ..BrokerConfig::default()
        };
        let queue = "baton-test-unreachable";
        let e = contract::unreachable_fails_fast(config, QUEUE, queue).await;
        assert!(!e.to_string().contains("guest:guest"), "{e}");
    }
}
