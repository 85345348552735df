//! `Transport::introduce`: reaching a cluster member known only by its address (a joining node's
//! `--join`). The member's id is learned from its hello and checked against its certificate; a
//! member from another CA, or one stating an id its certificate does not name, is refused.

mod common;

use cluster::transport::Service;
use cluster::{Error, NodeId};
use common::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

const CALL: Duration = Duration::from_secs(5);

/// Registers on `t` a Forward handler answering `"<peer>:<payload>"` and counting its calls.
fn echo(t: &cluster::transport::Transport) -> Arc<AtomicUsize> {
    let served = Arc::new(AtomicUsize::new(0));
    let counter = served.clone();
    t.register(Service::Forward, move |peer: NodeId, payload: Vec<u8>| {
        counter.fetch_add(1, Ordering::SeqCst);
        async move {
            let mut out = format!("{}:", peer.0).into_bytes();
            out.extend_from_slice(&payload);
            Ok(out)
        }
    });
    served
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn introduce_learns_the_member_id_and_records_its_address() {
    let (_, ids) = identities(2);
    let a = start_transport(ids[0].clone(), any_port()).await;
    let b = start_transport(ids[1].clone(), any_port()).await;
    let b_addr = b.local_addr().expect("addr");
    let served = echo(&b);
    assert_eq!(a.peer_addr(NodeId(2)), None);

    let (member, answer) = a
        .introduce(b_addr, Service::Forward, b"hi".to_vec(), CALL)
        .await
        .expect("introduce");
    assert_eq!(member, NodeId(2));
    // Node 2 saw the call come from the authenticated node 1.
    assert_eq!(answer, b"1:hi");
    assert_eq!(served.load(Ordering::SeqCst), 1);
    assert_eq!(a.peer_addr(NodeId(2)), Some(b_addr));
    // The introduction's connection is not cached: a call by id dials its own.
    assert!(a.stats().connects.is_empty());
    let answer = a
        .call(NodeId(2), Service::Forward, b"again".to_vec(), CALL)
        .await
        .expect("call by id");
    assert_eq!(answer, b"1:again");
    assert_eq!(a.stats().connects.get(&NodeId(2)), Some(&1));

    // An error answer travels back naming the member.
    let err = a
        .introduce(b_addr, Service::Raft, Vec::new(), CALL)
        .await
        .expect_err("no raft handler");
    assert!(
        matches!(
            err,
            Error::Remote {
                peer: NodeId(2),
                ..
            }
        ),
        "{err}"
    );

    // Its own address is refused.
    let own = a.local_addr().expect("addr");
    let err = a
        .introduce(own, Service::Forward, Vec::new(), CALL)
        .await
        .expect_err("own address");
    match &err {
        Error::Unreachable { peer, reason } => {
            assert_eq!(*peer, NodeId(1));
            assert!(reason.contains("own address"), "{reason}");
        }
        other => panic!("expected a refusal, got {other}"),
    }
    assert_eq!(a.peer_addr(NodeId(1)), None);

    // Nothing listening: unreachable within the timeout, the member unknown.
    let nobody = {
        let socket = std::net::UdpSocket::bind(any_port()).expect("bind");
        socket.local_addr().expect("addr")
    };
    let err = a
        .introduce(
            nobody,
            Service::Forward,
            Vec::new(),
            Duration::from_millis(300),
        )
        .await
        .expect_err("nobody there");
    assert!(
        matches!(
            err,
            Error::Unreachable {
                peer: NodeId(0),
                ..
            }
        ),
        "{err}"
    );

    // The introduction's connections were closed: only the cached call connection stays open.
    let end = tokio::time::Instant::now() + Duration::from_secs(5);
    while b.stats().inbound.get(&NodeId(1)) != Some(&1) {
        assert!(
            tokio::time::Instant::now() < end,
            "introductions left connections open: {:?}",
            b.stats().inbound
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn introduce_refuses_a_member_of_another_ca() {
    let (ca, ids) = identities(2);
    let cluster_ca = ca.cert_pem().to_string();
    let (_, strangers) = identities(2);
    let a = start_transport(ids[0].clone(), any_port()).await;
    let b = start_transport(ids[1].clone(), any_port()).await;
    let served = echo(&b);
    // Node 2 of another cluster, listening where a joining node 1 was told to go.
    let stranger = start_transport(strangers[1].clone(), any_port()).await;
    let stranger_served = echo(&stranger);
    let stranger_addr = stranger.local_addr().expect("addr");

    let err = a
        .introduce(stranger_addr, Service::Forward, b"hi".to_vec(), CALL)
        .await
        .expect_err("another CA");
    assert!(matches!(err, Error::Unreachable { .. }), "{err}");
    assert_eq!(stranger_served.load(Ordering::SeqCst), 0);
    assert_eq!(a.peer_addr(NodeId(2)), None);

    // The other way round: the stranger cannot introduce itself to this cluster's node 2.
    let err = stranger
        .introduce(
            b.local_addr().expect("addr"),
            Service::Forward,
            Vec::new(),
            CALL,
        )
        .await
        .expect_err("another CA");
    assert!(matches!(err, Error::Unreachable { .. }), "{err}");
    assert_eq!(served.load(Ordering::SeqCst), 0);
    assert!(b.stats().inbound.is_empty());

    // A node that trusts this cluster's CA (so it accepts node 2) but presents a certificate
    // from another CA: node 2 refuses it at the handshake.
    let foreign_ca = cluster::tls::generate_ca().expect("ca");
    let foreign = cluster::tls::generate_node_cert(&foreign_ca, NodeId(1), &[]).expect("cert");
    let pretender = cluster::tls::Identity::from_pem(
        NodeId(1),
        cluster_ca.as_bytes(),
        foreign.cert_pem.as_bytes(),
        foreign.key_pem.as_bytes(),
    )
    .expect("identity");
    let pretender = start_transport(pretender, any_port()).await;
    let err = pretender
        .introduce(
            b.local_addr().expect("addr"),
            Service::Forward,
            Vec::new(),
            CALL,
        )
        .await
        .expect_err("refused");
    assert!(matches!(err, Error::Unreachable { .. }), "{err}");
    assert_eq!(served.load(Ordering::SeqCst), 0);
    assert!(b.stats().inbound.is_empty());
    assert_eq!(pretender.peer_addr(NodeId(2)), None);
    for t in [a, b, stranger, pretender] {
        t.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn introduce_refuses_a_member_whose_certificate_does_not_name_its_id() {
    let (_, ids) = identities(2);
    let a = start_transport(ids[0].clone(), any_port()).await;
    // Holds node 2's certificate (chained to the cluster CA) but says it is node 3.
    let liar = start_transport(ids[1].clone().claiming(NodeId(3)), any_port()).await;
    let served = echo(&liar);
    let err = a
        .introduce(
            liar.local_addr().expect("addr"),
            Service::Forward,
            Vec::new(),
            CALL,
        )
        .await
        .expect_err("refused");
    match &err {
        Error::Tls(reason) => assert!(reason.contains("node 3"), "{reason}"),
        other => panic!("expected a certificate refusal, got {other}"),
    }
    assert_eq!(served.load(Ordering::SeqCst), 0);
    assert_eq!(a.peer_addr(NodeId(3)), None);
    assert_eq!(a.peer_addr(NodeId(2)), None);
    a.shutdown().await;
    liar.shutdown().await;
}
