//! The QUIC worker gateway (frames in [`proto::worker`]): workers connect with mutual
//! TLS, say hello with the task types they work, and the node pushes them tasks as their credit
//! allows. Results are acknowledged once committed, under the lease each task was pushed with.
//!
//! Per connection: one bidirectional stream. A reader takes the worker's frames (credit, results,
//! drain); one pump per subscription leases tasks through the same poll the HTTP API uses (in a
//! cluster it reaches the partitions other nodes lead) whenever the worker has credit; a writer
//! sends whatever the pumps and result handlers produce, in order. The worker's certificate
//! (issued by the workers CA, `baton worker-cert`) names the worker and the task types it may poll
//! and complete; anything else is refused with an error frame.

use crate::error::Error;
use crate::service::{Node, PollRequest};
use proto::limits::POLL_BATCH_MAX;
use proto::worker::{self as wire, ErrorCode, Grant, Lease, NodeFrame, Subscription, WorkerFrame};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch, Notify, Semaphore};

/// How long a worker may take to open its stream and say hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one pump's poll waits for a task before looking at its credit and the drain again.
const PUSH_WAIT_MS: u64 = 5_000;
/// Frames queued for one worker's writer.
const OUTBOX_FRAMES: usize = 1_024;
/// Results of one connection being committed at once.
const RESULTS_IN_FLIGHT: usize = 256;
/// After a drain, how long results are still taken before connections close.
const DRAIN_GRACE: Duration = Duration::from_secs(5);
/// Idle timeout of a worker connection (keep-alives every third of it).
const IDLE_TIMEOUT: Duration = Duration::from_secs(10);

use crate::options::WorkerGatewayOptions;

/// A running gateway.
pub struct WorkerGateway {
    endpoint: quinn::Endpoint,
    draining: watch::Sender<bool>,
    accept: tokio::task::JoinHandle<()>,
}

impl WorkerGateway {
    /// Listens for workers on `options.listen`.
    pub fn start(node: Node, options: &WorkerGatewayOptions) -> Result<WorkerGateway, Error> {
        let tls = |e: cluster::Error| Error::Invalid(format!("worker gateway certificates: {e}"));
        let identity = cluster::tls::Identity::load(&options.certs, node.id()).map_err(tls)?;
        let ca_path = options.certs.join(cluster::tls::WORKERS_CA_CERT_FILE);
        let workers_ca = std::fs::read_to_string(&ca_path).map_err(|e| {
            Error::Invalid(format!(
                "cannot read the workers CA {}: {e} (run `baton certs` to create it)",
                ca_path.display()
            ))
        })?;
        let server = cluster::tls::worker_server_config(&identity, &workers_ca).map_err(tls)?;
        let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(server)
            .map_err(|e| Error::Internal(format!("worker gateway TLS: {e}")))?;
        let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
        let mut transport = cluster::transport::options::quic_config();
        transport
            .max_idle_timeout(IDLE_TIMEOUT.try_into().ok())
            .keep_alive_interval(Some(IDLE_TIMEOUT / 3))
            .max_concurrent_bidi_streams(1u8.into())
            .max_concurrent_uni_streams(0u8.into());
        config.transport_config(Arc::new(transport));
        let endpoint = cluster::transport::options::quic_endpoint(options.listen, Some(config))
            .map_err(|e| {
                Error::Invalid(format!(
                    "cannot listen for workers on {}: {e}",
                    options.listen
                ))
            })?;
        let (draining, drain_rx) = watch::channel(false);
        let accept = tokio::spawn(accept_loop(endpoint.clone(), node, drain_rx));
        Ok(WorkerGateway {
            endpoint,
            draining,
            accept,
        })
    }

