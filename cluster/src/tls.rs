//! Certificates and TLS configurations of a cluster's peer transport: a cluster CA, one
//! certificate per node naming the node (SAN DNS `node-<id>.baton`, plus
//! [`proto::worker::NODE_SERVER_NAME`] and the hosts it is reached at), PEM files on disk, and
//! rustls configurations for *mutual* TLS over QUIC (ALPN [`ALPN_PEER`], TLS 1.3 only, no 0-RTT).
//!
//! Identity rules: a server proves it is node N by holding a certificate valid for
//! `node-N.baton` (the client dials with that server name); a client proves it is node N the same
//! way, checked by [`verify_node_certificate`] against the id it claims in its hello. Both chains
//! must end at the cluster CA, so a certificate from another CA is refused at the handshake.
//! The one exception is [`Identity::member_client_config`], for dialing a member known only by
//! address: it checks the chain but not the server name, and its caller checks the certificate
//! against the id the member then states.
//!
//! Workers have their own authority, the workers CA ([`CaKind::Workers`]): it signs
//! worker certificates ([`generate_worker_cert`]: client-only, naming the worker and the task types
//! it may work as URI SANs, read back by [`worker_grant`]), and nodes trust it for worker
//! connections only ([`worker_server_config`]). A worker certificate therefore cannot act as a
//! node, and whoever issues worker certificates need not hold the cluster CA key.
//!
//! Not here: certificate rotation, revocation lists, or what a worker connection may do once
//! accepted (the worker gateway's business).

use crate::error::Error;
use proto::worker::{Grant, NODE_SERVER_NAME, WORKER_URI_PREFIX};
use proto::NodeId;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose,
    Ia5String, IsCa, KeyPair, KeyUsagePurpose, SanType,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// ALPN protocol of node-to-node connections whose hello carries the binary's cluster versions
/// (`transport::hello`).
pub const ALPN_PEER: &[u8] = b"baton-peer/2";
/// The first peer protocol, all that releases up to 0.2.0 speak: still offered and accepted, so
/// that a cluster can run those binaries side by side with this one.
pub const ALPN_PEER_V1: &[u8] = b"baton-peer/1";

/// The peer protocols, preferred first; a peer speaking none of them is refused.
fn peer_protocols() -> Vec<Vec<u8>> {
    vec![ALPN_PEER.to_vec(), ALPN_PEER_V1.to_vec()]
}

/// Common name of the cluster CA. Also how a CA is rebuilt from its key ([`Ca::from_pem`]): the
/// issuer of a node certificate is matched by this name and the CA's public key.
const CA_COMMON_NAME: &str = "Baton cluster CA";
/// Common name of the workers CA. It differs from the cluster CA's so that a verifier never
/// mistakes one CA for the issuer of the other's certificates.
const WORKERS_CA_COMMON_NAME: &str = "Baton workers CA";

/// File name of the CA certificate written by [`write_cluster_certs`].
pub const CA_CERT_FILE: &str = "ca.pem";
/// File name of the CA key written by [`write_cluster_certs`] (keep it off the nodes).
pub const CA_KEY_FILE: &str = "ca.key";
/// File name of the workers CA certificate written by [`write_cluster_certs`]; nodes trust it for
/// worker connections.
pub const WORKERS_CA_CERT_FILE: &str = "workers-ca.pem";
/// File name of the workers CA key written by [`write_cluster_certs`]; only whoever issues worker
/// certificates needs it (keep it off the nodes).
pub const WORKERS_CA_KEY_FILE: &str = "workers-ca.key";
/// Most task types one worker certificate may grant (each is a SAN of the certificate).
pub const WORKER_CERT_TASK_TYPES_MAX: usize = 256;

/// Installs `ring` as the process-wide rustls crypto provider. Idempotent. Two providers (ring
/// and aws-lc-rs) end up linked in Baton's binaries, and rustls panics when asked
/// for "the" default with both present and none installed: call this first thing in every binary
/// and test that touches TLS. The transport's own configurations name `ring` explicitly and do
/// not depend on it.
pub fn install_crypto_provider() {
    // An error means a provider is installed already (ours or the caller's): nothing to do.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The DNS name in node `node`'s certificate, and the server name peers dial it with.
pub fn node_server_name(node: NodeId) -> String {
    format!("node-{}.baton", node.0)
}

/// File name of node `node`'s certificate chain.
pub fn node_cert_file(node: NodeId) -> String {
    format!("node-{}.pem", node.0)
}

/// File name of node `node`'s private key.
pub fn node_key_file(node: NodeId) -> String {
    format!("node-{}.key", node.0)
}

/// File name of worker `worker_id`'s certificate.
pub fn worker_cert_file(worker_id: &str) -> String {
    format!("worker-{worker_id}.pem")
}

/// File name of worker `worker_id`'s private key.
pub fn worker_key_file(worker_id: &str) -> String {
    format!("worker-{worker_id}.key")
}

fn tls_error(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Tls(format!("{what}: {e}"))
}

/// Which authority a [`Ca`] is. Each signs one kind of certificate only, and nodes trust each for
/// one kind of connection only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaKind {
    /// The cluster CA: signs node certificates; nodes trust it for each other.
    Cluster,
    /// The workers CA: signs worker certificates; nodes trust it for worker connections.
    Workers,
}

