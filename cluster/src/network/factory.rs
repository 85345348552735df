//! `Network`: openraft's network factory for one group, and `PeerClient`, the client it hands out
//! per peer. With a [`RaftRouter`] the clients send AppendEntries, Vote and InstallSnapshot
//! (openraft 0.9's default `full_snapshot` cuts a snapshot into `install_snapshot` chunks) as
//! [`Service::Raft`] calls over the node's one connection per peer, the group named in the
//! payload. Without one (the single-node default) every peer is unreachable, which a one-voter
//! group never notices.
//!
//! Peer addresses come from the membership (`BasicNode::addr`, a socket address): each new client
//! records its target's address in the transport, so membership changes need no separate address
//! update. Not here: serving RPCs (see [`RaftRouter`]).

use super::router::RaftRouter;
use super::wire::{self, RaftReply, RaftRequest, RaftRpc, WireError};
use crate::error::Error;
use crate::transport::{Service, Transport};
use crate::types::TypeConfig;
use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{Backoff, RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::BasicNode;
use proto::NodeId;
use std::net::SocketAddr;
use std::time::Duration;

/// How long openraft waits before retrying an unreachable peer. Short, so a restarted peer or a
/// group that opens a moment later is caught up quickly; each retry is one cheap failed call.
const UNREACHABLE_BACKOFF: Duration = Duration::from_millis(200);
/// How recent a peer's acknowledgement of the same vote and log position must be for a
/// commit-only AppendEntries to be answered here instead of sent (see [`PeerClient`]).
const ACK_FRESH: Duration = Duration::from_millis(10);
/// How long a commit-only AppendEntries answered here waits for a write to carry its commit
/// index before it is sent after all: the most a follower's apply lags for it.
const COMMIT_DEFER: Duration = Duration::from_millis(20);

/// Why a peer cannot be reached: there is no transport (single-voter groups only).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "node {target} is unreachable: this node runs without a peer transport (single-voter groups only)"
)]
pub struct NoTransport {
    /// The peer openraft tried to reach.
    pub target: u64,
}

/// Why a peer did not serve the group: it is not open there (yet).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("group {group} is not open on node {target}")]
pub struct NoGroup {
    pub group: String,
    pub target: u64,
}

/// The network factory openraft asks for a client per peer.
#[derive(Debug, Clone, Default)]
pub struct Network {
    /// The node's router and this group's name; `None` when the node has no transport.
    link: Option<(RaftRouter, String)>,
}

impl Network {
    /// A network for which every peer is unreachable (single-node mode).
    pub fn unreachable() -> Self {
        Network { link: None }
    }

    /// The network of group `group` over the router's transport.
    pub fn over(router: RaftRouter, group: impl Into<String>) -> Self {
        Network {
            link: Some((router, group.into())),
        }
    }
}

/// A client to one peer for one group.
///
/// openraft 0.9's replication stream follows every AppendEntries that a quorum acknowledged with
/// an empty one that only says the commit index moved: one more round trip per follower for every
/// write that no other write follows at once. The stream's client answers such a call itself
/// when the follower acknowledged the same vote and log position within [`ACK_FRESH`]: the answer
/// the follower would give (nothing of its log changes), and the commit index goes with the next
/// write, or is sent on its own after [`COMMIT_DEFER`] if no write came by then. Only the stream's
/// own client knows such a recent acknowledgement: openraft's leadership checks (read index)
/// make a new client per call, so their heartbeats always reach the follower.
#[derive(Debug)]
pub struct PeerClient {
    target: u64,
    link: Option<(Transport, String)>,
    /// What the follower last acknowledged through this client.
    acked: Option<Acked>,
    /// The commit-only call answered here and not yet carried by a later one.
    deferred: Option<tokio::task::AbortHandle>,
    /// [`ACK_FRESH`] and [`COMMIT_DEFER`] (tests widen them).
    ack_fresh: Duration,
    commit_defer: Duration,
}

/// A follower's acknowledgement of an AppendEntries.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Acked {
    /// When the acknowledged call was sent (the follower answered after that).
    sent: tokio::time::Instant,
    vote: openraft::Vote<u64>,
    /// The last log id the follower's log matched after it.
    matched: Option<crate::types::LogId>,
}

impl Drop for PeerClient {
    fn drop(&mut self) {
        if let Some(task) = self.deferred.take() {
            task.abort();
        }
    }
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = PeerClient;

