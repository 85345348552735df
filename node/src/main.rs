//! `baton`: run a Baton node.
//!
//! `baton server` with no flags runs the embedded default: one node, data in `./baton-data`, the
//! Conductor-compatible HTTP API on 127.0.0.1:8080, 8 workflow partitions and the meta group.
//! `baton server --cluster 1=ADDR,2=ADDR,3=ADDR --node-id N --certs DIR` runs node N of a cluster;
//! `baton certs --nodes 1,2,3` creates the certificates the nodes authenticate each other with
//! (and the workers CA); `baton worker-cert --id W --task-types a,b` creates a worker's.
//! `baton script-host` (hidden) is the process a node starts to run its scripts in
//! (`node::events::pool`).

use clap::{Parser, Subcommand};
use proto::NodeId;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// mimalloc instead of glibc's allocator: a node allocates and frees small buffers at a high
/// rate (records, entries, frames), and glibc's malloc was 15% of a loaded node's samples.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` in mimalloc.h's `mi_option_t` (the same in mimalloc 2 and 3;
/// libmimalloc-sys names no constant for it).
const MI_OPTION_PURGE_DELAY: std::ffi::c_int = 15;

/// Keeps memory mimalloc got back from the program for reuse instead of returning it to the OS
/// (`MIMALLOC_PURGE_DELAY`, when set, still decides). A loaded node frees and allocates the
/// same memory over and over; returning it made the kernel fault it in and zero it again,
/// transparent huge pages 2 MiB at a time. At W2 400/s on three nodes the page faults fell from
/// about 2,600 a second to 10 and CPU by 2-6%; RSS stayed the same.
#[allow(unsafe_code)] // mimalloc's options have no safe setter.
fn keep_freed_memory() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: an index within mimalloc's option table; called first in `main`, before any
        // other thread runs (mimalloc reads and writes its options without synchronisation).
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
    }
}

#[derive(Parser)]
#[command(
    name = "baton",
    version,
    about = "Baton: a durable workflow engine that speaks Conductor's API"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
