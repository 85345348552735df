//! One simulated node: the turmoil host software that opens a real Baton node (`node::service`)
//! over the simulated disk, network and clock, and serves the peer and client requests that reach
//! it. Crashing the host drops its runtime (every task, actor and timer of the node); restarting it
//! runs this software again over what the disk kept.

use crate::disk::Disk;
use crate::net::{Net, SimLink};
use node::clock::Clock;
use proto::NodeId;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

/// A node's wall clock: the simulation's epoch time plus this node's skew (which the fault
/// injector moves, including jumps).
pub struct SimClock {
    pub skew_ms: Arc<AtomicI64>,
}

impl Clock for SimClock {
    fn now_ms(&self) -> engine::NowMs {
        let elapsed = turmoil::sim_elapsed().unwrap_or_default().as_millis();
        let base = i128::from(crate::EPOCH_MS) + i128::try_from(elapsed).unwrap_or(0);
        let now = base + i128::from(self.skew_ms.load(Ordering::Relaxed));
        engine::NowMs::try_from(now.max(0)).unwrap_or(0)
    }
}

/// Everything about one node that outlives its crashes.
#[derive(Clone)]
pub struct NodeSlot {
    pub id: NodeId,
    pub addr: SocketAddr,
    pub disk: Arc<Disk>,
    pub skew_ms: Arc<AtomicI64>,
    /// The running incarnation, if any (for the checker).
    pub running: Arc<Mutex<Option<node::Node>>>,
    /// Seed of this node's own randomness (workflow ids), changed per incarnation.
    pub seed: u64,
    pub incarnation: Arc<std::sync::atomic::AtomicU64>,
    /// Set when the node stopped itself because its storage failed (fail-stop): the runner then
    /// restarts it, as its supervisor would.
    pub failed: Arc<std::sync::atomic::AtomicBool>,
    /// The cluster versions the node's binary serves from its next start (an upgrade changes it).
    pub supports: Arc<Mutex<proto::version::VersionRange>>,
}

impl NodeSlot {
    /// The versions the binary started next serves.
    pub fn supports(&self) -> proto::version::VersionRange {
        *self.supports.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn node(&self) -> Option<node::Node> {
        self.running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// The node's options in a cluster of `members`.
pub fn options(
    id: NodeId,
    addr: SocketAddr,
    members: &std::collections::BTreeMap<NodeId, SocketAddr>,
    partitions: u16,
) -> node::Options {
    node::Options {
        data_dir: std::path::PathBuf::from(format!("/sim/{id}")),
        http: SocketAddr::from(([127, 0, 0, 1], 0)),
        partitions,
        node: id,
        cluster: Some(node::ClusterOptions {
            listen: addr,
            members: members.clone(),
            join: None,
            certs: std::path::PathBuf::new(),
        }),
        workers: None,
        events: node::events::EventOptions {
            scripts_in_process: true,
            ..Default::default()
        },
        ..Default::default()
    }
}

/// The host software of one node.
pub async fn software(
    slot: NodeSlot,
    options: node::Options,
    net: Arc<Net>,
    snapshot_logs: u64,
) -> turmoil::Result {
    let incarnation = slot.incarnation.fetch_add(1, Ordering::Relaxed);
    let options = node::Options {
        supports: slot.supports(),
        ..options
    };
    let link = SimLink::new(slot.id, slot.addr, net.clone(), slot.disk.clone());
    let seams = |db| node::host::Seams {
        db: Some(db),
        transport: Some(cluster::Transport::over(link.clone())),
        clock: Some(Arc::new(SimClock {
            skew_ms: slot.skew_ms.clone(),
        })),
        seed: Some(slot.seed ^ incarnation.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
        snapshot_logs: Some(snapshot_logs),
        on_storage_failure: Some({
            let failed = slot.failed.clone();
            Arc::new(move |_reason: String| failed.store(true, Ordering::Relaxed))
        }),
    };
    let (peer_tx, peer_rx) = mpsc::unbounded_channel();
    let (client_tx, mut client_rx) = mpsc::unbounded_channel();
    // Peers can reach the node while it opens (it waits for them to form its groups).
    net.attach(slot.id, peer_tx, client_tx);
    tokio::spawn(link.clone().serve(peer_rx));
    // Opening the disk replays the Raft log and writes to it, so it can meet a storage fault.
    let opened = match slot.disk.open() {
        Ok(db) => node::service::open_with(&options, seams(db))
            .await
            .map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    let node = match opened {
        Ok(node) => node,
        Err(e) => {
            // A node that cannot open its storage exits; its supervisor restarts it.
            tracing::debug!(node = %slot.id, error = %e, "node failed to open");
            // Wait to be crashed (which drops everything it started) rather than finish.
            slot.failed.store(true, Ordering::Relaxed);
            std::future::pending::<()>().await;
            return Ok(());
        }
    };
    *slot.running.lock().unwrap_or_else(|e| e.into_inner()) = Some(node.clone());
    while let Some(envelope) = client_rx.recv().await {
        let node = node.clone();
        let net = net.clone();
        let id = slot.id;
        tokio::spawn(async move {
            let reply = crate::client::serve(&node, envelope.request).await;
            net.answer(id, crate::net::CLIENT, envelope.reply, reply)
                .await;
        });
    }
    Ok(())
}
