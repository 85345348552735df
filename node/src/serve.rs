//! The `baton` node's front doors: the HTTP API and, when asked for, the QUIC worker gateway,
//! over one node's services, until a shutdown signal.

use crate::options::Options;

/// Runs a node until `shutdown` resolves: the HTTP API on `options.http`. Then the node's
/// shutdown begins ([`crate::Node::begin_shutdown`]): the front doors take no new work and drain,
/// and the node stops.
pub async fn serve(
    options: Options,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    check_exposure(&options)?;
    let tls = match &options.tls {
        Some(files) => Some(crate::api::tls::server_config(files).map_err(anyhow::Error::msg)?),
        None => None,
    };
    let node = crate::service::open(&options)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    if options.auth {
        set_up_access(&node, &options.data_dir).await?;
    }
    let listener = tokio::net::TcpListener::bind(options.http)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", options.http))?;
    let admin_listener = match options.admin_http {
        Some(addr) => {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| anyhow::anyhow!("cannot listen on {addr} (--admin-http): {e}"))?;
            tracing::info!(admin = %addr, "serving the administration API");
            Some((listener, addr))
        }
        None => None,
    };
    let gateway = match &options.workers {
        Some(w) => {
            let g = crate::gateway::worker::WorkerGateway::start(node.clone(), w)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            tracing::info!(workers = %w.listen, "serving QUIC workers");
            Some(g)
        }
        None => None,
    };
    // The signal begins the node's shutdown, which both front doors follow: the HTTP API refuses
    // new requests while it finishes those it holds, and QUIC workers are told to drain.
    tokio::spawn({
        let node = node.clone();
        async move {
            shutdown.await;
            node.begin_shutdown().await;
        }
    });
    let stopped = || {
        let stopping = node.stopping.clone();
        async move { stopping.wait().await }
    };
    let workers_done = {
        let stop = stopped();
        async move {
            stop.await;
            if let Some(g) = gateway {
                g.shutdown().await;
            }
        }
    };
    tracing::info!(node = %options.node, http = %options.http, data_dir = %options.data_dir.display(), partitions = node.host.partition_count(), hosted = node.host.hosted().len(), members = node.host.peers().len() + 1, "baton node serving");
    let open = node.access.table().signing.is_none();
    let exposure = (options.insecure_no_auth && open).then(|| INSECURE.to_owned());
    let admin_door = match (options.admin_http, options.http.ip().is_loopback()) {
        (None, true) => crate::api::AdminDoor::Beside,
        _ => crate::api::AdminDoor::Elsewhere,
    };
    let app = crate::api::router(node.clone(), options.doors.clone(), exposure, admin_door);
    let listener = crate::api::listener::Bounded::new(listener);
    let idle = std::time::Duration::from_secs(proto::limits::HTTP_IDLE_SECS);
    let http = crate::api::server::serve(listener, app, idle, stopped(), tls.clone());
    let admin = async {
        if let Some((listener, addr)) = admin_listener {
            let names = options.doors.host_names.clone();
            let doors = crate::options::Doors::new(addr, names, Vec::new());
            let app = crate::api::admin_router(node.clone(), doors);
            let listener = crate::api::listener::Bounded::new(listener);
            crate::api::server::serve(listener, app, idle, stopped(), tls).await;
        }
    };
    tokio::join!(http, admin, workers_done);
    node.shutdown().await;
    tracing::info!("baton node stopped");
    Ok(())
}

/// What `/health` says of a node that serves its API beyond loopback without authentication.
pub const INSECURE: &str =
    "the HTTP API is served beyond loopback without access control (--insecure-no-auth): anyone who reaches it may do anything";

/// Where the node that sets access control up writes the administrator's key.
pub const ADMIN_KEY_FILE: &str = "admin-key.json";

/// Sets access control up for the cluster unless it is; the node that does writes the
/// administrator's key (`{"keyId", "keySecret"}`) to [`ADMIN_KEY_FILE`] in its data
/// directory, readable by its owner only.
async fn set_up_access(node: &crate::Node, data_dir: &std::path::Path) -> anyhow::Result<()> {
    let Some(key) = node
        .access
        .set_up()
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?
    else {
        tracing::info!("access control is on");
        return Ok(());
    };
    let path = data_dir.join(ADMIN_KEY_FILE);
    let body = serde_json::json!({"keyId": key.id, "keySecret": key.secret});
    write_private(&path, &serde_json::to_vec_pretty(&body)?).map_err(|e| {
        anyhow::anyhow!(
            "cannot write the administrator's key to {}: {e}",
            path.display()
        )
    })?;
    tracing::warn!(file = %path.display(), "access control set up: the administrator's key is in this file; keep it, then remove it");
    Ok(())
}

/// Writes `bytes` to a new file at `path` that only its owner may read.
fn write_private(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// Refuses to serve the API beyond loopback without access control (`--auth`), unless the
/// operator said `--insecure-no-auth`.
fn check_exposure(options: &Options) -> anyhow::Result<()> {
    let admin_exposed = options.admin_http.is_some_and(|a| !a.ip().is_loopback());
    if options.auth || (options.http.ip().is_loopback() && !admin_exposed) {
        return Ok(());
    }
    if options.insecure_no_auth {
        tracing::warn!(http = %options.http, "{INSECURE}");
        return Ok(());
    }
    let (flag, addr) = match admin_exposed {
        true => ("--admin-http", options.admin_http.unwrap_or(options.http)),
        false => ("--http", options.http),
    };
    anyhow::bail!(
        "{flag} {addr} is reachable from other machines: turn access control on with --auth, or listen on a loopback address (127.0.0.1) behind your own proxy, or pass --insecure-no-auth to let anyone who reaches it define, run, read and remove everything"
    )
}

#[cfg(test)]
#[path = "serve_tests.rs"]
mod tests;
