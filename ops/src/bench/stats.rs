//! Measurements: latency histograms and the target's process accounting from `/proc`.

use hdrhistogram::Histogram;
use std::time::Duration;

/// Highest latency recorded, in microseconds (one hour); longer samples are clamped to it.
const LATENCY_US_MAX: u64 = 3_600_000_000;
/// Clock ticks per second of `/proc/<pid>/stat` times (USER_HZ, 100 on Linux).
const CLOCK_TICKS_PER_S: u64 = 100;

/// A latency histogram in microseconds, 3 significant digits.
#[derive(Clone)]
pub struct Latency(Histogram<u64>);

impl Latency {
    pub fn new() -> Self {
        Self(
            Histogram::new_with_bounds(1, LATENCY_US_MAX, 3)
                .expect("constant bounds are valid for hdrhistogram"),
        )
    }

    pub fn record(&mut self, d: Duration) {
        let us = u64::try_from(d.as_micros())
            .unwrap_or(LATENCY_US_MAX)
            .clamp(1, LATENCY_US_MAX);
        self.0.saturating_record(us);
    }

    pub fn add(&mut self, other: &Latency) {
        // Same bounds on both sides, so adding cannot fail.
        let _ = self.0.add(&other.0);
    }

    pub fn count(&self) -> u64 {
        self.0.len()
    }

    /// The `q` quantile (0..=1) in milliseconds; 0 when empty.
    pub fn ms(&self, q: f64) -> f64 {
        if self.0.is_empty() {
            return 0.0;
        }
        self.0.value_at_quantile(q) as f64 / 1_000.0
    }

    /// `p50 X ms, p99 Y ms` with `digits` decimals.
    pub fn summary(&self, digits: usize) -> String {
        format!(
            "p50 {:.digits$} ms, p99 {:.digits$} ms",
            self.ms(0.50),
            self.ms(0.99)
        )
    }
}

impl Default for Latency {
    fn default() -> Self {
        Self::new()
    }
}

/// CPU time (user + system) of the processes, in milliseconds; 0 for a process that is gone.
pub fn cpu_ms(pids: &[u32]) -> u64 {
    pids.iter().map(|&pid| cpu_ms_of(pid).unwrap_or(0)).sum()
}

fn cpu_ms_of(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may contain spaces; fields after the
    // last ')' start at field 3 (state), so utime (14) and stime (15) are at 11 and 12.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) * 1_000 / CLOCK_TICKS_PER_S)
}

/// Resident set size of the processes, in MiB (VmRSS).
pub fn rss_mib(pids: &[u32]) -> f64 {
    pids.iter()
        .filter_map(|&pid| {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
            let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
            line.split_whitespace().nth(1)?.parse::<f64>().ok()
        })
        .sum::<f64>()
        / 1024.0
}

/// Bytes the processes caused to be written to storage (`write_bytes` of `/proc/<pid>/io`).
pub fn write_bytes(pids: &[u32]) -> u64 {
    pids.iter()
        .filter_map(|&pid| {
            let io = std::fs::read_to_string(format!("/proc/{pid}/io")).ok()?;
            io.lines()
                .find_map(|l| l.strip_prefix("write_bytes:"))
                .and_then(|v| v.trim().parse::<u64>().ok())
        })
        .sum()
}