impl CaKind {
    /// The CA's common name: part of what a certificate's issuer is matched by.
    fn common_name(self) -> &'static str {
        match self {
            CaKind::Cluster => CA_COMMON_NAME,
            CaKind::Workers => WORKERS_CA_COMMON_NAME,
        }
    }
}

/// A certificate authority: the cluster CA signs node certificates, the workers CA worker
/// certificates ([`CaKind`]).
pub struct Ca {
    /// Which authority this is; checked before signing.
    kind: CaKind,
    /// The CA certificate as issued; what nodes trust.
    cert_pem: String,
    /// rcgen's view of the CA, used as the issuer when signing. For a CA loaded from PEM it is a
    /// rebuilt self-signed certificate with the same name and key, which signs identically.
    issuer: rcgen::Certificate,
    key: KeyPair,
}

impl Ca {
    /// Which authority this is.
    pub fn kind(&self) -> CaKind {
        self.kind
    }

    /// The CA certificate (PEM); nodes trust it.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The CA private key (PEM); needed only to sign more certificates.
    pub fn key_pem(&self) -> String {
        self.key.serialize_pem()
    }

    /// Loads the cluster CA written by [`write_cluster_certs`] (or [`Ca::cert_pem`]/
    /// [`Ca::key_pem`]) to sign more node certificates, e.g. for a node added later.
    pub fn from_pem(cert_pem: &str, key_pem: &str) -> Result<Ca, Error> {
        Ca::from_pem_of(CaKind::Cluster, cert_pem, key_pem)
    }

    /// Loads a CA of kind `kind` from its certificate and key, e.g. the workers CA to sign worker
    /// certificates ([`load_workers_ca`] reads it from its files).
    pub fn from_pem_of(kind: CaKind, cert_pem: &str, key_pem: &str) -> Result<Ca, Error> {
        let key = KeyPair::from_pem(key_pem).map_err(|e| tls_error("CA key", e))?;
        // What a signature needs from the issuer is its name, key-id method and key, which are
        // the ones `generate_ca_of` uses; the certificate itself stays the one the nodes trust.
        let issuer = ca_params(kind)?
            .self_signed(&key)
            .map_err(|e| tls_error("CA", e))?;
        CertificateDer::from_pem_slice(cert_pem.as_bytes())
            .map_err(|e| tls_error("CA certificate", e))?;
        Ok(Ca {
            kind,
            cert_pem: cert_pem.to_string(),
            issuer,
            key,
        })
    }

    /// Refuses to sign with a CA of another kind than `kind`.
    fn expect_kind(&self, kind: CaKind, what: &str) -> Result<(), Error> {
        if self.kind == kind {
            return Ok(());
        }
        Err(Error::Tls(format!(
            "{what} are signed by the {}, not by the {}",
            kind.common_name(),
            self.kind.common_name()
        )))
    }
}

fn ca_params(kind: CaKind) -> Result<CertificateParams, Error> {
    let mut params = CertificateParams::new(Vec::new()).map_err(|e| tls_error("CA", e))?;
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, kind.common_name());
    params.distinguished_name = name;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    Ok(params)
}

/// Generates a new cluster CA (ECDSA P-256).
pub fn generate_ca() -> Result<Ca, Error> {
    generate_ca_of(CaKind::Cluster)
}

/// Generates a new CA of kind `kind` (ECDSA P-256).
pub fn generate_ca_of(kind: CaKind) -> Result<Ca, Error> {
    let key = KeyPair::generate().map_err(|e| tls_error("CA key", e))?;
    let issuer = ca_params(kind)?
        .self_signed(&key)
        .map_err(|e| tls_error("CA", e))?;
    Ok(Ca {
        kind,
        cert_pem: issuer.pem(),
        issuer,
        key,
    })
}

/// A node's certificate and key, PEM encoded.
#[derive(Clone)]
pub struct NodeCert {
    /// The node the certificate names.
    pub node: NodeId,
    /// The node's certificate (signed by the CA).
    pub cert_pem: String,
    /// The node's private key.
    pub key_pem: String,
}

impl std::fmt::Debug for NodeCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the key.
        f.debug_struct("NodeCert")
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

