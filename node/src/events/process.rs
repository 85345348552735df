//! The processes of the DSL's `run` tasks (`engine::Work::Process`: a shell command, a python
//! script), run by the partition's leader after the commit that left the task's work pending.
//!
//! A node runs them only when its operator allowed their kind (`baton server --dsl-run
//! shell,python`, [`ProcessOptions`]); otherwise it reports why, and the task fails. Each runs
//! the program the engine named with its arguments (no shell unless the task asked for one),
//! in a fresh temporary directory that is removed afterwards, with an environment of the
//! node's `PATH`, `HOME` and `LANG` plus the task's variables (the rest of the node's
//! environment may hold credentials and is not passed on), its stdin written then closed. It
//! is its own process group: at its time limit, and when it ends, the whole group is killed
//! (SIGKILL), so nothing it started outlives it; dropping a run (a node shutting down) kills
//! it too. stdout and stderr are each kept up to [`PROCESS_OUTPUT_BYTES_MAX`] and read to
//! their end; text past that is dropped and the kept text says so. At most [`PROCESSES_MAX`]
//! run at once on a node; the others wait for a slot.
//!
//! The result is reported like an HTTP call's answer, and with the same delivery: a leader
//! that dies after running a process and before its report commits leaves the work pending,
//! and the next leader runs it again (at least once).

use engine::process::{ProcessKind, ProcessRequest};
use proto::limits::{PROCESSES_MAX, PROCESS_OUTPUT_BYTES_MAX, PROCESS_RUN_MS_MAX};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

/// How long the output of a process that ended (or was killed) is read on: what it started
/// and that escaped its process group may hold its pipes open.
const DRAIN_MS: u64 = 1_000;

/// The kinds of process this node runs (`--dsl-run`); none by default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcessOptions {
    /// `shell`: `run.shell` (`sh -c`).
    pub shell: bool,
    /// `python`: `run.script` in python (`python3 -c`).
    pub python: bool,
}

impl ProcessOptions {
    /// Whether this node runs processes of `kind`.
    pub fn allows(&self, kind: ProcessKind) -> bool {
        match kind {
            ProcessKind::Shell => self.shell,
            ProcessKind::Python => self.python,
        }
    }

    /// The word of `--dsl-run` that allows `kind`.
    pub fn word(kind: ProcessKind) -> &'static str {
        match kind {
            ProcessKind::Shell => "shell",
            ProcessKind::Python => "python",
        }
    }
}

impl std::str::FromStr for ProcessOptions {
    type Err = String;

    /// `shell`, `python` or both, comma-separated.
    fn from_str(s: &str) -> Result<Self, String> {
        let mut options = ProcessOptions::default();
        for word in s.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            match word {
                "shell" => options.shell = true,
                "python" => options.python = true,
                other => return Err(format!("'{other}' is not 'shell' or 'python'")),
            }
        }
        Ok(options)
    }
}

/// Why a process could not be run (a process that ran and failed is a result, not this).
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error("this node does not run {0} processes; its operator allows them with `baton server --dsl-run {0}`")]
    NotAllowed(&'static str),
    #[error("could not make the process's working directory: {0}")]
    WorkDir(std::io::Error),
    #[error("could not start '{program}': {error}")]
    Spawn {
        program: String,
        error: std::io::Error,
    },
    #[error("could not wait for the process: {0}")]
    Wait(std::io::Error),
}

/// Runs processes (one per node, shared by its partitions' outboxes).
#[derive(Clone)]
pub struct ProcessRunner {
    options: ProcessOptions,
    slots: Arc<Semaphore>,
}

impl ProcessRunner {
    pub fn new(options: ProcessOptions) -> Self {
        Self {
            options,
            slots: Arc::new(Semaphore::new(PROCESSES_MAX)),
        }
    }

    /// Runs `request`: `{code, stdout, stderr}`, with `timedOut` (and no code) when it was
    /// killed at its time limit.
    pub async fn run(&self, request: &ProcessRequest) -> Result<Value, ProcessError> {
        if !self.options.allows(request.kind) {
            return Err(ProcessError::NotAllowed(ProcessOptions::word(request.kind)));
        }
        let _slot = self.slots.acquire().await;
        let dir = tempfile::tempdir().map_err(ProcessError::WorkDir)?;
        let mut child =
            command(request, dir.path())
                .spawn()
                .map_err(|error| ProcessError::Spawn {
                    program: request.program.clone(),
                    error,
                })?;
        let mut group = Group(child.id());
        let stdin = child.stdin.take();
        let text = request.stdin.clone().unwrap_or_default();
        let writer = tokio::spawn(async move {
            if let Some(mut stdin) = stdin {
                // A process that does not read its stdin may end before taking it all.
                let _ = stdin.write_all(text.as_bytes()).await;
            }
        });
        let stdout = tokio::spawn(capped(child.stdout.take()));
        let stderr = tokio::spawn(capped(child.stderr.take()));
        let limit = Duration::from_millis(request.timeout_ms.clamp(1, PROCESS_RUN_MS_MAX));
        let waited = tokio::time::timeout(limit, child.wait()).await;
        group.kill();
        writer.abort();
        let (stdout, stderr) = (drained(stdout).await, drained(stderr).await);
        match waited {
            Err(_) => {
                let _ = child.wait().await;
                Ok(json!({"code": null, "stdout": stdout, "stderr": stderr, "timedOut": true}))
            }
            Ok(Ok(status)) => {
                Ok(json!({"code": status.code(), "stdout": stdout, "stderr": stderr}))
            }
            Ok(Err(e)) => Err(ProcessError::Wait(e)),
        }
    }
}

