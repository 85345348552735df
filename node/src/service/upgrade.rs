//! Upgrades: the cluster's active version (`proto::version`), what each member's binary serves,
//! and activation, by an operator (`batonctl upgrade finalize`) or by the meta leader itself once
//! every member serves a newer version (in its membership rounds), unless it holds
//! (`--hold-cluster-version`).
//!
//! The meta apply decides: it refuses an activation while a recorded member does not serve the
//! version. This service also waits for members not recorded yet (initial members that have not
//! registered, replicas of the meta group), which the apply cannot see.

use super::Loops;
use crate::error::{Error, Result};
use crate::host::{read, Host};
use proto::record::{MetaCommand, MetaOutcome};
use proto::version::{Binary, ClusterVersion, VersionRange};
use proto::NodeId;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// How often a node alone looks for a version to activate.
const ROUND_MS: u64 = 1_000;

/// The upgrade service.
pub struct Upgrade {
    host: Arc<Host>,
    pub(crate) loops: Loops,
}

/// One member as `GET /api/admin/version` shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MemberVersion {
    pub id: u64,
    /// Its peer address (none for the embedded node).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub addr: Option<String>,
    /// Its binary, as it reported it (none until it has).
    pub binary: Option<Binary>,
    /// Whether its binary serves the active version.
    pub serves_active: bool,
}

/// The cluster's versions (`GET /api/admin/version`, `batonctl upgrade status`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VersionStatus {
    /// The version whose formats the cluster writes.
    pub active: ClusterVersion,
    /// The newest version every member serves (none while a member has not reported its
    /// binary): what activation would raise the cluster to.
    pub newest: Option<ClusterVersion>,
    /// Whether the node answering leaves activation to an operator.
    pub held: bool,
    /// The node answering.
    pub node: u64,
    pub members: Vec<MemberVersion>,
}

impl Upgrade {
    /// The service. A node alone runs its own activation loop; in a cluster the meta leader's
    /// membership rounds activate ([`Upgrade::activate_newest`]).
    pub(crate) fn start(host: Arc<Host>) -> Arc<Self> {
        let upgrade = Arc::new(Self {
            host,
            loops: Loops::default(),
        });
        if upgrade.host.transport.is_none() {
            let weak = Arc::downgrade(&upgrade);
            upgrade.loops.add(tokio::spawn(run(weak)));
        }
        upgrade
    }

    /// The active version and each member's binary.
    pub fn status(&self) -> VersionStatus {
        let active = self.host.defs.cluster_version();
        let members: Vec<MemberVersion> = self
            .members()
            .into_iter()
            .map(|(id, (addr, binary))| MemberVersion {
                id: id.0,
                addr,
                serves_active: binary.as_ref().is_some_and(|b| b.supports.contains(active)),
                binary,
            })
            .collect();
        VersionStatus {
            active,
            newest: newest(members.iter().map(|m| m.binary.as_ref())),
            held: self.host.hold_version,
            node: self.host.node.0,
            members,
        }
    }

    /// The active version as this node's meta replica holds it, and what this node's binary
    /// serves.
    pub fn served(&self) -> (ClusterVersion, VersionRange) {
        (self.host.defs.cluster_version(), self.host.binary.supports)
    }

    /// Activates `version`, or the newest every member serves; answers the active version.
    pub async fn finalize(&self, version: Option<ClusterVersion>) -> Result<ClusterVersion> {
        let status = self.status();
        let target = match (version, status.newest) {
            (Some(v), _) => v,
            (None, Some(newest)) => newest,
            (None, None) => return Err(unreported(&status)),
        };
        if target < status.active {
            return Err(Error::Conflict(format!(
                "the cluster is at version {} already; a version cannot be rolled back once it is activated",
                status.active
            )));
        }
        if let Some(member) = status.members.iter().find(|m| !serves(m, target)) {
            return Err(refusal(MetaOutcome::Unserved {
                node: NodeId(member.id),
                supports: member.binary.as_ref().map(|b| b.supports),
                active: target,
            }));
        }
        self.activate(target).await?;
        // The local replica may trail the meta leader that applied it.
        self.host.catch_up_meta().await?;
        Ok(self.host.defs.cluster_version())
    }

    /// Proposes activating `version` (already active answers as done).
    async fn activate(&self, version: ClusterVersion) -> Result<()> {
        match self
            .host
            .propose_meta(MetaCommand::ActivateVersion { version })
            .await?
        {
            MetaOutcome::Applied | MetaOutcome::Exists => Ok(()),
            refused => Err(refusal(refused)),
        }
    }

