//! Events: Conductor's event handlers (conditions, placeholders, actions), the providers they
//! consume (Baton's own replicated queues, NATS JetStream, RabbitMQ) and the execution records
//! that deduplicate their actions.
//!
//! Layout: [`script`] (the JavaScript sandbox), [`pool`] (the child processes scripts run in,
//! killed when stuck), [`host`] (such a child's side), [`frame`] (their wire format), [`eval`] (conditions,
//! `${...}` placeholders from the payload, `expandInlineJSON`), [`brokers`] (NATS JetStream and
//! RabbitMQ clients), [`bus`] (where Serverless Workflow events travel), [`http`] (HTTP tasks' calls and the hosts they may reach). The operations
//! that need the cluster — handler definitions, execution records, Baton's own queues, the
//! consumers on partition leaders, performing tasks' work — are in `service::events`.

pub mod brokers;
pub mod bus;
pub mod eval;
pub mod frame;
pub mod host;
pub mod http;
pub mod jq;
pub mod pool;
pub mod process;
pub mod script;

use brokers::{BrokerConfig, Provider};
use proto::record::EventSource;
use serde_json::Value;

/// The provider of Baton's own replicated queues.
pub const CONDUCTOR: &str = "conductor";
/// Signed HTTP deliveries (`POST /api/webhook/{name}`), queued like `conductor` messages.
pub const WEBHOOK: &str = "webhook";
/// The providers whose messages Baton keeps in its own queues.
pub const INTERNAL: &[&str] = &[CONDUCTOR, WEBHOOK];

/// One event at the gate (`Events::admit` in `service::events`): where it came from, its type
/// (the event `provider:queue` handlers listen on), its id if the source names one, its payload,
/// its trace id if the sender gave one, and whether the gate deduplicates it by content.
#[derive(Debug, Clone)]
pub struct GateEvent {
    pub source: EventSource,
    pub event: String,
    pub id: Option<String>,
    pub payload: Value,
    pub trace_id: Option<String>,
    /// Drop content (event and payload) seen within this many milliseconds (webhooks); `None`:
    /// no deduplication by content.
    pub dedup_window_ms: Option<i64>,
}

/// The trace id of a W3C `traceparent` header (`00-<32 hex>-<16 hex>-<2 hex>`), if it is one.
pub fn trace_id_of(traceparent: &str) -> Option<String> {
    let mut parts = traceparent.trim().split('-');
    let (_version, trace) = (parts.next()?, parts.next()?);
    let valid = trace.len() == 32
        && trace.bytes().all(|b| b.is_ascii_hexdigit())
        && trace.bytes().any(|b| b != b'0');
    valid.then(|| trace.to_ascii_lowercase())
}

/// A trace id for an event whose sender gave none: derived from its id, so every redelivery
/// carries the same one.
pub fn derived_trace_id(id: &str) -> String {
    let hi = proto::hash::stable_hash(id.as_bytes());
    let lo = proto::hash::fnv1a(hi ^ 0x9e37_79b9_7f4a_7c15, id.as_bytes());
    format!("{hi:016x}{lo:016x}")
}

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
    /// The program scripts run in (None: this binary's `script-host` subcommand).
    pub script_host: Option<pool::HostProgram>,
    /// Evaluate scripts on the calling thread instead ([`pool::ScriptPool::in_process`]): the
    /// simulator's setting, never a server's.
    pub scripts_in_process: bool,
    /// HTTP tasks' calls: how many at once, and the hosts they may reach.
    pub http: http::HttpOptions,
    /// `--dsl-events`: where Serverless Workflow events travel.
    pub dsl_bus: bus::DslBus,
    /// `--dsl-lifecycle-sink`: where Serverless Workflow instances publish their lifecycle
    /// CloudEvents (`provider:queue`); `None`: they record none.
    pub lifecycle_sink: Option<String>,
    /// The DSL's `run` processes this node runs (`--dsl-run`; none when absent).
    pub processes: process::ProcessOptions,
}