/// The command for `request` in `dir` (see the module's header).
fn command(request: &ProcessRequest, dir: &Path) -> Command {
    let mut command = Command::new(&request.program);
    command
        .args(&request.args)
        .current_dir(dir)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    for key in ["PATH", "HOME", "LANG"] {
        if let Some(value) = std::env::var_os(key) {
            command.env(key, value);
        }
    }
    command.envs(&request.env);
    command
}

/// A process group to kill: the process's and what it started (its id is the group's).
struct Group(Option<u32>);

impl Group {
    /// Kills every process of the group that is still there (once).
    fn kill(&mut self) {
        let pid = self.0.take().and_then(|id| i32::try_from(id).ok());
        if let Some(pid) = pid.and_then(rustix::process::Pid::from_raw) {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A stream's text, at most [`PROCESS_OUTPUT_BYTES_MAX`] bytes of it, read to its end.
async fn capped(stream: Option<impl AsyncRead + Unpin>) -> String {
    let Some(mut stream) = stream else {
        return String::new();
    };
    let mut kept = Vec::new();
    let mut cut = false;
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = PROCESS_OUTPUT_BYTES_MAX - kept.len();
                cut |= n > room;
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
    let mut text = String::from_utf8_lossy(&kept).into_owned();
    if cut {
        text.push_str(&format!(
            "\n[truncated: the output passed {PROCESS_OUTPUT_BYTES_MAX} bytes]"
        ));
    }
    text
}

/// What a stream's reader kept, waiting at most [`DRAIN_MS`] for its end.
async fn drained(mut reader: JoinHandle<String>) -> String {
    match tokio::time::timeout(Duration::from_millis(DRAIN_MS), &mut reader).await {
        Ok(Ok(text)) => text,
        _ => {
            reader.abort();
            "[not read: the stream stayed open after the process ended]".to_owned()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runner() -> ProcessRunner {
        ProcessRunner::new(ProcessOptions {
            shell: true,
            python: false,
        })
    }

    #[tokio::test]
    async fn a_shell_command_gets_arguments_environment_and_stdin() {
        let mut request = ProcessRequest::shell(
            r#"read line; echo "$1 $2 $GREETING $line"; echo err >&2; exit 3"#,
            vec!["a".into(), "b c".into()],
        );
        request.env.insert("GREETING".into(), "hi".into());
        request.stdin = Some("from stdin\n".into());
        let result = runner().run(&request).await.expect("it runs");
        assert_eq!(
            result,
            json!({"code": 3, "stdout": "a b c hi from stdin\n", "stderr": "err\n"})
        );
    }

    #[tokio::test]
    async fn output_past_the_limit_is_cut_and_said_so() {
        let request = ProcessRequest::shell("head -c 600000 /dev/zero | tr '\\0' x", vec![]);
        let result = runner().run(&request).await.expect("it runs");
        let stdout = result["stdout"].as_str().unwrap_or_default();
        assert!(stdout.starts_with(&"x".repeat(PROCESS_OUTPUT_BYTES_MAX)));
        assert!(
            stdout.ends_with("bytes]"),
            "{}",
            &stdout[stdout.len() - 80..]
        );
    }

    #[tokio::test]
    async fn a_process_past_its_limit_is_killed_with_what_it_started() {
        let mut request = ProcessRequest::shell("echo started; sleep 30 & sleep 30", vec![]);
        request.timeout_ms = 1_000;
        let result = runner().run(&request).await.expect("it runs");
        assert_eq!(result["timedOut"], json!(true));
        assert_eq!(result["stdout"], json!("started\n"));
    }

    #[tokio::test]
    async fn a_kind_not_allowed_is_refused() {
        let request = ProcessRequest::python("print(1)", vec![]);
        let refused = runner().run(&request).await;
        assert!(matches!(refused, Err(ProcessError::NotAllowed("python"))));
        let options: ProcessOptions = "shell, python".parse().expect("both");
        assert!(options.shell && options.python);
        assert!("ruby".parse::<ProcessOptions>().is_err());
    }
}