    /// On the meta leader: activates the newest version every member serves, if newer, unless
    /// this node holds activation for an operator.
    pub(crate) async fn activate_newest(&self) {
        if self.host.hold_version || !self.host.meta.is_leader() {
            return;
        }
        let status = self.status();
        let Some(newest) = status.newest.filter(|n| *n > status.active) else {
            return;
        };
        match self.activate(newest).await {
            Ok(()) => {
                tracing::info!(version = %newest, "every member serves a newer cluster version; activated it")
            }
            Err(e) => {
                tracing::warn!(error = %e, version = %newest, "could not activate the cluster version")
            }
        }
    }

    /// Every member: those recorded in the meta group, those in the address book (initial
    /// members not registered yet) and the meta group's replicas; this node with its own binary.
    fn members(&self) -> BTreeMap<NodeId, (Option<String>, Option<Binary>)> {
        let mut members: BTreeMap<NodeId, (Option<String>, Option<Binary>)> = BTreeMap::new();
        if self.host.listen.is_some() {
            for (id, addr) in read(&self.host.members).iter() {
                members.insert(*id, (Some(addr.to_string()), None));
            }
            let meta = self.host.meta.status();
            for id in meta.voters.iter().chain(&meta.learners) {
                members.entry(*id).or_insert((None, None));
            }
        }
        for entry in self.host.defs.nodes() {
            members.insert(entry.id, (Some(entry.addr), entry.binary));
        }
        let own = members.entry(self.host.node).or_insert((None, None));
        own.0 = own.0.take().or(self.host.listen.map(|l| l.to_string()));
        own.1 = Some(self.host.binary.clone());
        members
    }
}

/// The activation loop of a node alone.
async fn run(inner: Weak<Upgrade>) {
    loop {
        tokio::time::sleep(Duration::from_millis(ROUND_MS)).await;
        let Some(inner) = inner.upgrade() else { return };
        inner.activate_newest().await;
    }
}

/// The newest version every binary serves: none while one is unknown or they share none.
fn newest<'a>(binaries: impl Iterator<Item = Option<&'a Binary>>) -> Option<ClusterVersion> {
    let mut max = None::<ClusterVersion>;
    let mut min = ClusterVersion::FIRST;
    let any = engine::mutation::active(engine::mutation::Mutation::ActivateUnserved);
    for binary in binaries {
        let supports = binary?.supports;
        let fold = if any { Ord::max } else { Ord::min };
        max = Some(max.map_or(supports.max, |m| fold(m, supports.max)));
        min = min.max(supports.min);
    }
    max.filter(|max| *max >= min)
}

fn serves(member: &MemberVersion, version: ClusterVersion) -> bool {
    member
        .binary
        .as_ref()
        .is_some_and(|b| b.supports.contains(version))
}

fn unreported(status: &VersionStatus) -> Error {
    let waiting: Vec<String> = status
        .members
        .iter()
        .filter(|m| m.binary.is_none())
        .map(|m| m.id.to_string())
        .collect();
    if waiting.is_empty() {
        return Error::Conflict("the members' binaries serve no cluster version in common".into());
    }
    Error::Unavailable(format!(
        "node(s) {} have not reported their binary yet; retry once they run",
        waiting.join(", ")
    ))
}

/// The error for a meta outcome that refused a version: which member does not serve which.
pub(crate) fn refusal(outcome: MetaOutcome) -> Error {
    match outcome {
        MetaOutcome::Unserved {
            node,
            supports: Some(supports),
            active,
        } => Error::Conflict(format!(
            "node {} serves cluster {supports}, not version {active}: run a binary that serves version {active} there first",
            node.0
        )),
        MetaOutcome::Unserved { node, active, .. } => Error::Conflict(format!(
            "node {} has not reported which cluster versions it serves; version {active} waits for it",
            node.0
        )),
        other => Error::Internal(format!("unexpected meta outcome {other:?}")),
    }
}

#[cfg(test)]
#[path = "upgrade_tests.rs"]
mod in_process;

#[cfg(test)]
mod tests {
    use super::*;

    fn binary(min: u32, max: u32) -> Binary {
        Binary {
            release: "x".into(),
            supports: VersionRange {
                min: ClusterVersion(min),
                max: ClusterVersion(max),
            },
        }
    }

    #[test]
    fn the_newest_version_is_the_highest_every_member_serves() {
        let (a, b, c) = (binary(1, 2), binary(1, 3), binary(2, 3));
        assert_eq!(
            newest([Some(&a), Some(&b)].into_iter()),
            Some(ClusterVersion(2))
        );
        assert_eq!(
            newest([Some(&b), Some(&c)].into_iter()),
            Some(ClusterVersion(3))
        );
        assert_eq!(newest([Some(&a), None].into_iter()), None);
        assert_eq!(
            newest([Some(&binary(1, 1)), Some(&binary(2, 2))].into_iter()),
            None
        );
    }
}
