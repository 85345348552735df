//! The simulated network: every message between nodes (Raft RPC, forwarded requests) and between
//! clients and nodes passes through one [`Net`], which decides its fate from the run's seed:
//! delivered after a delay (reordering follows from independent delays), lost, duplicated, held
//! while an endpoint is paused, or refused by a cut (symmetric or one-way). Deliveries go into the
//! receiving node's inbox and are served on that node's own runtime, so a crash of the node drops
//! what it was serving.
//!
//! [`SimLink`] is the node-side [`cluster::transport::Link`] over it.

use crate::counters::{Counter, Counters};
use cluster::transport::{Handler, Link, LinkFuture, Service, TransportStats};
use cluster::Error;
use proto::NodeId;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// Who is at either end of a message: a node, or the simulated clients and workers.
pub const CLIENT: NodeId = NodeId(0);

/// Fault rates of the network, drawn per seed.
#[derive(Debug, Clone, Copy)]
pub struct NetFaults {
    /// Probability that a message is lost.
    pub loss: f64,
    /// Probability that a message is delivered twice.
    pub duplicate: f64,
    /// Delay of a normal message, milliseconds.
    pub delay_ms: (u64, u64),
    /// Probability that a message is delayed up to `long_delay_ms` instead.
    pub long_delay: f64,
    pub long_delay_ms: u64,
}

impl NetFaults {
    /// A network without faults (the liveness phase).
    pub fn calm() -> NetFaults {
        NetFaults {
            loss: 0.0,
            duplicate: 0.0,
            delay_ms: (0, 2),
            long_delay: 0.0,
            long_delay_ms: 0,
        }
    }
}

/// Where a peer request's answer goes (the answer, or the serving node's error message).
type ReplyTx = oneshot::Sender<Result<Vec<u8>, String>>;

/// A message to a node's peer service.
pub struct Envelope {
    pub from: NodeId,
    pub service: Service,
    pub payload: Vec<u8>,
    pub reply: ReplyTx,
}

/// A request of the simulated clients, served by the node's host (see `host.rs`).
pub struct ClientEnvelope {
    pub request: crate::client::Request,
    pub reply: oneshot::Sender<crate::client::Reply>,
}

struct Inbox {
    peers: mpsc::UnboundedSender<Envelope>,
    clients: mpsc::UnboundedSender<ClientEnvelope>,
}

struct State {
    rng: ChaCha8Rng,
    faults: NetFaults,
    /// One-way cuts (from, to).
    cuts: BTreeSet<(NodeId, NodeId)>,
    /// Nodes paused until the given simulated millisecond: nothing goes in or out before then.
    paused: BTreeMap<NodeId, u64>,
    inboxes: BTreeMap<NodeId, Inbox>,
    addrs: BTreeMap<SocketAddr, NodeId>,
}

