//! The cluster's active version (`proto::version`) in the meta group: one row, absent until a
//! version after the first is activated. Activation and members' records are checked against
//! each other here, in the replicated apply, so every replica decides alike.

use super::{counter, set_counter, NODE_PREFIX};
use cluster::storage::{Batch, Tree};
use proto::record::{self, MetaOutcome, NodeEntry};
use proto::version::ClusterVersion;

const ACTIVE_KEY: &[u8] = b"cv";

/// The active version.
pub(super) fn active(state: &Tree) -> ClusterVersion {
    match counter(state, ACTIVE_KEY) {
        0 => ClusterVersion::FIRST,
        n => ClusterVersion(u32::try_from(n).unwrap_or(u32::MAX)),
    }
}

/// Raises the active version to `version` if every recorded member's binary serves it.
pub(super) fn activate(state: &Tree, batch: &mut Batch, version: ClusterVersion) -> MetaOutcome {
    if version <= active(state) {
        return MetaOutcome::Exists;
    }
    let members = state.scan_prefix(NODE_PREFIX).filter_map(|kv| kv.ok());
    let unchecked = engine::mutation::active(engine::mutation::Mutation::ActivateUnserved);
    for (_, bytes) in members.filter(|_| !unchecked) {
        let Ok(entry) = record::decode::<NodeEntry>(&bytes) else {
            continue;
        };
        if let Some(refused) = unserved(&entry, version) {
            return refused;
        }
    }
    set_counter(batch, ACTIVE_KEY, u64::from(version.0));
    MetaOutcome::Applied
}

/// Whether `entry` may be recorded: a member that reports a binary must serve the active
/// version (one that has not reported yet is recorded, and holds activations back).
pub(super) fn admits(state: &Tree, entry: &NodeEntry) -> Option<MetaOutcome> {
    entry.binary.as_ref()?;
    unserved(entry, active(state))
}

/// `Unserved` when `entry`'s binary does not serve `version` (or is not known).
fn unserved(entry: &NodeEntry, version: ClusterVersion) -> Option<MetaOutcome> {
    let supports = entry.binary.as_ref().map(|b| b.supports);
    match supports {
        Some(range) if range.contains(version) => None,
        _ => Some(MetaOutcome::Unserved {
            node: entry.id,
            supports,
            active: version,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{apply_one, replica};
    use proto::record::{MetaCommand, MetaOutcome, NodeEntry};
    use proto::version::{Binary, ClusterVersion, VersionRange};
    use proto::NodeId;

    fn member(id: u64, max: Option<u32>) -> MetaCommand {
        MetaCommand::PutNode(NodeEntry {
            id: NodeId(id),
            addr: format!("127.0.0.1:{id}"),
            draining: false,
            binary: max.map(|max| Binary {
                release: format!("0.{max}.0"),
                supports: VersionRange {
                    min: ClusterVersion(1),
                    max: ClusterVersion(max),
                },
            }),
        })
    }

    fn activate(version: u32) -> MetaCommand {
        MetaCommand::ActivateVersion {
            version: ClusterVersion(version),
        }
    }

    #[test]
    fn a_version_is_activated_only_once_every_member_serves_it_and_never_lowered() {
        let (_dir, state, meta) = replica();
        assert_eq!(meta.cluster_version(), ClusterVersion::FIRST);
        assert_eq!(apply_one(&state, member(1, Some(2))), MetaOutcome::Applied);
        assert_eq!(apply_one(&state, member(2, Some(1))), MetaOutcome::Applied);
        assert_eq!(apply_one(&state, member(3, None)), MetaOutcome::Applied);
        let refused = MetaOutcome::Unserved {
            node: NodeId(2),
            supports: Some(VersionRange {
                min: ClusterVersion(1),
                max: ClusterVersion(1),
            }),
            active: ClusterVersion(2),
        };
        assert_eq!(apply_one(&state, activate(2)), refused);
        assert_eq!(apply_one(&state, member(2, Some(2))), MetaOutcome::Applied);
        let unreported = apply_one(&state, activate(2));
        assert!(
            matches!(
                unreported,
                MetaOutcome::Unserved {
                    node: NodeId(3),
                    supports: None,
                    ..
                }
            ),
            "{unreported:?}"
        );
        assert_eq!(apply_one(&state, member(3, Some(3))), MetaOutcome::Applied);
        assert_eq!(apply_one(&state, activate(2)), MetaOutcome::Applied);
        assert_eq!(meta.cluster_version(), ClusterVersion(2));
        assert_eq!(apply_one(&state, activate(2)), MetaOutcome::Exists);
        assert_eq!(apply_one(&state, activate(1)), MetaOutcome::Exists);
        assert_eq!(meta.cluster_version(), ClusterVersion(2));
    }

    #[test]
    fn a_member_whose_binary_does_not_serve_the_active_version_is_not_recorded() {
        let (_dir, state, meta) = replica();
        assert_eq!(apply_one(&state, member(1, Some(2))), MetaOutcome::Applied);
        assert_eq!(apply_one(&state, activate(2)), MetaOutcome::Applied);
        let old = apply_one(&state, member(1, Some(1)));
        assert!(
            matches!(
                old,
                MetaOutcome::Unserved {
                    node: NodeId(1),
                    ..
                }
            ),
            "{old:?}"
        );
        let kept = meta
            .node(NodeId(1))
            .and_then(|n| n.binary)
            .map(|b| b.supports.max);
        assert_eq!(
            kept,
            Some(ClusterVersion(2)),
            "the refused record changed nothing"
        );
        // An operator adding a member names no binary: it keeps the one it reported.
        assert_eq!(apply_one(&state, member(1, None)), MetaOutcome::Applied);
        assert!(meta.node(NodeId(1)).is_some_and(|n| n.binary.is_some()));
    }

    #[test]
    fn a_member_record_written_before_cluster_versions_reads_as_not_reported() {
        let old = br#"{"id":2,"addr":"127.0.0.1:9082","draining":false}"#;
        let bytes = [proto::record::FORMAT_VERSION.to_le_bytes().as_slice(), old].concat();
        let entry: NodeEntry = proto::record::decode(&bytes).expect("reads");
        assert_eq!(entry.binary, None);
        assert_eq!(entry.addr, "127.0.0.1:9082");
    }
}
