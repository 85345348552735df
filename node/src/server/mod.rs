//! The node service: opens the data directory, the meta group and the workflow partitions, starts
//! their actors, and implements the operations behind [`Node`](crate::Node). One node on one machine
//! is the embedded default; every group is a one-voter Raft group, the same code path a cluster runs.

mod metadata;
mod tasks;
mod workflows;

use crate::clock::{Clock, SystemClock};
use crate::engine::Effect;
use crate::error::{Error, Result};
use crate::meta::{Definitions, MetaMachine};
use crate::partition::machine::WorkflowMachine;
use crate::partition::Partition;
use crate::queue::TaskQueues;
use crate::service::Health;
use crate::Node;
use proto::{NodeId, PartitionId, TaskId, WorkflowId};
use rand::SeedableRng;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

/// Most effects waiting for the node to perform them (failure-workflow starts).
const OUTBOX_LEN_MAX: usize = 1_024;
/// Where the partition count is recorded in the data directory, so a restart cannot change it.
const PARTITIONS_KEY: &[u8] = b"baton/partitions";

/// How to run a node.
#[derive(Debug, Clone)]
pub struct Options {
    pub data_dir: PathBuf,
    pub http: SocketAddr,
    /// Workflow partitions; fixed when the data directory is created.
    pub partitions: u16,
    pub node: NodeId,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            data_dir: PathBuf::from("baton-data"),
            http: SocketAddr::from(([127, 0, 0, 1], 8080)),
            partitions: 8,
            node: NodeId(1),
        }
    }
}

/// The node's shared state behind every [`Node`] handle.
pub struct Inner {
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) meta: cluster::Group,
    pub(crate) defs: Definitions,
    pub(crate) partitions: Vec<Partition>,
    pub(crate) queues: Arc<TaskQueues>,
    /// Randomness for new workflow ids (at the edge: it picks the partition and the id).
    rng: Mutex<rand_chacha::ChaCha8Rng>,
    db: sled::Db,
}

impl Inner {
    pub(crate) fn partition_of(&self, id: &WorkflowId) -> &Partition {
        &self.partitions[usize::from(id.partition(self.partition_count()).0)]
    }

    pub(crate) fn partition_of_task(&self, id: &TaskId) -> &Partition {
        &self.partitions[usize::from(id.partition(self.partition_count()).0)]
    }

    pub(crate) fn partition_count(&self) -> u16 {
        // The count is at most u16::MAX by construction (Options::partitions is a u16).
        u16::try_from(self.partitions.len()).unwrap_or(u16::MAX)
    }

    pub(crate) fn new_workflow_id(&self) -> WorkflowId {
        use rand::RngCore;
        let mut rng = self.rng.lock().unwrap_or_else(|e| e.into_inner());
        let random = (u128::from(rng.next_u64()) << 64) | u128::from(rng.next_u64());
        let partition =
            PartitionId(u16::try_from(random % u128::from(self.partition_count())).unwrap_or(0));
        WorkflowId::new(partition, random)
    }

    pub fn health(&self) -> Health {
        let led = self
            .partitions
            .iter()
            .filter(|p| p.ctx.group.is_leader())
            .count();
        Health {
            healthy: self.meta.is_leader() && led == self.partitions.len(),
            partitions: self.partitions.len(),
            partitions_led: led,
        }
    }

    pub fn queue_sizes(&self, types: &[String]) -> std::collections::BTreeMap<String, u64> {
        let mut all = self.queues.sizes();
        if types.is_empty() {
            return all;
        }
        types
            .iter()
            .map(|t| (t.clone(), all.remove(t).unwrap_or(0)))
            .collect()
    }

    async fn shutdown(&self) {
        for p in &self.partitions {
            p.stop().await;
        }
        if let Err(e) = self.meta.shutdown().await {
            tracing::warn!(error = %e, "meta group shutdown");
        }
        if let Err(e) = cluster::log_store::flush(&self.db).await {
            tracing::warn!(error = %e, "final flush");
        }
    }
}

