//! A process a task asks the runtime to run: a DSL `run` of a shell command or of a python
//! script (`dsl/run` tasks, opened by `dsl::run`), performed by the partition's leader after
//! the commit like an HTTP call (`Work::Process`), and the task's end once its result is
//! reported. It decides nothing of the workflow: `work.rs` asks it and moves the workflow on.
//!
//! The task's input says everything: the request ([`ProcessRequest`], under `process`), or a
//! JavaScript program for the node's script sandbox (under `script`, with its `root`: a DSL
//! script in `js` runs there, see `dsl::run::process`), and the DSL's `return`. The reported
//! result is `{code, stdout, stderr}`, with `timedOut` when the runtime killed the process at
//! its limit. The task completes with that result when the process exited 0 or its `return`
//! (`code`, `all`, `none`) shows the exit code itself; otherwise it fails with the exit code
//! and the end of stderr as the reason, and times out when it was killed at its limit. The
//! DSL's side (`dsl::run::call`) shapes the output by `return` and raises the DSL's runtime
//! or timeout error.

use proto::model::{Json, Task, TaskStatus, Workflow};
use serde_json::Value;
use std::collections::BTreeMap;

/// The task type of a DSL `run` of a shell command or a script.
pub const PROCESS_TASK_TYPE: &str = "dsl/run";

/// What starts the process, so a node can refuse what its operator did not allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProcessKind {
    /// `sh -c command sh arguments...`
    Shell,
    /// `python3 -c code arguments...`
    Python,
}

/// A process to run: `program` with `args` (no shell unless `program` is one), `env` added
/// to the node's environment, `stdin` written then closed (empty when `None`), killed after
/// `timeout_ms`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessRequest {
    pub kind: ProcessKind,
    pub program: String,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub stdin: Option<String>,
    pub timeout_ms: u64,
}

impl ProcessRequest {
    /// A shell command, its arguments its positional parameters (`$1`, `$2`, ...).
    pub fn shell(command: &str, arguments: Vec<String>) -> Self {
        let mut args = vec!["-c".to_owned(), command.to_owned(), "sh".to_owned()];
        args.extend(arguments);
        Self::new(ProcessKind::Shell, "sh", args)
    }

    /// A python script, its arguments in `sys.argv` after `-c`.
    pub fn python(code: &str, arguments: Vec<String>) -> Self {
        let mut args = vec!["-c".to_owned(), code.to_owned()];
        args.extend(arguments);
        Self::new(ProcessKind::Python, "python3", args)
    }

    fn new(kind: ProcessKind, program: &str, args: Vec<String>) -> Self {
        Self {
            kind,
            program: program.to_owned(),
            args,
            env: BTreeMap::new(),
            stdin: None,
            timeout_ms: proto::limits::PROCESS_RUN_MS_DEFAULT,
        }
    }
}

/// The key of a `dsl/run` task's input that holds its [`ProcessRequest`].
pub(crate) const PROCESS_KEY: &str = "process";
/// The key that holds a JavaScript program for the sandbox, and the one of its `$`.
pub(crate) const SCRIPT_KEY: &str = "script";
pub(crate) const ROOT_KEY: &str = "root";
/// The key that holds the DSL's `return` (`stdout` when absent).
pub const RETURN_KEY: &str = "return";

/// What a SCHEDULED `dsl/run` task asks for: a process, or a JavaScript program for the
/// sandbox with its `$`. Only a DSL instance's task asks (a Conductor definition cannot ask
/// for a process by naming the type).
pub(crate) enum Asked {
    Process(ProcessRequest),
    Script { script: String, root: Value },
}

/// What the `dsl/run` task `t` of `wf` asks for (see [`Asked`]).
pub(crate) fn asked(wf: &Workflow, t: &Task) -> Option<Asked> {
    wf.workflow_definition.dsl.as_ref()?;
    let input = &t.input_data;
    if let Some(request) = input.get(PROCESS_KEY) {
        return serde_json::from_value(request.clone())
            .ok()
            .map(Asked::Process);
    }
    let script = input.get(SCRIPT_KEY).and_then(Value::as_str)?;
    Some(Asked::Script {
        script: script.to_owned(),
        root: input.get(ROOT_KEY).cloned().unwrap_or_default(),
    })
}

/// How a process's reported result ends its task.
#[derive(Debug, PartialEq)]
pub(crate) enum Judged {
    Completed(Json),
    Failed(String, Json),
    TimedOut(String, Json),
}

/// Judges a `dsl/run` task's result (see the module's header); `outcome` is what the runtime
/// reported: the result, or why it could not run the process.
pub(crate) fn judge(input: &Json, outcome: Result<Value, String>) -> Judged {
    let result = match outcome {
        Ok(Value::Object(result)) => result,
        Ok(other) => {
            let reason = format!("the process's result is not an object: {other}");
            return Judged::Failed(reason, Json::new());
        }
        Err(reason) => return Judged::Failed(reason, Json::new()),
    };
    let code = result.get("code").and_then(Value::as_i64);
    if result.get("timedOut") == Some(&Value::Bool(true)) {
        let reason = "the process ran past its time limit and was killed".to_owned();
        return Judged::TimedOut(reason, result);
    }
    let mode = input.get(RETURN_KEY).and_then(Value::as_str);
    let shows_code = matches!(mode, Some("code" | "all" | "none"));
    match code {
        Some(0) => Judged::Completed(result),
        Some(_) if shows_code => Judged::Completed(result),
        _ => Judged::Failed(exit_reason(code, &result), result),
    }
}