/// Generates node `node`'s certificate, signed by `ca` (the cluster CA): SAN DNS
/// `node-<id>.baton` (its identity), [`NODE_SERVER_NAME`] (what workers dial any node with) and
/// `hosts` (DNS names or IP addresses it is reached at), usable as TLS server and client.
pub fn generate_node_cert(ca: &Ca, node: NodeId, hosts: &[String]) -> Result<NodeCert, Error> {
    ca.expect_kind(CaKind::Cluster, "node certificates")?;
    let mut names = vec![node_server_name(node), NODE_SERVER_NAME.to_string()];
    names.extend(hosts.iter().cloned());
    let mut params = CertificateParams::new(names).map_err(|e| tls_error("node names", e))?;
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, node_server_name(node));
    params.distinguished_name = name;
    params.is_ca = IsCa::NoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    params.use_authority_key_identifier_extension = true;
    let key = KeyPair::generate().map_err(|e| tls_error("node key", e))?;
    let cert = params
        .signed_by(&key, &ca.issuer, &ca.key)
        .map_err(|e| tls_error("node certificate", e))?;
    Ok(NodeCert {
        node,
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// Writes a new cluster's certificates into `dir` (created if missing): `ca.pem`, `ca.key`,
/// `workers-ca.pem`, `workers-ca.key` (the workers CA, [`CaKind::Workers`]), and per node
/// `node-<id>.pem` and `node-<id>.key`. Each node certificate also names `hosts`. Keys are
/// written readable by the owner only. Refuses to overwrite an existing `ca.pem` or
/// `workers-ca.pem`, so a second run cannot silently split a cluster into two CAs. Returns the
/// cluster CA.
pub fn write_cluster_certs(dir: &Path, nodes: &[NodeId], hosts: &[String]) -> Result<Ca, Error> {
    std::fs::create_dir_all(dir).map_err(|e| tls_error(&dir.display().to_string(), e))?;
    let ca_path = dir.join(CA_CERT_FILE);
    let workers_ca_path = dir.join(WORKERS_CA_CERT_FILE);
    for (path, what) in [(&ca_path, "cluster CA"), (&workers_ca_path, "workers CA")] {
        if path.exists() {
            return Err(Error::Tls(format!(
                "{} exists; refusing to replace the {what}",
                path.display()
            )));
        }
    }
    let ca = generate_ca()?;
    write_file(&ca_path, ca.cert_pem().as_bytes(), false)?;
    write_file(&dir.join(CA_KEY_FILE), ca.key_pem().as_bytes(), true)?;
    let workers_ca = generate_ca_of(CaKind::Workers)?;
    write_file(&workers_ca_path, workers_ca.cert_pem().as_bytes(), false)?;
    write_file(
        &dir.join(WORKERS_CA_KEY_FILE),
        workers_ca.key_pem().as_bytes(),
        true,
    )?;
    for node in nodes {
        let cert = generate_node_cert(&ca, *node, hosts)?;
        write_file(
            &dir.join(node_cert_file(*node)),
            cert.cert_pem.as_bytes(),
            false,
        )?;
        write_file(
            &dir.join(node_key_file(*node)),
            cert.key_pem.as_bytes(),
            true,
        )?;
    }
    Ok(ca)
}

/// A worker's certificate and key, PEM encoded.
#[derive(Clone)]
pub struct WorkerCert {
    /// The worker the certificate names.
    pub worker_id: String,
    /// The worker's certificate (signed by the workers CA).
    pub cert_pem: String,
    /// The worker's private key.
    pub key_pem: String,
}

impl std::fmt::Debug for WorkerCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the key.
        f.debug_struct("WorkerCert")
            .field("worker_id", &self.worker_id)
            .finish_non_exhaustive()
    }
}

