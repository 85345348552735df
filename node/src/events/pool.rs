//! The script pool: where a node runs JavaScript (event-handler conditions today; any script
//! the engine's tasks evaluate can call [`ScriptPool::evaluate`] too). Each evaluation runs in
//! a script host, a child process (`baton script-host`, see [`host`](super::host)), so that a
//! script that QuickJS cannot stop from inside (a built-in looping in C over a huge `length`)
//! is stopped anyway: when its time limit plus [`KILL_GRACE`] passes, the pool kills the child
//! (SIGKILL) and answers [`ScriptError::TimedOut`].
//!
//! At most `size` hosts exist at once ([`SCRIPT_HOSTS_MAX`] for a node); an evaluation waits
//! for a free one. Hosts are reused across evaluations (starting one costs a fork and exec and
//! the binary's start-up, about a millisecond or more; an evaluation in a warm host costs
//! the in-process evaluation plus two pipe round trips), retired after
//! [`HOST_EVALUATIONS_MAX`], and replaced in the background when one is killed or found dead.
//! [`ScriptPool::shutdown`] kills every host, busy ones included, and fails the evaluations
//! in flight, so a node stops within its bound whatever a script does.

use super::frame::{self, Answer, Lang, RequestRef, HELLO};
use super::jq::Queries;
use super::script::{Limits, ScriptError};
use proto::limits::SCRIPT_HOSTS_MAX;
use serde_json::Value;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::BufReader;
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::{watch, Semaphore};

/// How long past a script's time limit the pool waits for its answer before it kills the host.
/// The host's own interrupt stops ordinary scripts at the limit; this is for the rest.
pub const KILL_GRACE: Duration = Duration::from_millis(40);

/// How long a new host may take to start and say hello.
pub const START_TIMEOUT: Duration = Duration::from_secs(10);

/// Evaluations a host serves before it is replaced (bounds whatever a long life accumulates).
pub const HOST_EVALUATIONS_MAX: u64 = 10_000;

/// How long the pool waits to learn how a host that died without an answer ended.
const EXIT_STATUS_WAIT: Duration = Duration::from_millis(100);

/// The program a script host runs: `baton script-host` by default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostProgram {
    pub program: PathBuf,
    pub args: Vec<OsString>,
}

impl HostProgram {
    /// The subcommand of the `baton` binary that serves as a script host.
    pub const SUBCOMMAND: &'static str = "script-host";

    /// `program script-host`: the `baton` binary at `program`.
    pub fn baton(program: impl Into<PathBuf>) -> Self {
        Self {
            program: program.into(),
            args: vec![Self::SUBCOMMAND.into()],
        }
    }

    /// The running binary itself (the `baton` binary of a node).
    pub fn this_binary() -> std::io::Result<Self> {
        Ok(Self::baton(std::env::current_exe()?))
    }
}

/// What the pool has done so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Hosts started.
    pub started: u64,
    /// Hosts killed because an evaluation passed its deadline.
    pub killed: u64,
    /// Hosts that died without answering (crashed, or killed from outside).
    pub lost: u64,
}

/// A bounded pool of script hosts; cheap to clone (one pool per node).
#[derive(Clone)]
pub struct ScriptPool {
    shared: Arc<Shared>,
}

struct Shared {
    /// `None`: [`HostProgram::this_binary`], found when a host is first needed.
    program: Option<HostProgram>,
    /// Set for [`ScriptPool::in_process`]: evaluations run on the caller's thread instead.
    in_process: Option<Mutex<Queries>>,
    size: usize,
    /// One permit per host that may exist.
    slots: Semaphore,
    idle: Mutex<Vec<Host>>,
    closing: watch::Sender<bool>,
    started: AtomicU64,
    killed: AtomicU64,
    lost: AtomicU64,
}

/// One running script host.
struct Host {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    served: u64,
}

fn closed() -> ScriptError {
    ScriptError::HostFailed("the node is shutting down".into())
}

impl ScriptPool {
    /// A pool of at most `size` hosts (at least one) running `program`. No host starts before
    /// the first evaluation.
    pub fn new(program: Option<HostProgram>, size: usize) -> Self {
        let size = size.max(1);
        Self {
            shared: Arc::new(Shared {
                program,
                in_process: None,
                size,
                slots: Semaphore::new(size),
                idle: Mutex::default(),
                closing: watch::channel(false).0,
                started: AtomicU64::new(0),
                killed: AtomicU64::new(0),
                lost: AtomicU64::new(0),
            }),
        }
    }

