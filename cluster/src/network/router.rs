//! `RaftRouter`: the registry of the Raft groups open on this node, attached to the node's
//! [`Transport`]. It serves [`Service::Raft`]: an incoming RPC names its group, and the router
//! hands it to that group's openraft instance. Groups register when they open and leave when they
//! shut down; an RPC for a group that is not open is answered "no such group", which the sender
//! treats as "unreachable" and retries after a back-off.
//!
//! The router belongs to one node's transport (no process-global registry): a test can run
//! several nodes, each with its own transport and router, in one process. It also checks that an
//! RPC comes from the node it names (the leader or candidate in its vote) — the transport
//! authenticated the peer, so a node cannot send Raft messages in another node's name.
//!
//! Not here: the client side of the RPCs (see [`super::Network`]).

use super::wire::{self, RaftReply, RaftRequest, RaftRpc};
use crate::transport::{Service, Transport};
use crate::types::TypeConfig;
use openraft::Raft;
use proto::NodeId;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, Weak};

/// Cheap cloneable handle to the router of one node.
#[derive(Clone)]
pub struct RaftRouter {
    inner: Arc<Inner>,
}

struct Inner {
    transport: Transport,
    /// Open groups by name, with the id of their registration (so a late deregistration of a
    /// closed instance cannot remove its reopened successor).
    groups: RwLock<BTreeMap<String, (u64, Raft<TypeConfig>)>>,
    /// Source of registration ids.
    next: AtomicU64,
}

impl PartialEq for RaftRouter {
    /// Two handles are equal when they are the same router.
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}
impl Eq for RaftRouter {}

impl std::fmt::Debug for RaftRouter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RaftRouter")
            .field("node", &self.inner.transport.node())
            .field("groups", &self.groups())
            .finish()
    }
}

impl RaftRouter {
    /// A router serving [`Service::Raft`] on `transport` (replacing any earlier Raft handler).
    pub fn new(transport: Transport) -> RaftRouter {
        let inner = Arc::new(Inner {
            transport: transport.clone(),
            groups: RwLock::new(BTreeMap::new()),
            next: AtomicU64::new(1),
        });
        // The handler holds the router weakly: the transport must not keep the router (and,
        // through it, every group's openraft instance) alive.
        let weak: Weak<Inner> = Arc::downgrade(&inner);
        transport.register(Service::Raft, move |peer: NodeId, payload: Vec<u8>| {
            let weak = weak.clone();
            async move {
                match weak.upgrade() {
                    Some(inner) => inner.serve(peer, payload).await,
                    None => Err("this node's raft router is gone".to_string()),
                }
            }
        });
        RaftRouter { inner }
    }

    /// The transport the router serves on and its groups call through.
    pub fn transport(&self) -> &Transport {
        &self.inner.transport
    }

    /// This node.
    pub fn node(&self) -> NodeId {
        self.inner.transport.node()
    }

    /// Names of the groups open on this node, ascending.
    pub fn groups(&self) -> Vec<String> {
        read(&self.inner.groups).keys().cloned().collect()
    }

    /// Routes RPCs for group `name` to `raft` until the returned registration is dropped.
    pub(crate) fn register(&self, name: &str, raft: Raft<TypeConfig>) -> Registration {
        let id = self.inner.next.fetch_add(1, Ordering::Relaxed);
        let previous = write(&self.inner.groups).insert(name.to_string(), (id, raft));
        if previous.is_some() {
            tracing::warn!(node = %self.node(), group = name, "a group with this name was already open; routing to the new one");
        }
        Registration {
            router: Arc::downgrade(&self.inner),
            name: name.to_string(),
            id,
        }
    }
}

fn read<T>(m: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    m.read().unwrap_or_else(|p| p.into_inner())
}
fn write<T>(m: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    m.write().unwrap_or_else(|p| p.into_inner())
}

impl Inner {
    async fn serve(&self, peer: NodeId, payload: Vec<u8>) -> Result<Vec<u8>, String> {
        let request: RaftRequest = wire::decode(&payload).map_err(|e| e.to_string())?;
        let sender = request.rpc.sender();
        if sender != peer.0 {
            return Err(format!(
                "node {peer} sent a raft message in the name of node {sender}; refused"
            ));
        }
        let raft = read(&self.groups)
            .get(&request.group)
            .map(|(_, raft)| raft.clone());
        let reply = match raft {
            None => RaftReply::NoGroup,
            Some(raft) => match request.rpc {
                RaftRpc::AppendEntries(rpc) => {
                    RaftReply::AppendEntries(raft.append_entries(rpc).await)
                }
                RaftRpc::Vote(rpc) => {
                    let candidate_log = rpc.last_log_id;
                    let reply = raft.vote(rpc).await;
                    if reply
                        .as_ref()
                        .is_ok_and(|r| refused_as_behind(candidate_log, r))
                    {
                        // See `refused_as_behind`.
                        raft.runtime_config().elect(true);
                    }
                    RaftReply::Vote(reply)
                }
                RaftRpc::InstallSnapshot(rpc) => {
                    RaftReply::InstallSnapshot(raft.install_snapshot(rpc).await)
                }
            },
        };
        wire::encode(&reply).map_err(|e| e.to_string())
    }
}

/// Whether this voter refused a candidate because the candidate's log is behind its own; the
/// voter then turns its elections back on. A leadership transfer turns off the elections of every
/// voter but its target (see the node's `hold_elections`); a target that missed the last entries
/// can never win, and without this the group would stay leaderless until the hold ran out.
/// Elections are on by default, so for a voter that holds none this changes nothing.
fn refused_as_behind(
    candidate_log: Option<openraft::LogId<u64>>,
    reply: &openraft::raft::VoteResponse<u64>,
) -> bool {
    !reply.vote_granted && candidate_log < reply.last_log_id
}

/// A group's place in the router; dropping it removes the group (if it is still this one).
pub(crate) struct Registration {
    router: Weak<Inner>,
    name: String,
    id: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Some(router) = self.router.upgrade() {
            let mut groups = write(&router.groups);
            if groups.get(&self.name).map(|(id, _)| *id) == Some(self.id) {
                groups.remove(&self.name);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::refused_as_behind;
    use openraft::raft::VoteResponse;
    use openraft::{CommittedLeaderId, LogId, Vote};

    fn log(term: u64, index: u64) -> Option<LogId<u64>> {
        Some(LogId::new(CommittedLeaderId::new(term, 4), index))
    }

    fn reply(granted: bool, last: Option<LogId<u64>>) -> VoteResponse<u64> {
        VoteResponse::new(Vote::new(10, 4), last, granted)
    }

    #[test]
    fn a_candidate_refused_for_its_shorter_log_is_behind() {
        assert!(refused_as_behind(log(10, 266), &reply(false, log(10, 270))));
        assert!(refused_as_behind(None, &reply(false, log(1, 1))));
        assert!(refused_as_behind(log(9, 300), &reply(false, log(10, 270))));
    }

    #[test]
    fn a_vote_granted_or_refused_for_another_reason_is_not() {
        assert!(!refused_as_behind(log(10, 266), &reply(true, log(10, 266))));
        assert!(!refused_as_behind(
            log(10, 270),
            &reply(false, log(10, 270))
        ));
        assert!(!refused_as_behind(
            log(10, 271),
            &reply(false, log(10, 270))
        ));
    }
}
