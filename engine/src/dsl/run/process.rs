//! `run: shell` and `run: script`: a `dsl/run` task ([`crate::process`]) whose work the
//! partition's leader performs after the commit, as it makes an HTTP call. Its arguments,
//! environment, stdin, command and code are evaluated now (their `${ }` strings), so the work
//! is fixed in the task's input.
//!
//! A shell command runs as `sh -c command sh arguments...` (the arguments are `$1`, `$2`, ...),
//! a python script as `python3 -c code arguments...`; both are processes, which a node runs
//! only when its operator allowed them (`baton server --dsl-run`). A `js` (or `javascript`)
//! script runs in the node's JavaScript sandbox instead, wrapped so that `console.log` and
//! `console.error` write its stdout and stderr, `process.argv` holds its arguments after two
//! entries (as under Node.js), `process.env` its environment, `process.stdin` its stdin as
//! text and `process.exit(code)` ends it; it reaches no file, network or module, so it needs no
//! permission. The process is killed at the task's `timeout`, or at
//! [`PROCESS_RUN_MS_DEFAULT`] without one (at most [`PROCESS_RUN_MS_MAX`]).

use super::call::external;
use super::{errors, Runner};
use crate::process::SCRIPT_KEY;
use crate::process::{ProcessRequest, PROCESS_KEY, PROCESS_TASK_TYPE, RETURN_KEY, ROOT_KEY};
use proto::limits::{PROCESS_RUN_MS_DEFAULT, PROCESS_RUN_MS_MAX};
use proto::model::dsl::Frame;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// Why a `run: container` cannot run (also refused at registration).
pub(crate) const NO_CONTAINERS: &str =
    "'run: container' is not supported: no container runtime is configured in Baton";

impl Runner<'_, '_> {
    /// Starts a `run` of a shell command or a script.
    pub(super) fn start_process(
        &mut self,
        at: &str,
        name: &str,
        def: &Value,
        input: Value,
        vars: &BTreeMap<String, Value>,
    ) -> Result<Frame, Value> {
        let run = def.get("run").cloned().unwrap_or_default();
        let Some((key, spec)) = ["shell", "script"]
            .into_iter()
            .find_map(|k| run.get(k).map(|spec| (k, spec)))
        else {
            return Err(errors::configuration_error(
                &format!("{at}/run"),
                NO_CONTAINERS,
            ));
        };
        let at_spec = format!("{at}/run/{key}");
        let spec = self
            .scope(vars, &input, None)
            .deep(spec, &input)
            .map_err(|e| errors::expression_error(&at_spec, &e))?;
        let timeout = self.timeout_ms(at, def)?;
        let mut task_input = work_input(key, &spec, timeout)
            .map_err(|detail| errors::configuration_error(&at_spec, &detail))?;
        let mode = run
            .get("return")
            .and_then(Value::as_str)
            .unwrap_or("stdout");
        task_input.insert(RETURN_KEY.into(), mode.into());
        let task_input = Value::Object(task_input);
        let task_id = self.open_task(at, name, PROCESS_TASK_TYPE, "", &task_input);
        Ok(external(at, name, task_id, input))
    }
}