/// The network of one run.
pub struct Net {
    state: Mutex<State>,
    counters: Arc<Counters>,
    /// Violations seen on the wire (an acknowledgement of entries not yet durable), for the
    /// runner to collect.
    violations: Mutex<Vec<(&'static str, String)>>,
    /// Reply channels of messages the network swallowed: kept open, so their callers wait until
    /// their own timeout as they would on a silent network (a dropped sender would tell them at once).
    swallowed: Mutex<Vec<ReplyTx>>,
}

/// What happens to one message.
enum Fate {
    Lost,
    Deliver(Vec<Duration>),
}

/// Simulated milliseconds since the run began.
pub fn now_ms() -> u64 {
    turmoil::sim_elapsed()
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

impl Net {
    pub fn new(rng: ChaCha8Rng, faults: NetFaults, counters: Arc<Counters>) -> Arc<Net> {
        Arc::new(Net {
            state: Mutex::new(State {
                rng,
                faults,
                cuts: BTreeSet::new(),
                paused: BTreeMap::new(),
                inboxes: BTreeMap::new(),
                addrs: BTreeMap::new(),
            }),
            counters,
            violations: Mutex::new(Vec::new()),
            swallowed: Mutex::new(Vec::new()),
        })
    }

    /// Takes the violations seen on the wire since the last call.
    pub fn take_violations(&self) -> Vec<(&'static str, String)> {
        std::mem::take(&mut *lock(&self.violations))
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn set_faults(&self, faults: NetFaults) {
        self.lock().faults = faults;
    }

    pub fn register_addr(&self, node: NodeId, addr: SocketAddr) {
        self.lock().addrs.insert(addr, node);
    }

    /// A node's incarnation starts serving.
    pub fn attach(
        &self,
        node: NodeId,
        peers: mpsc::UnboundedSender<Envelope>,
        clients: mpsc::UnboundedSender<ClientEnvelope>,
    ) {
        self.lock().inboxes.insert(node, Inbox { peers, clients });
    }

    /// A node crashed: nothing reaches it until it attaches again.
    pub fn detach(&self, node: NodeId) {
        self.lock().inboxes.remove(&node);
    }

    pub fn cut(&self, from: NodeId, to: NodeId) {
        self.lock().cuts.insert((from, to));
    }

    /// Removes every cut (pauses end by themselves).
    pub fn heal(&self) {
        self.lock().cuts.clear();
    }

    /// Ends every pause now (the end of the safety phase).
    pub fn resume_all(&self) {
        self.lock().paused.clear();
    }

    pub fn pause(&self, node: NodeId, until_ms: u64) {
        self.lock().paused.insert(node, until_ms);
    }

    fn is_cut(s: &State, from: NodeId, to: NodeId) -> bool {
        s.cuts.contains(&(from, to))
    }

    /// The fate of a message from `from` to `to` sent now; `copies` allows duplication.
    fn fate(&self, from: NodeId, to: NodeId, copies: bool) -> Fate {
        let mut s = self.lock();
        if Self::is_cut(&s, from, to) {
            self.counters.bump(Counter::MessageCut);
            return Fate::Lost;
        }
        let f = s.faults;
        if f.loss > 0.0 && s.rng.gen_bool(f.loss) {
            self.counters.bump(Counter::MessageLost);
            return Fate::Lost;
        }
        let now = now_ms();
        let held = [from, to]
            .iter()
            .filter_map(|n| s.paused.get(n).copied())
            .max()
            .unwrap_or(0)
            .saturating_sub(now);
        let n = if copies && f.duplicate > 0.0 && s.rng.gen_bool(f.duplicate) {
            self.counters.bump(Counter::MessageDuplicated);
            2
        } else {
            1
        };
        let mut delays = Vec::with_capacity(n);
        for _ in 0..n {
            let ms = if f.long_delay > 0.0 && s.rng.gen_bool(f.long_delay) {
                self.counters.bump(Counter::MessageDelayedLong);
                s.rng
                    .gen_range(f.delay_ms.1..=f.long_delay_ms.max(f.delay_ms.1))
            } else {
                s.rng.gen_range(f.delay_ms.0..=f.delay_ms.1)
            };
            delays.push(Duration::from_millis(ms + held));
        }
        if held > 0 {
            self.counters.bump(Counter::MessageHeldByPause);
        }
        Fate::Deliver(delays)
    }

    /// Whether a message may still arrive (the cut may have come while it travelled).
    fn arrives(&self, from: NodeId, to: NodeId) -> bool {
        !Self::is_cut(&self.lock(), from, to)
    }

    fn peer_inbox(&self, to: NodeId) -> Option<mpsc::UnboundedSender<Envelope>> {
        self.lock().inboxes.get(&to).map(|i| i.peers.clone())
    }

    fn client_inbox(&self, to: NodeId) -> Option<mpsc::UnboundedSender<ClientEnvelope>> {
        self.lock().inboxes.get(&to).map(|i| i.clients.clone())
    }

    /// Sends a peer request; the answer (if any) arrives on the returned receiver.
    fn send(
        self: &Arc<Self>,
        from: NodeId,
        to: NodeId,
        service: Service,
        payload: Vec<u8>,
    ) -> oneshot::Receiver<Result<Vec<u8>, String>> {
        let (tx, rx) = oneshot::channel();
        let Fate::Deliver(delays) = self.fate(from, to, true) else {
            lock(&self.swallowed).push(tx);
            return rx;
        };
        let mut reply = Some(tx);
        for delay in delays {
            let net = self.clone();
            let payload = payload.clone();
            // The first copy carries the caller's reply; a duplicate's answer goes nowhere.
            let tx = reply.take().unwrap_or_else(|| oneshot::channel().0);
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                if !net.arrives(from, to) {
                    net.counters.bump(Counter::MessageCut);
                    lock(&net.swallowed).push(tx);
                    return;
                }
                match net.peer_inbox(to) {
                    Some(inbox) => {
                        let _ = inbox.send(Envelope {
                            from,
                            service,
                            payload,
                            reply: tx,
                        });
                    }
                    // Nobody there: the caller learns it at once (connection refused).
                    None => drop(tx),
                }
            });
        }
        rx
    }

    /// Carries an answer back from `from` (the server) to `to`, with its own fate (no copies).
    pub async fn answer<T: Send + 'static>(
        self: &Arc<Self>,
        from: NodeId,
        to: NodeId,
        reply: oneshot::Sender<T>,
        value: T,
    ) {
        match self.fate(from, to, false) {
            Fate::Lost => {}
            Fate::Deliver(delays) => {
                let delay = delays.first().copied().unwrap_or_default();
                tokio::time::sleep(delay).await;
                if self.arrives(from, to) {
                    let _ = reply.send(value);
                } else {
                    self.counters.bump(Counter::MessageCut);
                }
            }
        }
    }