    /// Graceful stop: no new connections or tasks, a drain frame to every worker, results still
    /// taken for a short grace, then every connection closes.
    pub async fn shutdown(self) {
        self.draining.send_replace(true);
        self.accept.abort();
        let grace = tokio::time::Instant::now() + DRAIN_GRACE;
        while self.endpoint.open_connections() > 0 && tokio::time::Instant::now() < grace {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.endpoint.close(0u32.into(), b"node stopping");
        self.endpoint.wait_idle().await;
    }
}

async fn accept_loop(endpoint: quinn::Endpoint, node: Node, draining: watch::Receiver<bool>) {
    while let Some(incoming) = endpoint.accept().await {
        let (node, draining) = (node.clone(), draining.clone());
        tokio::spawn(async move {
            let remote = incoming.remote_address();
            match incoming.await {
                Ok(conn) => {
                    if let Err(e) = serve_worker(conn, node, draining).await {
                        tracing::info!(%remote, error = %e, "worker connection ended");
                    }
                }
                // A refused handshake (no certificate, another CA) ends here; the worker's TLS
                // stack reports why.
                Err(e) => tracing::info!(%remote, error = %e, "worker handshake refused"),
            }
        });
    }
}

/// The grant of the worker's certificate (the handshake already checked its chain).
fn grant_of(conn: &quinn::Connection) -> Result<Grant, String> {
    let certs = conn
        .peer_identity()
        .and_then(|id| {
            id.downcast::<Vec<rustls::pki_types::CertificateDer<'static>>>()
                .ok()
        })
        .ok_or("no client certificate")?;
    let leaf = certs.first().ok_or("no client certificate")?;
    cluster::tls::worker_grant(leaf).map_err(|e| e.to_string())
}

/// What a connection's parts share.
struct Conn {
    node: Node,
    grant: Grant,
    outbox: mpsc::Sender<NodeFrame>,
    /// Set when either side drains: the pumps stop.
    stopping: AtomicBool,
    stop: Notify,
}

/// One subscription's credit.
struct Credit {
    subscription: Subscription,
    available: AtomicU32,
    more: Notify,
}

async fn serve_worker(
    conn: quinn::Connection,
    node: Node,
    draining: watch::Receiver<bool>,
) -> Result<(), String> {
    let (send, mut recv, grant, subscriptions) = handshake(&conn, &node).await?;
    let (outbox, outgoing) = mpsc::channel::<NodeFrame>(OUTBOX_FRAMES);
    let shared = Arc::new(Conn {
        node,
        grant,
        outbox,
        stopping: AtomicBool::new(false),
        stop: Notify::new(),
    });
    let writer = tokio::spawn(write_frames(send, outgoing));
    metrics::gauge!(crate::metrics::QUIC_WORKERS).increment(1);
    let credits = credits_of(subscriptions);
    let pumps: Vec<_> = credits
        .iter()
        .map(|c| tokio::spawn(pump(shared.clone(), c.clone())))
        .collect();
    let results = Arc::new(Semaphore::new(RESULTS_IN_FLIGHT));
    let outcome = read_frames(&shared, &credits, &results, &mut recv, draining).await;
    stop(&shared);
    for p in pumps {
        p.abort();
    }
    // Results already taken still commit; their answers go nowhere once the stream is gone.
    let _ = results.acquire_many(RESULTS_IN_FLIGHT as u32).await;
    metrics::gauge!(crate::metrics::QUIC_WORKERS).decrement(1);
    for c in &credits {
        let unused = c.available.swap(0, Ordering::SeqCst);
        metrics::gauge!(crate::metrics::QUIC_CREDIT).decrement(unused);
    }
    drop(shared);
    let _ = writer.await;
    Err(outcome)
}

/// The worker's certificate grant, its stream, and its hello checked against the grant; answers
/// the welcome, or the refusal before closing the connection.
async fn handshake(
    conn: &quinn::Connection,
    node: &Node,
) -> Result<
    (
        quinn::SendStream,
        quinn::RecvStream,
        Grant,
        Vec<Subscription>,
    ),
    String,
> {
    let remote = conn.remote_address();
    let grant = match grant_of(conn) {
        Ok(g) => g,
        Err(e) => {
            conn.close(1u32.into(), e.as_bytes());
            return Err(e);
        }
    };
    let (mut send, mut recv) = tokio::time::timeout(HELLO_TIMEOUT, conn.accept_bi())
        .await
        .map_err(|_| "no stream opened in time".to_owned())?
        .map_err(|e| e.to_string())?;
    let hello = tokio::time::timeout(HELLO_TIMEOUT, read_frame(&mut recv))
        .await
        .map_err(|_| "no hello in time".to_owned())??;
    let (hello_id, subscriptions) = match check_hello(&grant, hello) {
        Ok(s) => s,
        Err((code, message)) => {
            refuse_hello(conn, &mut send, code, &message).await;
            return Err(message);
        }
    };
    let welcome = NodeFrame::Welcome {
        node: node.id().0,
        version: wire::choose_version(wire::PROTOCOL_VERSIONS).unwrap_or(1),
        worker_id: grant.worker_id.clone(),
    };
    send.write_all(&wire::encode_frame(&welcome))
        .await
        .map_err(|e| e.to_string())?;
    tracing::info!(%remote, worker = %grant.worker_id, calls_itself = %hello_id, types = ?subscriptions.iter().map(|s| &s.task_type).collect::<Vec<_>>(), "worker connected");
    Ok((send, recv, grant, subscriptions))
}

/// Tells the worker why its hello was refused, then closes the connection.
async fn refuse_hello(
    conn: &quinn::Connection,
    send: &mut quinn::SendStream,
    code: ErrorCode,
    message: &str,
) {
    let refusal = NodeFrame::Error {
        seq: None,
        code,
        message: message.to_owned(),
    };
    let _ = send.write_all(&wire::encode_frame(&refusal)).await;
    let _ = send.finish();
    // Let the refusal reach the worker before the close does.
    let _ = tokio::time::timeout(Duration::from_secs(2), send.stopped()).await;
    conn.close(2u32.into(), message.as_bytes());
}

/// Writes the connection's outgoing frames until the outbox closes.
async fn write_frames(mut send: quinn::SendStream, mut outgoing: mpsc::Receiver<NodeFrame>) {
    while let Some(frame) = outgoing.recv().await {
        if send.write_all(&wire::encode_frame(&frame)).await.is_err() {
            return;
        }
    }
    let _ = send.finish();
}

/// Each subscription's credit, starting at its capacity.
fn credits_of(subscriptions: Vec<Subscription>) -> Vec<Arc<Credit>> {
    subscriptions
        .into_iter()
        .map(|s| {
            metrics::gauge!(crate::metrics::QUIC_CREDIT).increment(s.capacity);
            Arc::new(Credit {
                available: AtomicU32::new(s.capacity),
                subscription: s,
                more: Notify::new(),
            })
        })
        .collect()
}

/// Handles the worker's frames until its stream ends; when the node drains, tells the worker to.
/// Answers why the stream ended.
async fn read_frames(
    shared: &Arc<Conn>,
    credits: &[Arc<Credit>],
    results: &Arc<Semaphore>,
    recv: &mut quinn::RecvStream,
    mut draining: watch::Receiver<bool>,
) -> String {
    let mut node_draining = false;
    loop {
        tokio::select! {
            frame = read_frame(recv) => match frame {
                Ok(frame) => handle_frame(shared, credits, results, frame).await,
                Err(e) => return e,
            },
            changed = draining.changed(), if !node_draining => {
                if changed.is_err() || *draining.borrow() {
                    node_draining = true;
                    stop(shared);
                    let _ = shared.outbox.send(NodeFrame::Drain).await;
                }
            }
        }
    }
}

fn stop(shared: &Conn) {
    shared.stopping.store(true, Ordering::SeqCst);
    shared.stop.notify_waiters();
}

/// Checks a hello against the certificate's grant and the limits.
/// Answers the id the worker gave itself and its subscriptions.
fn check_hello(
    grant: &Grant,
    frame: WorkerFrame,
) -> Result<(String, Vec<Subscription>), (ErrorCode, String)> {
    let WorkerFrame::Hello {
        worker_id,
        subscriptions,
        versions,
    } = frame
    else {
        return Err((ErrorCode::Invalid, "the first frame must be a hello".into()));
    };
    if wire::choose_version(&versions).is_none() {
        return Err((
            ErrorCode::Version,
            format!(
                "no common protocol version: the worker speaks {versions:?}, this node {:?}",
                wire::PROTOCOL_VERSIONS
            ),
        ));
    }
    if worker_id.len() > wire::WORKER_ID_LEN_MAX {
        return Err((
            ErrorCode::Invalid,
            format!("a worker id is at most {} bytes", wire::WORKER_ID_LEN_MAX),
        ));
    }
    if subscriptions.is_empty() || subscriptions.len() > wire::SUBSCRIPTIONS_MAX {
        return Err((
            ErrorCode::Invalid,
            format!(
                "a worker subscribes to 1 to {} task types, not {}",
                wire::SUBSCRIPTIONS_MAX,
                subscriptions.len()
            ),
        ));
    }
    for s in &subscriptions {
        if s.task_type.trim().is_empty() || s.capacity > wire::CREDIT_MAX {
            return Err((
                ErrorCode::Invalid,
                format!(
                    "subscription {:?}: the task type must be named and the capacity at most {}",
                    s.task_type,
                    wire::CREDIT_MAX
                ),
            ));
        }
        if !grant.allows(&s.task_type) {
            return Err((
                ErrorCode::Forbidden,
                format!(
                    "the certificate of worker {:?} does not allow task type {:?}",
                    grant.worker_id, s.task_type
                ),
            ));
        }
    }
    Ok((worker_id, subscriptions))
}

async fn handle_frame(
    shared: &Arc<Conn>,
    credits: &[Arc<Credit>],
    results: &Arc<Semaphore>,
    frame: WorkerFrame,
) {
    match frame {
        WorkerFrame::Credit {
            task_type,
            domain,
            n,
        } => {
            let found = credits
                .iter()
                .find(|c| c.subscription.task_type == task_type && c.subscription.domain == domain);
            match found {
                Some(c) => {
                    let before = c
                        .available
                        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |a| {
                            Some(a.saturating_add(n).min(wire::CREDIT_MAX))
                        })
                        .unwrap_or_else(|a| a);
                    let added = before.saturating_add(n).min(wire::CREDIT_MAX)
                        - before.min(wire::CREDIT_MAX);
                    metrics::gauge!(crate::metrics::QUIC_CREDIT).increment(added);
                    c.more.notify_one();
                }
                None => {
                    let refusal = NodeFrame::Error {
                        seq: None,
                        code: ErrorCode::Invalid,
                        message: format!(
                            "credit for {task_type:?}, which this worker did not subscribe to"
                        ),
                    };
                    let _ = shared.outbox.send(refusal).await;
                }
            }
        }
        WorkerFrame::Result { seq, lease, result } => {
            let Ok(permit) = results.clone().acquire_owned().await else {
                return;
            };
            let shared = shared.clone();
            tokio::spawn(async move {
                let answer = commit_result(&shared, seq, lease, result).await;
                let _ = shared.outbox.send(answer).await;
                drop(permit);
            });
        }
        WorkerFrame::Drain => stop(shared),
        WorkerFrame::Hello { .. } => {
            let refusal = NodeFrame::Error {
                seq: None,
                code: ErrorCode::Invalid,
                message: "hello sent twice".into(),
            };
            let _ = shared.outbox.send(refusal).await;
        }
    }
}

