//! The machine's own yardsticks, printed with every run: how long a small durable append and a
//! loopback round trip take here and now, so numbers from different runs and machines can be
//! read side by side.

use super::stats::Latency;
use anyhow::Context;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Instant;

/// Appends per fdatasync sample.
const SYNC_SAMPLES: usize = 200;
/// Bytes per append.
const SYNC_BYTES: usize = 4096;
/// Loopback round trips sampled.
const RTT_SAMPLES: usize = 2_000;
/// Bytes per round trip message.
const RTT_BYTES: usize = 64;

pub struct Calibration {
    pub fsync: Latency,
    pub rtt: Latency,
    pub git: String,
    pub nproc: usize,
}

impl Calibration {
    pub fn measure() -> anyhow::Result<Self> {
        Ok(Self {
            fsync: fdatasync()?,
            rtt: loopback_rtt()?,
            git: git_commit(),
            nproc: nproc(),
        })
    }
}

pub fn nproc() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// `SYNC_SAMPLES` appends of `SYNC_BYTES`, each followed by `sync_data` (fdatasync).
fn fdatasync() -> anyhow::Result<Latency> {
    let mut file = tempfile::tempfile().context("cannot create the calibration file")?;
    let block = vec![0x5a_u8; SYNC_BYTES];
    let mut hist = Latency::new();
    for _ in 0..SYNC_SAMPLES {
        let started = Instant::now();
        file.write_all(&block)?;
        file.sync_data()?;
        hist.record(started.elapsed());
    }
    Ok(hist)
}

/// How often a [`DiskProbe`] samples the disk.
const PROBE_EVERY_MS: u64 = 100;

/// Samples fdatasync latency in the background while a workload runs: this machine's disk can
/// change speed by an order of magnitude from one minute to the next (0.2 ms against 4 ms per
/// fdatasync have been seen in one session), so a sweep point is read with the disk it ran on.
/// Ten small syncs a second add nothing a loaded target would notice.
pub struct DiskProbe {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    sampler: std::thread::JoinHandle<anyhow::Result<Latency>>,
}

impl DiskProbe {
    pub fn start() -> Self {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopping = stop.clone();
        let sampler = std::thread::spawn(move || {
            let mut file = tempfile::tempfile().context("cannot create the probe file")?;
            let block = vec![0x5a_u8; SYNC_BYTES];
            let mut hist = Latency::new();
            while !stopping.load(std::sync::atomic::Ordering::Relaxed) {
                let started = Instant::now();
                file.write_all(&block)?;
                file.sync_data()?;
                hist.record(started.elapsed());
                std::thread::sleep(std::time::Duration::from_millis(PROBE_EVERY_MS));
            }
            Ok(hist)
        });
        Self { stop, sampler }
    }

    /// Stops sampling; the latencies seen (`None` if the probe could not write).
    pub fn finish(self) -> Option<Latency> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.sampler.join().ok()?.ok()
    }
}

/// `RTT_SAMPLES` round trips of `RTT_BYTES` through a local echo thread (TCP_NODELAY).
fn loopback_rtt() -> anyhow::Result<Latency> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let echo = std::thread::spawn(move || -> std::io::Result<()> {
        let (mut stream, _) = listener.accept()?;
        stream.set_nodelay(true)?;
        let mut buf = [0_u8; RTT_BYTES];
        for _ in 0..RTT_SAMPLES {
            stream.read_exact(&mut buf)?;
            stream.write_all(&buf)?;
        }
        Ok(())
    });
    let mut stream = TcpStream::connect(addr)?;
    stream.set_nodelay(true)?;
    let mut buf = [7_u8; RTT_BYTES];
    let mut hist = Latency::new();
    for _ in 0..RTT_SAMPLES {
        let started = Instant::now();
        stream.write_all(&buf)?;
        stream.read_exact(&mut buf)?;
        hist.record(started.elapsed());
    }
    echo.join()
        .map_err(|_| anyhow::anyhow!("the echo thread panicked"))??;
    Ok(hist)
}

/// `git rev-parse --short HEAD` in the current directory, or `unknown`.
fn git_commit() -> String {
    std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into())
}
