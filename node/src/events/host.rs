//! The script host: the process (`baton script-host`) a node's
//! [`ScriptPool`](super::pool::ScriptPool) runs scripts in, so that a script that cannot be
//! stopped from inside QuickJS (a built-in looping in C, a runaway native allocation) costs a
//! killed child process, never a node thread.
//!
//! It limits its own data memory ([`DATA_BYTES_MAX`] more than it starts with: a runaway
//! allocation fails or kills this process only) and core dumps, says [`HELLO`](super::frame::HELLO), then answers each request
//! on stdin with one evaluation on stdout (JavaScript in the [`script`](super::script) sandbox,
//! or a jq query: [`jq`](super::jq)). Its own
//! watchdog aborts it when an evaluation runs [`SELF_KILL_GRACE`] past its time limit: the node
//! kills it much sooner, so this only matters when the node itself is gone. It exits when stdin
//! closes (the node stopped or dropped it).

use super::frame::{self, Answer, Lang, Request};
use super::jq::Queries;
use super::script::{self, ScriptError};
use std::io::{self, BufReader, BufWriter};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// The most memory a script host may map for data (heap and anonymous mappings) beyond what it
/// maps when it starts. The pool starts hosts with mimalloc's up-front arena reservation off
/// ([`ALLOCATOR_ENV`]), which would otherwise take a whole GiB of address space (counted as
/// data) before the first script.
pub const DATA_BYTES_MAX: u64 = 512 << 20;

/// The environment a host needs for [`DATA_BYTES_MAX`] to bound what it uses rather than what
/// its allocator reserves.
pub const ALLOCATOR_ENV: (&str, &str) = ("MIMALLOC_ARENA_RESERVE", "0");

/// How long past a script's time limit the host's own watchdog lets an evaluation run before it
/// aborts the process (the node's deadline comes first; see `pool::KILL_GRACE`).
pub const SELF_KILL_GRACE: Duration = Duration::from_secs(2);

/// Runs the host until stdin closes.
pub fn serve() -> io::Result<()> {
    limit_self()?;
    let watchdog = Watchdog::start()?;
    let mut queries = Queries::default();
    let mut input = BufReader::new(io::stdin().lock());
    let mut output = BufWriter::new(io::stdout().lock());
    frame::write_blocking(&mut output, frame::HELLO)?;
    while let Some(body) = frame::read_blocking(&mut input)? {
        let answer: Answer = match serde_json::from_slice::<Request>(&body) {
            Ok(request) => {
                watchdog.arm(Instant::now() + request.limits.time + SELF_KILL_GRACE);
                let answer = match request.lang {
                    Lang::Js => script::evaluate(&request.script, &request.root, &request.limits),
                    Lang::Jq => queries.run(&request.script, &request.root, &request.limits),
                };
                watchdog.disarm();
                answer
            }
            Err(e) => Err(ScriptError::HostFailed(format!("bad request: {e}"))),
        };
        let body = serde_json::to_vec(&answer).map_err(io::Error::other)?;
        frame::write_blocking(&mut output, &body)?;
    }
    Ok(())
}

/// Bounds this process's data memory to what it maps already plus [`DATA_BYTES_MAX`], and
/// turns core dumps off (a killed host is expected).
fn limit_self() -> io::Result<()> {
    rlimit::setrlimit(rlimit::Resource::CORE, 0, 0)?;
    let limit = data_in_use().saturating_add(DATA_BYTES_MAX);
    rlimit::setrlimit(rlimit::Resource::DATA, limit, limit)
}

/// The data memory this process maps now (Linux's `VmData`; 0 where it cannot be read).
fn data_in_use() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmData:"))
        .and_then(|rest| rest.trim().strip_suffix("kB"))
        .and_then(|kb| kb.trim().parse::<u64>().ok())
        .map_or(0, |kb| kb.saturating_mul(1024))
}

/// Aborts the process when an armed deadline passes.
struct Watchdog {
    deadline: Arc<(Mutex<Option<Instant>>, Condvar)>,
}

impl Watchdog {
    fn start() -> io::Result<Self> {
        let deadline: Arc<(Mutex<Option<Instant>>, Condvar)> = Arc::default();
        let watched = deadline.clone();
        std::thread::Builder::new()
            .name("script-watchdog".into())
            .spawn(move || watch(&watched))?;
        Ok(Self { deadline })
    }

    fn arm(&self, at: Instant) {
        self.set(Some(at));
    }

    fn disarm(&self) {
        self.set(None);
    }

    fn set(&self, at: Option<Instant>) {
        let (lock, changed) = &*self.deadline;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) = at;
        changed.notify_one();
    }
}

/// The watchdog thread: sleeps until the armed deadline (or a change), aborts if it passed.
fn watch(deadline: &(Mutex<Option<Instant>>, Condvar)) {
    let (lock, changed) = deadline;
    let mut at = lock.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        at = match *at {
            None => changed.wait(at).unwrap_or_else(|e| e.into_inner()),
            Some(due) => {
                let now = Instant::now();
                if now >= due {
                    // The evaluation cannot be stopped from here; the process can.
                    std::process::abort();
                }
                changed
                    .wait_timeout(at, due - now)
                    .unwrap_or_else(|e| e.into_inner())
                    .0
            }
        };
    }
}