/// Commits one result; the answer is an ack, or an error naming why it was refused.
async fn commit_result(
    shared: &Conn,
    seq: u64,
    lease: Lease,
    mut result: proto::model::TaskResult,
) -> NodeFrame {
    let refuse = |code, message| NodeFrame::Error {
        seq: Some(seq),
        code,
        message,
    };
    if !shared.grant.allows(&lease.task_type) {
        return refuse(
            ErrorCode::Forbidden,
            format!(
                "the certificate of worker {:?} does not allow task type {:?}",
                shared.grant.worker_id, lease.task_type
            ),
        );
    }
    if result.worker_id.is_none() {
        result.worker_id = Some(shared.grant.worker_id.clone());
    }
    match shared.node.tasks.update_leased(result, lease).await {
        Ok(()) => NodeFrame::Ack { seq },
        Err(e) => {
            let code = match &e {
                Error::Conflict(_) => {
                    metrics::counter!(crate::metrics::QUIC_STALE_RESULTS).increment(1);
                    ErrorCode::Stale
                }
                Error::NotFound(_) => ErrorCode::NotFound,
                Error::Invalid(_) | Error::TooLarge(_) => ErrorCode::Invalid,
                Error::Unauthorized(_) => ErrorCode::Forbidden,
                Error::Unavailable(_) | Error::Undecodable(_) | Error::Internal(_) => {
                    ErrorCode::Unavailable
                }
            };
            refuse(code, e.to_string())
        }
    }
}