/// Generates worker `worker_id`'s certificate, signed by `ca` (the workers CA): common name the
/// worker id, URI SANs [`proto::worker::worker_uri`] and one [`proto::worker::task_type_uri`] per
/// entry of `task_types` (`*` grants every type), usable as a TLS client only.
///
/// The worker id is 1 to [`proto::worker::WORKER_ID_LEN_MAX`] printable ASCII characters without
/// spaces; `task_types` holds 1 to [`WORKER_CERT_TASK_TYPES_MAX`] names, each 1 to
/// [`proto::limits::NAME_LEN_MAX`] printable ASCII characters without spaces (URIs carry them).
pub fn generate_worker_cert(
    ca: &Ca,
    worker_id: &str,
    task_types: &[String],
) -> Result<WorkerCert, Error> {
    ca.expect_kind(CaKind::Workers, "worker certificates")?;
    check_uri_part("worker id", worker_id, proto::worker::WORKER_ID_LEN_MAX)?;
    if task_types.is_empty() {
        return Err(Error::Tls(
            "a worker certificate must grant at least one task type (`*` grants every type)".into(),
        ));
    }
    if task_types.len() > WORKER_CERT_TASK_TYPES_MAX {
        return Err(Error::Tls(format!(
            "a worker certificate grants at most {WORKER_CERT_TASK_TYPES_MAX} task types, not {} \
             (grant `*` for every type)",
            task_types.len()
        )));
    }
    let mut uris = vec![proto::worker::worker_uri(worker_id)];
    for task_type in task_types {
        check_uri_part("task type", task_type, proto::limits::NAME_LEN_MAX)?;
        uris.push(proto::worker::task_type_uri(task_type));
    }
    let mut params = CertificateParams::default();
    params.subject_alt_names = uris
        .into_iter()
        .map(|uri| {
            Ia5String::try_from(uri)
                .map(SanType::URI)
                .map_err(|e| tls_error("worker URI", e))
        })
        .collect::<Result<_, _>>()?;
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, worker_id);
    params.distinguished_name = name;
    params.is_ca = IsCa::NoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    // Client only: a worker certificate cannot serve as a node.
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    params.use_authority_key_identifier_extension = true;
    let key = KeyPair::generate().map_err(|e| tls_error("worker key", e))?;
    let cert = params
        .signed_by(&key, &ca.issuer, &ca.key)
        .map_err(|e| tls_error("worker certificate", e))?;
    Ok(WorkerCert {
        worker_id: worker_id.to_string(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// Checks a name that goes into a certificate URI: 1 to `len_max` bytes of printable ASCII
/// without spaces (a URI SAN is an IA5 string, and whitespace would make the name ambiguous).
fn check_uri_part(what: &str, value: &str, len_max: usize) -> Result<(), Error> {
    if value.is_empty() {
        return Err(Error::Tls(format!("the {what} is empty")));
    }
    if value.len() > len_max {
        return Err(Error::Tls(format!(
            "the {what} is {} bytes long; at most {len_max} are allowed",
            value.len()
        )));
    }
    if !value.chars().all(|c| c.is_ascii_graphic()) {
        return Err(Error::Tls(format!(
            "the {what} {value:?} may hold only printable ASCII characters, without whitespace \
             or control characters"
        )));
    }
    Ok(())
}

/// Writes `cert` into `dir` (created if missing) as `worker-<id>.pem` and `worker-<id>.key`, the
/// key readable by the owner only, replacing earlier files of the same worker. Returns the paths
/// written (certificate, key). Refuses a worker id holding a path separator.
pub fn write_worker_cert(dir: &Path, cert: &WorkerCert) -> Result<(PathBuf, PathBuf), Error> {
    if cert.worker_id.contains(['/', '\\']) {
        return Err(Error::Tls(format!(
            "the worker id {:?} holds a path separator; it cannot name a file",
            cert.worker_id
        )));
    }
    std::fs::create_dir_all(dir).map_err(|e| tls_error(&dir.display().to_string(), e))?;
    let cert_path = dir.join(worker_cert_file(&cert.worker_id));
    let key_path = dir.join(worker_key_file(&cert.worker_id));
    write_file(&cert_path, cert.cert_pem.as_bytes(), false)?;
    write_file(&key_path, cert.key_pem.as_bytes(), true)?;
    Ok((cert_path, key_path))
}

/// Loads the workers CA from a directory written by [`write_cluster_certs`]
/// (`workers-ca.pem`, `workers-ca.key`), to sign worker certificates.
pub fn load_workers_ca(dir: &Path) -> Result<Ca, Error> {
    let text = |file: &str| {
        let path = dir.join(file);
        String::from_utf8(read_file(&path)?).map_err(|e| tls_error(&path.display().to_string(), e))
    };
    Ca::from_pem_of(
        CaKind::Workers,
        &text(WORKERS_CA_CERT_FILE)?,
        &text(WORKERS_CA_KEY_FILE)?,
    )
}

fn write_file(path: &Path, bytes: &[u8], secret: bool) -> Result<(), Error> {
    use std::io::Write;
    let mut open = std::fs::OpenOptions::new();
    open.write(true).create(true).truncate(true);
    #[cfg(unix)]
    if secret {
        use std::os::unix::fs::OpenOptionsExt;
        open.mode(0o600);
    }
    #[cfg(not(unix))]
    let _ = secret;
    let mut file = open
        .open(path)
        .map_err(|e| tls_error(&path.display().to_string(), e))?;
    file.write_all(bytes)
        .and_then(|_| file.sync_all())
        .map_err(|e| tls_error(&path.display().to_string(), e))
}

fn read_file(path: &Path) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|e| tls_error(&path.display().to_string(), e))
}

/// What a node needs for mutual TLS with its peers: its id, the cluster CA it trusts, and its own
/// certificate chain and key.
pub struct Identity {
    /// The node this identity belongs to (its certificate names `node-<id>.baton`).
    pub node: NodeId,
    /// Trusted roots: the cluster CA.
    roots: Vec<CertificateDer<'static>>,
    /// The node's certificate chain, leaf first.
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
}

impl Clone for Identity {
    fn clone(&self) -> Self {
        Identity {
            node: self.node,
            roots: self.roots.clone(),
            chain: self.chain.clone(),
            key: self.key.clone_key(),
        }
    }
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the key.
        f.debug_struct("Identity")
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

impl Identity {
    /// An identity from PEM text: the CA certificate(s), the node's chain and its key. Checks
    /// that the chain names `node` (a misplaced file fails here, not at the first handshake).
    pub fn from_pem(
        node: NodeId,
        ca_pem: &[u8],
        cert_pem: &[u8],
        key_pem: &[u8],
    ) -> Result<Identity, Error> {
        let roots = CertificateDer::pem_slice_iter(ca_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| tls_error("CA certificate", e))?;
        let chain = CertificateDer::pem_slice_iter(cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| tls_error("node certificate", e))?;
        let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| tls_error("node key", e))?;
        if roots.is_empty() || chain.is_empty() {
            return Err(Error::Tls(
                "the CA and the node certificate files must each hold a certificate".into(),
            ));
        }
        verify_node_certificate(node, &chain[0])?;
        Ok(Identity {
            node,
            roots,
            chain,
            key,
        })
    }

    /// An identity from a [`NodeCert`] and the CA certificate.
    pub fn from_node_cert(ca_pem: &str, cert: &NodeCert) -> Result<Identity, Error> {
        Identity::from_pem(
            cert.node,
            ca_pem.as_bytes(),
            cert.cert_pem.as_bytes(),
            cert.key_pem.as_bytes(),
        )
    }

    /// Loads node `node`'s identity from a directory written by [`write_cluster_certs`]
    /// (`ca.pem`, `node-<id>.pem`, `node-<id>.key`).
    pub fn load(dir: &Path, node: NodeId) -> Result<Identity, Error> {
        Identity::from_pem(
            node,
            &read_file(&dir.join(CA_CERT_FILE))?,
            &read_file(&dir.join(node_cert_file(node)))?,
            &read_file(&dir.join(node_key_file(node)))?,
        )
    }

    /// The same certificate and key, claiming to be `node`: what a misbehaving peer would do.
    /// Exists only so tests can check that peers refuse the claim; never use it to run a node.
    #[doc(hidden)]
    pub fn claiming(mut self, node: NodeId) -> Identity {
        self.node = node;
        self
    }

    fn root_store(&self) -> Result<rustls::RootCertStore, Error> {
        let mut roots = rustls::RootCertStore::empty();
        for root in &self.roots {
            roots
                .add(root.clone())
                .map_err(|e| tls_error("CA certificate", e))?;
        }
        Ok(roots)
    }

    /// rustls server configuration: requires a client certificate chained to the cluster CA,
    /// TLS 1.3, ALPN [`ALPN_PEER`] or [`ALPN_PEER_V1`], no 0-RTT (early data could be replayed).
    pub fn server_config(&self) -> Result<rustls::ServerConfig, Error> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(self.root_store()?),
            provider.clone(),
        )
        .build()
        .map_err(|e| tls_error("client verifier", e))?;
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| tls_error("server config", e))?
            .with_client_cert_verifier(verifier)
            .with_single_cert(self.chain.clone(), self.key.clone_key())
            .map_err(|e| tls_error("server certificate", e))?;
        config.alpn_protocols = peer_protocols();
        config.max_early_data_size = 0;
        Ok(config)
    }

    /// rustls client configuration: verifies the server against the cluster CA (and the server
    /// name the caller dials, `node-<id>.baton`), presents this node's certificate, TLS 1.3,
    /// ALPN [`ALPN_PEER`] or [`ALPN_PEER_V1`], no 0-RTT.
    pub fn client_config(&self) -> Result<rustls::ClientConfig, Error> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| tls_error("client config", e))?
            .with_root_certificates(self.root_store()?)
            .with_client_auth_cert(self.chain.clone(), self.key.clone_key())
            .map_err(|e| tls_error("client certificate", e))?;
        config.alpn_protocols = peer_protocols();
        config.enable_early_data = false;
        Ok(config)
    }

    /// rustls client configuration for dialing *some* cluster member whose node id is not known
    /// yet (a joining node knows only an address): like [`Identity::client_config`] (the server's
    /// chain must end at the cluster CA, this node's certificate is presented, TLS 1.3, ALPN
    /// [`ALPN_PEER`], no 0-RTT), except that the server name is not checked, since the dialer
    /// cannot know which `node-<id>.baton` answers. Dial with [`MEMBER_SERVER_NAME`]. The caller
    /// must then learn the member's id (its hello answer) and check the server's certificate
    /// names it with [`verify_node_certificate`]; until then the peer is only "a member".
    pub fn member_client_config(&self) -> Result<rustls::ClientConfig, Error> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(self.root_store()?),
            provider.clone(),
        )
        .build()
        .map_err(|e| tls_error("server verifier", e))?;
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| tls_error("client config", e))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyMemberVerifier { inner: verifier }))
            .with_client_auth_cert(self.chain.clone(), self.key.clone_key())
            .map_err(|e| tls_error("client certificate", e))?;
        config.alpn_protocols = peer_protocols();
        config.enable_early_data = false;
        Ok(config)
    }
}