    /// A pool that evaluates on the calling thread, in the same sandbox but without a
    /// process around it: nothing stops a script that loops in C, and the caller's thread is
    /// busy while it runs. For the deterministic simulator, whose scripts are its own and tiny,
    /// and which must not start processes.
    pub fn in_process() -> Self {
        let shared = Shared {
            program: None,
            in_process: Some(Mutex::default()),
            size: 1,
            slots: Semaphore::new(1),
            idle: Mutex::default(),
            closing: watch::channel(false).0,
            started: AtomicU64::new(0),
            killed: AtomicU64::new(0),
            lost: AtomicU64::new(0),
        };
        Self {
            shared: Arc::new(shared),
        }
    }

    /// A node's pool: [`SCRIPT_HOSTS_MAX`] hosts of `program` (default: this binary).
    pub fn for_node(program: Option<HostProgram>) -> Self {
        Self::new(program, SCRIPT_HOSTS_MAX)
    }

    pub fn stats(&self) -> PoolStats {
        PoolStats {
            started: self.shared.started.load(Ordering::Relaxed),
            killed: self.shared.killed.load(Ordering::Relaxed),
            lost: self.shared.lost.load(Ordering::Relaxed),
        }
    }

    /// The process ids of the idle hosts.
    pub fn idle_pids(&self) -> Vec<u32> {
        self.idle().iter().filter_map(|h| h.child.id()).collect()
    }

    fn idle(&self) -> std::sync::MutexGuard<'_, Vec<Host>> {
        self.shared.idle.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Evaluates `script` with `root` bound to `$` in a script host, answering within
    /// `limits.time` plus [`KILL_GRACE`] once a host is free.
    pub async fn evaluate(
        &self,
        script: &str,
        root: &Value,
        limits: &Limits,
    ) -> Result<Value, ScriptError> {
        self.ask(Lang::Js, script, root, limits).await
    }

    /// Runs the jq `query` on `input` in a script host: the list of its outputs, within the same
    /// deadline as [`Self::evaluate`].
    pub async fn query(
        &self,
        query: &str,
        input: &Value,
        limits: &Limits,
    ) -> Result<Value, ScriptError> {
        self.ask(Lang::Jq, query, input, limits).await
    }

    async fn ask(
        &self,
        lang: Lang,
        script: &str,
        root: &Value,
        limits: &Limits,
    ) -> Result<Value, ScriptError> {
        if let Some(queries) = &self.shared.in_process {
            return match lang {
                Lang::Js => super::script::evaluate(script, root, limits),
                Lang::Jq => lock(queries).run(script, root, limits),
            };
        }
        let request = RequestRef {
            lang,
            script,
            root,
            limits,
        };
        let body = serde_json::to_vec(&request)
            .map_err(|e| ScriptError::Failed(format!("the payload is not JSON: {e}")))?;
        let mut closing = self.shared.closing.subscribe();
        let _slot = tokio::select! {
            slot = self.shared.slots.acquire() => slot.map_err(|_| closed())?,
            _ = closing.wait_for(|c| *c) => return Err(closed()),
        };
        let host = match self.take_idle() {
            Some(host) => host,
            None => tokio::select! {
                host = self.start() => host?,
                _ = closing.wait_for(|c| *c) => return Err(closed()),
            },
        };
        self.run(host, &body, limits, closing).await
    }

