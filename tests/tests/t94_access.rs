//! Access control end to end. A node started with `--auth` sets it up and writes the
//! administrator's key; conductor-python 2.0.0 with `AuthenticationSettings` then runs workers
//! and workflows unchanged, a worker-only key is refused everything but its work, and a key
//! made inactive is refused (`tests/python/test_access.py`). In a 3-node cluster every role meets
//! every family of routes on every node (requests a node forwards to a leader included), and a
//! key made inactive through one node is refused by the others, the time it took measured.

use harness::cluster::Cluster;
use harness::python::pytest;
use harness::{baton_bin, wait_for, Api, Server};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(30);
const PYTEST_DEADLINE: Duration = Duration::from_secs(180);

#[test]
fn conductor_python_authenticates_with_application_keys() {
    let server = Server::start_with_args(&["--auth".to_owned()]);
    let key = server.data_dir().join("data").join("admin-key.json");
    assert!(key.is_file(), "--auth writes {}", key.display());
    // batonctl authenticates with a key file; without one the node refuses it.
    let batonctl = |key_file: Option<&std::path::Path>| {
        let mut command = std::process::Command::new(baton_bin().with_file_name("batonctl"));
        command.arg("--url").arg(server.base_url());
        if let Some(file) = key_file {
            command.arg("--key-file").arg(file);
        }
        command.arg("cluster").output().expect("batonctl runs")
    };
    let refused = batonctl(None);
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("401"), "{said}");
    let allowed = batonctl(Some(&key));
    let said = String::from_utf8_lossy(&allowed.stdout);
    assert!(
        allowed.status.success(),
        "{said} {}",
        String::from_utf8_lossy(&allowed.stderr)
    );
    assert!(said.contains("meta"), "{said}");

    let key = key.to_string_lossy().into_owned();
    let env = [
        ("CONDUCTOR_WORKER_ISOLATION", None),
        ("BATON_ADMIN_KEY", Some(key.as_str())),
    ];
    pytest(
        "tests/python/test_access.py",
        &server.base_url(),
        &env,
        PYTEST_DEADLINE,
    );
}