#[allow(clippy::large_enum_variant)] // parsed once at start; boxing the server's flags buys nothing
enum Command {
    /// Run a node: the HTTP API and the partitions it hosts.
    Server {
        /// Where the node keeps its data (created if missing).
        #[arg(long, default_value = "baton-data")]
        data_dir: PathBuf,
        /// Address of the HTTP API. An address beyond loopback (`0.0.0.0:8080`) also needs
        /// --auth, or --insecure-no-auth.
        #[arg(long, default_value = "127.0.0.1:8080")]
        http: SocketAddr,
        /// Access control: every request but health, metrics, the agent card, token exchange
        /// and signed webhooks needs a token (`POST /api/token`) whose application's roles
        /// reach it. The first node started with it sets it up for the cluster and writes the
        /// administrator's key to DATA_DIR/admin-key.json; once set up, it stays on.
        #[arg(long)]
        auth: bool,
        /// Serve the HTTP API beyond loopback without access control, although anyone who
        /// reaches it may then do anything; `/health` says so.
        #[arg(long)]
        insecure_no_auth: bool,
        /// Serve the administration API (`/api/admin/*`: members, snapshots, partitions) on its
        /// own address instead of beside the API. Without it, it is served on a loopback --http
        /// only.
        #[arg(long, value_name = "ADDR")]
        admin_http: Option<SocketAddr>,
        /// Serve the API over HTTPS with this certificate chain (PEM; read again when it
        /// changes, without a restart); needs --tls-key.
        #[arg(long, value_name = "PEM", requires = "tls_key")]
        tls_cert: Option<PathBuf>,
        /// The private key of --tls-cert (PEM).
        #[arg(long, value_name = "PEM", requires = "tls_cert")]
        tls_key: Option<PathBuf>,
        /// The names requests must give in `Host` besides IP addresses (refuses DNS
        /// rebinding); without it any name, or only `localhost` on a loopback address.
        #[arg(long, value_delimiter = ',', value_name = "NAME[,NAME...]")]
        host_names: Vec<String>,
        /// Origins (`scheme://host[:port]`) whose browser pages may call the API besides the
        /// node's own, such as a UI served elsewhere; other sites' requests are refused.
        #[arg(long, value_delimiter = ',', value_name = "ORIGIN[,ORIGIN...]")]
        allow_origin: Vec<String>,
        /// Workflow partitions (fixed when the data directory is created).
        #[arg(long, default_value_t = 8)]
        partitions: u16,
        /// This node's id.
        #[arg(long, default_value_t = 1)]
        node_id: u64,
        /// This node's peer (QUIC, UDP) address; needed with --cluster.
        #[arg(long)]
        listen: Option<SocketAddr>,
        /// The cluster's initial members, the same on every node: `1=127.0.0.1:9081,2=...`.
        #[arg(long, value_parser = parse_members)]
        cluster: Option<BTreeMap<NodeId, SocketAddr>>,
        /// Join a running cluster through the member listening at this peer address (a node
        /// added later; needs --listen). Only the first start of a data directory joins; later
        /// starts find the cluster in the data directory.
        #[arg(long, conflicts_with = "cluster", requires = "listen")]
        join: Option<SocketAddr>,
        /// Directory with the cluster's certificates (`baton certs`); needed with --cluster and
        /// --workers.
        #[arg(long, default_value = "baton-certs")]
        certs: PathBuf,
        /// Serve QUIC workers (the `worker` SDK) on this UDP address, with mutual TLS: the node's
        /// certificate and the workers CA from --certs (`baton certs`, `baton worker-cert`).
        #[arg(long)]
        workers: Option<SocketAddr>,
        /// NATS server for `nats:` event handlers (JetStream), e.g. `nats://127.0.0.1:4222`;
        /// without it that provider is disabled.
        #[arg(long, env = "BATON_NATS")]
        nats: Option<String>,
        /// RabbitMQ for `amqp_queue:` / `amqp_exchange:` event handlers, e.g.
        /// `amqp://guest:guest@127.0.0.1:5672/%2f`; without it those providers are disabled.
        #[arg(long, env = "BATON_AMQP")]
        amqp: Option<String>,
        /// Where Serverless Workflow events travel (`emit`, `listen`, `schedule.on`): `conductor`
        /// (Baton's own queues), `nats` (a JetStream subject per event type; needs --nats) or
        /// `amqp_exchange:NAME` (a RabbitMQ topic exchange routed by event type; needs --amqp).
        #[arg(long, default_value = "conductor", value_parser = node::events::bus::DslBus::parse)]
        dsl_events: node::events::bus::DslBus,
        /// Publish Serverless Workflow instances' lifecycle CloudEvents
        /// (`io.serverlessworkflow.workflow.started.v1`, ...) to this sink, `provider:queue`
        /// (`conductor:lifecycle`, `nats:baton.lifecycle`, `amqp_exchange:...`); none without it.
        #[arg(long)]
        dsl_lifecycle_sink: Option<String>,
        /// The event gate drops a webhook delivery whose content it saw within this many seconds.
        #[arg(long, default_value_t = node::events::DEDUP_WINDOW_SECS)]
        event_dedup_secs: u64,
        /// HTTP tasks' calls this node makes at once; the others wait for a slot.
        #[arg(long, default_value_t = node::events::http::HTTP_CONCURRENCY,
              value_parser = parse_http_concurrency)]
        http_concurrency: usize,
        /// The only hosts HTTP tasks may call: `api.example.com`, `*.example.com` (names below
        /// it), `10.0.0.7`, `[::1]` or `*`, each optionally with `:PORT`, comma-separated.
        /// Without it every host may be called. Either way link-local and cloud metadata
        /// addresses (169.254.0.0/16 with 169.254.169.254, fe80::/10, fd00:ec2::254,
        /// 100.100.100.200) are refused, after DNS resolution too, unless listed here by IP.
        #[arg(long, value_name = "HOST[,HOST...]")]
        http_allow: Option<node::events::http::AllowList>,
        /// A directory of secrets (a file per secret, `NAME` as text or `NAME.json` as JSON)
        /// read at start: Serverless Workflow documents read them as `$secrets`.
        #[arg(long, value_name = "DIR")]
        secrets_dir: Option<PathBuf>,
        /// The keys of the replicated secrets store (`/api/secrets`), one per line as 64 hex
        /// digits (`openssl rand -hex 32`): the first seals, every one opens. Give every node
        /// the same file. HTTP tasks name its secrets as `${workflow.secrets.NAME}` in headers.
        #[arg(long, value_name = "FILE")]
        secrets_key_file: Option<PathBuf>,
        /// An OpenID Connect issuer (its URL, as its tokens' `iss`) whose bearer tokens sign
        /// people in once access control is set up; their roles are the Baton role names the
        /// claim `--oidc-roles-claim` lists.
        #[arg(long, value_name = "URL", requires = "oidc_audience")]
        oidc_issuer: Option<String>,
        /// The audience (`aud`) the issuer's tokens must name: Baton's client id there.
        #[arg(long, value_name = "AUD", requires = "oidc_issuer")]
        oidc_audience: Option<String>,
        /// The claim of the issuer's tokens that lists a person's Baton roles.
        #[arg(long, value_name = "CLAIM", default_value = "roles")]
        oidc_roles_claim: String,
        /// The processes Serverless Workflow `run` tasks may start on this node: `shell`
        /// (`run.shell`, `sh -c`), `python` (`run.script` in python, `python3 -c`), or both,
        /// comma-separated. Without it documents that run them are refused. (`js` scripts run
        /// in the JavaScript sandbox and need nothing.)
        #[arg(long, value_name = "KIND[,KIND]")]
        dsl_run: Option<node::events::process::ProcessOptions>,
        /// Leave the cluster's active version where it is when every member's binary serves a
        /// newer one, until `batonctl upgrade finalize` (docs/upgrading.md). Without it the
        /// meta leader activates the newest version every member serves.
        #[arg(long)]
        hold_cluster_version: bool,
        /// Serve cluster versions up to this one only, as an older binary would (rehearsing an
        /// upgrade; tests).
        #[arg(long, value_name = "N", hide = true)]
        max_cluster_version: Option<u32>,
    },
    /// Serve as a node's script host: evaluate scripts read from stdin, answers on stdout (a
    /// node starts these itself).
    #[command(name = "script-host", hide = true)]
    ScriptHost,
    /// Create a cluster CA and a certificate for each node (mutual TLS between nodes), and a
    /// workers CA that signs worker certificates (`baton worker-cert`).
    Certs {
        /// Output directory (must not already hold a ca.pem or workers-ca.pem).
        #[arg(long, default_value = "baton-certs")]
        out: PathBuf,
        /// Node ids, e.g. `1,2,3`.
        #[arg(long, value_delimiter = ',', required = true)]
        nodes: Vec<u64>,
        /// Host names or IP addresses the nodes are reached by (added to every certificate).
        #[arg(long, value_delimiter = ',', default_value = "127.0.0.1,localhost")]
        host: Vec<String>,
    },
    /// Create a worker's certificate, signed by the workers CA of `baton certs`: it names the
    /// worker and the task types it may work.
    WorkerCert {
        /// Directory holding the workers CA (workers-ca.pem, workers-ca.key).
        #[arg(long, default_value = "baton-certs")]
        certs: PathBuf,
        /// The worker's id (printable ASCII, no spaces).
        #[arg(long)]
        id: String,
        /// Task types the worker may work, e.g. `charge,refund`, or `*` for every type.
        #[arg(long, value_delimiter = ',', required = true)]
        task_types: Vec<String>,
        /// Output directory for worker-<id>.pem and worker-<id>.key (default: --certs).
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

/// Parses `1=127.0.0.1:9081,2=127.0.0.1:9082`.
fn parse_members(s: &str) -> Result<BTreeMap<NodeId, SocketAddr>, String> {
    let mut out = BTreeMap::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (id, addr) = part
            .split_once('=')
            .ok_or_else(|| format!("'{part}' is not ID=HOST:PORT"))?;
        let id: u64 = id
            .trim()
            .parse()
            .map_err(|_| format!("'{id}' is not a node id"))?;
        let addr: SocketAddr = addr
            .trim()
            .parse()
            .map_err(|_| format!("'{addr}' is not an IP:PORT address"))?;
        if out.insert(NodeId(id), addr).is_some() {
            return Err(format!("node {id} is listed twice"));
        }
    }
    if out.is_empty() {
        return Err("the member list is empty".into());
    }
    Ok(out)
}