    /// A client request to `node`, answered within `timeout` or not at all (unknown outcome).
    pub async fn client_call(
        self: &Arc<Self>,
        node: NodeId,
        request: crate::client::Request,
        timeout: Duration,
    ) -> Option<crate::client::Reply> {
        let (tx, rx) = oneshot::channel();
        match self.fate(CLIENT, node, false) {
            Fate::Lost => {
                tokio::time::sleep(timeout).await;
                return None;
            }
            Fate::Deliver(delays) => {
                let net = self.clone();
                let delay = delays.first().copied().unwrap_or_default();
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    if !net.arrives(CLIENT, node) {
                        return;
                    }
                    if let Some(inbox) = net.client_inbox(node) {
                        let _ = inbox.send(ClientEnvelope { request, reply: tx });
                    }
                });
            }
        }
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(reply)) => Some(reply),
            // Refused (node down) or timed out: the client cannot tell whether it ran.
            Ok(Err(_)) => None,
            Err(_) => {
                self.counters.bump(Counter::ClientTimeout);
                None
            }
        }
    }

    fn node_at(&self, addr: SocketAddr) -> Option<NodeId> {
        self.lock().addrs.get(&addr).copied()
    }
}

/// A node's [`Link`] over the simulated network.
pub struct SimLink {
    node: NodeId,
    addr: SocketAddr,
    net: Arc<Net>,
    /// The node's disk, to check that what it acknowledges is durable.
    disk: Arc<crate::disk::Disk>,
    handlers: Mutex<BTreeMap<Service, Arc<dyn Handler>>>,
    peers: Mutex<BTreeMap<NodeId, SocketAddr>>,
}

impl SimLink {
    pub fn new(
        node: NodeId,
        addr: SocketAddr,
        net: Arc<Net>,
        disk: Arc<crate::disk::Disk>,
    ) -> Arc<SimLink> {
        Arc::new(SimLink {
            node,
            addr,
            net,
            disk,
            handlers: Mutex::new(BTreeMap::new()),
            peers: Mutex::new(BTreeMap::new()),
        })
    }

    /// Serves the peer requests that reach this node, each on its own task of this runtime.
    pub async fn serve(self: Arc<Self>, mut inbox: mpsc::UnboundedReceiver<Envelope>) {
        while let Some(envelope) = inbox.recv().await {
            let handler = lock(&self.handlers).get(&envelope.service).cloned();
            let net = self.net.clone();
            let node = self.node;
            let disk = self.disk.clone();
            tokio::spawn(async move {
                let Envelope {
                    from,
                    payload,
                    reply,
                    service,
                } = envelope;
                let appended = (service == Service::Raft)
                    .then(|| appended_entries(&payload))
                    .flatten();
                let answer = match handler {
                    Some(h) => h.handle(from, payload).await,
                    None => Err(format!("no handler for {service:?}")),
                };
                if let (Some((group, last)), Ok(body)) = (appended, &answer) {
                    check_durable_ack(&net, &disk, node, &group, last, body);
                }
                net.answer(node, from, reply, answer).await;
            });
        }
    }
}

