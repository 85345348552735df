//! The Raft network of Baton groups: openraft's `RaftNetworkFactory`/`RaftNetwork`
//! over the peer [`crate::transport`], for every group of the node multiplexed over one
//! connection per peer, plus the [`RaftRouter`] that delivers incoming RPCs to the right group.
//!
//! - [`Network`] / [`PeerClient`] (`factory.rs`): the client side, one client per (group, peer).
//! - [`RaftRouter`] (`router.rs`): the server side and registry of open groups, owned by the
//!   node's transport handle (no process-global registry).
//! - [`wire`]: the payload format of a Raft call.
//!
//! Without a transport (the single-node default) [`Network::unreachable`] answers "unreachable"
//! for every peer, which a single-voter group never asks about. Not here: membership decisions
//! (see [`crate::Group`]) or storage.

pub mod factory;
pub mod router;
pub mod wire;

pub use factory::{Network, NoGroup, NoTransport, PeerClient};
pub use router::RaftRouter;
