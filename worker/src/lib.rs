//! Baton's Rust worker SDK: a worker connects to a node of a Baton cluster over QUIC with mutual
//! TLS, announces the task types it handles and how many of each it takes at once, and the node
//! pushes tasks against that credit; the worker runs a handler per task and reports results,
//! which the node acknowledges once committed ([`proto::worker`] is the protocol).
//!
//! ```no_run
//! # async fn example(ca: &[u8], cert: &[u8], key: &[u8]) -> Result<(), Box<dyn std::error::Error>> {
//! use serde_json::json;
//!
//! let worker = worker::Worker::builder()
//!     .nodes(["127.0.0.1:7070".parse()?, "127.0.0.1:7071".parse()?])
//!     .tls(worker::Tls::from_pem(ca, cert, key)?)
//!     .worker_id("billing-1")
//!     .handler("charge", 8, |task: worker::Task| async move {
//!         task.log(format!("charging {}", task.input()["amount"]));
//!         Ok(worker::Outcome::completed(json!({"ok": true})))
//!     })
//!     .domain("charge", "eu")
//!     .build()?;
//! let handle = worker.start();
//! // ... until it is time to stop:
//! handle.shutdown().await?;
//! # Ok(())
//! # }
//! ```
//!
//! What the SDK guarantees: at most `concurrency` handlers of a type run at once; a handler's
//! error or panic fails the attempt (FAILED, with the text as the reason) instead of losing the
//! task; a result is kept and sent again (to another node if need be) until a node acknowledges
//! or refuses it; a lost connection moves to the next node with exponential backoff and jitter,
//! while handlers keep running. A node drain moves the worker elsewhere; [`Handle::shutdown`]
//! drains the worker itself within a bounded wait.
//!
//! What it does not do: retry a task (the node decides retries from the task definition),
//! deduplicate deliveries (a task whose lease expired may be run again elsewhere: make handlers
//! idempotent), or poll over HTTP.
//!
//! Modules: [`worker`](Worker) (builder and checked configuration), `connection` (the driver:
//! connection lifecycle and event loop), `credit`, `outbox` and `backoff` (the pure decisions it
//! takes), `frame` (frames on a byte stream), [`Task`], [`Outcome`], [`Tls`], [`Handle`].

mod backoff;
mod config;
mod connection;
mod credit;
mod error;
mod frame;
mod handle;
mod handler;
mod outbox;
mod outcome;
mod task;
mod tls;
mod worker;

pub use error::Error;
pub use handle::{Handle, State, Status};
pub use handler::BoxError;
pub use outcome::{Outcome, LOGS_BYTES_MAX, LOG_LINE_BYTES_MAX, REASON_BYTES_MAX};
pub use task::Task;
pub use tls::{worker_cert_file, worker_key_file, Tls, CA_CERT_FILE};
pub use worker::{Builder, Worker, CONNECT_TIMEOUT, IDLE_TIMEOUT, NODES_MAX, SHUTDOWN_TIMEOUT};

/// The protocol and model types handlers meet (re-exported for convenience).
pub use proto::model::{Json, TaskResultStatus};
pub use proto::worker::{ErrorCode, Lease};
