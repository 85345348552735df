//! The hello's version check over real QUIC: each end says which cluster versions its binary
//! serves, and a peer that cannot serve the active version is refused, whichever end dials and
//! whichever dialect it speaks (`baton-peer/2` with the range, or `baton-peer/1` as releases up to
//! 0.2.0 do).

mod common;

use cluster::transport::frame::{self, CODE_HELLO, STATUS_OK};
use cluster::transport::{PeerVersions, Service, Transport, V1_RANGE};
use cluster::{Error, NodeId};
use common::*;
use proto::version::{ClusterVersion, VersionRange};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

const CALL: Duration = Duration::from_secs(5);
/// What node 1 and node 2 serve.
const BOTH: VersionRange = VersionRange {
    min: ClusterVersion(1),
    max: ClusterVersion(2),
};
const REFUSED_2: &str =
    "node 2 runs a binary that serves cluster version 1, but the cluster is at version 2";

/// A transport for `identity` whose binary serves `supports`, in a cluster whose active version
/// (as this node's replica knows it) is read from `active`.
fn start(
    identity: &cluster::tls::Identity,
    supports: VersionRange,
    active: &Arc<AtomicU32>,
) -> Transport {
    let active = active.clone();
    let versions = PeerVersions::new(supports, move || {
        ClusterVersion(active.load(Ordering::SeqCst))
    });
    let options = transport_options(identity.clone(), any_port()).with_versions(versions);
    let t = Transport::start(options).expect("transport");
    t.register(Service::Forward, |_: NodeId, payload: Vec<u8>| async move {
        Ok(payload)
    });
    t
}

fn refusal(err: &Error) -> &str {
    match err {
        Error::Unreachable { reason, .. } => reason,
        other => panic!("expected a refusal, got {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_cannot_serve_the_active_version_is_refused_both_ways() {
    let (_, ids) = identities(2);
    let new_active = Arc::new(AtomicU32::new(1));
    let old_active = Arc::new(AtomicU32::new(1));
    let a = start(&ids[0], BOTH, &new_active);
    let old = start(&ids[1], V1_RANGE, &old_active);
    a.set_peer(NodeId(2), old.local_addr().expect("addr"));
    old.set_peer(NodeId(1), a.local_addr().expect("addr"));

    // At version 1 both serve the cluster and talk.
    for (from, to) in [(&a, NodeId(2)), (&old, NodeId(1))] {
        let answer = from.call(to, Service::Forward, b"hi".to_vec(), CALL).await;
        assert_eq!(answer.expect("call at version 1"), b"hi");
    }

    // Version 2 is activated while node 2 is down; it comes back on a binary that serves only
    // version 1, and its own replica still says 1.
    new_active.store(2, Ordering::SeqCst);
    old.shutdown().await;
    drop(old);
    let old = start(&ids[1], V1_RANGE, &old_active);
    a.set_peer(NodeId(2), old.local_addr().expect("addr"));
    old.set_peer(NodeId(1), a.local_addr().expect("addr"));

    // It dials node 1: node 1 refuses its hello.
    let err = old
        .call(NodeId(1), Service::Forward, b"vote for me".to_vec(), CALL)
        .await
        .expect_err("node 1 refuses node 2");
    assert!(refusal(&err).contains(REFUSED_2), "{err}");
    // Node 1 dials it: node 1 refuses its answer, and sends nothing.
    let err = a
        .call(NodeId(2), Service::Forward, b"entries".to_vec(), CALL)
        .await
        .expect_err("node 1 will not talk to node 2");
    assert!(refusal(&err).contains(REFUSED_2), "{err}");
    assert!(a.stats().inbound.is_empty(), "{:?}", a.stats());

    // Back on a binary that serves version 2, it is admitted again.
    old.shutdown().await;
    let back = start(&ids[1], BOTH, &old_active);
    a.set_peer(NodeId(2), back.local_addr().expect("addr"));
    back.set_peer(NodeId(1), a.local_addr().expect("addr"));
    let answer = back
        .call(NodeId(1), Service::Forward, b"x".to_vec(), CALL)
        .await;
    assert_eq!(answer.expect("admitted"), b"x");
    let answer = a
        .call(NodeId(2), Service::Forward, b"y".to_vec(), CALL)
        .await;
    assert_eq!(answer.expect("admitted"), b"y");
    for t in [a, back] {
        t.shutdown().await;
    }
}

/// Opens a connection to `addr` as a release up to 0.2.0 does (ALPN `baton-peer/1` only, a hello
/// of node id and boot id) and answers the hello's outcome: the server's answer, or the reason
/// it closed the connection.
async fn first_dialect_hello(
    identity: &cluster::tls::Identity,
    addr: std::net::SocketAddr,
) -> Result<Vec<u8>, String> {
    let mut tls = identity.client_config().expect("client config");
    tls.alpn_protocols = vec![cluster::tls::ALPN_PEER_V1.to_vec()];
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls).expect("quic tls");
    let mut endpoint = quinn::Endpoint::client(any_port()).expect("endpoint");
    endpoint.set_default_client_config(quinn::ClientConfig::new(Arc::new(crypto)));
    let conn = endpoint
        .connect(addr, &cluster::tls::node_server_name(NodeId(1)))
        .expect("connect")
        .await
        .expect("handshake");
    let (mut send, mut recv) = conn.open_bi().await.expect("stream");
    let mut hello = 2u64.to_be_bytes().to_vec();
    hello.extend_from_slice(&7u64.to_be_bytes());
    frame::write(&mut send, CODE_HELLO, &hello)
        .await
        .expect("hello sent");
    let outcome = match frame::read(&mut recv, 64).await {
        Ok((STATUS_OK, body)) => Ok(body),
        Ok((_, body)) => Err(String::from_utf8_lossy(&body).into_owned()),
        Err(e) => Err(conn.close_reason().map_or(e.to_string(), |r| r.to_string())),
    };
    conn.close(0u32.into(), b"done");
    endpoint.wait_idle().await;
    outcome
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_speaking_the_first_dialect_is_served_until_version_2_is_active() {
    let (_, ids) = identities(2);
    let active = Arc::new(AtomicU32::new(1));
    let a = start(&ids[0], BOTH, &active);
    let addr = a.local_addr().expect("addr");

    let answer = first_dialect_hello(&ids[1], addr).await;
    assert_eq!(
        answer,
        Ok(1u64.to_be_bytes().to_vec()),
        "the answer a 0.2.0 dialer reads"
    );

    active.store(2, Ordering::SeqCst);
    let refused = first_dialect_hello(&ids[1], addr)
        .await
        .expect_err("refused at version 2");
    assert!(refused.contains(REFUSED_2), "{refused}");
    a.shutdown().await;
}
