//! Cluster versions through the binary: a node reports its binary and the versions it serves
//! (`GET /api/admin/version`, `batonctl upgrade status`), keeps the active version in its data
//! directory, and a binary refuses to start on a data directory at a version it does not serve,
//! naming both (docs/upgrading.md).

use harness::Server;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

fn batonctl(server: &Server, args: &[&str]) -> std::process::Output {
    Command::new(harness::baton_bin().with_file_name("batonctl"))
        .args(["--url", &server.base_url()])
        .args(args)
        .output()
        .expect("batonctl runs")
}

fn stdout_of(out: &std::process::Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn kept_version(data: &Path) -> String {
    std::fs::read_to_string(data.join("CLUSTER_VERSION")).expect("the version file")
}

/// The newest cluster version this build serves.
const NEWEST: u32 = proto::version::VersionRange::BUILD.max.0;

#[test]
fn a_node_reports_its_binary_and_the_active_version() {
    let server = Server::start();
    let api = server.api();
    // A lone node activates the newest version it serves by itself, within a second or so.
    let status = harness::wait_for(Duration::from_secs(30), "the newest version active", || {
        let status = api.get("/api/admin/version").expect_ok("version").json();
        (status["active"] == NEWEST).then_some(status)
    });
    assert_eq!(status["newest"], NEWEST, "{status}");
    let member = &status["members"][0];
    assert_eq!(
        member["binary"]["release"],
        env!("CARGO_PKG_VERSION"),
        "{status}"
    );
    assert_eq!(member["binary"]["supports"]["min"], 1, "{status}");
    assert_eq!(member["binary"]["supports"]["max"], NEWEST, "{status}");
    assert_eq!(member["servesActive"], true, "{status}");
    assert_eq!(
        kept_version(&server.data_dir().join("data")),
        format!("{NEWEST}\n")
    );

    let shown = stdout_of(&batonctl(&server, &["upgrade", "status"]));
    let active = format!("active cluster version: {NEWEST}");
    assert!(shown.contains(&active), "{shown}");
    assert!(shown.contains(env!("CARGO_PKG_VERSION")), "{shown}");
    let finalized = stdout_of(&batonctl(&server, &["upgrade", "finalize"]));
    let finalized_text = format!("cluster version {NEWEST} is active");
    assert!(finalized.contains(&finalized_text), "{finalized}");
    let refused = batonctl(&server, &["upgrade", "finalize", "--version", "7"]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(stderr.contains("not version 7"), "{stderr}");
}

#[test]
fn a_binary_refuses_a_data_directory_at_a_version_it_does_not_serve() {
    let mut server = Server::start();
    server.kill9();
    let data = server.data_dir().join("data");
    let beyond = NEWEST + 1;
    std::fs::write(data.join("CLUSTER_VERSION"), format!("{beyond}\n")).expect("write the version");
    server.restart_unchecked();
    let status = server.wait_exit(Duration::from_secs(60));
    assert!(!status.success(), "{status}");
    let log = server.log_tail();
    let expected = format!(
        "this binary (baton {}) serves cluster versions 1 to {NEWEST}, but the cluster is at \
         version {beyond}: run a binary that serves version {beyond} (a version cannot be rolled \
         back once it is activated)",
        env!("CARGO_PKG_VERSION")
    );
    assert!(log.contains(&expected), "{log}");
    assert_eq!(
        kept_version(&data),
        format!("{beyond}\n"),
        "the refusal changed nothing"
    );
}