/// The group and last entry index of an AppendEntries request that carries entries.
fn appended_entries(payload: &[u8]) -> Option<(String, u64)> {
    use cluster::network::wire::{decode, RaftRequest, RaftRpc};
    let request: RaftRequest = decode(payload).ok()?;
    match request.rpc {
        RaftRpc::AppendEntries(a) => a.entries.last().map(|e| (request.group, e.log_id.index)),
        _ => None,
    }
}

/// Nothing acknowledged is lost, checked at the moment of acknowledgement: a replica that answers
/// an AppendEntries with success has flushed those entries (Raft's AppendEntries receiver persists
/// before it replies).
fn check_durable_ack(
    net: &Net,
    disk: &crate::disk::Disk,
    node: NodeId,
    group: &str,
    last: u64,
    body: &[u8],
) {
    use cluster::network::wire::{decode, RaftReply};
    let Ok(RaftReply::AppendEntries(Ok(openraft::raft::AppendEntriesResponse::Success))) =
        decode::<RaftReply>(body)
    else {
        return;
    };
    let durable = disk.durable_index(group);
    tracing::trace!(%node, group, last, durable, "append acknowledged");
    if durable < last {
        lock(&net.violations).push((
            "acknowledged entries are durable",
            format!(
                "node {node} acknowledged {group} entries up to {last} while only {durable} were flushed"
            ),
        ));
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Link for SimLink {
    fn node(&self) -> NodeId {
        self.node
    }

    fn local_addr(&self) -> Result<SocketAddr, Error> {
        Ok(self.addr)
    }

    fn frame_bytes_max(&self) -> usize {
        16 << 20
    }

    fn set_peer(&self, peer: NodeId, addr: SocketAddr) {
        lock(&self.peers).insert(peer, addr);
    }

    fn peer_addr(&self, peer: NodeId) -> Option<SocketAddr> {
        lock(&self.peers).get(&peer).copied()
    }

    fn register(&self, service: Service, handler: Arc<dyn Handler>) {
        lock(&self.handlers).insert(service, handler);
    }

    fn unregister(&self, service: Service) {
        lock(&self.handlers).remove(&service);
    }

    fn stats(&self) -> TransportStats {
        TransportStats::default()
    }

    fn call(
        &self,
        peer: NodeId,
        service: Service,
        payload: Vec<u8>,
        timeout: Duration,
    ) -> LinkFuture<'_, Result<Vec<u8>, Error>> {
        let rx = self.net.send(self.node, peer, service, payload);
        Box::pin(async move {
            match tokio::time::timeout(timeout, rx).await {
                Ok(Ok(Ok(body))) => Ok(body),
                Ok(Ok(Err(message))) => Err(Error::Remote { peer, message }),
                Ok(Err(_)) => Err(Error::Unreachable {
                    peer,
                    reason: "connection refused (simulated)".into(),
                }),
                Err(_) => Err(Error::Timeout {
                    peer,
                    waited_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
                }),
            }
        })
    }

    fn introduce(
        &self,
        addr: SocketAddr,
        service: Service,
        payload: Vec<u8>,
        timeout: Duration,
    ) -> LinkFuture<'_, Result<(NodeId, Vec<u8>), Error>> {
        Box::pin(async move {
            let peer = self.net.node_at(addr).ok_or_else(|| Error::Unreachable {
                peer: NodeId(0),
                reason: format!("nothing listens at {addr}"),
            })?;
            self.set_peer(peer, addr);
            let body = self.call(peer, service, payload, timeout).await?;
            Ok((peer, body))
        })
    }

    fn shutdown(&self) -> LinkFuture<'_, ()> {
        lock(&self.handlers).clear();
        Box::pin(async {})
    }
}