/// Why a process failed: its exit code (none when a signal ended it) and its stderr's end.
fn exit_reason(code: Option<i64>, result: &Json) -> String {
    const TAIL_CHARS: usize = 512;
    let how = match code {
        Some(code) => format!("the process exited with code {code}"),
        None => "the process was ended by a signal".to_owned(),
    };
    let stderr = result.get("stderr").and_then(Value::as_str).unwrap_or("");
    let stderr = stderr.trim();
    if stderr.is_empty() {
        return how;
    }
    let skip = stderr.chars().count().saturating_sub(TAIL_CHARS);
    let tail: String = stderr.chars().skip(skip).collect();
    format!("{how}: {tail}")
}

/// A `dsl/run` task's work was performed at `now`: the task ends as [`judge`] says.
pub(crate) fn performed(t: &mut Task, now: crate::NowMs, outcome: Result<Value, String>) {
    let judged = judge(&t.input_data, outcome);
    t.start_time = now;
    t.update_time = now;
    t.end_time = now;
    let (status, output, reason) = match judged {
        Judged::Completed(output) => (TaskStatus::Completed, output, None),
        Judged::Failed(reason, output) => (TaskStatus::Failed, output, Some(reason)),
        Judged::TimedOut(reason, output) => (TaskStatus::TimedOut, output, Some(reason)),
    };
    t.status = status;
    t.output_data = output;
    t.reason_for_incompletion = reason;
}

/// The DSL output of a completed `dsl/run` task's result, by its `return`: `stdout` (the
/// default), `stderr`, `code`, `all` (`{code, stdout, stderr}`) or `none` (null).
pub fn shaped(input: &Json, result: &Json) -> Value {
    let field = |k: &str| result.get(k).cloned().unwrap_or(Value::Null);
    match input.get(RETURN_KEY).and_then(Value::as_str) {
        Some("stderr") => field("stderr"),
        Some("code") => field("code"),
        Some("all") => serde_json::json!({
            "code": field("code"),
            "stdout": field("stdout"),
            "stderr": field("stderr"),
        }),
        Some("none") => Value::Null,
        _ => field("stdout"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn input(mode: &str) -> Json {
        json!({ RETURN_KEY: mode })
            .as_object()
            .cloned()
            .unwrap_or_default()
    }

    fn result(code: i64) -> Value {
        json!({"code": code, "stdout": "out\n", "stderr": "oops\n"})
    }

    #[test]
    fn a_non_zero_exit_fails_unless_return_shows_the_code() {
        let failed = judge(&input("stdout"), Ok(result(3)));
        let reason = "the process exited with code 3: oops".to_owned();
        let output = result(3).as_object().cloned().unwrap_or_default();
        assert_eq!(failed, Judged::Failed(reason, output.clone()));
        assert_eq!(
            judge(&input("stderr"), Ok(result(3))),
            judge(&Json::new(), Ok(result(3)))
        );
        for mode in ["code", "all", "none"] {
            let judged = judge(&input(mode), Ok(result(3)));
            assert_eq!(judged, Judged::Completed(output.clone()), "{mode}");
        }
        let ok = judge(&input("stdout"), Ok(result(0)));
        assert!(matches!(ok, Judged::Completed(_)));
    }

    #[test]
    fn a_killed_process_times_out_and_an_unrun_one_fails() {
        let killed = json!({"code": null, "stdout": "", "stderr": "", "timedOut": true});
        assert!(matches!(
            judge(&input("all"), Ok(killed)),
            Judged::TimedOut(..)
        ));
        let unrun = judge(&input("all"), Err("no python3".into()));
        assert_eq!(unrun, Judged::Failed("no python3".into(), Json::new()));
    }

    #[test]
    fn return_shapes_the_output() {
        let result = result(0).as_object().cloned().unwrap_or_default();
        assert_eq!(shaped(&Json::new(), &result), json!("out\n"));
        assert_eq!(shaped(&input("stderr"), &result), json!("oops\n"));
        assert_eq!(shaped(&input("code"), &result), json!(0));
        assert_eq!(shaped(&input("none"), &result), Value::Null);
        let all = json!({"code": 0, "stdout": "out\n", "stderr": "oops\n"});
        assert_eq!(shaped(&input("all"), &result), all);
    }

    #[test]
    fn requests_say_program_and_argv() {
        let shell = ProcessRequest::shell("echo $1", vec!["a".into()]);
        assert_eq!(shell.program, "sh");
        assert_eq!(shell.args, ["-c", "echo $1", "sh", "a"]);
        let python = ProcessRequest::python("print(1)", vec!["b".into()]);
        assert_eq!(
            (python.program.as_str(), python.kind),
            ("python3", ProcessKind::Python)
        );
        assert_eq!(python.args, ["-c", "print(1)", "b"]);
    }
}
