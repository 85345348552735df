//! The driver: the one tokio task that owns a worker's state (credit, outbox, running handlers)
//! and its connection to a node, reconnecting through the node list until shutdown.
//!
//! Life of a connection: dial (QUIC, mutual TLS), open the one bidirectional stream, send
//! `Hello` (capacity = free slots, see [`crate::credit`]), wait for `Welcome`. Then one loop reacts
//! to node frames (tasks, acks, refusals, drain), finished handlers, heartbeats and the shutdown
//! signal, and after each event writes what is ready: results from the outbox, then credit.
//! Frames are read by a small reader task, because reading a frame is not cancel-safe.
//!
//! When a connection ends, results in flight become unsent again and go to the next node;
//! handlers keep running throughout (they are not tied to a connection). A refusal of the worker
//! itself (`Forbidden`, `Version`) backs off for long: another node will say the same.
//!
//! The decisions are in the pure parts ([`Credits`], [`Outbox`], [`crate::backoff`]); this
//! module performs I/O and keeps time.

use crate::backoff::{self, Backoff};
use crate::config::Config;
use crate::credit::{Credits, Refusal};
use crate::frame::{read_frame, write_frame, ReadError};
use crate::handle::{State, Status};
use crate::outbox::{Answer, Outbox};
use crate::task::Command;
use crate::{handler, Error, Task};
use proto::model::{Task as ModelTask, TaskResult};
use proto::worker::{
    ErrorCode, Lease, NodeFrame, WorkerFrame, NODE_SERVER_NAME, PROTOCOL_VERSIONS,
};
use rand::rngs::StdRng;
use rand::SeedableRng;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tracing::{debug, error, info, info_span, warn, Instrument};

/// Frames read ahead of the driver.
const FRAMES_QUEUE_MAX: usize = 64;
/// Heartbeat requests waiting for the driver.
pub(crate) const COMMANDS_QUEUE_MAX: usize = 256;
/// How long a draining node is given to answer the results already sent to it.
const NODE_DRAIN_WAIT: Duration = Duration::from_secs(5);
/// Final results left unacknowledged before credit is withheld, per slot of concurrency: a node
/// that stops acknowledging stops getting tasks, so the outbox stays bounded.
const UNACKED_PER_SLOT_MAX: usize = 2;

/// A handler's end: the result to report under the lease.
struct Finished {
    lease: Lease,
    result: TaskResult,
}

/// How a connection ended.
enum End {
    /// The worker is done: stopping, and everything was delivered or the wait ran out.
    Stop,
    /// The node drained: move to another node now.
    Drained,
    /// The node refused the worker.
    Refused(Error),
    /// Dial, handshake or stream failure, or a protocol error.
    Failed(Error),
}

/// The worker's state and its driving loop.
pub(crate) struct Driver {
    config: Arc<Config>,
    credits: Credits,
    outbox: Outbox,
    /// Handlers running (each holds a slot in `credits`).
    running: JoinSet<Finished>,
    commands: mpsc::Receiver<Command>,
    /// Given to every [`Task`] for its heartbeats.
    commands_tx: mpsc::Sender<Command>,
    stop: watch::Receiver<bool>,
    /// Set when a shutdown is asked for: the time the wait for in-flight work ends.
    stop_deadline: Option<Instant>,
    status: watch::Sender<Status>,
    /// Final results unacknowledged above which credit is withheld.
    unacked_max: usize,
    /// Index into `config.nodes` of the next node to dial.
    next_node: usize,
    connect_backoff: Backoff,
    refused_backoff: Backoff,
    rng: StdRng,
}

