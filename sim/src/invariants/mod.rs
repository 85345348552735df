//! The invariants a run must keep, one per file, each citing where it comes from
//! (the paper, report or Conductor semantics behind it). Some are checked during
//! the run on samples of every replica ([`Checker::observe_groups`], [`Checker::observe_records`],
//! [`Checker::at_crash`]), the rest on the final state ([`Checker::finish`]).

mod acked_flushed;
mod acked_results;
mod attempts;
mod dsl_instances;
mod durable_votes;
mod event_once;
mod fork_once;
mod join_complete;
mod loop_order;
mod no_lost_workflow;
mod replica_digests;
mod sub_workflows;
mod task_limits;
mod terminal_absorbs;
mod timers_not_early;
pub mod timers_on_time;
mod versions_served;

use crate::ms;
use crate::workload::{Facts, LIMITED_TYPE};
use proto::record::WorkflowRecord;
use proto::NodeId;
use std::collections::BTreeMap;

/// A broken invariant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub invariant: &'static str,
    pub at_ms: u64,
    pub detail: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[{} ms] {}: {}", self.at_ms, self.invariant, self.detail)
    }
}

/// One replica's view of one group at a sample.
#[derive(Debug, Clone)]
pub struct GroupSample {
    pub group: String,
    pub node: NodeId,
    pub term: u64,
    pub is_leader: bool,
    pub applied: Option<u64>,
    pub digest: Option<u64>,
}

/// What a crashed node had durably, per group: the highest log index it can recover from its disk
/// (log, purge marker or applied state).
pub type Durable = BTreeMap<String, u64>;

/// Final state for the end checks.
pub struct Ending<'a> {
    pub records: &'a BTreeMap<String, WorkflowRecord>,
    pub facts: &'a Facts,
    /// Largest clock skew any node had, milliseconds.
    pub skew_ms: u64,
    /// The workload's `concurrentExecLimit` of `sim_work`, if it set one.
    pub concurrency_limit: Option<u32>,
    pub now_ms: u64,
    /// Wall-clock milliseconds (the nodes' clocks, all unskewed again) from which the healed
    /// cluster has settled; and at the end.
    pub settled_wall_ms: u64,
    pub now_wall_ms: u64,
}

/// Checks the invariants over one run.
#[derive(Default)]
pub struct Checker {
    violations: Vec<Violation>,
    terms: durable_votes::Terms,
    digests: replica_digests::Digests,
    absorb: terminal_absorbs::Seen,
    /// The workload's `concurrentExecLimit` of [`LIMITED_TYPE`], if it set one.
    concurrency_limit: Option<u32>,
}

impl Checker {
    /// A checker for a run whose workload sets `concurrency_limit` on [`LIMITED_TYPE`] (or none).
    pub fn new(concurrency_limit: Option<u32>) -> Self {
        Self {
            concurrency_limit,
            ..Self::default()
        }
    }

    fn report(&mut self, invariant: &'static str, at_ms: u64, detail: String) {
        // One report per (invariant, detail) is enough.
        if !self
            .violations
            .iter()
            .any(|v| v.invariant == invariant && v.detail == detail)
        {
            self.violations.push(Violation {
                invariant,
                at_ms,
                detail,
            });
        }
    }

    pub fn violations(&self) -> &[Violation] {
        &self.violations
    }

    /// Raft state of every replica at one instant.
    pub fn observe_groups(&mut self, at_ms: u64, samples: &[GroupSample]) {
        for (inv, detail) in self.terms.observe(samples) {
            self.report(inv, at_ms, detail);
        }
        for (inv, detail) in self.digests.observe(samples) {
            self.report(inv, at_ms, detail);
        }
    }

    /// A running node's active cluster version and the versions its binary serves.
    pub fn observe_version(
        &mut self,
        at_ms: u64,
        node: NodeId,
        active: proto::version::ClusterVersion,
        serves: proto::version::VersionRange,
    ) {
        if let Some((inv, detail)) = versions_served::check(node, active, serves) {
            self.report(inv, at_ms, detail);
        }
    }

    /// How many Raft commands replicas skipped as unreadable over the run: none may be, even
    /// while nodes serve different cluster versions (a node run as an older binary reads only
    /// its versions' formats).
    pub fn observe_undecodable(&mut self, at_ms: u64, skipped: u64) {
        if skipped > 0 {
            let detail = format!("{skipped} commands were skipped as undecodable by a replica");
            self.report(
                "no replica applies a command its version cannot read",
                at_ms,
                detail,
            );
        }
    }

    /// Workflow records read from partition leaders at one instant.
    pub fn observe_records(&mut self, at_ms: u64, records: &BTreeMap<String, WorkflowRecord>) {
        for (inv, detail) in self.absorb.observe(records) {
            self.report(inv, at_ms, detail);
        }
        for record in records.values() {
            for (inv, detail) in attempts::check_live(record) {
                self.report(inv, at_ms, detail);
            }
        }
        if let Some(limit) = self.concurrency_limit {
            for (inv, detail) in task_limits::check_live(records, LIMITED_TYPE, limit) {
                self.report(inv, at_ms, detail);
            }
        }
    }

    /// `node` just crashed: every entry a leader counted as replicated on it (`matched`) must be
    /// on its disk.
    pub fn at_crash(
        &mut self,
        at_ms: u64,
        node: NodeId,
        matched: &BTreeMap<String, u64>,
        durable: &Durable,
    ) {
        for (inv, detail) in acked_flushed::check(node, matched, durable) {
            self.report(inv, at_ms, detail);
        }
    }

    /// The end of the run.
    pub fn finish(&mut self, end: &Ending<'_>) {
        let mut found = Vec::new();
        found.extend(no_lost_workflow::check(end));
        found.extend(acked_results::check(end));
        found.extend(event_once::check(end));
        found.extend(sub_workflows::check(end.records));
        if let Some(limit) = end.concurrency_limit {
            found.extend(task_limits::check(
                end.records,
                LIMITED_TYPE,
                limit,
                end.skew_ms,
            ));
        }
        for record in end.records.values() {
            found.extend(attempts::check_final(record, end.skew_ms));
            found.extend(dsl_instances::check(record));
            found.extend(join_complete::check(record, end.skew_ms));
            found.extend(fork_once::check(record));
            found.extend(loop_order::check(record, end.skew_ms));
            found.extend(timers_not_early::check(record, end.skew_ms));
            found.extend(timers_on_time::check(
                record,
                end.settled_wall_ms,
                end.now_wall_ms,
            ));
        }
        for (inv, detail) in found {
            self.report(inv, end.now_ms, detail);
        }
    }
}

impl Checker {
    /// A violation found by the runner itself (liveness, convergence, a crashed simulation).
    pub fn report_now(&mut self, invariant: &'static str, at_ms: u64, detail: String) {
        self.report(invariant, at_ms, detail);
    }
}
