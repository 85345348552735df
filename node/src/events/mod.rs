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

/// Where the external brokers are; a broker without a URL is disabled, and handlers naming it
/// are refused.
#[derive(Debug, Clone, Default)]
pub struct EventOptions {
    /// `--nats URL`: NATS JetStream (`nats:` events).
    pub nats_url: Option<String>,
    /// `--amqp URL`: RabbitMQ (`amqp_queue:` and `amqp_exchange:` events).
    pub amqp_url: Option<String>,
}

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

    /// Whether `provider` is known and enabled here; the error says which are.
    pub fn check(&self, provider: &str) -> Result<Option<Provider>, String> {
        if provider == CONDUCTOR {
            return Ok(None);
        }
        let Some(p) = Provider::parse(provider) else {
            return Err(format!(
                "unknown event provider '{provider}'; Baton knows conductor, nats, amqp_queue and amqp_exchange"
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