impl Driver {
    pub(crate) fn new(
        config: Config,
        stop: watch::Receiver<bool>,
        status: watch::Sender<Status>,
    ) -> Driver {
        let credits = Credits::new(
            config
                .handlers
                .iter()
                .map(|(t, h)| (t.clone(), h.domain.clone(), h.concurrency)),
        );
        let slots: usize = config
            .handlers
            .values()
            .map(|h| h.concurrency as usize)
            .sum();
        let (commands_tx, commands) = mpsc::channel(COMMANDS_QUEUE_MAX);
        Driver {
            config: Arc::new(config),
            credits,
            outbox: Outbox::default(),
            running: JoinSet::new(),
            commands,
            commands_tx,
            stop,
            stop_deadline: None,
            status,
            unacked_max: slots.saturating_mul(UNACKED_PER_SLOT_MAX),
            next_node: 0,
            connect_backoff: backoff::CONNECT,
            refused_backoff: backoff::REFUSED,
            rng: StdRng::from_entropy(),
        }
    }

    /// Runs until shutdown.
    pub(crate) async fn run(mut self) {
        let span = info_span!("worker", worker = %self.config.worker_id);
        async move {
            loop {
                if self.done() || self.out_of_time() {
                    break;
                }
                let node = self.config.nodes[self.next_node % self.config.nodes.len()];
                self.next_node = self.next_node.wrapping_add(1);
                let end = self
                    .connection(node)
                    .instrument(info_span!("connection", %node))
                    .await;
                self.outbox.connection_lost();
                let pause = match end {
                    End::Stop => break,
                    End::Drained => {
                        self.connect_backoff.reset();
                        self.connect_backoff.next_delay(&mut self.rng)
                    }
                    End::Refused(e) => {
                        // Forbidden and Version need someone to act; another node says the same.
                        let long = matches!(
                            e,
                            Error::Refused {
                                code: ErrorCode::Forbidden | ErrorCode::Version,
                                ..
                            }
                        );
                        if long {
                            error!(error = %e, "node refused the worker; backing off");
                        } else {
                            warn!(error = %e, "node refused the worker; trying the next node");
                        }
                        self.record(e);
                        if long {
                            self.refused_backoff.next_delay(&mut self.rng)
                        } else {
                            self.connect_backoff.next_delay(&mut self.rng)
                        }
                    }
                    End::Failed(e) => {
                        warn!(error = %e, "connection failed");
                        self.record(e);
                        self.connect_backoff.next_delay(&mut self.rng)
                    }
                };
                self.set_state(State::Disconnected);
                self.idle(pause).await;
            }
            self.finish();
        }
        .instrument(span)
        .await
    }

    /// Stopping, and nothing left to deliver.
    fn done(&self) -> bool {
        self.stop_deadline.is_some() && self.running.is_empty() && self.outbox.is_empty()
    }

