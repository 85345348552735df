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
#[derive(Debug, Clone)]
pub struct PeerClient {
    target: u64,
    link: Option<(Transport, String)>,
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
        PeerClient { target, link }
    }
}

impl PeerClient {
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
        let payload = wire::encode(&RaftRequest {
            group: group.clone(),
            rpc,
        })
        .map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
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
        let trimmed = fit_entries(&mut rpc, self.frame_bytes_max());
        match self
            .send(RaftRpc::AppendEntries(rpc), option.hard_ttl())
            .await?
        {
            RaftReply::AppendEntries(Ok(AppendEntriesResponse::Success)) => match trimmed {
                Some(last) => Ok(AppendEntriesResponse::PartialSuccess(last)),
                None => Ok(AppendEntriesResponse::Success),
            },
            RaftReply::AppendEntries(Ok(response)) => Ok(response),
            RaftReply::AppendEntries(Err(e)) => {
                Err(RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            other => Err(Self::unexpected(&other)),
        }
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