/// Parses `--http-concurrency`: 1 to `HTTP_CONCURRENCY_MAX`.
fn parse_http_concurrency(s: &str) -> Result<usize, String> {
    let max = node::events::http::HTTP_CONCURRENCY_MAX;
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!("'{s}' is not a number from 1 to {max}")),
    }
}

/// Set to `off`, the node records no metrics and `GET /metrics` answers 404 (to measure what
/// recording costs).
const METRICS_ENV: &str = "BATON_METRICS";

fn main() -> anyhow::Result<()> {
    keep_freed_memory();
    let cli = Cli::parse();
    if let Command::ScriptHost = cli.command {
        // Before logging is set up: stdout carries the host's answers and nothing else.
        return Ok(node::events::host::serve()?);
    }
    init_logging_and_metrics();
    match cli.command {
        Command::Server {
            data_dir,
            http,
            auth,
            insecure_no_auth,
            admin_http,
            tls_cert,
            tls_key,
            host_names,
            allow_origin,
            partitions,
            node_id,
            listen,
            cluster,
            join,
            certs,
            workers,
            nats,
            amqp,
            dsl_events,
            dsl_lifecycle_sink,
            event_dedup_secs,
            http_concurrency,
            http_allow,
            secrets_dir,
            secrets_key_file,
            oidc_issuer,
            oidc_audience,
            oidc_roles_claim,
            dsl_run,
            hold_cluster_version,
            max_cluster_version,
        } => {
            let node = NodeId(node_id);
            let workers = workers.map(|listen| node::options::WorkerGatewayOptions {
                listen,
                certs: certs.clone(),
            });
            let cluster = cluster_options(node, cluster, listen, join, certs)?;
            let events = node::events::EventOptions {
                nats_url: nats,
                amqp_url: amqp,
                dedup_window_secs: Some(event_dedup_secs),
                http: node::events::http::HttpOptions {
                    concurrency: http_concurrency,
                    allow: http_allow,
                },
                dsl_bus: dsl_events,
                lifecycle_sink: dsl_lifecycle_sink,
                processes: dsl_run.unwrap_or_default(),
                ..Default::default()
            };
            events.check_dsl_bus().map_err(anyhow::Error::msg)?;
            events.check_lifecycle_sink().map_err(anyhow::Error::msg)?;
            let secret_files = match secrets_dir {
                Some(dir) => {
                    node::secrets::SecretFiles::read_dir(&dir).map_err(anyhow::Error::msg)?
                }
                None => Default::default(),
            };
            let secrets_keys = secrets_key_file
                .map(|f| node::secrets::SecretsKeys::read_file(&f).map(std::sync::Arc::new))
                .transpose()
                .map_err(anyhow::Error::msg)?;
            let doors = node::api::doors::Doors::new(http, host_names, allow_origin);
            serve(node::Options {
                data_dir,
                http,
                auth,
                insecure_no_auth,
                admin_http,
                tls: tls_cert
                    .zip(tls_key)
                    .map(|(cert, key)| node::api::tls::TlsFiles { cert, key }),
                doors,
                partitions,
                node,
                cluster,
                workers,
                events,
                secret_files,
                secrets_keys,
                oidc: oidc_issuer.zip(oidc_audience).map(|(issuer, audience)| {
                    node::access::oidc::OidcOptions {
                        issuer,
                        audience,
                        roles_claim: oidc_roles_claim,
                    }
                }),
                supports: supported_versions(max_cluster_version)?,
                hold_cluster_version,
            })
        }
        Command::Certs { out, nodes, host } => write_certs(&out, nodes, &host),
        Command::WorkerCert {
            certs,
            id,
            task_types,
            out,
        } => write_worker_cert(&certs, &id, &task_types, out),
        Command::ScriptHost => Ok(node::events::host::serve()?),
    }
}

