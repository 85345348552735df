//! The Serverless Workflow event bus: where a document's `emit` publishes its CloudEvents and
//! where its `listen` tasks and `schedule.on` hear them, chosen by the operator
//! (`baton server --dsl-events`). An event travels under its CloudEvent `type`:
//!
//! - `conductor` (the default): Baton's own replicated queue `conductor:{type}`;
//! - `nats`: the JetStream subject `{type}` (`nats:{type}`);
//! - `amqp_exchange:NAME`: the RabbitMQ topic exchange `NAME` with the routing key `{type}`,
//!   heard through the queue `baton.NAME.{type}` bound to it.
//!
//! A filter that names no event type (`engine::dsl::ANY_TYPE`) hears every event: on Baton's
//! own queues, whose consumers then take every `conductor:` queue; on a topic exchange, through
//! the queue `baton.NAME.#` bound with `#`. NATS keeps each subject in its own stream, so there
//! such a filter is refused at registration.
//!
//! The engine names the bus, never a broker: an `emit` is an EVENT task whose sink is
//! `dsl:{type}` ([`BUS_PROVIDER`]), resolved here when it is published. Conductor's event
//! handlers on the resolved event see the same messages.

use super::brokers::{self, Provider};
use super::CONDUCTOR;
use engine::dsl::ANY_TYPE;
use proto::model::split_event;

/// The routing key that binds a queue to every key of a topic exchange.
const EVERY_KEY: &str = "#";

/// The provider of an EVENT task's sink that names the DSL event bus (`dsl:{type}`).
pub const BUS_PROVIDER: &str = engine::dsl::run::EVENT_BUS;

/// Where Serverless Workflow events travel.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum DslBus {
    /// Baton's own queues.
    #[default]
    Conductor,
    /// NATS JetStream, a subject per type.
    Nats,
    /// A RabbitMQ topic exchange, routed by type.
    AmqpExchange(String),
}

impl DslBus {
    /// Reads `--dsl-events`: `conductor`, `nats` or `amqp_exchange:NAME`.
    pub fn parse(spec: &str) -> Result<DslBus, String> {
        let bus = match split_event(spec.trim()) {
            Some(("amqp_exchange", name)) if is_exchange_name(name) => {
                DslBus::AmqpExchange(name.to_owned())
            }
            Some(("amqp_exchange", name)) => {
                return Err(format!(
                    "'{name}' is not an exchange name (letters, digits, '.', '_' and '-')"
                ))
            }
            _ => match spec.trim() {
                CONDUCTOR => DslBus::Conductor,
                "nats" => DslBus::Nats,
                other => {
                    return Err(format!(
                        "unknown DSL event bus '{other}'; use conductor, nats or amqp_exchange:NAME"
                    ))
                }
            },
        };
        Ok(bus)
    }

    /// The broker this bus needs enabled, if any.
    pub fn provider(&self) -> Option<Provider> {
        match self {
            DslBus::Conductor => None,
            DslBus::Nats => Some(Provider::Nats),
            DslBus::AmqpExchange(_) => Some(Provider::AmqpExchange),
        }
    }

    /// Whether a filter that names no event type can hear this bus: Baton's own queues can
    /// all be consumed, and a topic exchange routes every key to a queue bound with `#`; NATS
    /// keeps each subject in a stream of its own, which no one consumer reads all of.
    pub fn hears_every_type(&self) -> bool {
        *self != DslBus::Nats
    }

    /// The event (`provider:queue`) that carries CloudEvents of `event_type`.
    pub fn event(&self, event_type: &str) -> String {
        match self {
            DslBus::Conductor => format!("{CONDUCTOR}:{event_type}"),
            DslBus::Nats => format!("nats:{event_type}"),
            DslBus::AmqpExchange(name) => {
                let key = match event_type {
                    ANY_TYPE => EVERY_KEY,
                    key => key,
                };
                format!("amqp_exchange:{name}?routingKey={key}")
            }
        }
    }

    /// The CloudEvent type `event` carries on this bus, if it is one of the bus's events.
    pub fn event_type<'a>(&self, event: &'a str) -> Option<&'a str> {
        let (provider, queue) = split_event(event)?;
        let found = match self {
            DslBus::Conductor => (provider == CONDUCTOR).then_some(queue),
            DslBus::Nats => (provider == "nats").then_some(queue),
            DslBus::AmqpExchange(name) => (provider == "amqp_exchange")
                .then(|| queue.strip_prefix(name.as_str()))
                .flatten()
                .and_then(|rest| rest.strip_prefix("?routingKey="))
                .map(|key| if key == EVERY_KEY { ANY_TYPE } else { key }),
        };
        found.filter(|t| !t.is_empty())
    }

    /// Whether `event_type` can travel on this bus (a NATS subject, a routing key), or why not.
    pub fn check_type(&self, event_type: &str) -> Result<(), String> {
        let Some(provider) = self.provider() else {
            return Ok(());
        };
        let event = self.event(event_type);
        let (_, queue) = split_event(&event).unwrap_or_default();
        brokers::validate_queue(provider, queue).map_err(|e| e.to_string())
    }
}

fn is_exchange_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= brokers::amqp::NAME_LEN_MAX
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_bus_names_the_event_of_a_type_and_reads_the_type_back() {
        let buses = [
            DslBus::Conductor,
            DslBus::Nats,
            DslBus::AmqpExchange("cloud.events".into()),
        ];
        for bus in buses {
            let event = bus.event("com.example.ready");
            assert_eq!(bus.event_type(&event), Some("com.example.ready"), "{bus:?}");
            assert_eq!(bus.event_type("webhook:com.example.ready"), None);
        }
        assert_eq!(DslBus::Nats.event("a.b"), "nats:a.b");
        let exchange = DslBus::AmqpExchange("cloud.events".into());
        let every = exchange.event(ANY_TYPE);
        assert_eq!(every, "amqp_exchange:cloud.events?routingKey=#");
        assert_eq!(exchange.event_type(&every), Some(ANY_TYPE));
        assert!(exchange.hears_every_type() && DslBus::Conductor.hears_every_type());
        assert!(!DslBus::Nats.hears_every_type());
        let other = DslBus::AmqpExchange("other".into());
        assert_eq!(
            other.event_type("amqp_exchange:cloud.events?routingKey=a"),
            None
        );
    }

    #[test]
    fn the_flag_reads_three_buses_and_refuses_the_rest() {
        assert_eq!(DslBus::parse("conductor"), Ok(DslBus::Conductor));
        assert_eq!(DslBus::parse("nats"), Ok(DslBus::Nats));
        assert_eq!(
            DslBus::parse("amqp_exchange:events"),
            Ok(DslBus::AmqpExchange("events".into()))
        );
        for bad in [
            "kafka",
            "amqp_exchange:",
            "amqp_exchange:a?b=c",
            "amqp_queue:q",
        ] {
            assert!(DslBus::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_type_that_is_no_subject_is_refused_on_nats() {
        assert!(DslBus::Nats.check_type("com.example.ready").is_ok());
        assert!(DslBus::Nats.check_type("com example").is_err());
        assert!(DslBus::Conductor.check_type("com example").is_ok());
    }
}
