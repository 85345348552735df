//! Events: Conductor's event handlers (conditions, placeholders, actions), the providers they
//! consume (Baton's own replicated queues, NATS JetStream, RabbitMQ) and the execution records
//! that deduplicate their actions.
//!
//! Layout: [`script`] (the JavaScript sandbox conditions run in), [`eval`] (conditions,
//! `${...}` placeholders from the payload, `expandInlineJSON`), [`brokers`] (NATS JetStream and
//! RabbitMQ clients). The operations that need the cluster — handler definitions, execution
//! records, Baton's own queues, the consumers on partition leaders — are in
//! `server::events` and `server::consumers`.

pub mod brokers;
pub mod eval;
pub mod script;

use brokers::{BrokerConfig, Provider};

/// The provider of Baton's own replicated queues.
pub const CONDUCTOR: &str = "conductor";
/// Signed HTTP deliveries (`POST /api/webhook/{name}`), queued like `conductor` messages.
pub const WEBHOOK: &str = "webhook";
/// The providers whose messages Baton keeps in its own queues.
pub const INTERNAL: &[&str] = &[CONDUCTOR, WEBHOOK];

/// Where the external brokers are; a broker without a URL is disabled, and handlers naming it
/// are refused.
#[derive(Debug, Clone, Default)]
pub struct EventOptions {
    /// `--nats URL`: NATS JetStream (`nats:` events).
    pub nats_url: Option<String>,
    /// `--amqp URL`: RabbitMQ (`amqp_queue:` and `amqp_exchange:` events).
    pub amqp_url: Option<String>,
    /// `--event-dedup-secs`: the event gate drops a webhook delivery whose content it saw this
    /// recently (None: [`DEDUP_WINDOW_SECS`]).
    pub dedup_window_secs: Option<u64>,
}

/// The event gate's default deduplication window.
pub const DEDUP_WINDOW_SECS: u64 = 60;

/// The providers this node can consume, and the clients of the enabled brokers.
#[derive(Clone)]
pub struct Providers {
    options: EventOptions,
    pub brokers: brokers::Brokers,
}

impl Providers {
    pub fn new(options: EventOptions) -> Self {
        let defaults = BrokerConfig::default();
        let config = BrokerConfig {
            nats_url: options.nats_url.clone().unwrap_or(defaults.nats_url),
            amqp_url: options.amqp_url.clone().unwrap_or(defaults.amqp_url),
        };
        Self {
            options,
            brokers: brokers::Brokers::new(config),
        }
    }

    /// The event gate's deduplication window.
    pub fn dedup_window_ms(&self) -> i64 {
        let secs = self.options.dedup_window_secs.unwrap_or(DEDUP_WINDOW_SECS);
        i64::try_from(secs.saturating_mul(1000)).unwrap_or(i64::MAX)
    }

    /// Whether `provider` is known and enabled here; the error says which are.
    pub fn check(&self, provider: &str) -> Result<Option<Provider>, String> {
        if INTERNAL.contains(&provider) {
            return Ok(None);
        }
        let Some(p) = Provider::parse(provider) else {
            return Err(format!(
                "unknown event provider '{provider}'; Baton knows conductor, webhook, nats, amqp_queue and amqp_exchange"
            ));
        };
        let enabled = match p {
            Provider::Nats => self.options.nats_url.is_some(),
            Provider::AmqpQueue | Provider::AmqpExchange => self.options.amqp_url.is_some(),
        };
        if !enabled {
            let flag = match p {
                Provider::Nats => "--nats",
                _ => "--amqp",
            };
            return Err(format!(
                "event provider '{provider}' is not enabled on this cluster (start the nodes with {flag} URL)"
            ));
        }
        Ok(Some(p))
    }
}
