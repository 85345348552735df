//! Workers over QUIC: workers built on the Rust SDK (`worker` crate) connect with mutual
//! TLS, get tasks pushed against their credit, and have their results acknowledged after commit.
//! The certificates come from `baton certs` and `baton worker-cert`; the refusals (no client
//! certificate, another CA, a task type the certificate does not grant) are checked against the
//! real node.

use harness::cluster::{free_udp_port, write_certs, write_worker_cert as worker_cert};
use harness::Server;
use rustls_pki_types::pem::PemObject;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use worker::{Outcome, Task, Tls, Worker};

const TASK: &str = "quic_echo";
/// Longest a workflow may take here.
const LONG_WAIT: Duration = Duration::from_secs(60);

/// A single node serving QUIC workers, with its certificate directory.
fn node_with_workers(certs: &Path) -> (Server, SocketAddr) {
    write_certs(certs, &[1]);
    let addr: SocketAddr = format!("127.0.0.1:{}", free_udp_port())
        .parse()
        .expect("addr");
    let server = Server::start_with_args(&[
        "--workers".into(),
        addr.to_string(),
        "--certs".into(),
        certs.display().to_string(),
    ]);
    define_chain(server.api(), 1, 2);
    (server, addr)
}

/// `quic_chain`: two echo steps, `a` then `b`, passing `n` along; the task type retries
/// `retries` times and times an attempt out after `response_timeout_s` without a result.
fn define_chain(api: &harness::Api, retries: u32, response_timeout_s: u32) {
    api.register_task_defs(&[json!({
        "name": TASK, "retryCount": retries, "retryLogic": "FIXED", "retryDelaySeconds": 0,
        "responseTimeoutSeconds": response_timeout_s, "timeoutSeconds": 60,
        "timeoutPolicy": "RETRY"
    })]);
    api.register_workflow_def(&json!({
        "name": "quic_chain", "version": 1, "schemaVersion": 2,
        "tasks": [
            {"name": TASK, "taskReferenceName": "a", "type": "SIMPLE",
             "inputParameters": {"n": "${workflow.input.n}"}},
            {"name": TASK, "taskReferenceName": "b", "type": "SIMPLE",
             "inputParameters": {"n": "${a.output.echo.n}"}}
        ],
        "outputParameters": {"n": "${b.output.echo.n}"}
    }));
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// An echo worker: completes every task with `{"echo": input}`.
fn echo_worker(nodes: Vec<SocketAddr>, tls: Tls, id: &str, concurrency: u32) -> Worker {
    Worker::builder()
        .nodes(nodes)
        .tls(tls)
        .worker_id(id)
        .handler(TASK, concurrency, |task: Task| async move {
            Ok(Outcome::completed(json!({ "echo": task.input() })))
        })
        .build()
        .expect("worker builds")
}

/// Waits (bounded) until the worker's status satisfies `ok`.
async fn wait_status(handle: &worker::Handle, what: &str, ok: impl Fn(&worker::Status) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut watch = handle.watch();
    loop {
        if ok(&watch.borrow_and_update()) {
            return;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "{what}: worker status is {:?}",
            handle.status()
        );
        let _ = tokio::time::timeout(left, watch.changed()).await;
    }
}

#[test]
fn quic_workers_complete_workflows_with_results_acknowledged_after_commit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let certs = dir.path().join("certs");
    let (server, addr) = node_with_workers(&certs);
    worker_cert(&certs, "echo-1", TASK);
    let api = server.api().clone();
    let rt = runtime();
    let tls = Tls::from_dir(&certs, "echo-1").expect("worker tls");
    let handle = rt.block_on(async { echo_worker(vec![addr], tls, "echo-1", 16).start() });

    let ids: Vec<String> = (0..200)
        .map(|n| api.start_workflow("quic_chain", &json!({"n": n})))
        .collect();
    for (n, id) in ids.iter().enumerate() {
        let wf = api.wait_workflow_status(id, "COMPLETED", LONG_WAIT);
        assert_eq!(wf["output"]["n"], json!(n), "{wf}");
        for t in wf["tasks"].as_array().expect("tasks") {
            assert_eq!(
                t["workerId"],
                json!("echo-1"),
                "the certificate names the worker"
            );
            assert_eq!(t["status"], json!("COMPLETED"));
        }
    }
    rt.block_on(async {
        wait_status(&handle, "every result acknowledged", |s| {
            s.results_acked >= 400 && s.unacked == 0
        })
        .await;
        handle.shutdown().await.expect("graceful shutdown");
    });
    assert_eq!(handle.status().results_stale, 0);
}