/// Leases tasks of one subscription while the worker has credit, and queues them for the writer.
async fn pump(shared: Arc<Conn>, credit: Arc<Credit>) {
    let s = &credit.subscription;
    loop {
        let more = credit.more.notified();
        let stop = shared.stop.notified();
        tokio::pin!(more, stop);
        more.as_mut().enable();
        stop.as_mut().enable();
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        let available = credit.available.load(Ordering::SeqCst) as usize;
        if available == 0 {
            tokio::select! {
                _ = &mut more => {}
                _ = &mut stop => {}
            }
            continue;
        }
        let request = PollRequest {
            task_type: s.task_type.clone(),
            worker_id: Some(shared.grant.worker_id.clone()),
            domain: s.domain.clone(),
            count: available.min(POLL_BATCH_MAX),
            wait_ms: PUSH_WAIT_MS,
        };
        let polled = tokio::select! {
            polled = shared.node.tasks.poll(request) => polled,
            _ = &mut stop => return,
        };
        match polled {
            Ok(tasks) => {
                for task in tasks {
                    credit.available.fetch_sub(1, Ordering::SeqCst);
                    metrics::gauge!(crate::metrics::QUIC_CREDIT).decrement(1);
                    let frame = NodeFrame::Task {
                        lease: Lease::of(&task),
                        task: Box::new(task),
                    };
                    if shared.outbox.send(frame).await.is_err() {
                        return;
                    }
                }
            }
            Err(e) => {
                tracing::debug!(task_type = %s.task_type, error = %e, "push poll failed");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

/// Reads one length-prefixed frame.
async fn read_frame(recv: &mut quinn::RecvStream) -> Result<WorkerFrame, String> {
    let mut header = [0u8; 4];
    recv.read_exact(&mut header)
        .await
        .map_err(|e| format!("stream closed: {e}"))?;
    let len = wire::frame_len(header).map_err(|e| e.to_string())?;
    let mut body = vec![0u8; len];
    recv.read_exact(&mut body)
        .await
        .map_err(|e| format!("stream closed: {e}"))?;
    wire::decode_frame(&body).map_err(|e| e.to_string())
}