/// Server name dialed with [`Identity::member_client_config`]; never checked against the
/// certificate (any member may answer), only sent as SNI.
pub const MEMBER_SERVER_NAME: &str = "member.baton";

/// Server-certificate verifier of [`Identity::member_client_config`]: webpki's, with one error
/// tolerated, the certificate not naming the dialed server name. Everything else (chain to the
/// cluster CA, validity period, key usage, handshake signatures) is webpki's verdict unchanged.
/// webpki checks the name last, after the chain, so a tolerated name error means the chain was
/// accepted.
#[derive(Debug)]
struct AnyMemberVerifier {
    inner: Arc<rustls::client::WebPkiServerVerifier>,
}

impl rustls::client::danger::ServerCertVerifier for AnyMemberVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        use rustls::CertificateError::{NotValidForName, NotValidForNameContext};
        match self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            // rustls 0.23 reports a name mismatch as `NotValidForNameContext`; older releases
            // used `NotValidForName`.
            Err(rustls::Error::InvalidCertificate(
                NotValidForName | NotValidForNameContext { .. },
            )) => Ok(rustls::client::danger::ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.inner.supported_verify_schemes()
    }

    fn requires_raw_public_keys(&self) -> bool {
        self.inner.requires_raw_public_keys()
    }

    fn root_hint_subjects(&self) -> Option<&[rustls::DistinguishedName]> {
        self.inner.root_hint_subjects()
    }
}