/// A result that comes after the attempt timed out is refused as stale and changes nothing; the
/// retry (a new attempt with its own lease) completes the workflow.
#[test]
fn a_result_after_the_lease_ended_is_refused_as_stale() {
    let dir = tempfile::tempdir().expect("tempdir");
    let certs = dir.path().join("certs");
    let (server, addr) = node_with_workers(&certs);
    worker_cert(&certs, "slow-1", TASK);
    let api = server.api().clone();
    let rt = runtime();
    let tls = Tls::from_dir(&certs, "slow-1").expect("worker tls");
    let first = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let handle = rt.block_on(async {
        Worker::builder()
            .node(addr)
            .tls(tls)
            .worker_id("slow-1")
            .handler(TASK, 4, move |task: Task| {
                let first = first.clone();
                async move {
                    // The first attempt overruns its 2 s response timeout.
                    if first.swap(false, std::sync::atomic::Ordering::SeqCst) {
                        tokio::time::sleep(Duration::from_millis(3_500)).await;
                    }
                    Ok(Outcome::completed(json!({ "echo": task.input() })))
                }
            })
            .build()
            .expect("worker builds")
            .start()
    });
    let id = api.start_workflow("quic_chain", &json!({"n": 7}));
    let wf = api.wait_workflow_status(&id, "COMPLETED", LONG_WAIT);
    let attempts: Vec<&Value> = wf["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .filter(|t| t["referenceTaskName"] == "a")
        .collect();
    assert_eq!(attempts.len(), 2, "{wf}");
    assert_eq!(attempts[0]["status"], json!("TIMED_OUT"), "{wf}");
    assert_eq!(attempts[1]["status"], json!("COMPLETED"), "{wf}");
    rt.block_on(async {
        wait_status(&handle, "the late result refused as stale", |s| {
            s.results_stale == 1
        })
        .await;
        handle.shutdown().await.expect("graceful shutdown");
    });
    let again = api.workflow(&id);
    assert_eq!(again["tasks"][0]["status"], json!("TIMED_OUT"), "{again}");
}

#[test]
fn a_task_type_the_certificate_does_not_grant_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let certs = dir.path().join("certs");
    let (_server, addr) = node_with_workers(&certs);
    worker_cert(&certs, "other-1", "some_other_type");
    let rt = runtime();
    let tls = Tls::from_dir(&certs, "other-1").expect("worker tls");
    rt.block_on(async {
        let handle = echo_worker(vec![addr], tls, "other-1", 1).start();
        wait_status(&handle, "refused", |s| {
            matches!(
                &s.last_error,
                Some(worker::Error::Refused { code: proto::worker::ErrorCode::Forbidden, message, .. })
                    if message.contains("does not allow task type") && message.contains(TASK)
            )
        })
        .await;
        let _ = handle.shutdown().await;
    });
}

#[test]
fn a_worker_certificate_from_another_ca_is_refused_at_the_handshake() {
    let dir = tempfile::tempdir().expect("tempdir");
    let certs = dir.path().join("certs");
    let (_server, addr) = node_with_workers(&certs);
    // Another deployment's CA issues a certificate for the same worker name and type.
    let foreign = dir.path().join("foreign");
    write_certs(&foreign, &[1]);
    worker_cert(&foreign, "echo-1", TASK);
    let ca = std::fs::read(certs.join("ca.pem")).expect("ca");
    let cert = std::fs::read(foreign.join("worker-echo-1.pem")).expect("cert");
    let key = std::fs::read(foreign.join("worker-echo-1.key")).expect("key");
    let tls = Tls::from_pem(&ca, &cert, &key).expect("tls");
    let rt = runtime();
    rt.block_on(async {
        let handle = echo_worker(vec![addr], tls, "echo-1", 1).start();
        wait_status(&handle, "handshake refused", |s| {
            matches!(
                &s.last_error,
                Some(worker::Error::Connect { .. } | worker::Error::Connection { .. })
            ) && !matches!(s.state, worker::State::Connected { .. })
        })
        .await;
        let status = handle.status();
        let message = status.last_error.map(|e| e.to_string()).unwrap_or_default();
        assert!(
            message.to_lowercase().contains("certificate") || message.contains("UnknownCA"),
            "{message}"
        );
        let _ = handle.shutdown().await;
    });
}

