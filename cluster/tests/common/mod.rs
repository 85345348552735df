//! Shared helpers of the cluster integration tests: a toy counter state machine and ways to open a
//! (sled) database and a group with test-friendly options.

#![allow(dead_code)]

pub mod nodes;

use cluster::storage::{Batch, Db, Tree};
use cluster::{Group, GroupOptions, NodeId, StateMachine};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Counts commands: each command increments `count`, is stored under `cmd/{count:08}`, and gets
/// the new count (u64 BE) as its response. A command `set:key=value` also writes `key`.
#[derive(Default)]
pub struct Counter {
    /// How many times `restored` was called.
    pub restored: AtomicUsize,
}

pub fn count(state: &Tree) -> u64 {
    state
        .get(b"count")
        .expect("read count")
        .map(|v| u64::from_be_bytes(v.as_ref().try_into().expect("8 bytes")))
        .unwrap_or(0)
}

impl StateMachine for Counter {
    fn apply(&self, state: &Tree, batch: &mut Batch, command: &[u8]) -> Vec<u8> {
        let next = count(state) + 1;
        batch.insert(b"count".to_vec(), next.to_be_bytes().to_vec());
        batch.insert(format!("cmd/{next:08}").into_bytes(), command.to_vec());
        if let Some(kv) = command.strip_prefix(b"set:") {
            if let Some(eq) = kv.iter().position(|b| *b == b'=') {
                batch.insert(kv[..eq].to_vec(), kv[eq + 1..].to_vec());
            }
        }
        next.to_be_bytes().to_vec()
    }

    fn restored(&self, _state: &Tree) {
        self.restored.fetch_add(1, Ordering::SeqCst);
    }
}

/// Proposes each command in turn, waiting for each answer.
pub async fn propose_all(group: &Group, commands: impl IntoIterator<Item = String>) {
    for command in commands {
        group.propose(command.into_bytes()).await.expect("propose");
    }
}

pub fn decode_count(response: &[u8]) -> u64 {
    u64::from_be_bytes(response.try_into().expect("8-byte response"))
}

/// Test options: fast timings, no automatic snapshots unless asked.
pub fn options(name: &str) -> GroupOptions {
    GroupOptions {
        heartbeat_ms: 50,
        election_timeout_min_ms: 150,
        election_timeout_max_ms: 300,
        leader_wait_ms: 10_000,
        ..GroupOptions::new(name, NodeId(1))
    }
}

/// Opens the sled database at `path`, retrying while a previous instance in this process still
/// holds its lock (openraft's tasks release their handles shortly after shutdown).
pub fn open_db(path: &Path) -> Db {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match Db::open_sled(path) {
            Ok(db) => return db,
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                std::thread::yield_now();
            }
            Err(e) => panic!("cannot open sled at {}: {e}", path.display()),
        }
    }
}

pub async fn open_group(db: &Db, options: GroupOptions) -> (Group, Arc<Counter>) {
    let sm = Arc::new(Counter::default());
    let group = Group::open(db, options, sm.clone())
        .await
        .expect("group opens");
    (group, sm)
}

/// Waits until `cond` holds, failing after `deadline`.
pub async fn wait_until(what: &str, deadline: Duration, mut cond: impl FnMut() -> bool) {
    let end = tokio::time::Instant::now() + deadline;
    while !cond() {
        assert!(
            tokio::time::Instant::now() < end,
            "timed out waiting for {what}"
        );
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A cluster CA and the identities of nodes `1..=n`, certificates valid for 127.0.0.1.
pub fn identities(n: u64) -> (cluster::tls::Ca, Vec<cluster::tls::Identity>) {
    cluster::tls::install_crypto_provider();
    let ca = cluster::tls::generate_ca().expect("ca");
    let ids = (1..=n)
        .map(|i| {
            let cert = cluster::tls::generate_node_cert(&ca, NodeId(i), &["127.0.0.1".into()])
                .expect("node cert");
            cluster::tls::Identity::from_node_cert(ca.cert_pem(), &cert).expect("identity")
        })
        .collect();
    (ca, ids)
}

/// Transport options for `identity` on `listen` with test timings.
pub fn transport_options(
    identity: cluster::tls::Identity,
    listen: std::net::SocketAddr,
) -> cluster::transport::TransportOptions {
    let mut options = cluster::transport::TransportOptions::new(identity, listen);
    options.connect_timeout_ms = 2_000;
    options.idle_timeout_ms = 3_000;
    options.keep_alive_ms = 500;
    options
}

/// Starts a transport on `listen`, retrying while a previous transport in this process still
/// holds the port (its endpoint releases the socket shortly after shutdown).
pub async fn start_transport(
    identity: cluster::tls::Identity,
    listen: std::net::SocketAddr,
) -> cluster::transport::Transport {
    let end = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match cluster::transport::Transport::start(transport_options(identity.clone(), listen)) {
            Ok(t) => return t,
            Err(e) if tokio::time::Instant::now() < end => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("cannot start transport on {listen}: {e}"),
        }
    }
}

/// A loopback address with a free port chosen by the OS.
pub fn any_port() -> std::net::SocketAddr {
    std::net::SocketAddr::from(([127, 0, 0, 1], 0))
}
