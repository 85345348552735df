//! The API's doors against browsers and strangers: a page of another site cannot drive a node
//! (a `text/plain` POST with a foreign `Origin` is refused, and changes nothing), a body that is
//! neither JSON nor YAML is refused, a node told its names refuses a request naming another
//! host, a node asked to listen beyond loopback refuses to start unless told
//! `--insecure-no-auth`, which `/health` then reports, and the administration API is served on
//! its own listener with `--admin-http`, and not beyond loopback without it. Over HTTPS
//! (`--tls-cert`, `--tls-key`) a renewed certificate is served without a restart.

use harness::{baton_bin, free_port, wait_for, Server};
use serde_json::{json, Value};
use std::process::{Command, Stdio};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

/// A `baton` process started by hand, killed when dropped (a failed assertion included).
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .timeout(WAIT)
        .build()
        .expect("client")
}

/// POSTs a task definition as `content_type`, with `headers`; answers the status.
fn define(server: &Server, name: &str, content_type: &str, headers: &[(&str, &str)]) -> u16 {
    let body = json!([{"name": name, "retryCount": 0}]).to_string();
    let mut request = client()
        .post(format!("{}/api/metadata/taskdefs", server.base_url()))
        .header("Content-Type", content_type)
        .body(body);
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    request.send().expect("POST").status().as_u16()
}

fn defined(server: &Server, name: &str) -> bool {
    let url = format!("{}/api/metadata/taskdefs/{name}", server.base_url());
    client().get(url).send().expect("GET").status().is_success()
}

#[test]
fn another_sites_page_cannot_drive_the_node() {
    let server = Server::start();
    let own = format!("http://127.0.0.1:{}", server.port());
    let evil = [("Origin", "http://evil.example")];
    assert_eq!(define(&server, "t91_csrf", "text/plain", &evil), 403);
    assert_eq!(define(&server, "t91_csrf", "application/json", &evil), 403);
    let fetched = [("Sec-Fetch-Site", "cross-site")];
    assert_eq!(
        define(&server, "t91_csrf", "application/json", &fetched),
        403
    );
    assert_eq!(
        define(
            &server,
            "t91_form",
            "application/x-www-form-urlencoded",
            &[]
        ),
        415
    );
    assert!(
        !defined(&server, "t91_csrf") && !defined(&server, "t91_form"),
        "nothing stored"
    );

    let same = [("Origin", own.as_str())];
    assert_eq!(define(&server, "t91_ok", "application/json", &same), 200);
    assert!(defined(&server, "t91_ok"));
}

#[test]
fn a_node_told_its_names_refuses_other_hosts() {
    let server = Server::start_with_args(&["--host-names".into(), "baton.test".into()]);
    let health = |host: &str| {
        let url = format!("{}/health", server.base_url());
        client()
            .get(url)
            .header("Host", host)
            .send()
            .expect("GET")
            .status()
            .as_u16()
    };
    assert_eq!(health("evil.test"), 403);
    assert_eq!(health(&format!("baton.test:{}", server.port())), 200);
    assert_eq!(
        health(&format!("127.0.0.1:{}", server.port())),
        200,
        "an address"
    );
}

#[test]
fn the_administration_api_can_have_its_own_listener() {
    let admin_port = free_port();
    let admin = format!("127.0.0.1:{admin_port}");
    let server = Server::start_with_args(&["--admin-http".into(), admin.clone()]);
    let get = |base: &str, path: &str| {
        let reply = client().get(format!("{base}{path}")).send().expect("GET");
        (reply.status().as_u16(), reply.text().unwrap_or_default())
    };
    let (status, body) = get(&server.base_url(), "/api/admin/cluster");
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("--admin-http"), "{body}");
    let admin = format!("http://{admin}");
    assert_eq!(get(&admin, "/api/admin/cluster").0, 200);
    assert_eq!(get(&admin, "/health").0, 200);
    assert_eq!(
        get(&admin, "/api/metadata/taskdefs").0,
        404,
        "only administration"
    );
    assert_eq!(get(&server.base_url(), "/api/metadata/taskdefs").0, 200);
}