#[test]
fn a_connection_without_a_client_certificate_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let certs = dir.path().join("certs");
    let (_server, addr) = node_with_workers(&certs);
    let rt = runtime();
    let refused = rt.block_on(async move {
        let ca = std::fs::read(certs.join("ca.pem")).expect("ca");
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls_pki_types::CertificateDer::pem_slice_iter(&ca) {
            roots.add(cert.expect("ca pem")).expect("root");
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .expect("tls13")
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![proto::worker::ALPN_WORKER.to_vec()];
        let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(config).expect("quic tls");
        let mut endpoint =
            quinn::Endpoint::client("127.0.0.1:0".parse().expect("addr")).expect("endpoint");
        endpoint.set_default_client_config(quinn::ClientConfig::new(Arc::new(crypto)));
        // The handshake may complete on the client's side before the node's refusal arrives;
        // either way no hello is ever answered.
        let attempt = async {
            let conn = endpoint
                .connect(addr, proto::worker::NODE_SERVER_NAME)
                .map_err(|e| e.to_string())?
                .await
                .map_err(|e| e.to_string())?;
            let (mut send, mut recv) = conn.open_bi().await.map_err(|e| {
                conn.close_reason()
                    .map_or_else(|| e.to_string(), |r| r.to_string())
            })?;
            let hello = proto::worker::WorkerFrame::Hello {
                worker_id: "anonymous".into(),
                subscriptions: vec![proto::worker::Subscription {
                    task_type: TASK.into(),
                    domain: None,
                    capacity: 1,
                }],
                versions: proto::worker::PROTOCOL_VERSIONS.to_vec(),
            };
            let reason = |e: &dyn std::fmt::Display| {
                conn.close_reason()
                    .map_or_else(|| e.to_string(), |r| r.to_string())
            };
            send.write_all(&proto::worker::encode_frame(&hello))
                .await
                .map_err(|e| reason(&e))?;
            let mut header = [0u8; 4];
            recv.read_exact(&mut header).await.map_err(|e| reason(&e))?;
            Ok::<_, String>(format!(
                "the node answered a worker without a certificate: {header:?}"
            ))
        };
        tokio::time::timeout(Duration::from_secs(10), attempt)
            .await
            .expect("the refusal comes within 10 s")
    });
    let error = refused.expect_err("a worker without a client certificate gets nothing");
    assert!(
        error.to_lowercase().contains("certificate"),
        "the refusal names the missing certificate: {error}"
    );
}

/// The QUIC workers' acceptance test: 1,000 workflows through workers built on the SDK, on three
/// nodes, while the node leading the most partitions is killed. Every workflow completes, no step
/// completes twice, and results that come after their attempt timed out (a 20th of the first
/// attempts overrun their response timeout across the failover) are refused as stale.
#[test]
fn a_thousand_workflows_through_quic_workers_survive_a_killed_node() {
    let mut c = harness::cluster::Cluster::start(3);
    worker_cert(c.certs_dir(), "qa", TASK);
    worker_cert(c.certs_dir(), "qb", TASK);
    define_chain(&c.api(2), 3, 3);
    let victim = c
        .leader_counts()
        .into_iter()
        .max_by_key(|(id, n)| (*n, *id))
        .map(|(id, _)| id)
        .expect("leaders");
    let rt = runtime();
    let nodes: Vec<SocketAddr> = c.ids().into_iter().map(|id| c.worker_addr(id)).collect();
    let start_worker = |id: &str, nodes: Vec<SocketAddr>| {
        let tls = Tls::from_dir(c.certs_dir(), id).expect("worker tls");
        Worker::builder()
            .nodes(nodes)
            .tls(tls)
            .worker_id(id)
            .handler(TASK, 64, |task: Task| async move {
                let n = task.input()["n"].as_u64().unwrap_or(0);
                // Every 20th workflow's first attempt of `a` overruns the 3 s response timeout.
                if n.is_multiple_of(20)
                    && task.task().reference_task_name == "a"
                    && task.task().retry_count == 0
                {
                    tokio::time::sleep(Duration::from_millis(6_000)).await;
                }
                Ok(Outcome::completed(json!({ "echo": task.input() })))
            })
            .build()
            .expect("worker builds")
            .start()
    };
    // One worker starts at the victim, the other elsewhere; both know every node.
    let mut rotated = nodes.clone();
    rotated.rotate_left(1);
    let (qa, qb) = rt.block_on(async {
        (
            start_worker("qa", nodes.clone()),
            start_worker("qb", rotated),
        )
    });

    let starters: Vec<u64> = c.ids().into_iter().filter(|id| *id != victim).collect();
    let mut ids = Vec::new();
    for n in 0..1_000u64 {
        let via = c.api(starters[n as usize % starters.len()]);
        ids.push(via.start_workflow("quic_chain", &json!({ "n": n })));
        if n == 400 {
            c.kill9(victim);
        }
    }
    let survivor = c.api(starters[0]);
    let deadline = Instant::now() + Duration::from_secs(180);
    for (n, id) in ids.iter().enumerate() {
        let left = deadline.saturating_duration_since(Instant::now());
        let wf = survivor.wait_workflow_status(id, "COMPLETED", left.max(Duration::from_secs(1)));
        assert_eq!(wf["output"]["n"], json!(n), "{wf}");
        for reference in ["a", "b"] {
            let attempts: Vec<&Value> = wf["tasks"]
                .as_array()
                .expect("tasks")
                .iter()
                .filter(|t| t["referenceTaskName"] == reference)
                .collect();
            let completed = attempts
                .iter()
                .filter(|t| t["status"] == "COMPLETED")
                .count();
            assert_eq!(completed, 1, "{reference} completed exactly once: {wf}");
            assert_eq!(
                attempts.last().map(|t| t["status"].clone()),
                Some(json!("COMPLETED")),
                "{wf}"
            );
        }
    }
    let stale = rt.block_on(async {
        // Every handler has returned and every result is answered: the overrunning first
        // attempts report 6 s after their lease, possibly after every workflow has completed.
        for h in [&qa, &qb] {
            wait_status(h, "results settled", |s| s.running == 0 && s.unacked == 0).await;
        }
        let stale = qa.status().results_stale + qb.status().results_stale;
        for h in [&qa, &qb] {
            h.shutdown().await.expect("graceful shutdown");
        }
        stale
    });
    // 50 first attempts overran; each was retried (its result refused) unless a failover delayed
    // its timeout past the 6 s the worker took.
    let acked = qa.status().results_acked + qb.status().results_acked;
    println!("node {victim} killed; {acked} results acknowledged, {stale} refused as stale");
    assert!(
        stale >= 25,
        "only {stale} late results were refused as stale"
    );
    // Exactly one acknowledged result per step: a result whose acknowledgement died with the
    // node is sent again and acknowledged then.
    assert_eq!(acked, 2_000, "results acknowledged for 2,000 steps");
}