    /// Sends one request to `host` and waits for the answer until the deadline.
    async fn run(
        &self,
        mut host: Host,
        body: &[u8],
        limits: &Limits,
        mut closing: watch::Receiver<bool>,
    ) -> Result<Value, ScriptError> {
        let deadline = limits.time.saturating_add(KILL_GRACE);
        let outcome = tokio::select! {
            outcome = tokio::time::timeout(deadline, host.ask(body)) => outcome,
            _ = closing.wait_for(|c| *c) => {
                host.kill();
                return Err(closed());
            }
        };
        match outcome {
            Ok(Ok(answer)) => {
                self.put_back(host);
                answer
            }
            Ok(Err(e)) => {
                self.shared.lost.fetch_add(1, Ordering::Relaxed);
                let ended = host.ended().await;
                self.replace_in_background();
                Err(ScriptError::HostFailed(format!(
                    "the script host stopped without an answer ({e}; {ended})"
                )))
            }
            Err(_) => {
                self.shared.killed.fetch_add(1, Ordering::Relaxed);
                host.kill();
                tracing::info!(
                    limit_ms = limits.time.as_millis(),
                    "a script ran past its deadline; its host was killed"
                );
                self.replace_in_background();
                Err(ScriptError::TimedOut(limits.time))
            }
        }
    }

    /// An idle host that is still alive, if any.
    fn take_idle(&self) -> Option<Host> {
        let mut idle = self.idle();
        while let Some(mut host) = idle.pop() {
            if matches!(host.child.try_wait(), Ok(None)) {
                return Some(host);
            }
            self.shared.lost.fetch_add(1, Ordering::Relaxed);
        }
        None
    }

    fn put_back(&self, mut host: Host) {
        host.served += 1;
        if host.served >= HOST_EVALUATIONS_MAX || *self.shared.closing.borrow() {
            host.kill();
            return;
        }
        let mut idle = self.idle();
        if idle.len() < self.shared.size {
            idle.push(host);
        }
    }

    /// Starts a host so that the next evaluation finds one warm.
    fn replace_in_background(&self) {
        let pool = self.clone();
        tokio::spawn(async move {
            let Ok(_slot) = pool.shared.slots.try_acquire() else {
                return; // Every slot is busy: the next free one is warm already.
            };
            if pool.idle().len() >= pool.shared.size {
                return;
            }
            match pool.start().await {
                Ok(host) => pool.put_back(host),
                Err(e) => tracing::warn!(error = %e, "could not start a script host"),
            }
        });
    }

    /// Starts a host and waits for its hello.
    async fn start(&self) -> Result<Host, ScriptError> {
        let program = match &self.shared.program {
            Some(p) => p.clone(),
            None => HostProgram::this_binary()
                .map_err(|e| ScriptError::HostFailed(format!("cannot find this binary: {e}")))?,
        };
        let cannot =
            |what: String| ScriptError::HostFailed(format!("{} {what}", program.program.display()));
        let mut child = Command::new(&program.program)
            .args(&program.args)
            .env(super::host::ALLOCATOR_ENV.0, super::host::ALLOCATOR_ENV.1)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| cannot(format!("cannot be started: {e}")))?;
        self.shared.started.fetch_add(1, Ordering::Relaxed);
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(cannot("has no pipes".into()));
        };
        let mut stdout = BufReader::new(stdout);
        match tokio::time::timeout(START_TIMEOUT, frame::read(&mut stdout)).await {
            Ok(Ok(hello)) if hello == HELLO => Ok(Host {
                child,
                stdin,
                stdout,
                served: 0,
            }),
            Ok(Ok(_)) => Err(cannot("is not a script host".into())),
            Ok(Err(e)) => Err(cannot(format!("did not start as a script host: {e}"))),
            Err(_) => Err(cannot("did not start in time".into())),
        }
    }

    /// Kills every host and fails every evaluation waiting or in flight; later evaluations
    /// fail at once.
    pub fn shutdown(&self) {
        self.shared.closing.send_replace(true);
        self.shared.slots.close();
        for host in self.idle().drain(..) {
            host.kill();
        }
    }
}

impl Host {
    /// Writes one request and reads its answer.
    async fn ask(&mut self, body: &[u8]) -> std::io::Result<Answer> {
        frame::write(&mut self.stdin, body).await?;
        let answer = frame::read(&mut self.stdout).await?;
        serde_json::from_slice(&answer)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
    }

    /// SIGKILL; the runtime reaps the child.
    fn kill(mut self) {
        let _ = self.child.start_kill();
    }

    /// How a host that stopped answering ended, for the error message.
    async fn ended(mut self) -> String {
        let _ = self.child.start_kill();
        match tokio::time::timeout(EXIT_STATUS_WAIT, self.child.wait()).await {
            Ok(Ok(status)) => format!("it {status}"),
            _ => "its exit status is unknown".into(),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
