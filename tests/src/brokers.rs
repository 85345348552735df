//! The local message brokers the event tests need, started if they are not running: NATS with
//! JetStream on `127.0.0.1:4222` (`start-stop-daemon`) and RabbitMQ on `127.0.0.1:5672`
//! (`rabbitmq-server -detached`). A test harness concern: a node never starts a broker.

use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Longest a broker may take to accept connections after it is started.
const START_DEADLINE: Duration = Duration::from_secs(60);
/// How often its port is tried meanwhile.
const POLL_INTERVAL: Duration = Duration::from_millis(200);

/// A broker this machine can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Broker {
    /// NATS with JetStream.
    Nats,
    /// RabbitMQ (AMQP 0-9-1).
    RabbitMq,
}

impl Broker {
    fn addr(self) -> SocketAddr {
        match self {
            Broker::Nats => SocketAddr::from(([127, 0, 0, 1], 4222)),
            Broker::RabbitMq => SocketAddr::from(([127, 0, 0, 1], 5672)),
        }
    }

    /// The command that starts it in the background.
    fn start_command(self) -> (&'static str, &'static [&'static str]) {
        match self {
            Broker::Nats => (
                "start-stop-daemon",
                &[
                    "--start",
                    "--oknodo",
                    "--background",
                    "--exec",
                    "/usr/sbin/nats-server",
                    "--",
                    "-a",
                    "127.0.0.1",
                    "-p",
                    "4222",
                    "-js",
                    "-sd",
                    "/var/lib/nats-server",
                    "-l",
                    "/var/log/nats-server.log",
                ],
            ),
            Broker::RabbitMq => ("rabbitmq-server", &["-detached"]),
        }
    }
}

/// Makes sure `broker` accepts connections, starting it if not and waiting up to
/// [`START_DEADLINE`] for its port. Blocks the calling thread.
pub fn ensure_running(broker: Broker) -> anyhow::Result<()> {
    /// One start at a time per process, so parallel tests do not start a broker twice.
    static STARTING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let addr = broker.addr();
    let reachable = || TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok();
    if reachable() {
        return Ok(());
    }
    // A poisoned lock only means another start panicked; starting again is still right.
    let _starting = STARTING.lock().unwrap_or_else(|e| e.into_inner());
    if reachable() {
        return Ok(());
    }
    let (program, args) = broker.start_command();
    let status = std::process::Command::new(program)
        .args(args)
        .status()
        .map_err(|e| {
            anyhow::anyhow!(
                "{broker:?} on {addr} is not running, and `{program}` could not be run: {e}"
            )
        })?;
    anyhow::ensure!(
        status.success(),
        "{broker:?} on {addr} is not running, and `{program}` failed ({status})"
    );
    let deadline = Instant::now() + START_DEADLINE;
    while Instant::now() < deadline {
        if reachable() {
            return Ok(());
        }
        std::thread::sleep(POLL_INTERVAL);
    }
    anyhow::bail!(
        "{broker:?} started with `{program}` but {addr} did not accept connections within {} s",
        START_DEADLINE.as_secs()
    )
}