/// A node stopping gracefully (SIGTERM) tells its workers to drain: they deliver what they hold
/// and move to another node, the node exits cleanly, and every workflow completes with each step
/// once.
#[test]
fn a_node_stopping_gracefully_sends_its_workers_elsewhere() {
    let mut c = harness::cluster::Cluster::start(3);
    worker_cert(c.certs_dir(), "qd", TASK);
    define_chain(&c.api(2), 3, 5);
    let rt = runtime();
    let nodes: Vec<SocketAddr> = c.ids().into_iter().map(|id| c.worker_addr(id)).collect();
    let first = nodes[0];
    let tls = Tls::from_dir(c.certs_dir(), "qd").expect("worker tls");
    let handle = rt.block_on(async {
        Worker::builder()
            .nodes(nodes)
            .tls(tls)
            .worker_id("qd")
            .handler(TASK, 8, |task: Task| async move {
                tokio::time::sleep(Duration::from_millis(200)).await;
                Ok(Outcome::completed(json!({ "echo": task.input() })))
            })
            .build()
            .expect("worker builds")
            .start()
    });
    let api = c.api(2);
    // Just after the cluster formed a partition may still change leader on a loaded machine.
    let ids: Vec<String> = (0..60)
        .map(|n| {
            let key = format!("qd-{n}");
            api.start_workflow_keyed("quic_chain", &json!({ "n": n }), &key, LONG_WAIT)
        })
        .collect();
    rt.block_on(wait_status(&handle, "working through node 1", |s| {
        s.running > 0 && matches!(s.state, worker::State::Connected { node, .. } if node == first)
    }));
    assert!(
        c.terminate(1, Duration::from_secs(30)),
        "node 1 exits cleanly on SIGTERM"
    );
    rt.block_on(wait_status(
        &handle,
        "moved to another node",
        |s| matches!(s.state, worker::State::Connected { node, .. } if node != first),
    ));
    for (n, id) in ids.iter().enumerate() {
        let wf = api.wait_workflow_status(id, "COMPLETED", LONG_WAIT);
        assert_eq!(wf["output"]["n"], json!(n), "{wf}");
        for reference in ["a", "b"] {
            let completed = wf["tasks"]
                .as_array()
                .expect("tasks")
                .iter()
                .filter(|t| t["referenceTaskName"] == reference && t["status"] == "COMPLETED")
                .count();
            assert_eq!(completed, 1, "{reference} completed exactly once: {wf}");
        }
    }
    rt.block_on(async {
        wait_status(&handle, "results acknowledged", |s| s.unacked == 0).await;
        handle.shutdown().await.expect("graceful shutdown");
    });
    assert_eq!(handle.status().results_acked, 120);
}