    async fn new_client(&mut self, target: u64, node: &BasicNode) -> PeerClient {
        let link = self.link.as_ref().map(|(router, group)| {
            let transport = router.transport().clone();
            match node.addr.parse::<SocketAddr>() {
                Ok(addr) => transport.set_peer(NodeId(target), addr),
                Err(_) if node.addr.is_empty() => {}
                Err(e) => {
                    tracing::warn!(group = %group, target, addr = %node.addr, error = %e, "membership names a peer address that is not ip:port")
                }
            }
            (transport, group.clone())
        });
        PeerClient::new(target, link)
    }
}

/// Encodes one Raft call of `group` for the transport.
fn request_payload(group: &str, rpc: RaftRpc) -> Result<Vec<u8>, WireError> {
    wire::encode(&RaftRequest {
        group: group.to_owned(),
        rpc,
    })
}

impl PeerClient {
    fn new(target: u64, link: Option<(Transport, String)>) -> Self {
        PeerClient {
            target,
            link,
            acked: None,
            deferred: None,
            ack_fresh: ACK_FRESH,
            commit_defer: COMMIT_DEFER,
        }
    }

    /// Whether `rpc` only repeats what the follower acknowledged a moment ago, plus a commit index.
    fn only_commit(&self, rpc: &AppendEntriesRequest<TypeConfig>) -> bool {
        rpc.entries.is_empty()
            && self.acked.as_ref().is_some_and(|a| {
                a.vote == rpc.vote
                    && a.matched == rpc.prev_log_id
                    && a.sent.elapsed() <= self.ack_fresh
            })
    }

    /// Sends the commit-only `rpc` after [`COMMIT_DEFER`] unless a later call carries it first
    /// (which aborts this one). The answer is not needed: the follower's log does not change.
    fn defer(&mut self, rpc: AppendEntriesRequest<TypeConfig>, timeout: Duration) {
        if let Some(earlier) = self.deferred.take() {
            earlier.abort();
        }
        let Some((transport, group)) = &self.link else {
            return;
        };
        let Ok(payload) = request_payload(group, RaftRpc::AppendEntries(rpc)) else {
            return;
        };
        let (transport, target, defer) =
            (transport.clone(), NodeId(self.target), self.commit_defer);
        let task = tokio::spawn(async move {
            tokio::time::sleep(defer).await;
            let _ = transport
                .call(target, Service::Raft, payload, timeout)
                .await;
        });
        self.deferred = Some(task.abort_handle());
    }

    /// Sends one RPC and returns the reply, mapping transport failures to openraft's RPC errors:
    /// a peer that cannot be reached (or does not run the group) is `Unreachable` (openraft backs
    /// off), anything else is a `Network` error (openraft retries).
    async fn send<E: std::error::Error>(
        &self,
        rpc: RaftRpc,
        timeout: Duration,
    ) -> Result<RaftReply, RPCError<u64, BasicNode, E>> {
        let Some((transport, group)) = &self.link else {
            return Err(RPCError::Unreachable(Unreachable::new(&NoTransport {
                target: self.target,
            })));
        };
        let payload =
            request_payload(group, rpc).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        let answer = transport
            .call(NodeId(self.target), Service::Raft, payload, timeout)
            .await
            .map_err(|e| match e {
                Error::Unreachable { .. } | Error::TransportClosed => {
                    RPCError::Unreachable(Unreachable::new(&e))
                }
                other => RPCError::Network(NetworkError::new(&other)),
            })?;
        let reply: RaftReply =
            wire::decode(&answer).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        if let RaftReply::NoGroup = reply {
            return Err(RPCError::Unreachable(Unreachable::new(&NoGroup {
                group: group.clone(),
                target: self.target,
            })));
        }
        Ok(reply)
    }

    fn unexpected<E: std::error::Error>(reply: &RaftReply) -> RPCError<u64, BasicNode, E> {
        RPCError::Network(NetworkError::new(&WireError(format!(
            "reply does not match the request: {reply:?}"
        ))))
    }

    /// The largest request payload the transport carries.
    fn frame_bytes_max(&self) -> usize {
        self.link
            .as_ref()
            .map_or(usize::MAX, |(transport, _)| transport.frame_bytes_max())
    }
}

/// Trims `rpc.entries` until the encoded request fits in `max` bytes (at least one entry stays);
/// returns the last log id kept when entries were dropped. openraft 0.9 bounds an AppendEntries
/// by entry count only, so a batch of large entries could exceed the frame; sending a prefix
/// and answering `PartialSuccess` lets openraft send the rest next.
fn fit_entries(
    rpc: &mut AppendEntriesRequest<TypeConfig>,
    max: usize,
) -> Option<Option<crate::types::LogId>> {
    // Everything but the entries: vote, log ids, group name (bounded by the router's names).
    const ENVELOPE_BYTES_BOUND: usize = 1024;
    let bounds: Vec<usize> = rpc.entries.iter().map(wire::entry_bytes_bound).collect();
    let total: usize = ENVELOPE_BYTES_BOUND + bounds.iter().sum::<usize>();
    if total <= max {
        return None;
    }
    let mut size = ENVELOPE_BYTES_BOUND;
    let keep = bounds
        .iter()
        .take_while(|b| {
            size += **b;
            size <= max
        })
        .count()
        .max(1);
    rpc.entries.truncate(keep);
    Some(rpc.entries.last().map(|e| e.log_id))
}

