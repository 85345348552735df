//! The peer transport over real QUIC on loopback: calls and handlers, one shared connection per
//! peer, limits and errors, reconnect after a peer restarts, and the identity checks of mutual
//! TLS (another CA is refused; a node cannot claim another node's id).

mod common;

use cluster::transport::Service;
use cluster::{Error, NodeId};
use common::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

const CALL: Duration = Duration::from_secs(5);

/// Registers on `t` a Forward handler answering `"<peer>:<payload>"`.
fn echo(t: &cluster::transport::Transport) {
    t.register(
        Service::Forward,
        |peer: NodeId, payload: Vec<u8>| async move {
            let mut out = format!("{}:", peer.0).into_bytes();
            out.extend_from_slice(&payload);
            Ok(out)
        },
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_reach_handlers_over_one_connection() {
    let (_, ids) = identities(2);
    let a = start_transport(ids[0].clone(), any_port()).await;
    let b = start_transport(ids[1].clone(), any_port()).await;
    a.set_peer(NodeId(2), b.local_addr().expect("addr"));
    echo(&b);

    let answer = a
        .call(NodeId(2), Service::Forward, b"hi".to_vec(), CALL)
        .await
        .expect("call");
    assert_eq!(answer, b"1:hi");

    // Many concurrent calls share the one connection.
    let calls = (0..64u32).map(|i| {
        let a = a.clone();
        async move {
            a.call(NodeId(2), Service::Forward, i.to_be_bytes().to_vec(), CALL)
                .await
        }
    });
    for (i, answer) in futures::future::join_all(calls)
        .await
        .into_iter()
        .enumerate()
    {
        let mut expected = b"1:".to_vec();
        expected.extend_from_slice(&(i as u32).to_be_bytes());
        assert_eq!(answer.expect("call"), expected);
    }
    assert_eq!(
        a.stats()
            .connects_by_service
            .get(&(NodeId(2), Service::Forward)),
        Some(&1)
    );
    assert_eq!(b.stats().inbound.get(&NodeId(1)), Some(&1));

    // A service without a handler answers with an error, and the connection stays usable.
    let err = a
        .call(NodeId(2), Service::Raft, Vec::new(), CALL)
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

    // Oversized payloads are refused before anything is sent.
    let max = a.frame_bytes_max();
    let err = a
        .call(NodeId(2), Service::Forward, vec![0; max + 1], CALL)
        .await
        .expect_err("too large");
    assert_eq!(
        err,
        Error::FrameTooLarge {
            bytes: max + 1,
            max
        }
    );

    // Unknown peers are unreachable.
    let err = a
        .call(NodeId(9), Service::Forward, Vec::new(), CALL)
        .await
        .expect_err("unknown peer");
    assert!(
        matches!(
            err,
            Error::Unreachable {
                peer: NodeId(9),
                ..
            }
        ),
        "{err}"
    );

    // A handler that never answers makes the call time out.
    b.register(Service::Forward, |_: NodeId, _: Vec<u8>| {
        std::future::pending::<Result<Vec<u8>, String>>()
    });
    let err = a
        .call(
            NodeId(2),
            Service::Forward,
            Vec::new(),
            Duration::from_millis(200),
        )
        .await
        .expect_err("times out");
    assert_eq!(
        err,
        Error::Timeout {
            peer: NodeId(2),
            waited_ms: 200
        }
    );
    assert_eq!(
        a.stats()
            .connects_by_service
            .get(&(NodeId(2), Service::Forward)),
        Some(&1)
    );

    a.shutdown().await;
    assert_eq!(
        a.call(NodeId(2), Service::Forward, Vec::new(), CALL).await,
        Err(Error::TransportClosed)
    );
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_peer_is_redialled() {
    let (_, ids) = identities(2);
    let a = start_transport(ids[0].clone(), any_port()).await;
    let b = start_transport(ids[1].clone(), any_port()).await;
    let b_addr = b.local_addr().expect("addr");
    a.set_peer(NodeId(2), b_addr);
    echo(&b);
    a.call(NodeId(2), Service::Forward, b"1".to_vec(), CALL)
        .await
        .expect("call");

    b.shutdown().await;
    drop(b);
    let b = start_transport(ids[1].clone(), b_addr).await;
    echo(&b);
    // The first calls may still meet the old connection; a later one must get through.
    let end = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match a
            .call(
                NodeId(2),
                Service::Forward,
                b"2".to_vec(),
                Duration::from_secs(1),
            )
            .await
        {
            Ok(answer) => {
                assert_eq!(answer, b"1:2");
                break;
            }
            Err(e) => assert!(tokio::time::Instant::now() < end, "never reconnected: {e}"),
        }
    }
    assert_eq!(
        a.stats()
            .connects_by_service
            .get(&(NodeId(2), Service::Forward)),
        Some(&2)
    );
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_from_another_ca_is_refused() {
    let (ca, ids) = identities(2);
    let (_, strangers) = identities(1);
    let b = start_transport(ids[1].clone(), any_port()).await;
    let served = Arc::new(AtomicUsize::new(0));
    {
        let served = served.clone();
        b.register(Service::Forward, move |_: NodeId, _: Vec<u8>| {
            served.fetch_add(1, Ordering::SeqCst);
            async { Ok(Vec::new()) }
        });
    }
    // Node 1 of another cluster dials node 2: neither side trusts the other's CA.
    let stranger = start_transport(strangers[0].clone(), any_port()).await;
    stranger.set_peer(NodeId(2), b.local_addr().expect("addr"));
    let err = stranger
        .call(NodeId(2), Service::Forward, Vec::new(), CALL)
        .await
        .expect_err("refused");
    assert!(matches!(err, Error::Unreachable { .. }), "{err}");
    assert_eq!(served.load(Ordering::SeqCst), 0);
    assert!(b.stats().inbound.is_empty());

    // A client that trusts the cluster CA (so it accepts node 2) but presents a certificate from
    // another CA: node 2's client verifier refuses it.
    let pretender = ca.cert_pem().to_string();
    let foreign_ca = cluster::tls::generate_ca().expect("ca");
    let foreign = cluster::tls::generate_node_cert(&foreign_ca, NodeId(1), &[]).expect("cert");
    let identity = cluster::tls::Identity::from_pem(
        NodeId(1),
        pretender.as_bytes(),
        foreign.cert_pem.as_bytes(),
        foreign.key_pem.as_bytes(),
    )
    .expect("identity");
    let client = start_transport(identity, any_port()).await;
    client.set_peer(NodeId(2), b.local_addr().expect("addr"));
    let err = client
        .call(NodeId(2), Service::Forward, Vec::new(), CALL)
        .await
        .expect_err("refused");
    assert!(matches!(err, Error::Unreachable { .. }), "{err}");
    assert_eq!(served.load(Ordering::SeqCst), 0);
    assert!(b.stats().inbound.is_empty());
    for t in [stranger, client, b] {
        t.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_cannot_claim_another_id() {
    let (_, ids) = identities(3);
    let b = start_transport(ids[1].clone(), any_port()).await;
    let b_addr = b.local_addr().expect("addr");
    let served = Arc::new(AtomicUsize::new(0));
    {
        let served = served.clone();
        b.register(Service::Forward, move |_: NodeId, _: Vec<u8>| {
            served.fetch_add(1, Ordering::SeqCst);
            async { Ok(Vec::new()) }
        });
    }

    // Holding node 1's certificate while claiming to be node 3: the hello is refused.
    let liar = start_transport(ids[0].clone().claiming(NodeId(3)), any_port()).await;
    liar.set_peer(NodeId(2), b_addr);
    let err = liar
        .call(NodeId(2), Service::Forward, Vec::new(), CALL)
        .await
        .expect_err("refused");
    match &err {
        Error::Unreachable { reason, .. } => {
            assert!(reason.contains("node 3"), "{reason}")
        }
        other => panic!("expected a refusal, got {other}"),
    }
    assert_eq!(served.load(Ordering::SeqCst), 0);
    assert!(b.stats().inbound.is_empty());

    // The other way round: node 1 dials "node 3" at node 2's address; node 2's certificate does
    // not name node 3, so the client refuses the server.
    let a = start_transport(ids[0].clone(), any_port()).await;
    a.set_peer(NodeId(3), b_addr);
    let err = a
        .call(NodeId(3), Service::Forward, Vec::new(), CALL)
        .await
        .expect_err("refused");
    assert!(
        matches!(
            err,
            Error::Unreachable {
                peer: NodeId(3),
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(served.load(Ordering::SeqCst), 0);

    // The honest node 1 gets through.
    a.set_peer(NodeId(2), b_addr);
    a.call(NodeId(2), Service::Forward, Vec::new(), CALL)
        .await
        .expect("call");
    assert_eq!(served.load(Ordering::SeqCst), 1);
    for t in [a, b, liar] {
        t.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raft_messages_must_come_from_the_node_they_name() {
    use cluster::network::wire::{self, RaftReply, RaftRequest, RaftRpc};
    use openraft::raft::VoteRequest;
    use openraft::Vote;

    let (_, ids) = identities(2);
    let a = start_transport(ids[0].clone(), any_port()).await;
    let b = start_transport(ids[1].clone(), any_port()).await;
    a.set_peer(NodeId(2), b.local_addr().expect("addr"));
    let router = cluster::RaftRouter::new(b.clone());
    let vote_from = |candidate: u64| {
        wire::encode(&RaftRequest {
            group: "p0".into(),
            rpc: RaftRpc::Vote(VoteRequest::new(Vote::new(5, candidate), None)),
        })
        .expect("encode")
    };

    // Node 1 asking for votes in node 3's name is refused.
    let err = a
        .call(NodeId(2), Service::Raft, vote_from(3), CALL)
        .await
        .expect_err("refused");
    match err {
        Error::Remote { message, .. } => assert!(message.contains("node 3"), "{message}"),
        other => panic!("expected a refusal, got {other}"),
    }
    // In its own name it gets through to the router, which has no such group.
    let answer = a
        .call(NodeId(2), Service::Raft, vote_from(1), CALL)
        .await
        .expect("call");
    assert!(matches!(
        wire::decode::<RaftReply>(&answer).expect("decode"),
        RaftReply::NoGroup
    ));
    assert!(router.groups().is_empty());
    a.shutdown().await;
    b.shutdown().await;
}
