//! [`Worker`] and its [`Builder`]: the configuration checked once, before anything runs.

use crate::config::{Config, Registered};
use crate::connection::Driver;
use crate::handle::{Handle, Status};
use crate::handler::{self, BoxError};
use crate::{Error, Outcome, Task, Tls};
use proto::worker::{CREDIT_MAX, SUBSCRIPTIONS_MAX, WORKER_ID_LEN_MAX};
use quinn::crypto::rustls::QuicClientConfig;
use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Default bound on dialing a node and being welcomed.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Default silence after which a connection counts as lost (a killed node, a cut network).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(5);
/// Default bound on a graceful shutdown.
pub const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);
/// Most nodes a worker is given.
pub const NODES_MAX: usize = 64;

/// A configured worker, ready to [`start`](Worker::start).
pub struct Worker {
    config: Config,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("worker_id", &self.config.worker_id)
            .field("nodes", &self.config.nodes)
            .field(
                "task_types",
                &self.config.handlers.keys().collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl Worker {
    /// A builder; see the crate documentation for an example.
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// The id the worker announces.
    pub fn worker_id(&self) -> &str {
        &self.config.worker_id
    }

    /// Starts the worker on the current tokio runtime (panics outside one) and returns its
    /// handle. It connects to the first node and keeps a connection, moving through the nodes,
    /// until [`Handle::shutdown`].
    pub fn start(self) -> Handle {
        let (stop_tx, stop_rx) = watch::channel(false);
        let (status_tx, status_rx) = watch::channel(Status::starting());
        let driver = Driver::new(self.config, stop_rx, status_tx);
        tokio::spawn(driver.run());
        Handle::new(stop_tx, status_rx)
    }
}

/// Configures a [`Worker`]. Mistakes are reported by [`Builder::build`].
pub struct Builder {
    nodes: Vec<SocketAddr>,
    tls: Option<Tls>,
    worker_id: Option<String>,
    handlers: BTreeMap<String, Registered>,
    domains: BTreeMap<String, String>,
    connect_timeout: Duration,
    idle_timeout: Duration,
    shutdown_timeout: Duration,
    /// The first mistake made while configuring, reported by `build`.
    error: Option<Error>,
}

impl Default for Builder {
    fn default() -> Builder {
        Builder {
            nodes: Vec::new(),
            tls: None,
            worker_id: None,
            handlers: BTreeMap::new(),
            domains: BTreeMap::new(),
            connect_timeout: CONNECT_TIMEOUT,
            idle_timeout: IDLE_TIMEOUT,
            shutdown_timeout: SHUTDOWN_TIMEOUT,
            error: None,
        }
    }
}

impl std::fmt::Debug for Builder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder")
            .field("nodes", &self.nodes)
            .field("worker_id", &self.worker_id)
            .field("task_types", &self.handlers.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl Builder {
    /// The nodes to connect to, tried in order; after a lost connection the worker moves to the
    /// next. Any node of the cluster serves every task type.
    pub fn nodes(mut self, nodes: impl IntoIterator<Item = SocketAddr>) -> Builder {
        self.nodes.extend(nodes);
        self
    }

    /// One more node (see [`Builder::nodes`]).
    pub fn node(mut self, node: SocketAddr) -> Builder {
        self.nodes.push(node);
        self
    }

    /// The worker's TLS identity (required).
    pub fn tls(mut self, tls: Tls) -> Builder {
        self.tls = Some(tls);
        self
    }

    /// The worker's id, reported with every result. Nodes may require it to match the id in the
    /// worker's certificate. Default: the host name, else `worker`.
    pub fn worker_id(mut self, id: impl Into<String>) -> Builder {
        self.worker_id = Some(id.into());
        self
    }

    /// Handles tasks of `task_type` with `handler`, at most `concurrency` at once
    /// (1..=[`CREDIT_MAX`]). The handler gets the [`Task`] and returns an [`Outcome`]; an error
    /// or a panic fails the attempt with its text as the reason.
    pub fn handler<F, Fut>(
        mut self,
        task_type: impl Into<String>,
        concurrency: u32,
        handler: F,
    ) -> Builder
    where
        F: Fn(Task) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Outcome, BoxError>> + Send + 'static,
    {
        let task_type = task_type.into();
        if task_type.is_empty() {
            self.fail("a handler's task type is empty".to_owned());
        } else if !(1..=CREDIT_MAX).contains(&concurrency) {
            self.fail(format!(
                "the concurrency of {task_type} is {concurrency}; it must be 1..={CREDIT_MAX}"
            ));
        } else {
            match self.handlers.entry(task_type) {
                std::collections::btree_map::Entry::Occupied(e) => {
                    let message = format!("{} has two handlers; give it one", e.key());
                    self.fail(message);
                }
                std::collections::btree_map::Entry::Vacant(e) => {
                    e.insert(Registered {
                        run: handler::erase(handler),
                        concurrency,
                        domain: None,
                    });
                }
            }
        }
        self
    }

    /// Polls `task_type` in `domain` (Conductor's task-to-domain) instead of the default.
    pub fn domain(mut self, task_type: impl Into<String>, domain: impl Into<String>) -> Builder {
        self.domains.insert(task_type.into(), domain.into());
        self
    }

    /// Bound on dialing a node and being welcomed. Default [`CONNECT_TIMEOUT`].
    pub fn connect_timeout(mut self, timeout: Duration) -> Builder {
        self.connect_timeout = timeout;
        self
    }

    /// Silence after which a connection counts as lost. Default [`IDLE_TIMEOUT`]; keep-alives
    /// go out at a fifth of it.
    pub fn idle_timeout(mut self, timeout: Duration) -> Builder {
        self.idle_timeout = timeout;
        self
    }

    /// Bound on a graceful shutdown. Default [`SHUTDOWN_TIMEOUT`].
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Builder {
        self.shutdown_timeout = timeout;
        self
    }

    /// Checks the configuration and builds the worker.
    pub fn build(self) -> Result<Worker, Error> {
        let Builder {
            nodes,
            tls,
            worker_id,
            mut handlers,
            domains,
            connect_timeout,
            idle_timeout,
            shutdown_timeout,
            error,
        } = self;
        if let Some(error) = error {
            return Err(error);
        }
        let config = |m: String| Err(Error::Config(m));
        if nodes.is_empty() || nodes.len() > NODES_MAX {
            return config(format!(
                "give 1..={NODES_MAX} node addresses, not {}",
                nodes.len()
            ));
        }
        let Some(tls) = tls else {
            return config("no TLS identity: call .tls(Tls::from_pem(...)?)".to_owned());
        };
        if handlers.is_empty() || handlers.len() > SUBSCRIPTIONS_MAX {
            return config(format!(
                "register 1..={SUBSCRIPTIONS_MAX} task handlers, not {}",
                handlers.len()
            ));
        }
        for (task_type, domain) in domains {
            match handlers.get_mut(&task_type) {
                Some(h) => h.domain = Some(domain),
                None => {
                    return config(format!(
                        "a domain is set for {task_type}, which has no handler"
                    ))
                }
            }
        }
        let worker_id = worker_id.unwrap_or_else(default_worker_id);
        if worker_id.is_empty() || worker_id.len() > WORKER_ID_LEN_MAX {
            return config(format!(
                "the worker id must be 1..={WORKER_ID_LEN_MAX} bytes, not {}",
                worker_id.len()
            ));
        }
        if connect_timeout.is_zero() || shutdown_timeout.is_zero() {
            return config("timeouts must be positive".to_owned());
        }
        let quic = quic_config(&tls, idle_timeout)?;
        Ok(Worker {
            config: Config {
                nodes,
                quic,
                worker_id: worker_id.into(),
                handlers,
                connect_timeout,
                shutdown_timeout,
            },
        })
    }

    fn fail(&mut self, message: String) {
        self.error.get_or_insert(Error::Config(message));
    }
}

/// The node acknowledges every ninth packet from the worker (or after 25 ms) instead of every
/// second one; results and tasks carry acknowledgements anyway.
const ACK_ELICITING_THRESHOLD: u8 = 8;

/// QUIC client configuration: the TLS identity, the idle timeout and keep-alives at a fifth of
/// it, so a dead node is noticed within the idle timeout while a quiet one stays connected;
/// fewer acknowledgement-only packets (the node's worker gateway asks the same of the worker).
fn quic_config(tls: &Tls, idle_timeout: Duration) -> Result<quinn::ClientConfig, Error> {
    let crypto = QuicClientConfig::try_from(tls.client_config())
        .map_err(|e| Error::Tls(format!("QUIC client config: {e}")))?;
    let idle = quinn::IdleTimeout::try_from(idle_timeout)
        .map_err(|e| Error::Config(format!("idle timeout: {e}")))?;
    if idle_timeout < Duration::from_millis(100) {
        return Err(Error::Config(
            "the idle timeout must be 100 ms or more".to_owned(),
        ));
    }
    let mut acks = quinn::AckFrequencyConfig::default();
    acks.ack_eliciting_threshold(ACK_ELICITING_THRESHOLD.into());
    let mut transport = quinn::TransportConfig::default();
    transport
        .ack_frequency_config(Some(acks))
        .max_idle_timeout(Some(idle))
        .keep_alive_interval(Some(idle_timeout / 5))
        // The worker opens its one stream; the node opens none.
        .max_concurrent_bidi_streams(0u8.into())
        .max_concurrent_uni_streams(0u8.into());
    let mut config = quinn::ClientConfig::new(Arc::new(crypto));
    config.transport_config(Arc::new(transport));
    Ok(config)
}

/// The host name (`HOSTNAME`, else `/etc/hostname`), else `worker`.
fn default_worker_id() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty() && h.len() <= WORKER_ID_LEN_MAX)
        .unwrap_or_else(|| "worker".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    async fn echo(task: Task) -> Result<Outcome, BoxError> {
        Ok(Outcome::completed(json!({"echo": task.input()})))
    }

    fn node() -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 7070))
    }

    fn config_error(b: Builder) -> String {
        match b.build() {
            Err(Error::Config(m)) => m,
            other => panic!("expected a configuration error, got {other:?}"),
        }
    }

    #[test]
    fn mistakes_are_reported_by_build() {
        assert!(config_error(Worker::builder().handler("t", 1, echo)).contains("node"));
        assert!(config_error(Worker::builder().node(node()).handler("t", 1, echo)).contains("TLS"));
        assert!(
            config_error(Worker::builder().node(node()).handler("t", 0, echo))
                .contains("concurrency")
        );
        assert!(config_error(
            Worker::builder()
                .node(node())
                .handler("t", CREDIT_MAX + 1, echo)
        )
        .contains("concurrency"));
        assert!(config_error(
            Worker::builder()
                .node(node())
                .handler("t", 1, echo)
                .handler("t", 2, echo)
        )
        .contains("two handlers"));
        assert!(config_error(Worker::builder().handler("", 1, echo)).contains("empty"));
    }

    #[test]
    fn a_complete_configuration_builds() {
        let (ca, cert, key) = crate::tls::test_pems();
        let tls = Tls::from_pem(ca, cert, key).expect("identity");
        let builder = || {
            Worker::builder()
                .nodes([node()])
                .tls(tls.clone())
                .handler("charge", 8, echo)
                .handler("refund", 1, |_task: Task| async {
                    Err::<Outcome, BoxError>("not yet".into())
                })
        };
        let worker = builder()
            .domain("charge", "eu")
            .worker_id("billing-1")
            .build()
            .expect("a worker");
        assert_eq!(worker.worker_id(), "billing-1");
        let charge = &worker.config.handlers["charge"];
        assert_eq!(
            (charge.concurrency, charge.domain.as_deref()),
            (8, Some("eu"))
        );
        assert!(config_error(builder().domain("ship", "eu")).contains("ship"));
        assert!(config_error(builder().worker_id("")).contains("worker id"));
        assert!(config_error(builder().idle_timeout(Duration::from_millis(1))).contains("idle"));
    }

    #[test]
    fn the_default_worker_id_is_usable() {
        let id = default_worker_id();
        assert!(!id.is_empty() && id.len() <= WORKER_ID_LEN_MAX);
    }
}