/// Logs to stderr (`RUST_LOG`, else info with openraft, sled and quinn at warn), installs the
/// crypto provider, and records metrics unless `BATON_METRICS=off`.
fn init_logging_and_metrics() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,openraft=warn,sled=warn,quinn=warn".into()),
        )
        .init();
    cluster::tls::install_crypto_provider();
    if std::env::var_os(METRICS_ENV).is_none_or(|v| v != "off") {
        node::metrics::install();
    }
}

/// The cluster part of `baton server`: none for a single node; the peer address is `--listen`,
/// else this node's entry in `--cluster`.
fn cluster_options(
    node: NodeId,
    cluster: Option<BTreeMap<NodeId, SocketAddr>>,
    listen: Option<SocketAddr>,
    join: Option<SocketAddr>,
    certs: PathBuf,
) -> anyhow::Result<Option<node::ClusterOptions>> {
    Ok(match (cluster, listen) {
        (None, Some(listen)) if join.is_some() => Some(node::ClusterOptions {
            listen,
            members: BTreeMap::new(),
            join,
            certs,
        }),
        (None, _) => None,
        (Some(members), Some(listen)) => Some(node::ClusterOptions {
            listen,
            members,
            join: None,
            certs,
        }),
        (Some(members), None) => {
            // The node's own entry in the member list is its peer address.
            let listen = *members
                .get(&node)
                .ok_or_else(|| anyhow::anyhow!("--cluster does not list this node ({node})"))?;
            Some(node::ClusterOptions {
                listen,
                members,
                join: None,
                certs,
            })
        }
    })
}

/// Runs the node until Ctrl-C or SIGTERM.
fn serve(options: node::Options) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(node::serve::serve(options, shutdown_signal()))
}

/// The cluster versions this node serves: the build's, or up to `max`.
fn supported_versions(max: Option<u32>) -> anyhow::Result<proto::version::VersionRange> {
    use proto::version::{ClusterVersion, VersionRange};
    let build = VersionRange::BUILD;
    let Some(max) = max.map(ClusterVersion) else {
        return Ok(build);
    };
    if !build.contains(max) {
        anyhow::bail!("--max-cluster-version {max}: this binary serves cluster {build}");
    }
    Ok(VersionRange { max, ..build })
}