/// The `dsl/run` task's input for the evaluated `spec` of a `shell` or a `script`.
fn work_input(
    key: &str,
    spec: &Value,
    timeout_ms: Option<i64>,
) -> Result<Map<String, Value>, String> {
    let arguments: Vec<String> = spec
        .get("arguments")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(text)
        .collect();
    let environment: BTreeMap<String, String> = spec
        .get("environment")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), text(v)))
        .collect();
    let stdin = spec.get("stdin").filter(|v| !v.is_null()).map(text);
    let given = |k: &str| spec.get(k).and_then(Value::as_str);
    let mut request = match (key, given("language")) {
        ("shell", _) => {
            let command = given("command").ok_or("a shell's 'command' must give a string")?;
            ProcessRequest::shell(command, arguments)
        }
        (_, Some("js" | "javascript")) => {
            let code = given("code").ok_or("a script's 'code' must give a string")?;
            let root = json!({"arguments": arguments, "environment": environment, "stdin": stdin});
            let mut input = Map::new();
            input.insert(SCRIPT_KEY.into(), javascript(code).into());
            input.insert(ROOT_KEY.into(), root);
            return Ok(input);
        }
        (_, Some("python")) => {
            let code = given("code").ok_or("a script's 'code' must give a string")?;
            ProcessRequest::python(code, arguments)
        }
        (_, language) => {
            let language = language.unwrap_or_default();
            return Err(format!("the script language '{language}' is not supported"));
        }
    };
    request.env = environment;
    request.stdin = stdin;
    request.timeout_ms = timeout_ms
        .and_then(|ms| u64::try_from(ms.max(1)).ok())
        .map_or(PROCESS_RUN_MS_DEFAULT, |ms| ms.min(PROCESS_RUN_MS_MAX));
    let request = serde_json::to_value(request).map_err(|e| e.to_string())?;
    Ok(Map::from_iter([(PROCESS_KEY.to_owned(), request)]))
}

/// An argument, a variable's value or stdin as text: a string as it is, anything else as JSON.
fn text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// A `js` script as the sandbox runs it (see the module's header): its value is the
/// process result `{code, stdout, stderr}`; `$` holds its arguments, environment and stdin.
fn javascript(code: &str) -> String {
    format!(
        r#"(function () {{
  var out = [], err = [], code = 0, exit = {{}};
  function line(args) {{
    return Array.prototype.map.call(args, function (v) {{
      return typeof v === 'string' ? v : JSON.stringify(v);
    }}).join(' ');
  }}
  function text(lines) {{ return lines.length ? lines.join('\n') + '\n' : ''; }}
  var console = {{
    log: function () {{ out.push(line(arguments)); }},
    info: function () {{ out.push(line(arguments)); }},
    error: function () {{ err.push(line(arguments)); }},
    warn: function () {{ err.push(line(arguments)); }}
  }};
  var process = {{
    argv: ['js', 'script'].concat($.arguments),
    env: $.environment,
    stdin: $.stdin === null ? '' : $.stdin,
    exit: function (c) {{ code = c === undefined ? 0 : c | 0; throw exit; }}
  }};
  try {{
    (function (console, process) {{
{code}
    }})(console, process);
  }} catch (e) {{
    if (e !== exit) {{ err.push(String(e)); code = 1; }}
  }}
  return {{ code: code, stdout: text(out), stderr: text(err) }};
}})()"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shell_becomes_a_process_request() {
        let spec = json!({"command": "echo $1", "arguments": ["a", 2],
            "environment": {"X": "1", "N": 3}, "stdin": "in"});
        let input = work_input("shell", &spec, Some(2_000)).unwrap_or_default();
        let request: ProcessRequest =
            serde_json::from_value(input[PROCESS_KEY].clone()).expect("a request");
        assert_eq!(request.program, "sh");
        assert_eq!(request.args, ["-c", "echo $1", "sh", "a", "2"]);
        assert_eq!(request.env.get("N").map(String::as_str), Some("3"));
        assert_eq!(request.stdin.as_deref(), Some("in"));
        assert_eq!(request.timeout_ms, 2_000);
        let spec = json!({"language": "python", "code": "print(1)"});
        let input = work_input("script", &spec, None).unwrap_or_default();
        assert_eq!(
            input[PROCESS_KEY]["timeoutMs"],
            json!(PROCESS_RUN_MS_DEFAULT)
        );
    }

    #[test]
    fn a_js_script_runs_in_the_sandbox_and_other_languages_are_refused() {
        let spec = json!({"language": "js", "code": "console.log(1)", "arguments": ["x"]});
        let input = work_input("script", &spec, None).unwrap_or_default();
        assert!(input.get(PROCESS_KEY).is_none());
        assert_eq!(input[ROOT_KEY]["arguments"], json!(["x"]));
        let script = input[SCRIPT_KEY].as_str().unwrap_or_default();
        assert!(script.contains("console.log(1)"));
        let refused = work_input("script", &json!({"language": "ruby", "code": ""}), None);
        assert!(refused.is_err());
    }
}