    fn out_of_time(&self) -> bool {
        self.stop_deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// Abandons what is left and reports the worker stopped.
    fn finish(&mut self) {
        let abandoned_tasks = self.running.len();
        self.running.abort_all();
        let abandoned_results = self.outbox.abandon();
        if abandoned_tasks + abandoned_results > 0 {
            warn!(
                abandoned_tasks,
                abandoned_results, "shutdown ran out of time; the node will retry these tasks"
            );
        }
        info!("worker stopped");
        self.status.send_modify(|s| {
            s.state = State::Stopped {
                abandoned_tasks,
                abandoned_results,
            };
            s.running = 0;
            s.unacked = 0;
        });
    }

    /// Waits out `pause` between connections, still collecting finished handlers and
    /// heartbeats. Returns early when a shutdown leaves nothing to deliver.
    async fn idle(&mut self, pause: Duration) {
        let until = Instant::now() + pause;
        loop {
            if self.done() || self.out_of_time() {
                return;
            }
            let wake = self.stop_deadline.map_or(until, |d| d.min(until));
            tokio::select! {
                () = tokio::time::sleep_until(wake.into()) => {
                    if wake == until {
                        return;
                    }
                }
                Some(joined) = self.running.join_next(), if !self.running.is_empty() => {
                    self.finished(joined);
                }
                Some(command) = self.commands.recv() => self.command(command),
                () = stop_requested(&mut self.stop), if self.stop_deadline.is_none() => {
                    self.begin_stop();
                }
            }
            self.publish();
        }
    }

    /// One connection to `node`, from dialing to its end.
    async fn connection(&mut self, node: SocketAddr) -> End {
        self.set_state(State::Connecting { node });
        let connect_timeout = self.config.connect_timeout;
        let dialed = tokio::time::timeout(connect_timeout, self.dial(node)).await;
        let (endpoint, conn, mut send, mut recv, node_id) = match dialed {
            Ok(Ok(dialed)) => dialed,
            Ok(Err(end)) => return end,
            Err(_) => {
                return End::Failed(Error::Connect {
                    node,
                    message: format!("not welcomed within {connect_timeout:?}"),
                })
            }
        };
        self.connect_backoff.reset();
        self.refused_backoff.reset();
        self.set_state(State::Connected { node, node_id });

        let (frames_tx, mut frames) = mpsc::channel(FRAMES_QUEUE_MAX);
        let reader = tokio::spawn(async move {
            loop {
                let frame = read_frame::<NodeFrame, _>(&mut recv).await;
                let last = !matches!(frame, Ok(Some(_)));
                if frames_tx.send(frame).await.is_err() || last {
                    return;
                }
            }
        });
        let end = self.exchange(node, &mut send, &mut frames).await;
        reader.abort();
        let _ = send.finish();
        conn.close(0u32.into(), b"bye");
        if matches!(end, End::Stop | End::Drained) {
            // A clean end: let the close reach the node rather than leave it to time out.
            let _ = tokio::time::timeout(Duration::from_secs(1), endpoint.wait_idle()).await;
        }
        end
    }

    /// Dials `node`, opens the stream, says hello and reads the welcome.
    async fn dial(
        &mut self,
        node: SocketAddr,
    ) -> Result<
        (
            quinn::Endpoint,
            quinn::Connection,
            quinn::SendStream,
            quinn::RecvStream,
            u64,
        ),
        End,
    > {
        let failed = |e: &dyn std::fmt::Display| {
            End::Failed(Error::Connect {
                node,
                message: e.to_string(),
            })
        };
        let bind: SocketAddr = if node.is_ipv6() {
            (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
        } else {
            (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
        };
        let endpoint = quinn::Endpoint::client(bind).map_err(|e| failed(&e))?;
        let conn = endpoint
            .connect_with(self.config.quic.clone(), node, NODE_SERVER_NAME)
            .map_err(|e| failed(&e))?
            .await
            .map_err(|e| failed(&e))?;
        // With TLS 1.3 the node checks the worker's certificate after the client's side of the
        // handshake is done: a refusal shows up as the connection closing, and its reason (for
        // example "peer sent no certificates") is what the worker's operator needs to see.
        let failed = |e: &dyn std::fmt::Display| match conn.close_reason() {
            Some(reason) => failed(&reason),
            None => failed(e),
        };
        let (mut send, mut recv) = conn.open_bi().await.map_err(|e| failed(&e))?;
        let hello = WorkerFrame::Hello {
            worker_id: self.config.worker_id.to_string(),
            subscriptions: self.credits.hello(self.stop_deadline.is_some()),
            versions: PROTOCOL_VERSIONS.to_vec(),
        };
        write_frame(&mut send, &hello)
            .await
            .map_err(|e| failed(&e))?;
        match read_frame::<NodeFrame, _>(&mut recv).await {
            Ok(Some(NodeFrame::Welcome {
                node: node_id,
                version,
                worker_id,
            })) if PROTOCOL_VERSIONS.contains(&version) => {
                info!(node_id, version, recorded_as = %worker_id, "connected");
                Ok((endpoint, conn, send, recv, node_id))
            }
            Ok(Some(NodeFrame::Error { code, message, .. })) => Err(End::Refused(Error::Refused {
                node,
                code,
                message,
            })),
            Ok(Some(other)) => Err(End::Failed(Error::Protocol {
                node,
                message: format!(
                    "expected Welcome (of a version this worker speaks), got {other:?}"
                ),
            })),
            Ok(None) => Err(failed(&"the node closed the stream before its welcome")),
            Err(e) => Err(failed(&e)),
        }
    }

    /// The welcomed connection's loop.
    async fn exchange(
        &mut self,
        node: SocketAddr,
        send: &mut quinn::SendStream,
        frames: &mut mpsc::Receiver<Result<Option<NodeFrame>, ReadError>>,
    ) -> End {
        let lost = |message: String| End::Failed(Error::Connection { node, message });
        // The worker told this node it drains.
        let mut drain_sent = false;
        // The node drains: until this time, wait for answers to what was sent, send nothing new.
        let mut node_drain: Option<Instant> = None;
        loop {
            if self.stop_deadline.is_some() && !drain_sent {
                if let Err(e) = write_frame(send, &WorkerFrame::Drain).await {
                    return lost(e.to_string());
                }
                info!("drain sent: no new tasks");
                drain_sent = true;
            }
            if self.done() || self.out_of_time() {
                return End::Stop;
            }
            if let Some(until) = node_drain {
                if self.outbox.in_flight() == 0 || Instant::now() >= until {
                    return End::Drained;
                }
            } else if let Err(e) = self.flush(send, drain_sent).await {
                return lost(e.to_string());
            }
            self.publish();

            // While the node drains nothing is sent, so a due retry must not wake the loop.
            let retry_at = self.outbox.next_retry_at().filter(|_| node_drain.is_none());
            let wake = [retry_at, node_drain, self.stop_deadline]
                .into_iter()
                .flatten()
                .min();
            tokio::select! {
                frame = frames.recv() => match frame {
                    Some(Ok(Some(frame))) => {
                        if let Some(end) = self.on_frame(node, frame, &mut node_drain) {
                            return end;
                        }
                    }
                    Some(Ok(None)) | None => return lost("the node closed the stream".to_owned()),
                    Some(Err(e)) => return lost(e.to_string()),
                },
                Some(joined) = self.running.join_next(), if !self.running.is_empty() => {
                    self.finished(joined);
                }
                Some(command) = self.commands.recv() => self.command(command),
                () = stop_requested(&mut self.stop), if self.stop_deadline.is_none() => {
                    self.begin_stop();
                }
                () = sleep_until(wake), if wake.is_some() => {}
            }
        }
    }

    /// Writes the results that are ready, then the credit owed (unless draining, or the node is
    /// behind on acknowledgements).
    async fn flush(
        &mut self,
        send: &mut quinn::SendStream,
        drain_sent: bool,
    ) -> std::io::Result<()> {
        let now = Instant::now();
        while let Some(s) = self.outbox.next_send(now) {
            if let Some(task_type) = &s.freed {
                self.credits.release(task_type);
            }
            if let WorkerFrame::Result { seq, lease, result } = &s.frame {
                debug!(seq, task = %lease.task_id, status = ?result.status, "result sent");
            }
            write_frame(send, &s.frame).await?;
        }
        if !drain_sent && self.outbox.finals() < self.unacked_max {
            for credit in self.credits.flush() {
                write_frame(send, &credit).await?;
            }
        }
        Ok(())
    }

    /// Reacts to a node frame; `Some` ends the connection.
    fn on_frame(
        &mut self,
        node: SocketAddr,
        frame: NodeFrame,
        node_drain: &mut Option<Instant>,
    ) -> Option<End> {
        match frame {
            NodeFrame::Task { lease, task } => self.on_task(lease, task),
            NodeFrame::Ack { seq } => match self.outbox.ack(seq) {
                Answer::Acked { task_id, heartbeat } => {
                    debug!(seq, task = %task_id, heartbeat, "acknowledged");
                    if !heartbeat {
                        self.status.send_modify(|s| s.results_acked += 1);
                    }
                }
                other => debug!(seq, ?other, "acknowledgement of nothing pending"),
            },
            NodeFrame::Error {
                seq: Some(seq),
                code,
                message,
            } => {
                let now = Instant::now();
                match self.outbox.refuse(seq, code, &message, now, &mut self.rng) {
                    Answer::Dropped {
                        task_id,
                        code: ErrorCode::Stale,
                        ..
                    } => {
                        info!(
                            seq, task = %task_id, %message,
                            "report dropped: the lease ended (the task timed out or was leased again)"
                        );
                        self.status.send_modify(|s| s.results_stale += 1);
                    }
                    Answer::Dropped {
                        task_id,
                        code,
                        message,
                    } => {
                        warn!(seq, task = %task_id, ?code, %message, "report refused; dropped");
                    }
                    Answer::Retry { task_id, delay } => {
                        debug!(seq, task = %task_id, ?delay, %message, "node unavailable; will retry");
                    }
                    other => debug!(seq, ?code, ?other, "refusal of nothing pending"),
                }
            }
            NodeFrame::Error {
                seq: None,
                code,
                message,
            } => {
                return Some(End::Refused(Error::Refused {
                    node,
                    code,
                    message,
                }));
            }
            NodeFrame::Drain => {
                if node_drain.is_none() {
                    info!("node is draining; moving to another node");
                    *node_drain = Some(Instant::now() + NODE_DRAIN_WAIT);
                }
            }
            NodeFrame::Welcome { .. } => {
                return Some(End::Failed(Error::Protocol {
                    node,
                    message: "a second Welcome".to_owned(),
                }));
            }
        }
        None
    }

    /// Starts the handler of a pushed task.
    fn on_task(&mut self, lease: Lease, task: Box<ModelTask>) {
        let Some(handler) = self.config.handlers.get(&lease.task_type) else {
            warn!(task = %lease.task_id, task_type = %lease.task_type,
                "node pushed a task of a type this worker did not subscribe to; ignored");
            return;
        };
        if let Err(refusal) = self.credits.take(&lease.task_type) {
            let why = match refusal {
                Refusal::Full => "beyond the credit given",
                Refusal::Unknown => "of an unknown type",
            };
            warn!(task = %lease.task_id, task_type = %lease.task_type,
                "node pushed a task {why}; ignored (it will time out and be retried)");
            return;
        }
        let run = handler.run.clone();
        let span = info_span!("task", task = %lease.task_id, task_type = %lease.task_type,
            workflow = %task.workflow_instance_id);
        let task = Task::new(
            task,
            lease.clone(),
            self.config.worker_id.clone(),
            self.commands_tx.clone(),
        );
        self.running.spawn(
            async move {
                debug!("task started");
                let outcome = handler::run(&run, task.clone()).await;
                let result = task.result(outcome);
                debug!(status = ?result.status, "task finished");
                Finished { lease, result }
            }
            .instrument(span),
        );
    }

    fn finished(&mut self, joined: Result<Finished, tokio::task::JoinError>) {
        match joined {
            Ok(Finished { lease, result }) => self.outbox.push_final(lease, result),
            // Handlers' panics are caught inside the task; only an abort (at shutdown) ends here.
            Err(e) => error!(error = %e, "a task's driver ended without a result"),
        }
    }

    fn command(&mut self, command: Command) {
        match command {
            Command::Heartbeat {
                lease,
                result,
                reply,
            } => self.outbox.push_heartbeat(lease, result, reply),
        }
    }

    fn begin_stop(&mut self) {
        info!(
            running = self.running.len(),
            unacked = self.outbox.len(),
            "shutting down"
        );
        self.stop_deadline = Some(Instant::now() + self.config.shutdown_timeout);
        self.status.send_modify(|s| s.stopping = true);
    }

    fn record(&mut self, error: Error) {
        self.status.send_modify(|s| s.last_error = Some(error));
    }

    fn set_state(&mut self, state: State) {
        self.status.send_modify(|s| s.state = state);
        self.publish();
    }

    /// Publishes the counters when they changed.
    fn publish(&mut self) {
        let running = self.credits.held();
        let unacked = self.outbox.len();
        self.status.send_if_modified(|s| {
            let changed = s.running != running || s.unacked != unacked;
            s.running = running;
            s.unacked = unacked;
            changed
        });
    }
}

/// Resolves once a shutdown is asked for; never if every handle is gone without asking.
async fn stop_requested(stop: &mut watch::Receiver<bool>) {
    if stop.wait_for(|s| *s).await.is_err() {
        std::future::pending::<()>().await;
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}