impl EventOptions {
    /// Whether `provider`'s broker has a URL here.
    fn enables(&self, provider: Provider) -> bool {
        match provider {
            Provider::Nats => self.nats_url.is_some(),
            Provider::AmqpQueue | Provider::AmqpExchange => self.amqp_url.is_some(),
        }
    }

    /// Whether the lifecycle sink names a provider this node has and a queue it accepts.
    pub fn check_lifecycle_sink(&self) -> Result<(), String> {
        let Some(sink) = self.lifecycle_sink.as_deref() else {
            return Ok(());
        };
        let what = "--dsl-lifecycle-sink";
        let (provider, queue) = proto::model::split_event(sink).ok_or_else(|| {
            format!("{what} '{sink}' is not provider:queue (e.g. nats:lifecycle)")
        })?;
        let checked = Providers::new(self.clone()).check(provider);
        match checked.map_err(|e| format!("{what}: {e}"))? {
            Some(p) => brokers::validate_queue(p, queue).map_err(|e| format!("{what}: {e}")),
            None if queue.trim().is_empty() => Err(format!("{what} '{sink}' names no queue")),
            None => Ok(()),
        }
    }

    /// Whether the broker of the DSL event bus is enabled, or which flag it needs.
    pub fn check_dsl_bus(&self) -> Result<(), String> {
        match self.dsl_bus.provider() {
            Some(p) if !self.enables(p) => Err(format!(
                "--dsl-events {} needs {} URL",
                p.name(),
                enabling_flag(p)
            )),
            _ => Ok(()),
        }
    }
}

/// The flag that enables `provider`'s broker.
fn enabling_flag(provider: Provider) -> &'static str {
    match provider {
        Provider::Nats => "--nats",
        Provider::AmqpQueue | Provider::AmqpExchange => "--amqp",
    }
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

    /// Where Serverless Workflow events travel.
    pub fn dsl_bus(&self) -> &bus::DslBus {
        &self.options.dsl_bus
    }

    /// Where Serverless Workflow instances publish their lifecycle events, if anywhere.
    pub fn lifecycle_sink(&self) -> Option<&str> {
        self.options.lifecycle_sink.as_deref()
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
        if !self.options.enables(p) {
            let flag = enabling_flag(p);
            return Err(format!(
                "event provider '{provider}' is not enabled on this cluster (start the nodes with {flag} URL)"
            ));
        }
        Ok(Some(p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_ids_come_from_traceparent_or_from_the_id() {
        assert_eq!(
            trace_id_of("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01").as_deref(),
            Some("4bf92f3577b34da6a3ce929d0e0e4736")
        );
        for bad in [
            "",
            "00",
            "00-xyz-00f067aa0ba902b7-01",
            &format!("00-{}-01-01", "0".repeat(32)),
        ] {
            assert_eq!(trace_id_of(bad), None, "{bad:?}");
        }
        let a = derived_trace_id("m1");
        assert_eq!(a.len(), 32);
        assert_eq!(a, derived_trace_id("m1"), "the same id, the same trace");
        assert_ne!(a, derived_trace_id("m2"));
    }

    #[test]
    fn providers_are_known_and_enabled_or_refused_clearly() {
        let p = Providers::new(EventOptions {
            nats_url: Some("nats://127.0.0.1:4222".into()),
            ..Default::default()
        });
        assert_eq!(p.check("conductor"), Ok(None));
        assert_eq!(p.check("webhook"), Ok(None));
        assert_eq!(p.check("nats"), Ok(Some(Provider::Nats)));
        assert!(p.check("amqp_queue").is_err_and(|e| e.contains("--amqp")));
        assert!(p
            .check("kafka")
            .is_err_and(|e| e.contains("unknown event provider")));
        assert_eq!(p.dedup_window_ms(), 60_000);
    }
}
