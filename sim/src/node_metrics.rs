//! The nodes' own metrics as the simulator sees them: an in-memory recorder installed once per
//! process, read by name. Reading resets every counter, so a run reads once as it starts (dropping
//! what an earlier run in the process counted) and once at its end.

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use std::sync::OnceLock;

static SNAPSHOTTER: OnceLock<Option<Snapshotter>> = OnceLock::new();

/// Installs the recorder unless the process already has one (then every count reads 0).
pub fn install() {
    SNAPSHOTTER.get_or_init(|| {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder.install().ok().map(|()| snapshotter)
    });
}

/// The sums of the counters `names` over all their labels, on every node of this process, since
/// the last reading; every counter starts again from 0.
pub fn take_counters<const N: usize>(names: [&str; N]) -> [u64; N] {
    let mut sums = [0; N];
    let Some(Some(snapshotter)) = SNAPSHOTTER.get() else {
        return sums;
    };
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let at = names.iter().position(|n| *n == key.key().name());
        if let (Some(i), DebugValue::Counter(n)) = (at, value) {
            sums[i] += n;
        }
    }
    sums
}