impl RaftNetwork<TypeConfig> for PeerClient {
    async fn append_entries(
        &mut self,
        mut rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<u64>, RPCError<u64, BasicNode, RaftError<u64>>> {
        if self.only_commit(&rpc) {
            self.defer(rpc, option.hard_ttl());
            return Ok(AppendEntriesResponse::Success);
        }
        // This call carries the commit index of any deferred one (openraft's is monotonic).
        if let Some(deferred) = self.deferred.take() {
            deferred.abort();
        }
        let trimmed = fit_entries(&mut rpc, self.frame_bytes_max());
        let sent = tokio::time::Instant::now();
        let vote = rpc.vote;
        let last = rpc.entries.last().map(|e| e.log_id).or(rpc.prev_log_id);
        self.acked = None;
        let response = match self
            .send(RaftRpc::AppendEntries(rpc), option.hard_ttl())
            .await?
        {
            RaftReply::AppendEntries(Ok(AppendEntriesResponse::Success)) => match trimmed {
                Some(last) => AppendEntriesResponse::PartialSuccess(last),
                None => AppendEntriesResponse::Success,
            },
            RaftReply::AppendEntries(Ok(response)) => response,
            RaftReply::AppendEntries(Err(e)) => {
                return Err(RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            other => return Err(Self::unexpected(&other)),
        };
        let matched = match &response {
            AppendEntriesResponse::Success => Some(last),
            AppendEntriesResponse::PartialSuccess(upto) => Some(*upto),
            _ => None,
        };
        self.acked = matched.map(|matched| Acked {
            sent,
            vote,
            matched,
        });
        Ok(response)
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<u64>,
        RPCError<u64, BasicNode, RaftError<u64, InstallSnapshotError>>,
    > {
        match self
            .send(RaftRpc::InstallSnapshot(rpc), option.hard_ttl())
            .await?
        {
            RaftReply::InstallSnapshot(Ok(response)) => Ok(response),
            RaftReply::InstallSnapshot(Err(e)) => {
                Err(RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            other => Err(Self::unexpected(&other)),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<u64>,
        option: RPCOption,
    ) -> Result<VoteResponse<u64>, RPCError<u64, BasicNode, RaftError<u64>>> {
        match self.send(RaftRpc::Vote(rpc), option.hard_ttl()).await? {
            RaftReply::Vote(Ok(response)) => Ok(response),
            RaftReply::Vote(Err(e)) => Err(RPCError::RemoteError(RemoteError::new(self.target, e))),
            other => Err(Self::unexpected(&other)),
        }
    }

    fn backoff(&self) -> Backoff {
        Backoff::new(std::iter::repeat(UNREACHABLE_BACKOFF))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::{Handler, Link, LinkFuture, TransportStats};
    use crate::types::{Entry, LogId, Request};
    use openraft::{CommittedLeaderId, EntryPayload, Vote};
    use std::sync::{Arc, Mutex};

    /// A link that answers every AppendEntries with success and records what each carried.
    #[derive(Default)]
    struct Recording {
        /// Per call: entries carried and the commit index.
        calls: Mutex<Vec<(usize, Option<LogId>)>>,
    }

    impl Recording {
        fn calls(&self) -> Vec<(usize, Option<LogId>)> {
            self.calls.lock().expect("lock").clone()
        }
    }

    impl Link for Recording {
        fn node(&self) -> NodeId {
            NodeId(1)
        }
        fn local_addr(&self) -> Result<SocketAddr, Error> {
            Ok("127.0.0.1:1".parse().expect("addr"))
        }
        fn frame_bytes_max(&self) -> usize {
            1 << 20
        }
        fn set_peer(&self, _: NodeId, _: SocketAddr) {}
        fn peer_addr(&self, _: NodeId) -> Option<SocketAddr> {
            None
        }
        fn register(&self, _: Service, _: Arc<dyn Handler>) {}
        fn unregister(&self, _: Service) {}
        fn stats(&self) -> TransportStats {
            TransportStats::default()
        }
        fn call(
            &self,
            _: NodeId,
            _: Service,
            payload: Vec<u8>,
            _: Duration,
        ) -> LinkFuture<'_, Result<Vec<u8>, Error>> {
            Box::pin(async move {
                let request: RaftRequest = wire::decode(&payload).expect("a Raft request");
                let RaftRpc::AppendEntries(rpc) = request.rpc else {
                    panic!("only AppendEntries here");
                };
                self.calls
                    .lock()
                    .expect("lock")
                    .push((rpc.entries.len(), rpc.leader_commit));
                Ok(wire::encode(&RaftReply::AppendEntries(Ok(
                    AppendEntriesResponse::Success,
                )))
                .expect("encode"))
            })
        }
        fn introduce(
            &self,
            _: SocketAddr,
            _: Service,
            _: Vec<u8>,
            _: Duration,
        ) -> LinkFuture<'_, Result<(NodeId, Vec<u8>), Error>> {
            Box::pin(async { Err(Error::TransportClosed) })
        }
        fn shutdown(&self) -> LinkFuture<'_, ()> {
            Box::pin(async {})
        }
    }

    fn log_id(index: u64) -> LogId {
        LogId::new(CommittedLeaderId::new(2, 1), index)
    }

    fn append(
        prev: u64,
        entries: u64,
        commit: Option<u64>,
        vote: Vote<u64>,
    ) -> AppendEntriesRequest<TypeConfig> {
        AppendEntriesRequest {
            vote,
            prev_log_id: Some(log_id(prev)),
            entries: (prev + 1..=prev + entries)
                .map(|i| Entry {
                    log_id: log_id(i),
                    payload: EntryPayload::Normal(Request(vec![vec![1, 2, 3]])),
                })
                .collect(),
            leader_commit: commit.map(log_id),
        }
    }

    async fn wait_for_calls(link: &Recording, n: usize) -> Vec<(usize, Option<LogId>)> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let calls = link.calls();
            if calls.len() >= n || tokio::time::Instant::now() >= deadline {
                return calls;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    #[tokio::test]
    async fn a_commit_only_append_after_a_fresh_ack_is_answered_here_and_sent_later() {
        let link = Arc::new(Recording::default());
        let transport = Transport::over(link.clone());
        let mut client = PeerClient::new(2, Some((transport.clone(), "p0".into())));
        client.ack_fresh = Duration::from_secs(60);
        client.commit_defer = Duration::from_millis(50);
        let vote = Vote::new_committed(2, 1);
        let option = RPCOption::new(Duration::from_secs(1));

        let r = client.append_entries(append(4, 2, Some(4), vote), option.clone());
        assert_eq!(r.await.expect("sent"), AppendEntriesResponse::Success);
        assert_eq!(link.calls(), vec![(2, Some(log_id(4)))]);

        // Only the commit index moved: answered at once, nothing sent yet.
        let r = client.append_entries(append(6, 0, Some(6), vote), option.clone());
        assert_eq!(r.await.expect("answered"), AppendEntriesResponse::Success);
        assert_eq!(link.calls().len(), 1, "the commit waits for the next write");
        // No write came: the commit goes on its own.
        let calls = wait_for_calls(&link, 2).await;
        assert_eq!(calls, vec![(2, Some(log_id(4))), (0, Some(log_id(6)))]);

        // A write carries the commit of a deferred call, which is then dropped.
        let r = client.append_entries(append(6, 0, Some(6), vote), option.clone());
        assert_eq!(r.await.expect("answered"), AppendEntriesResponse::Success);
        let r = client.append_entries(append(6, 1, Some(6), vote), option.clone());
        assert_eq!(r.await.expect("sent"), AppendEntriesResponse::Success);
        assert_eq!(link.calls().len(), 3);

        // Anything else is sent: another position, another vote, and every call of a new client
        // (openraft's leadership checks make one per call).
        for rpc in [
            append(3, 0, Some(7), vote),
            append(7, 0, Some(7), Vote::new_committed(3, 1)),
        ] {
            let r = client.append_entries(rpc, option.clone());
            assert_eq!(r.await.expect("sent"), AppendEntriesResponse::Success);
        }
        let mut fresh = PeerClient::new(2, Some((transport, "p0".into())));
        let r = fresh.append_entries(append(7, 0, Some(7), vote), option.clone());
        assert_eq!(r.await.expect("sent"), AppendEntriesResponse::Success);
        assert_eq!(link.calls().len(), 6, "{:?}", link.calls());
        // The deferred call the write carried never goes (this waits only to see nothing more).
        tokio::time::sleep(client.commit_defer * 4).await;
        assert_eq!(link.calls().len(), 6, "{:?}", link.calls());
    }
}
