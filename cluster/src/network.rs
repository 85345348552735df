//! The Raft network of Baton groups. In this slice every group has one voter, so no message ever
//! leaves the node: [`Network`] hands out clients that answer `Unreachable` for any peer. The QUIC
//! transport (DESIGN §6: one connection per peer, multiplexing the Raft RPC of all groups) replaces
//! this file's clients without touching the stores or the group.

use crate::types::TypeConfig;
use openraft::error::{InstallSnapshotError, RPCError, RaftError, Unreachable};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::BasicNode;

/// Why a peer cannot be reached: there is no transport yet.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "node {target} is unreachable: this build has no peer transport (single-voter groups only)"
)]
pub struct NoTransport {
    /// The peer openraft tried to reach.
    pub target: u64,
}

/// The network factory openraft asks for a client per peer.
#[derive(Debug, Clone, Default)]
pub struct Network;

/// A client to one peer; every call fails with `Unreachable`.
#[derive(Debug, Clone)]
pub struct PeerClient {
    target: u64,
}

impl PeerClient {
    fn unreachable<E: std::error::Error>(&self) -> RPCError<u64, BasicNode, E> {
        RPCError::Unreachable(Unreachable::new(&NoTransport {
            target: self.target,
        }))
    }
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = PeerClient;

    async fn new_client(&mut self, target: u64, _node: &BasicNode) -> PeerClient {
        PeerClient { target }
    }
}

impl RaftNetwork<TypeConfig> for PeerClient {
    async fn append_entries(
        &mut self,
        _rpc: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<u64>, RPCError<u64, BasicNode, RaftError<u64>>> {
        Err(self.unreachable())
    }

    async fn install_snapshot(
        &mut self,
        _rpc: InstallSnapshotRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<u64>,
        RPCError<u64, BasicNode, RaftError<u64, InstallSnapshotError>>,
    > {
        Err(self.unreachable())
    }

    async fn vote(
        &mut self,
        _rpc: VoteRequest<u64>,
        _option: RPCOption,
    ) -> Result<VoteResponse<u64>, RPCError<u64, BasicNode, RaftError<u64>>> {
        Err(self.unreachable())
    }
}
