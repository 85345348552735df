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

/// The sum of the counter `name` over all its labels, on every node of this process, since the
/// last reading; every counter starts again from 0.
pub fn take_counter(name: &str) -> u64 {
    let Some(Some(snapshotter)) = SNAPSHOTTER.get() else {
        return 0;
    };
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter(|(key, ..)| key.key().name() == name)
        .map(|(.., value)| match value {
            DebugValue::Counter(n) => n,
            _ => 0,
        })
        .sum()
}