/// `baton certs`: the cluster CA, the workers CA and a certificate for each node.
fn write_certs(out: &Path, nodes: Vec<u64>, host: &[String]) -> anyhow::Result<()> {
    let ids: Vec<NodeId> = nodes.into_iter().map(NodeId).collect();
    cluster::tls::write_cluster_certs(out, &ids, host)
        .map_err(|e| anyhow::anyhow!("cannot write certificates to {}: {e}", out.display()))?;
    println!(
        "wrote ca.pem, ca.key, workers-ca.pem, workers-ca.key and node certificates for \
         {ids:?} to {}",
        out.display()
    );
    Ok(())
}

/// `baton worker-cert`: a worker's certificate signed by the workers CA in `certs`, written to
/// `out` (default `certs`) with the cluster CA beside it.
fn write_worker_cert(
    certs: &Path,
    id: &str,
    task_types: &[String],
    out: Option<PathBuf>,
) -> anyhow::Result<()> {
    use cluster::tls::{WORKERS_CA_CERT_FILE, WORKERS_CA_KEY_FILE};
    for file in [WORKERS_CA_CERT_FILE, WORKERS_CA_KEY_FILE] {
        let path = certs.join(file);
        if !path.exists() {
            anyhow::bail!(
                "{} not found: run `baton certs` first (it creates the workers CA), or \
                 point --certs at its directory",
                path.display()
            );
        }
    }
    let ca = cluster::tls::load_workers_ca(certs)
        .map_err(|e| anyhow::anyhow!("cannot load the workers CA from {}: {e}", certs.display()))?;
    let cert = cluster::tls::generate_worker_cert(&ca, id, task_types)
        .map_err(|e| anyhow::anyhow!("cannot create worker {id:?}'s certificate: {e}"))?;
    let out = out.unwrap_or_else(|| certs.to_path_buf());
    let (cert_path, key_path) = cluster::tls::write_worker_cert(&out, &cert).map_err(|e| {
        anyhow::anyhow!(
            "cannot write worker {id:?}'s certificate to {}: {e}",
            out.display()
        )
    })?;
    println!("wrote {}", cert_path.display());
    println!("wrote {}", key_path.display());
    // The worker checks nodes against the cluster CA: put it beside the worker's files
    // (the SDK's `Tls::from_dir` reads all three from one directory).
    let ca = out.join(cluster::tls::CA_CERT_FILE);
    if !ca.exists() {
        std::fs::copy(certs.join(cluster::tls::CA_CERT_FILE), &ca)
            .map_err(|e| anyhow::anyhow!("cannot copy the cluster CA to {}: {e}", ca.display()))?;
        println!("wrote {}", ca.display());
    }
    Ok(())
}

/// Resolves on Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %e, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
    tracing::info!("shutting down");
}

#[cfg(test)]
mod tests {
    /// The index names the purge delay: its default is mimalloc 3's (1000 ms) unless the
    /// environment set it. A wrong index after an upgrade would set another option.
    #[test]
    #[allow(unsafe_code)]
    fn the_option_index_is_the_purge_delay() {
        // SAFETY: reads one of mimalloc's options; nothing sets options in this test binary.
        let delay = unsafe { libmimalloc_sys::mi_option_get(super::MI_OPTION_PURGE_DELAY) };
        match std::env::var("MIMALLOC_PURGE_DELAY") {
            Ok(set) => assert_eq!(Some(delay), set.parse().ok()),
            Err(_) => assert_eq!(delay, 1000),
        }
    }

    #[test]
    fn the_http_flags_parse_or_say_what_is_wrong() {
        use clap::Parser;
        let server = |args: &[&str]| {
            let all = ["baton", "server"].iter().chain(args).copied();
            super::Cli::try_parse_from(all).map(|cli| match cli.command {
                super::Command::Server {
                    http_concurrency,
                    http_allow,
                    ..
                } => (http_concurrency, http_allow.is_some()),
                _ => unreachable!("a server command"),
            })
        };
        assert_eq!(server(&[]).ok(), Some((64, false)));
        let given = server(&[
            "--http-concurrency",
            "8",
            "--http-allow",
            "*.example.com:443",
        ]);
        assert_eq!(given.ok(), Some((8, true)));
        for bad in [["--http-concurrency", "0"], ["--http-allow", "a b"]] {
            assert!(server(&bad).is_err(), "{bad:?}");
        }
    }
}