/// One request to `base` with `token`: its status and JSON body.
fn call(
    base: &str,
    token: Option<&str>,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> (u16, Value) {
    let headers: Vec<_> = token.map(|t| ("X-Authorization", t)).into_iter().collect();
    Api::with_timeout(base, WAIT).call(&headers, method, path, body)
}

fn ok(answer: (u16, Value), what: &str) -> Value {
    assert!((200..300).contains(&answer.0), "{what}: {answer:?}");
    answer.1
}

fn token(base: &str, key: &Value) -> String {
    let body = json!({"keyId": key["id"], "keySecret": key["secret"]});
    let answer = ok(call(base, None, "POST", "/api/token", Some(&body)), "token");
    answer["token"].as_str().expect("a token").to_owned()
}

/// An application with `role` (none when empty) made through `base` by `admin`: its id and a key.
fn application(base: &str, admin: &str, name: &str, role: &str) -> (String, Value) {
    let app = ok(
        call(
            base,
            Some(admin),
            "POST",
            "/api/applications",
            Some(&json!({"name": name})),
        ),
        "create an application",
    );
    let id = app["id"].as_str().expect("id").to_owned();
    if !role.is_empty() {
        let roles = format!("/api/applications/{id}/roles/{role}");
        ok(call(base, Some(admin), "POST", &roles, None), "grant");
    }
    let keys = format!("/api/applications/{id}/accessKeys");
    let key = ok(call(base, Some(admin), "POST", &keys, None), "a key");
    (id, key)
}

/// One request of each family: (family, method, path, body).
fn requests(n: usize) -> Vec<(&'static str, &'static str, String, Option<Value>)> {
    vec![
        (
            "Read",
            "GET",
            "/api/metadata/taskdefs/t94_task".into(),
            None,
        ),
        ("Read", "GET", "/api/workflow/search?size=1".into(), None),
        (
            "Define",
            "POST",
            "/api/metadata/taskdefs".into(),
            Some(json!([{"name": format!("t94_def_{n}"), "retryCount": 0}])),
        ),
        (
            "Operate",
            "POST",
            "/api/workflow".into(),
            Some(json!({"name": "t94_wf", "input": {}})),
        ),
        (
            "Work",
            "GET",
            "/api/tasks/poll/t94_task?workerid=w".into(),
            None,
        ),
        ("Admin", "GET", "/api/admin/cluster".into(), None),
        ("Admin", "GET", "/api/applications".into(), None),
    ]
}

const ROLES: [(&str, &[&str]); 5] = [
    ("ADMIN", &["Read", "Define", "Operate", "Work", "Admin"]),
    ("METADATA_MANAGER", &["Read", "Define"]),
    ("WORKFLOW_MANAGER", &["Read", "Operate", "Work"]),
    ("WORKER", &["Work"]),
    ("READ_ONLY", &["Read"]),
];

#[test]
fn every_role_meets_every_route_family_on_every_node_and_revocation_spreads() {
    let cluster = Cluster::start(3);
    let base = |id: u64| cluster.base_url(id);
    let admin_key = ok(
        call(&base(2), None, "POST", "/api/admin/access", None),
        "set up",
    );
    // Set up once: a node that knows it already wants a token, one that does not yet finds
    // it set up when it asks the meta group.
    let again = call(&base(3), None, "POST", "/api/admin/access", None).0;
    assert!(again == 401 || again == 409, "{again}");
    let admin = token(&base(3), &admin_key);
    let task = json!([{"name": "t94_task", "retryCount": 0}]);
    ok(
        call(
            &base(1),
            Some(&admin),
            "POST",
            "/api/metadata/taskdefs",
            Some(&task),
        ),
        "task def",
    );
    let wf = json!({"name": "t94_wf", "version": 1, "schemaVersion": 2, "tasks": [
        {"name": "t94_task", "taskReferenceName": "t", "type": "SIMPLE"}]});
    ok(
        call(
            &base(1),
            Some(&admin),
            "POST",
            "/api/metadata/workflow",
            Some(&wf),
        ),
        "workflow def",
    );

    let mut n = 0;
    for (role, allowed) in ROLES {
        let (_, key) = application(&base(1), &admin, &format!("t94-{role}"), role);
        for id in cluster.ids() {
            let token = token(&base(id), &key);
            for (family, method, path, body) in requests(n) {
                n += 1;
                let (status, answer) = call(&base(id), Some(&token), method, &path, body.as_ref());
                let what = format!("{role} {method} {path} on node {id}: {status} {answer}");
                if allowed.contains(&family) {
                    assert!(status != 401 && status != 403 && status < 500, "{what}");
                } else {
                    assert_eq!(status, 403, "{what}");
                    assert_eq!(answer["code"], "FORBIDDEN", "{what}");
                }
            }
            assert_eq!(
                call(&base(id), None, "GET", "/api/metadata/taskdefs", None).0,
                401
            );
        }
    }

    // A grant to execute some task types opens work on those types only.
    let (granted, key) = application(&base(1), &admin, "t94-granted", "");
    let grant = json!({"subject": {"type": "USER", "id": format!("app:{granted}")},
        "target": {"type": "TASK_DEF", "id": "t94_other*"}, "access": ["EXECUTE"]});
    ok(
        call(
            &base(2),
            Some(&admin),
            "POST",
            "/api/auth/authorization",
            Some(&grant),
        ),
        "grant",
    );
    let worker = token(&base(3), &key);
    let poll = |task_type: &str| {
        let path = format!("/api/tasks/poll/{task_type}?workerid=w");
        call(&base(3), Some(&worker), "GET", &path, None).0
    };
    assert_eq!(poll("t94_other_type"), 204);
    assert_eq!(poll("t94_task"), 403);
    let started = json!({"name": "t94_wf", "input": {}});
    ok(
        call(
            &base(1),
            Some(&admin),
            "POST",
            "/api/workflow",
            Some(&started),
        ),
        "start",
    );
    let task = wait_for(WAIT, "a t94_task", || {
        let answer = call(
            &base(1),
            Some(&admin),
            "GET",
            "/api/tasks/poll/t94_task?workerid=a",
            None,
        );
        (answer.0 == 200).then_some(answer.1)
    });
    let result = json!({"taskId": task["taskId"], "workflowInstanceId": task["workflowInstanceId"],
        "status": "COMPLETED"});
    let (status, answer) = call(&base(2), Some(&worker), "POST", "/api/tasks", Some(&result));
    assert_eq!(status, 403, "another type's result: {answer}");
    let by_ref = format!(
        "/api/tasks/{}/t/COMPLETED",
        task["workflowInstanceId"].as_str().unwrap_or("")
    );
    assert_eq!(
        call(&base(2), Some(&worker), "POST", &by_ref, Some(&json!({}))).0,
        403
    );
    ok(
        call(&base(2), Some(&admin), "POST", "/api/tasks", Some(&result)),
        "the admin completes it",
    );

    // A grant to run and read the workflows of one name opens their starts, operations and
    // reads, and nothing of other workflows.
    let other = json!({"name": "t94_x_wf", "version": 1, "schemaVersion": 2, "tasks": [
        {"name": "t94_task", "taskReferenceName": "t", "type": "SIMPLE"}]});
    ok(
        call(
            &base(1),
            Some(&admin),
            "POST",
            "/api/metadata/workflow",
            Some(&other),
        ),
        "t94_x_wf",
    );
    let (runner, key) = application(&base(1), &admin, "t94-runner", "");
    let grant = json!({"subject": {"type": "USER", "id": format!("app:{runner}")},
        "target": {"type": "WORKFLOW_DEF", "id": "t94_wf"}, "access": ["EXECUTE", "READ"]});
    ok(
        call(
            &base(2),
            Some(&admin),
            "POST",
            "/api/auth/authorization",
            Some(&grant),
        ),
        "grant",
    );
    let runner = token(&base(3), &key);
    let as_runner = |method: &str, path: &str, body: Option<&Value>| {
        call(&base(3), Some(&runner), method, path, body)
    };
    let mine = ok(
        as_runner("POST", "/api/workflow", Some(&json!({"name": "t94_wf"}))),
        "start",
    );
    let mine = mine.as_str().expect("an id").to_owned();
    let theirs = ok(
        call(
            &base(1),
            Some(&admin),
            "POST",
            "/api/workflow",
            Some(&json!({"name": "t94_x_wf"})),
        ),
        "start another",
    );
    let theirs = theirs.as_str().expect("an id").to_owned();
    assert_eq!(
        as_runner("POST", "/api/workflow", Some(&json!({"name": "t94_x_wf"}))).0,
        403
    );
    for (method, path, expected) in [
        ("GET", format!("/api/workflow/{mine}"), 200),
        ("GET", format!("/api/workflow/{mine}/status"), 200),
        ("PUT", format!("/api/workflow/{mine}/pause"), 200),
        ("DELETE", format!("/api/workflow/{mine}"), 200),
        ("GET", format!("/api/workflow/{theirs}"), 403),
        ("PUT", format!("/api/workflow/{theirs}/pause"), 403),
        ("DELETE", format!("/api/workflow/{theirs}"), 403),
        ("GET", "/api/workflow/search".to_owned(), 403),
        ("POST", "/api/workflow/bulk/terminate".to_owned(), 403),
        ("GET", "/api/metadata/workflow/t94_wf".to_owned(), 200),
        ("GET", "/api/metadata/workflow/t94_x_wf".to_owned(), 403),
        ("DELETE", "/api/metadata/workflow/t94_wf/1".to_owned(), 403),
    ] {
        let body = (method != "GET").then(|| json!([theirs]));
        let (status, answer) = as_runner(method, &path, body.as_ref());
        assert_eq!(status, expected, "{method} {path}: {answer}");
    }

    // Revocation: a key made inactive through node 1 is refused by nodes 2 and 3.
    let (app, key) = application(&base(1), &admin, "t94-revoked", "READ_ONLY");
    let reader = token(&base(2), &key);
    for id in [2, 3] {
        ok(
            call(
                &base(id),
                Some(&reader),
                "GET",
                "/api/metadata/taskdefs",
                None,
            ),
            "before",
        );
    }
    let status = format!(
        "/api/applications/{app}/accessKeys/{}/status",
        key["id"].as_str().expect("a key id")
    );
    let started = Instant::now();
    ok(
        call(&base(1), Some(&admin), "POST", &status, None),
        "deactivate",
    );
    for id in [2, 3] {
        wait_for(WAIT, "the revocation to reach every node", || {
            let (code, _) = call(
                &base(id),
                Some(&reader),
                "GET",
                "/api/metadata/taskdefs",
                None,
            );
            (code == 401).then_some(())
        });
        println!(
            "node {id} refused the revoked key {:?} after it was revoked",
            started.elapsed()
        );
    }

    // Every change is in the audit log, with who made it and never a secret.
    let audit = ok(
        call(
            &base(3),
            Some(&admin),
            "GET",
            "/api/admin/audit?limit=1000",
            None,
        ),
        "the audit log",
    );
    let entries = audit.as_array().expect("entries");
    let made_by = |by: &str, action: &str, target: &str| {
        entries.iter().any(|e| {
            e["action"] == action
                && e["target"].as_str().is_some_and(|t| t.contains(target))
                && e["by"].as_str().is_some_and(|b| b.starts_with(by))
        })
    };
    let made = |action: &str, target: &str| made_by("admin (", action, target);
    // Operations on workflows too, by whoever made them; starts are not recorded.
    assert!(made_by("t94-runner (", "PauseWorkflow", &mine), "{audit:#}");
    assert!(
        made_by("t94-runner (", "TerminateWorkflow", &mine),
        "{audit:#}"
    );
    assert!(!entries
        .iter()
        .any(|e| e["target"].as_str().is_some_and(|t| t.contains(&theirs))));
    assert!(made("PutTaskDefs", "t94_task"), "{audit:#}");
    assert!(made("PutWorkflowDef", "t94_wf v1"), "{audit:#}");
    assert!(made("GrantRole", "READ_ONLY"), "{audit:#}");
    assert!(made("SetAccessKeyStatus", "Inactive"), "{audit:#}");
    assert!(made("GrantAccess", "t94_other*"), "{audit:#}");
    let set_up = entries.iter().find(|e| e["action"] == "SetUpAccess");
    assert_eq!(set_up.map(|e| e["by"].clone()), Some(json!("anonymous")));
    let text = audit.to_string();
    assert!(!text.contains(admin_key["secret"].as_str().unwrap_or("?")));
    assert!(!text.contains(key["secret"].as_str().unwrap_or("?")));
}

/// Secrets: conductor-python stores one through its SecretClient, a workflow's HTTP task sends
/// it in a header while the workflow holds only its placeholder, and applications holding
/// grants alone create and read what their grants name (`tests/python/test_secrets.py`). Then
/// no file under the node's data directory (Raft log, stores, snapshots, logs) holds the value.
#[test]
fn secrets_are_sealed_at_rest_and_reach_only_the_calls_that_name_them() {
    let keys = tempfile::tempdir().expect("a directory");
    let key_file = keys.path().join("secrets.key");
    std::fs::write(&key_file, format!("{}\n", "5a".repeat(32))).expect("write the key");
    let mut server = Server::start_with_args(&[
        "--auth".to_owned(),
        "--secrets-key-file".to_owned(),
        key_file.to_string_lossy().into_owned(),
    ]);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("a clock after 1970")
        .as_nanos();
    let value = format!("sv-{nanos}-never-stored");
    let admin_key = server.data_dir().join("data").join("admin-key.json");
    let admin_key = admin_key.to_string_lossy().into_owned();
    let env = [
        ("BATON_ADMIN_KEY", Some(admin_key.as_str())),
        ("BATON_SECRET_VALUE", Some(value.as_str())),
    ];
    pytest(
        "tests/python/test_secrets.py",
        &server.base_url(),
        &env,
        PYTEST_DEADLINE,
    );
    assert!(server.terminate(WAIT).is_some(), "the node stops");
    let named = files_holding(server.data_dir(), b"sec_api_token");
    assert!(
        !named.is_empty(),
        "the secret's name is stored, so the scan reads the stores"
    );
    let holding = files_holding(server.data_dir(), value.as_bytes());
    assert!(holding.is_empty(), "the value is stored in {holding:?}");
}

/// The files under `dir` whose bytes contain `needle`.
fn files_holding(dir: &std::path::Path, needle: &[u8]) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut folders = vec![dir.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).expect("read the folder") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                folders.push(path);
            } else if std::fs::read(&path)
                .expect("read the file")
                .windows(needle.len())
                .any(|w| w == needle)
            {
                found.push(path);
            }
        }
    }
    found
}
