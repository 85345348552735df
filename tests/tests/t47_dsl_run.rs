//! Serverless Workflow `run` of a shell command and of a script. A node started with
//! `--dsl-run shell,python` runs shell commands (arguments as `$1`, `$2`, ..., environment,
//! stdin) and python scripts; `return` shapes the output; a non-zero exit faults the instance
//! with the runtime error unless `return` shows the exit code; a command past its task's
//! `timeout` is killed. A `js` script runs in the JavaScript sandbox without the flag. A node
//! without the flag refuses documents that run processes at registration, at the `run`'s
//! pointer, and every node refuses `run.container`.

use std::path::Path;
use std::time::Duration;

use harness::{wait_until, Api, Server};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(30);

const RUNTIME_ERROR: &str = "https://serverlessworkflow.io/spec/1.0.0/errors/runtime";
const TIMEOUT_ERROR: &str = "https://serverlessworkflow.io/spec/1.0.0/errors/timeout";

fn server_running_processes() -> Server {
    Server::start_with_args(&["--dsl-run".to_owned(), "shell,python".to_owned()])
}

fn document(name: &str, body: &str) -> String {
    format!(
        "document:\n  dsl: '1.0.3'\n  namespace: test\n  name: {name}\n  version: '1.0.0'\n{body}"
    )
}

/// Registers and starts `text` (named `name`) on `input`; answers the instance once it ended.
fn run(api: &Api, name: &str, text: &str, input: &Value) -> Value {
    let (status, body) = api.register_dsl(text);
    assert_eq!(status, 200, "{body}");
    let id = api.start_dsl(&format!("test/{name}/1.0.0"), input);
    api.wait_dsl_ended(&id, WAIT)
}

#[test]
fn a_shell_command_gets_arguments_environment_and_stdin() {
    let server = server_running_processes();
    let text = document(
        "greet",
        r#"do:
  - greet:
      run:
        shell:
          command: 'echo "$1 $2 $GREETING"; cat'
          arguments: [ '${ .who }', two ]
          environment:
            GREETING: ${ .greeting }
          stdin: ${ .letter }
"#,
    );
    let input = json!({"who": "world", "greeting": "hi", "letter": "dear"});
    let done = run(server.api(), "greet", &text, &input);
    assert_eq!(done["phase"], "completed", "{done:#}");
    assert_eq!(done["output"], json!("world two hi\ndear"), "{done:#}");
}

#[test]
fn return_all_shows_a_failing_command() {
    let server = server_running_processes();
    let text = document(
        "all",
        "do:\n  - fail:\n      run:\n        shell:\n          command: 'echo out; echo err >&2; exit 3'\n        return: all\n",
    );
    let done = run(server.api(), "all", &text, &json!({}));
    assert_eq!(done["phase"], "completed", "{done:#}");
    let all = json!({"code": 3, "stdout": "out\n", "stderr": "err\n"});
    assert_eq!(done["output"], all, "{done:#}");
}

#[test]
fn a_non_zero_exit_faults_with_the_runtime_error() {
    let server = server_running_processes();
    let text = document(
        "exit",
        "do:\n  - fail:\n      run:\n        shell:\n          command: 'echo broken >&2; exit 4'\n",
    );
    let done = run(server.api(), "exit", &text, &json!({}));
    assert_eq!(done["phase"], "faulted", "{done:#}");
    assert_eq!(done["error"]["type"], RUNTIME_ERROR, "{done:#}");
    assert_eq!(done["error"]["status"], 500, "{done:#}");
    let detail = done["error"]["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("code 4") && detail.contains("broken"),
        "{done:#}"
    );
}

#[test]
fn a_command_past_its_timeout_is_killed() {
    let server = server_running_processes();
    let dir = tempfile::tempdir().expect("a directory");
    let pid_file = dir.path().join("pid");
    let text = document(
        "slow",
        r#"do:
  - slow:
      timeout:
        after:
          seconds: 1
      run:
        shell:
          command: 'echo $$ > "$1"; exec sleep 600'
          arguments: [ '${ .pidFile }' ]
"#,
    );
    let input = json!({"pidFile": pid_file.display().to_string()});
    let done = run(server.api(), "slow", &text, &input);
    assert_eq!(done["phase"], "faulted", "{done:#}");
    assert_eq!(done["error"]["type"], TIMEOUT_ERROR, "{done:#}");
    let pid = std::fs::read_to_string(&pid_file).expect("the command wrote its pid");
    let proc_dir = format!("/proc/{}", pid.trim());
    let what = format!("the command {} to be killed", pid.trim());
    wait_until(WAIT, &what, || !is_running(Path::new(&proc_dir)));
}

/// Whether the process of `/proc/{pid}` is there and not a zombie.
fn is_running(proc_dir: &Path) -> bool {
    let stat = std::fs::read_to_string(proc_dir.join("stat")).unwrap_or_default();
    let state = stat
        .rsplit(')')
        .next()
        .and_then(|rest| rest.split_whitespace().next());
    matches!(state, Some(s) if s != "Z" && s != "X")
}

#[test]
fn a_python_script_runs() {
    let server = server_running_processes();
    let text = document(
        "py",
        r#"do:
  - py:
      run:
        script:
          language: python
          code: |
            import os, sys
            print(sys.argv[1], os.environ["X"], sys.stdin.read())
          arguments: [ a ]
          environment:
            X: y
          stdin: z
"#,
    );
    let done = run(server.api(), "py", &text, &json!({}));
    assert_eq!(done["phase"], "completed", "{done:#}");
    assert_eq!(done["output"], json!("a y z\n"), "{done:#}");
}

#[test]
fn without_the_flag_processes_are_refused_and_js_runs_in_the_sandbox() {
    let server = Server::start();
    let api = server.api();
    let shell = document(
        "shell",
        "do:\n  - runIt:\n      run:\n        shell:\n          command: 'echo hi'\n",
    );
    let (status, body) = api.register_dsl(&shell);
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["instance"], "/do/0/runIt/run/shell", "{body}");
    assert!(body.to_string().contains("--dsl-run shell"), "{body}");
    let python = document(
        "python",
        "do:\n  - py:\n      run:\n        script:\n          language: python\n          code: 'print(1)'\n",
    );
    let (status, body) = api.register_dsl(&python);
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["instance"], "/do/0/py/run/script", "{body}");
    let js = document(
        "js",
        r#"do:
  - js:
      run:
        script:
          language: js
          code: |
            console.log(process.argv[2], process.env.X, process.stdin);
          arguments: [ a ]
          environment:
            X: y
          stdin: z
"#,
    );
    let done = run(api, "js", &js, &json!({}));
    assert_eq!(done["phase"], "completed", "{done:#}");
    assert_eq!(done["output"], json!("a y z\n"), "{done:#}");
}

#[test]
fn a_container_is_refused() {
    let server = server_running_processes();
    let text = document(
        "box",
        "do:\n  - box:\n      run:\n        container:\n          image: alpine\n",
    );
    let (status, body) = server.api().register_dsl(&text);
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["instance"], "/do/0/box/run/container", "{body}");
    assert!(body.to_string().contains("no container runtime"), "{body}");
}
