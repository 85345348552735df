//! No node holds a cluster version its binary does not serve: the versioned-upgrade rule of
//! Zeebe, CockroachDB and Temporal (a format becomes writable only once every member can read
//! it). A node whose meta replica applied the activation of a version beyond its binary's range
//! would next apply commands and read records in formats it cannot decode.

use proto::version::{ClusterVersion, VersionRange};
use proto::NodeId;

/// One running node's active version and what its binary serves, at a sample.
pub fn check(
    node: NodeId,
    active: ClusterVersion,
    serves: VersionRange,
) -> Option<(&'static str, String)> {
    (!serves.contains(active)).then(|| {
        (
            "no node holds a cluster version its binary does not serve",
            format!(
                "node {node} serves cluster {serves} but its replica activated version {active}"
            ),
        )
    })
}
