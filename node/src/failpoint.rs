//! One-shot crash points for end-to-end tests. With `BATON_FAILPOINT=name@marker` in its
//! environment, the process aborts (no shutdown, no flush: as `kill -9`) the first time it
//! reaches the point `name`, creating the file `marker` first; a restarted process finds the
//! marker and runs on. Without the variable every point is inert.

use std::path::PathBuf;
use std::sync::OnceLock;

fn armed() -> Option<&'static (String, PathBuf)> {
    static SPEC: OnceLock<Option<(String, PathBuf)>> = OnceLock::new();
    SPEC.get_or_init(|| {
        let spec = std::env::var("BATON_FAILPOINT").ok()?;
        let (name, marker) = spec.split_once('@')?;
        Some((name.to_owned(), PathBuf::from(marker)))
    })
    .as_ref()
}

/// Aborts the process here if this point is armed and has not fired yet.
pub fn hit(name: &str) {
    let Some((armed, marker)) = armed() else {
        return;
    };
    if armed == name && !marker.exists() && std::fs::write(marker, name).is_ok() {
        tracing::error!(point = name, "failpoint reached: aborting");
        std::process::abort();
    }
}
