//! The node's Prometheus metrics, named in one place, and `GET /metrics`'s text.
//!
//! The `baton` binary installs the recorder at start ([`install`]); without it (a node embedded
//! in a test or the simulator) every metric is a no-op and `/metrics` answers 404. Gauges of
//! state that lives in storage (quarantined workflows, partitions that cannot run) are read
//! when scraped, so they cannot drift from what the admin endpoints show.

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use std::sync::OnceLock;

/// Workflows of a partition hosted here whose stored record could not be decoded and was set
/// aside (label `partition`); see `GET /api/admin/quarantine`.
pub const QUARANTINED_WORKFLOWS: &str = "baton_quarantined_workflows";
/// Partitions led here whose actors cannot start (label `partition`, value 1); see `/health`.
pub const PARTITION_STOPPED: &str = "baton_partition_stopped";

/// Proposals of a spell of leadership that had ended (labels `partition`, `outcome`): `refused`,
/// one for each made after its spell ended; `awaited`, one each time a new spell had to wait for
/// the last spell's proposals in flight before recovering. Either keeps an old actor's write from
/// landing unpublished; a steady rise means leadership flaps.
pub const STALE_PROPOSALS: &str = "baton_stale_proposals_total";

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the Prometheus recorder as the process's metrics recorder (once; later calls and a
/// recorder installed by someone else are left alone).
pub fn install() {
    if HANDLE.get().is_some() {
        return;
    }
    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    if metrics::set_global_recorder(recorder).is_ok() {
        let _ = HANDLE.set(handle);
        metrics::describe_gauge!(
            QUARANTINED_WORKFLOWS,
            "workflows set aside because their stored record does not decode"
        );
        metrics::describe_gauge!(
            PARTITION_STOPPED,
            "1 for a partition led here whose actors cannot start"
        );
        metrics::describe_counter!(
            STALE_PROPOSALS,
            "proposals of an ended spell of leadership, refused or awaited by the next spell"
        );
    }
}

/// The exposition text, or `None` when no recorder is installed.
pub fn render() -> Option<String> {
    HANDLE.get().map(PrometheusHandle::render)
}