/// Checks that `cert` (already verified as chained to the cluster CA by the handshake) names
/// node `node`, i.e. is valid for `node-<id>.baton`.
pub fn verify_node_certificate(node: NodeId, cert: &CertificateDer<'_>) -> Result<(), Error> {
    let name = ServerName::try_from(node_server_name(node))
        .map_err(|e| tls_error("node server name", e))?;
    let parsed = rustls::server::ParsedCertificate::try_from(cert)
        .map_err(|e| tls_error("peer certificate", e))?;
    rustls::client::verify_server_name(&parsed, &name).map_err(|_| {
        Error::Tls(format!(
            "the certificate does not name node {} (expected SAN {})",
            node.0,
            node_server_name(node)
        ))
    })
}

/// rustls server configuration for worker connections: presents `identity`'s certificate chain
/// (it names [`NODE_SERVER_NAME`], which workers dial), requires a client certificate chained to
/// the workers CA `workers_ca_pem` (and only to it: a node certificate is refused), TLS 1.3, ALPN
/// [`proto::worker::ALPN_WORKER`], no 0-RTT (early data could be replayed). What the client may
/// do is then read from its certificate with [`worker_grant`].
pub fn worker_server_config(
    identity: &Identity,
    workers_ca_pem: &str,
) -> Result<rustls::ServerConfig, Error> {
    let mut roots = rustls::RootCertStore::empty();
    for root in CertificateDer::pem_slice_iter(workers_ca_pem.as_bytes()) {
        roots
            .add(root.map_err(|e| tls_error("workers CA certificate", e))?)
            .map_err(|e| tls_error("workers CA certificate", e))?;
    }
    if roots.is_empty() {
        return Err(Error::Tls(format!(
            "no workers CA certificate in the PEM text (expected the contents of \
             {WORKERS_CA_CERT_FILE})"
        )));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .map_err(|e| tls_error("worker client verifier", e))?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| tls_error("worker server config", e))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(identity.chain.clone(), identity.key.clone_key())
        .map_err(|e| tls_error("server certificate", e))?;
    config.alpn_protocols = vec![proto::worker::ALPN_WORKER.to_vec()];
    config.max_early_data_size = 0;
    Ok(config)
}

