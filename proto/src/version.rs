//! Cluster versions: which encodings a cluster may write.
//!
//! Every encoded format Baton keeps or sends (records, Raft commands, snapshots, peer and worker
//! frames) belongs to a cluster version. A binary serves a [`VersionRange`]: it reads every format
//! of every version in it, and writes the formats of the version the cluster has *activated*. The
//! meta group records the active version; it is raised only once every recorded member's binary
//! serves the new one (the meta apply checks it, so the check is deterministic), and never
//! lowered. Until then a newer binary writes the older formats, so a cluster can run two builds
//! side by side and roll back; after it, a binary whose range stops short refuses to start.
//!
//! [`FEATURES`] names the version each format change starts in.

use serde::{Deserialize, Serialize};

/// A cluster version: a set of formats every member can read. Version 1 is the first release's.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(transparent)]
pub struct ClusterVersion(pub u32);

impl ClusterVersion {
    /// The version of a cluster that never activated one: the first release's formats.
    pub const FIRST: ClusterVersion = ClusterVersion(1);
}

impl std::fmt::Display for ClusterVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The cluster versions a binary serves, both ends included.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionRange {
    pub min: ClusterVersion,
    pub max: ClusterVersion,
}

impl VersionRange {
    /// What this build serves.
    pub const BUILD: VersionRange = VersionRange {
        min: ClusterVersion::FIRST,
        max: ClusterVersion(2),
    };

    pub fn contains(&self, version: ClusterVersion) -> bool {
        self.min <= version && version <= self.max
    }
}

impl std::fmt::Display for VersionRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.min == self.max {
            write!(f, "version {}", self.min)
        } else {
            write!(f, "versions {} to {}", self.min, self.max)
        }
    }
}

/// A node's binary as members report it: its release and the versions it serves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Binary {
    /// The package version it was built as (`0.1.0`).
    pub release: String,
    pub supports: VersionRange,
}

impl Binary {
    /// This build, serving `supports` (the build's own range, or less: see the node's options).
    pub fn this_build(supports: VersionRange) -> Binary {
        Binary {
            release: env!("CARGO_PKG_VERSION").to_string(),
            supports,
        }
    }
}

/// A format change and the cluster version it starts in: until the cluster activates that
/// version, writers use the format before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Feature {
    pub name: &'static str,
    pub since: ClusterVersion,
}

impl Feature {
    /// Whether a cluster at `active` writes this format.
    pub fn active(&self, active: ClusterVersion) -> bool {
        active >= self.since
    }
}

/// A task record carries its task definition's rate limit (`rateLimitPerFrequency`,
/// `rateLimitFrequencyInSeconds`), as Conductor's tasks do.
pub const TASK_RATE_LIMITS: Feature = Feature {
    name: "task-rate-limits",
    since: ClusterVersion(2),
};

/// The meta command `PutWorkflowDefs`: a bulk update of workflow definitions is one command,
/// applied whole, instead of one `PutWorkflowDef` per definition.
pub const PUT_WORKFLOW_DEFS: Feature = Feature {
    name: "put-workflow-defs",
    since: ClusterVersion(2),
};

/// Every format change since version 1, oldest first.
pub const FEATURES: &[Feature] = &[TASK_RATE_LIMITS, PUT_WORKFLOW_DEFS];

/// Why a binary may not serve a cluster's data.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "this binary (baton {release}) serves cluster {supports}, but the cluster is at version \
     {active}: run a binary that serves version {active}{after}"
)]
pub struct Unserved {
    pub release: String,
    pub supports: VersionRange,
    pub active: ClusterVersion,
    /// What to add: a version once activated cannot be gone back on.
    after: &'static str,
}

impl Binary {
    /// Whether this binary may serve a cluster at `active`.
    pub fn serves(&self, active: ClusterVersion) -> Result<(), Unserved> {
        if self.supports.contains(active) {
            return Ok(());
        }
        let after = if active > self.supports.max {
            " (a version cannot be rolled back once it is activated)"
        } else {
            ""
        };
        Err(Unserved {
            release: self.release.clone(),
            supports: self.supports,
            active,
            after,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_binary_serves_only_its_range_and_says_both_versions() {
        let old = Binary {
            release: "0.1.0".into(),
            supports: VersionRange {
                min: ClusterVersion(1),
                max: ClusterVersion(1),
            },
        };
        assert!(old.serves(ClusterVersion(1)).is_ok());
        let refused = old
            .serves(ClusterVersion(2))
            .expect_err("refused")
            .to_string();
        assert_eq!(
            refused,
            "this binary (baton 0.1.0) serves cluster version 1, but the cluster is at version 2: \
             run a binary that serves version 2 (a version cannot be rolled back once it is activated)"
        );
        let newer = Binary {
            release: "0.3.0".into(),
            supports: VersionRange {
                min: ClusterVersion(3),
                max: ClusterVersion(4),
            },
        };
        assert!(newer
            .serves(ClusterVersion(2))
            .expect_err("refused")
            .to_string()
            .contains("serves cluster versions 3 to 4, but the cluster is at version 2"));
    }

    #[test]
    fn features_start_in_versions_this_build_serves_in_order() {
        let mut last = ClusterVersion::FIRST;
        for feature in FEATURES {
            assert!(feature.since > ClusterVersion::FIRST, "{}", feature.name);
            assert!(feature.since >= last, "{} out of order", feature.name);
            assert!(
                VersionRange::BUILD.contains(feature.since),
                "{}",
                feature.name
            );
            last = feature.since;
        }
        assert_eq!(last.max(ClusterVersion::FIRST), VersionRange::BUILD.max);
    }
}
