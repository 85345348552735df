//! The Raft layer's metrics (the `metrics` facade; the node's binary installs the Prometheus
//! recorder and exports them at `GET /metrics`). Every one is labelled by `group` (`meta`, `p0`,
//! ...), a set as small as the node's partitions, and never by an id. Without a recorder each
//! call is a no-op.
//!
//! Counters and histograms are recorded where things happen; the gauges of a group's state
//! (term, log, applied, lag) are read from [`crate::GroupStatus`] when scraped ([`observe`]).

use crate::GroupStatus;
use std::time::Duration;

/// Commands proposed to a group through its proposer.
pub const PROPOSALS: &str = "baton_raft_proposals_total";
/// Entries a group's proposer wrote (each carries a batch of commands).
pub const ENTRIES: &str = "baton_raft_entries_total";
/// Commands per proposed entry.
pub const BATCH_COMMANDS: &str = "baton_raft_batch_commands";
/// From proposing an entry to its being committed and applied on the leader.
pub const COMMIT_SECONDS: &str = "baton_raft_commit_seconds";
/// One `fdatasync` of the node's Raft log (shared by every group: no `group` label).
pub const FSYNC_SECONDS: &str = "baton_raft_log_fsync_seconds";
/// Applying one run of committed entries to a group's state machine.
pub const APPLY_SECONDS: &str = "baton_raft_apply_seconds";
/// Changes of the leader a group's replica here knows of (elections and transfers seen).
pub const LEADER_CHANGES: &str = "baton_raft_leader_changes_total";
/// Snapshots built by a group's replica here.
pub const SNAPSHOT_BUILDS: &str = "baton_raft_snapshot_builds_total";
/// Snapshots installed on a group's replica here (sent by its leader).
pub const SNAPSHOT_INSTALLS: &str = "baton_raft_snapshot_installs_total";
/// A group's current term.
pub const TERM: &str = "baton_raft_term";
/// 1 while the replica here leads its group.
pub const LEADER: &str = "baton_raft_leader";
/// Entries in a group's log here (last index minus last purged).
pub const LOG_ENTRIES: &str = "baton_raft_log_entries";
/// Entries of a group's log here not yet applied.
pub const APPLY_LAG: &str = "baton_raft_apply_lag_entries";
/// On a group's leader: how many entries each follower (label `follower`) is behind.
pub const FOLLOWER_LAG: &str = "baton_raft_follower_lag_entries";

/// Help texts, for the recorder's `describe_*` at install.
pub fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_counter!(PROPOSALS, "commands proposed to the group");
    describe_counter!(ENTRIES, "log entries proposed (each a batch of commands)");
    describe_histogram!(BATCH_COMMANDS, Unit::Count, "commands per proposed entry");
    describe_histogram!(
        COMMIT_SECONDS,
        Unit::Seconds,
        "from proposing an entry to its commit and apply on the leader"
    );
    describe_histogram!(
        FSYNC_SECONDS,
        Unit::Seconds,
        "one fdatasync of the Raft log"
    );
    describe_histogram!(
        APPLY_SECONDS,
        Unit::Seconds,
        "applying a run of committed entries"
    );
    describe_counter!(LEADER_CHANGES, "changes of the known leader");
    describe_counter!(SNAPSHOT_BUILDS, "snapshots built");
    describe_counter!(SNAPSHOT_INSTALLS, "snapshots installed from the leader");
    describe_gauge!(TERM, "current term");
    describe_gauge!(LEADER, "1 while this replica leads the group");
    describe_gauge!(LOG_ENTRIES, "entries in the log (last minus purged)");
    describe_gauge!(APPLY_LAG, "log entries not yet applied");
    describe_gauge!(FOLLOWER_LAG, "on the leader: entries a follower is behind");
}

/// Records a proposed entry of `commands` commands.
pub(crate) fn proposed(group: &str, commands: usize) {
    let label = [metrics::Label::new("group", group.to_owned())];
    metrics::counter!(PROPOSALS, label.iter()).increment(commands as u64);
    metrics::counter!(ENTRIES, label.iter()).increment(1);
    metrics::histogram!(BATCH_COMMANDS, label.iter()).record(commands as f64);
}

/// Records the time `took` of something of `group` measured by `histogram`.
pub(crate) fn timed(histogram: &'static str, group: &str, took: Duration) {
    metrics::histogram!(histogram, "group" => group.to_owned()).record(took.as_secs_f64());
}

/// Counts one event (a counter of this module) of `group`.
pub(crate) fn count(counter: &'static str, group: &str) {
    metrics::counter!(counter, "group" => group.to_owned()).increment(1);
}

/// Sets the gauges of one group from its status, read now.
pub fn observe(status: &GroupStatus) {
    let group = status.name.clone();
    let last = status.last_log_index.unwrap_or(0);
    let gauge = |name: &'static str, value: u64| {
        metrics::gauge!(name, "group" => group.clone()).set(value as f64);
    };
    gauge(TERM, status.term);
    gauge(LEADER, u64::from(status.leader == Some(status.node)));
    gauge(
        LOG_ENTRIES,
        last.saturating_sub(status.purged_index.unwrap_or(0)),
    );
    gauge(
        APPLY_LAG,
        last.saturating_sub(status.last_applied_index.unwrap_or(0)),
    );
    for follower in status.matched.keys().filter(|n| **n != status.node) {
        let lag = status.lag(*follower).unwrap_or(0);
        metrics::gauge!(FOLLOWER_LAG, "group" => group.clone(), "follower" => follower.0.to_string())
            .set(lag as f64);
    }
}