/// What the worker certificate `cert` allows, read from its URI SANs. The caller must have
/// verified its chain to the workers CA (the handshake of [`worker_server_config`] does); this
/// only reads it. Refuses a certificate naming no worker, or more than one.
pub fn worker_grant(cert: &CertificateDer<'_>) -> Result<Grant, Error> {
    // rcgen's parser reads any certificate's extensions into parameters, despite its name (it
    // does not check that the certificate is a CA's); one parser suffices for the crate.
    let params = CertificateParams::from_ca_cert_der(cert)
        .map_err(|e| tls_error("worker certificate", e))?;
    let uris: Vec<&str> = params
        .subject_alt_names
        .iter()
        .filter_map(|san| match san {
            SanType::URI(uri) => Some(uri.as_str()),
            _ => None,
        })
        .collect();
    let workers = uris
        .iter()
        .filter(|uri| uri.starts_with(WORKER_URI_PREFIX))
        .count();
    if workers != 1 {
        return Err(Error::Tls(format!(
            "not a worker certificate: it names {workers} workers (URI SANs `{WORKER_URI_PREFIX}<id>`), \
             not one"
        )));
    }
    let grant = Grant::from_uris(uris);
    if grant.worker_id.is_empty() {
        return Err(Error::Tls(format!(
            "not a worker certificate: its `{WORKER_URI_PREFIX}` URI names no worker id"
        )));
    }
    Ok(grant)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_certificates_name_their_node() {
        let ca = generate_ca().expect("ca");
        let cert =
            generate_node_cert(&ca, NodeId(2), &["127.0.0.1".into(), "db2".into()]).expect("cert");
        let identity = Identity::from_node_cert(ca.cert_pem(), &cert).expect("identity");
        assert_eq!(identity.node, NodeId(2));
        assert!(verify_node_certificate(NodeId(2), &identity.chain[0]).is_ok());
        assert!(verify_node_certificate(NodeId(3), &identity.chain[0]).is_err());
        // A certificate for node 2 cannot make an identity for node 3.
        assert!(Identity::from_pem(
            NodeId(3),
            ca.cert_pem().as_bytes(),
            cert.cert_pem.as_bytes(),
            cert.key_pem.as_bytes()
        )
        .is_err());
        assert!(identity.server_config().is_ok());
        assert!(identity.client_config().is_ok());
        assert!(!format!("{cert:?}{identity:?}").contains("PRIVATE"));
    }

    #[test]
    fn the_member_verifier_checks_the_chain_but_not_the_name() {
        use rustls::client::danger::ServerCertVerifier;
        let ca = generate_ca().expect("ca");
        let cert = generate_node_cert(&ca, NodeId(2), &[]).expect("cert");
        let identity = Identity::from_node_cert(ca.cert_pem(), &cert).expect("identity");
        assert!(identity.member_client_config().is_ok());
        let verifier = AnyMemberVerifier {
            inner: rustls::client::WebPkiServerVerifier::builder_with_provider(
                Arc::new(identity.root_store().expect("roots")),
                Arc::new(rustls::crypto::ring::default_provider()),
            )
            .build()
            .expect("verifier"),
        };
        let verify = |cert: &CertificateDer<'_>, name: &str| {
            verifier.verify_server_cert(
                cert,
                &[],
                &ServerName::try_from(name.to_string()).expect("name"),
                &[],
                rustls::pki_types::UnixTime::now(),
            )
        };
        // Node 2's certificate passes whatever name was dialed.
        assert!(verify(&identity.chain[0], MEMBER_SERVER_NAME).is_ok());
        assert!(verify(&identity.chain[0], &node_server_name(NodeId(7))).is_ok());
        // A certificate from another CA does not, whatever its name. (Both CAs share their
        // common name, so webpki finds the "issuer" and rejects the signature.)
        let foreign_ca = generate_ca().expect("ca");
        let foreign = generate_node_cert(&foreign_ca, NodeId(2), &[]).expect("cert");
        let foreign = CertificateDer::from_pem_slice(foreign.cert_pem.as_bytes()).expect("der");
        for name in [MEMBER_SERVER_NAME.to_string(), node_server_name(NodeId(2))] {
            match verify(&foreign, &name) {
                Err(rustls::Error::InvalidCertificate(
                    rustls::CertificateError::BadSignature
                    | rustls::CertificateError::UnknownIssuer,
                )) => {}
                other => panic!("a foreign certificate passed or failed oddly: {other:?}"),
            }
        }
    }

    fn der(pem: &str) -> CertificateDer<'static> {
        CertificateDer::from_pem_slice(pem.as_bytes()).expect("der")
    }

    fn types(names: &[&str]) -> Vec<String> {
        names.iter().map(|t| t.to_string()).collect()
    }

    /// webpki's verdict on `cert` as a client certificate, trusting only `ca_pem`.
    fn verify_client(ca_pem: &str, cert: &CertificateDer<'_>) -> Result<(), rustls::Error> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(der(ca_pem)).expect("root");
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            Arc::new(rustls::crypto::ring::default_provider()),
        )
        .build()
        .expect("verifier");
        verifier
            .verify_client_cert(cert, &[], rustls::pki_types::UnixTime::now())
            .map(|_| ())
    }

    #[test]
    fn worker_certificates_carry_their_grant() {
        let workers_ca = generate_ca_of(CaKind::Workers).expect("workers ca");
        let cert = generate_worker_cert(&workers_ca, "billing-7", &types(&["charge", "refund"]))
            .expect("cert");
        assert_eq!(
            worker_grant(&der(&cert.cert_pem)).expect("grant"),
            Grant {
                worker_id: "billing-7".into(),
                task_types: Some(types(&["charge", "refund"])),
            }
        );
        let all = generate_worker_cert(&workers_ca, "w2", &types(&["*"])).expect("cert");
        let grant = worker_grant(&der(&all.cert_pem)).expect("grant");
        assert_eq!(grant.worker_id, "w2");
        assert_eq!(grant.task_types, None);
        assert!(grant.allows("anything"));
        assert!(!format!("{cert:?}").contains("PRIVATE"));
        // The workers CA accepts it as a client; the cluster CA does not.
        let cluster_ca = generate_ca().expect("ca");
        assert!(verify_client(workers_ca.cert_pem(), &der(&cert.cert_pem)).is_ok());
        assert!(verify_client(cluster_ca.cert_pem(), &der(&cert.cert_pem)).is_err());
    }

    #[test]
    fn node_certificates_are_not_worker_certificates() {
        let ca = generate_ca().expect("ca");
        let workers_ca = generate_ca_of(CaKind::Workers).expect("workers ca");
        let cert = generate_node_cert(&ca, NodeId(1), &[]).expect("cert");
        let cert = der(&cert.cert_pem);
        match worker_grant(&cert) {
            Err(Error::Tls(message)) => assert!(message.contains(WORKER_URI_PREFIX), "{message}"),
            other => panic!("a node certificate gave a grant: {other:?}"),
        }
        // Workers dial any node by the shared server name.
        let parsed = rustls::server::ParsedCertificate::try_from(&cert).expect("parse");
        let name = ServerName::try_from(NODE_SERVER_NAME).expect("name");
        assert!(rustls::client::verify_server_name(&parsed, &name).is_ok());
        assert!(verify_node_certificate(NodeId(1), &cert).is_ok());
        // Worker connections trust the workers CA only.
        assert!(verify_client(workers_ca.cert_pem(), &cert).is_err());
        // Each CA signs its own kind of certificate only.
        assert!(generate_node_cert(&workers_ca, NodeId(1), &[]).is_err());
        assert!(generate_worker_cert(&ca, "w1", &types(&["t"])).is_err());
    }

    #[test]
    fn worker_certificates_refuse_bad_ids_and_types() {
        let ca = generate_ca_of(CaKind::Workers).expect("workers ca");
        let long_id = "w".repeat(proto::worker::WORKER_ID_LEN_MAX + 1);
        let cases: &[(&str, &[&str])] = &[
            ("", &["t"]),
            ("w 1", &["t"]),
            ("w\n1", &["t"]),
            ("w\u{e9}", &["t"]),
            (&long_id, &["t"]),
            ("w1", &[]),
            ("w1", &[""]),
            ("w1", &["a", "b c"]),
        ];
        for (id, task_types) in cases {
            match generate_worker_cert(&ca, id, &types(task_types)) {
                Err(Error::Tls(_)) => {}
                other => panic!("{id:?} {task_types:?} was not refused: {other:?}"),
            }
        }
        let too_many: Vec<String> = (0..=WORKER_CERT_TASK_TYPES_MAX)
            .map(|i| format!("t{i}"))
            .collect();
        assert!(generate_worker_cert(&ca, "w1", &too_many).is_err());
        let longest = "w".repeat(proto::worker::WORKER_ID_LEN_MAX);
        assert!(generate_worker_cert(&ca, &longest, &types(&["t"])).is_ok());
    }

    #[test]
    fn the_worker_server_config_builds() {
        let ca = generate_ca().expect("ca");
        let workers_ca = generate_ca_of(CaKind::Workers).expect("workers ca");
        let cert = generate_node_cert(&ca, NodeId(1), &[]).expect("cert");
        let identity = Identity::from_node_cert(ca.cert_pem(), &cert).expect("identity");
        let config = worker_server_config(&identity, workers_ca.cert_pem()).expect("config");
        assert_eq!(
            config.alpn_protocols,
            vec![proto::worker::ALPN_WORKER.to_vec()]
        );
        assert_eq!(config.max_early_data_size, 0);
        assert!(worker_server_config(&identity, "").is_err());
    }

    #[test]
    fn worker_certs_are_written_and_the_workers_ca_reloads() {
        let dir = tempfile::tempdir().expect("tempdir");
        write_cluster_certs(dir.path(), &[NodeId(1)], &[]).expect("write");
        let workers_ca = load_workers_ca(dir.path()).expect("load");
        assert_eq!(workers_ca.kind(), CaKind::Workers);
        let original = std::fs::read_to_string(dir.path().join(WORKERS_CA_CERT_FILE)).expect("ca");
        assert_eq!(workers_ca.cert_pem(), original);
        let cert = generate_worker_cert(&workers_ca, "w1", &types(&["a", "b"])).expect("cert");
        // Signed by the reloaded CA, it verifies against the original.
        assert!(verify_client(&original, &der(&cert.cert_pem)).is_ok());
        let (cert_path, key_path) = write_worker_cert(dir.path(), &cert).expect("write");
        assert_eq!(cert_path, dir.path().join("worker-w1.pem"));
        assert_eq!(key_path, dir.path().join("worker-w1.key"));
        let written = std::fs::read_to_string(&cert_path).expect("read");
        assert_eq!(worker_grant(&der(&written)).expect("grant").worker_id, "w1");
        let slashed = generate_worker_cert(&workers_ca, "a/b", &types(&["t"])).expect("cert");
        assert!(write_worker_cert(dir.path(), &slashed).is_err());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            for file in [WORKERS_CA_KEY_FILE, "worker-w1.key"] {
                let mode = std::fs::metadata(dir.path().join(file))
                    .expect("metadata")
                    .permissions()
                    .mode();
                assert_eq!(mode & 0o077, 0, "{file}");
            }
        }
        // No workers CA in a directory without one.
        let empty = tempfile::tempdir().expect("tempdir");
        assert!(load_workers_ca(empty.path()).is_err());
    }

    #[test]
    fn cluster_certs_are_written_and_loaded() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ca = write_cluster_certs(dir.path(), &[NodeId(1), NodeId(2)], &["localhost".into()])
            .expect("write");
        for node in [NodeId(1), NodeId(2)] {
            assert!(Identity::load(dir.path(), node).is_ok());
        }
        assert!(Identity::load(dir.path(), NodeId(3)).is_err());
        // No second CA over the first.
        assert!(write_cluster_certs(dir.path(), &[NodeId(1)], &[]).is_err());
        // The CA reloads from its files and signs a node that verifies against the original.
        let reloaded = Ca::from_pem(ca.cert_pem(), &ca.key_pem()).expect("reload");
        let cert = generate_node_cert(&reloaded, NodeId(3), &[]).expect("cert");
        let identity = Identity::from_node_cert(ca.cert_pem(), &cert).expect("identity");
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(identity.root_store().expect("roots")),
            Arc::new(rustls::crypto::ring::default_provider()),
        )
        .build()
        .expect("verifier");
        let name = ServerName::try_from(node_server_name(NodeId(3))).expect("name");
        rustls::client::danger::ServerCertVerifier::verify_server_cert(
            verifier.as_ref(),
            &identity.chain[0],
            &[],
            &name,
            &[],
            rustls::pki_types::UnixTime::now(),
        )
        .expect("a certificate signed by the reloaded CA chains to the original");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join(node_key_file(NodeId(1))))
                .expect("metadata")
                .permissions()
                .mode();
            assert_eq!(mode & 0o077, 0);
        }
    }
}