#[test]
fn listening_beyond_loopback_needs_insecure_no_auth_and_health_says_so() {
    let dir = tempfile::tempdir().expect("a data directory");
    let port = free_port();
    let command = |extra: &[&str]| {
        let mut command = Command::new(baton_bin());
        command
            .args(["server", "--partitions", "1", "--http"])
            .arg(format!("0.0.0.0:{port}"))
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .args(extra)
            .stdin(Stdio::null());
        command
    };
    let refused = command(&[]).output().expect("run baton");
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("--insecure-no-auth"), "{said}");

    let child = command(&["--insecure-no-auth"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn baton");
    let child = Running(child);
    let url = format!("http://127.0.0.1:{port}/health");
    let body: Value = wait_for(WAIT, "the node's health", || {
        let reply = client().get(&url).send().ok()?;
        reply
            .status()
            .is_success()
            .then(|| reply.json().ok())
            .flatten()
    });
    let admin = client()
        .get(format!("http://127.0.0.1:{port}/api/admin/cluster"))
        .send()
        .expect("GET");
    drop(child);
    let insecure = body["insecure"].as_str().unwrap_or_default();
    assert!(insecure.contains("without access control"), "{body:#}");
    assert_eq!(
        admin.status().as_u16(),
        404,
        "no administration beyond loopback"
    );
}

/// Writes a new self-signed certificate for `localhost` and its key; answers the certificate.
fn certificate(dir: &std::path::Path) -> reqwest::Certificate {
    let pair = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("a cert");
    std::fs::write(dir.join("api.key"), pair.key_pair.serialize_pem()).expect("write the key");
    std::fs::write(dir.join("api.pem"), pair.cert.pem()).expect("write the certificate");
    reqwest::Certificate::from_pem(pair.cert.pem().as_bytes()).expect("a PEM certificate")
}

#[test]
fn the_api_serves_https_and_a_renewed_certificate_without_a_restart() {
    let dir = tempfile::tempdir().expect("a directory");
    let first = certificate(dir.path());
    let port = free_port();
    let child = Command::new(baton_bin())
        .args(["server", "--partitions", "1", "--http"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .arg("--tls-cert")
        .arg(dir.path().join("api.pem"))
        .arg("--tls-key")
        .arg(dir.path().join("api.key"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn baton");
    let child = Running(child);
    let trusting = |certificate: reqwest::Certificate| {
        reqwest::blocking::Client::builder()
            .tls_built_in_root_certs(false)
            .add_root_certificate(certificate)
            .timeout(WAIT)
            .build()
            .expect("client")
    };
    let healthy = |client: &reqwest::blocking::Client| {
        let url = format!("https://localhost:{port}/health");
        client
            .get(url)
            .send()
            .is_ok_and(|r| r.status().is_success())
    };
    let trusted = trusting(first);
    wait_for(WAIT, "the node's health over HTTPS", || {
        healthy(&trusted).then_some(())
    });
    let plain = client()
        .get(format!("http://127.0.0.1:{port}/health"))
        .send();
    assert!(
        plain.map_or(true, |r| !r.status().is_success()),
        "no plain HTTP"
    );

    let renewed = trusting(certificate(dir.path()));
    wait_for(WAIT, "the renewed certificate", || {
        healthy(&renewed).then_some(())
    });
    let batonctl = Command::new(baton_bin().with_file_name("batonctl"))
        .arg("--url")
        .arg(format!("https://localhost:{port}"))
        .arg("--ca-cert")
        .arg(dir.path().join("api.pem"))
        .arg("health")
        .output()
        .expect("batonctl runs");
    let said = String::from_utf8_lossy(&batonctl.stdout);
    let complained = String::from_utf8_lossy(&batonctl.stderr);
    assert!(batonctl.status.success(), "{said} {complained}");
    drop(child);
}
