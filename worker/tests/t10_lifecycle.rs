//! A worker's life without any node answering: it keeps trying, reports why it is not connected,
//! and a shutdown with no work in hand stops it at once. (Tests against real nodes live in the
//! workspace's `tests` crate.)

use serde_json::json;
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;
use worker::{Error, Outcome, State, Task, Tls, Worker};

fn identity() -> Tls {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca_params = CertificateParams::new(Vec::new()).expect("CA params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).expect("CA");
    let key = KeyPair::generate().expect("worker key");
    let cert = CertificateParams::new(vec!["w1".to_owned()])
        .expect("worker params")
        .signed_by(&key, &ca, &ca_key)
        .expect("worker certificate");
    Tls::from_pem(ca.pem(), cert.pem(), key.serialize_pem()).expect("identity")
}

#[tokio::test]
async fn an_unanswered_worker_reports_why_and_stops_cleanly() {
    // A bound UDP socket that never answers: the QUIC handshake times out.
    let silent = UdpSocket::bind("127.0.0.1:0").expect("socket");
    let node: SocketAddr = silent.local_addr().expect("address");
    let worker = Worker::builder()
        .nodes([node, node])
        .tls(identity())
        .worker_id("w1")
        .connect_timeout(Duration::from_millis(200))
        .handler("echo", 2, |task: Task| async move {
            Ok(Outcome::completed(json!({ "echo": task.input() })))
        })
        .build()
        .expect("worker");
    let handle = worker.start();

    let mut status = handle.watch();
    let failed = tokio::time::timeout(
        Duration::from_secs(20),
        status.wait_for(|s| matches!(s.last_error, Some(Error::Connect { .. }))),
    )
    .await
    .expect("a connection failure is reported within the deadline")
    .expect("the worker is running")
    .clone();
    assert!(matches!(failed.last_error, Some(Error::Connect { node: n, .. }) if n == node));
    assert!(!matches!(failed.state, State::Connected { .. }));
    drop(status);

    tokio::time::timeout(Duration::from_secs(20), handle.shutdown())
        .await
        .expect("an idle worker stops within the deadline")
        .expect("nothing was abandoned");
    let status = handle.status();
    assert!(status.stopping);
    assert_eq!(
        status.state,
        State::Stopped {
            abandoned_tasks: 0,
            abandoned_results: 0
        }
    );
    // Every handle sees the end.
    assert_eq!(handle.clone().stopped().await, Ok(()));
}