fn storage(e: impl std::fmt::Display) -> Error {
    Error::Internal(format!("storage: {e}"))
}

/// Opens the node's storage and groups and starts its partitions.
pub async fn open(options: &Options) -> Result<Node> {
    if options.partitions == 0 {
        return Err(Error::Invalid("--partitions must be at least 1".into()));
    }
    std::fs::create_dir_all(&options.data_dir).map_err(storage)?;
    let db = sled::Config::new()
        .path(&options.data_dir)
        .open()
        .map_err(storage)?;
    let partitions = match db.get(PARTITIONS_KEY).map_err(storage)? {
        Some(v) if v.len() == 2 => {
            let stored = u16::from_be_bytes([v[0], v[1]]);
            if stored != options.partitions {
                tracing::warn!(
                    stored,
                    requested = options.partitions,
                    "data directory was created with another partition count; keeping it"
                );
            }
            stored
        }
        _ => {
            db.insert(PARTITIONS_KEY, &options.partitions.to_be_bytes())
                .map_err(storage)?;
            cluster::log_store::flush(&db).await.map_err(storage)?;
            options.partitions
        }
    };
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let meta = cluster::Group::open(
        &db,
        cluster::GroupOptions::new("meta", options.node),
        Arc::new(MetaMachine),
    )
    .await
    .map_err(|e| Error::Internal(format!("meta group: {e}")))?;
    let defs = Definitions::new(meta.state().clone());
    let queues = Arc::new(TaskQueues::default());
    let (outbox_tx, outbox_rx) = mpsc::channel(OUTBOX_LEN_MAX);
    let mut parts = Vec::with_capacity(usize::from(partitions));
    for p in 0..partitions {
        let name = format!("p{p}");
        let group = cluster::Group::open(
            &db,
            cluster::GroupOptions::new(name, options.node),
            Arc::new(WorkflowMachine),
        )
        .await
        .map_err(|e| Error::Internal(format!("partition {p}: {e}")))?;
        parts.push(
            Partition::start(
                PartitionId(p),
                group,
                clock.clone(),
                queues.clone(),
                outbox_tx.clone(),
            )
            .await?,
        );
    }
    let inner = Arc::new(Inner {
        clock,
        meta,
        defs,
        partitions: parts,
        queues,
        rng: Mutex::new(rand_chacha::ChaCha8Rng::from_entropy()),
        db,
    });
    tokio::spawn(perform_outbox(Arc::downgrade(&inner), outbox_rx));
    Ok(Node { inner })
}

/// Performs effects addressed to other workflows. Starting a failure workflow uses an id derived from
/// the failed workflow, so a repeat finds it already started.
async fn perform_outbox(inner: std::sync::Weak<Inner>, mut rx: mpsc::Receiver<Effect>) {
    while let Some(effect) = rx.recv().await {
        let Some(inner) = inner.upgrade() else { return };
        if let Effect::StartWorkflow {
            workflow_id,
            name,
            version,
            input,
            correlation_id,
        } = effect
        {
            match inner
                .start_with_id(workflow_id.clone(), &name, version, input, correlation_id)
                .await
            {
                Ok(()) | Err(Error::Conflict(_)) => {}
                Err(e) => {
                    tracing::warn!(workflow = %workflow_id, %name, error = %e, "could not start failure workflow")
                }
            }
        }
    }
}

/// Runs a node until `shutdown` resolves: the HTTP API on `options.http`.
pub async fn serve(
    options: Options,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let node = open(&options).await.map_err(|e| anyhow::anyhow!("{e}"))?;
    let listener = tokio::net::TcpListener::bind(options.http)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", options.http))?;
    tracing::info!(http = %options.http, data_dir = %options.data_dir.display(), partitions = node.inner.partitions.len(), "baton node serving");
    let app = crate::api::router(node.clone());
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await?;
    node.inner.shutdown().await;
    tracing::info!("baton node stopped");
    Ok(())
}
