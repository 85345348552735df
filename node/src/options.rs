//! How to run a node: its data directory, its addresses, its partitions and its cluster.

use proto::NodeId;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

/// How this node takes part in a cluster.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// This node's peer (QUIC) address.
    pub listen: SocketAddr,
    /// Every initial member with its peer address, this node included; identical on every node.
    /// Empty for a node that joins a running cluster.
    pub members: BTreeMap<NodeId, SocketAddr>,
    /// A member's peer address to join the cluster through (a node added to a running cluster;
    /// only used on the first start of its data directory).
    pub join: Option<SocketAddr>,
    /// Directory with `ca.pem` and this node's `node-<id>.pem` / `node-<id>.key` (`baton certs`).
    pub certs: PathBuf,
}

/// How to run a node.
#[derive(Debug, Clone)]
pub struct Options {
    pub data_dir: PathBuf,
    pub http: SocketAddr,
    /// Set access control up unless it is (`--auth`); once set up, it is enforced whatever
    /// this says.
    pub auth: bool,
    /// Serve `http` beyond loopback without access control (`--insecure-no-auth`).
    pub insecure_no_auth: bool,
    /// The administration API's own listener (`--admin-http`); without it the administration
    /// routes are served on `http` when it is a loopback address, and not at all otherwise.
    pub admin_http: Option<SocketAddr>,
    /// Serve the API (and the administration API) over HTTPS with these files (`--tls-cert`,
    /// `--tls-key`).
    pub tls: Option<TlsFiles>,
    /// The API's checks of hosts, origins and bodies.
    pub doors: Doors,
    /// Workflow partitions; fixed when the data directory is created.
    pub partitions: u16,
    pub node: NodeId,
    /// `None`: the embedded single node.
    pub cluster: Option<ClusterOptions>,
    /// `Some`: serve QUIC workers (`--workers`).
    pub workers: Option<WorkerGatewayOptions>,
    /// The external event brokers (disabled when absent).
    pub events: crate::events::EventOptions,
    /// The operator's secrets directory (`--secrets-dir`; none when absent).
    pub secret_files: crate::secrets::SecretFiles,
    /// The keys that seal and open the replicated secrets store (`--secrets-key-file`; the
    /// store refuses writes and HTTP tasks cannot name secrets without them).
    pub secrets_keys: Option<std::sync::Arc<crate::secrets::SecretsKeys>>,
    /// The OpenID Connect issuer whose tokens name people (`--oidc-issuer`; none when absent).
    pub oidc: Option<crate::access::oidc::OidcOptions>,
    /// The cluster versions this node serves: the build's own range, or one that stops short of
    /// it so a node behaves as an older binary would (tests and the simulator).
    pub supports: proto::version::VersionRange,
    /// Leave the active cluster version as it is until an operator raises it
    /// (`--hold-cluster-version`; `batonctl upgrade finalize`).
    pub hold_cluster_version: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            data_dir: PathBuf::from("baton-data"),
            http: SocketAddr::from(([127, 0, 0, 1], 8080)),
            auth: false,
            insecure_no_auth: false,
            admin_http: None,
            tls: None,
            doors: Doors {
                loopback_only: true,
                ..Default::default()
            },
            partitions: 8,
            node: NodeId(1),
            cluster: None,
            workers: None,
            events: Default::default(),
            secret_files: Default::default(),
            secrets_keys: None,
            oidc: None,
            supports: proto::version::VersionRange::BUILD,
            hold_cluster_version: false,
        }
    }
}

/// Where the gateway listens and the certificates it uses.
#[derive(Debug, Clone)]
pub struct WorkerGatewayOptions {
    /// UDP address of the worker endpoint.
    pub listen: SocketAddr,
    /// Directory with `ca.pem`, this node's `node-<id>.pem` / `.key` and `workers-ca.pem`
    /// (`baton certs`).
    pub certs: PathBuf,
}

/// The API's checks of hosts, origins and bodies (applied by `api::doors`).
#[derive(Debug, Clone, Default)]
pub struct Doors {
    /// The names `Host` may give (`--host-names`); empty: any name, or only `localhost` when
    /// the node listens on loopback only.
    pub host_names: Vec<String>,
    /// Origins allowed besides the node's own (`--allow-origin`), as `scheme://host[:port]`.
    pub allowed_origins: Vec<String>,
    /// The node listens on loopback only.
    pub loopback_only: bool,
}

impl Doors {
    /// The doors of a node listening on `http`.
    pub fn new(http: SocketAddr, host_names: Vec<String>, allowed_origins: Vec<String>) -> Self {
        let lower = |list: Vec<String>| list.into_iter().map(|s| s.to_ascii_lowercase()).collect();
        Self {
            host_names: lower(host_names),
            allowed_origins: lower(allowed_origins),
            loopback_only: http.ip().is_loopback(),
        }
    }
}

/// Where the API's certificate chain and key are (PEM; served by `api::tls`).
#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}
