//! Certificates and TLS configurations of a cluster's peer transport: a cluster CA, one
//! certificate per node naming the node (SAN DNS `node-<id>.baton`, plus the hosts it is reached
//! at), PEM files on disk, and rustls configurations for *mutual* TLS over QUIC (ALPN
//! [`ALPN_PEER`], TLS 1.3 only, no 0-RTT).
//!
//! Identity rules: a server proves it is node N by holding a certificate valid for
//! `node-N.baton` (the client dials with that server name); a client proves it is node N the same
//! way, checked by [`verify_node_certificate`] against the id it claims in its hello. Both chains
//! must end at the cluster CA, so a certificate from another CA is refused at the handshake.
//! The one exception is [`Identity::member_client_config`], for dialing a member known only by
//! address: it checks the chain but not the server name, and its caller checks the certificate
//! against the id the member then states.
//!
//! Not here: certificate rotation, revocation lists, or worker certificates (DESIGN §6 gives
//! workers their own identities; that is the worker gateway's business).

use crate::error::Error;
use proto::NodeId;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::path::Path;
use std::sync::Arc;

/// ALPN protocol of node-to-node connections; a peer speaking anything else is refused.
pub const ALPN_PEER: &[u8] = b"baton-peer/1";

/// Common name of the cluster CA. Also how a CA is rebuilt from its key ([`Ca::from_pem`]): the
/// issuer of a node certificate is matched by this name and the CA's public key.
const CA_COMMON_NAME: &str = "Baton cluster CA";

/// File name of the CA certificate written by [`write_cluster_certs`].
pub const CA_CERT_FILE: &str = "ca.pem";
/// File name of the CA key written by [`write_cluster_certs`] (keep it off the nodes).
pub const CA_KEY_FILE: &str = "ca.key";

/// Installs `ring` as the process-wide rustls crypto provider. Idempotent. Two providers (ring
/// and aws-lc-rs) end up linked in Baton's binaries (DESIGN §10), and rustls panics when asked
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

fn tls_error(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Tls(format!("{what}: {e}"))
}

/// A cluster certificate authority: signs node certificates.
pub struct Ca {
    /// The CA certificate as issued; what nodes trust.
    cert_pem: String,
    /// rcgen's view of the CA, used as the issuer when signing. For a CA loaded from PEM it is a
    /// rebuilt self-signed certificate with the same name and key, which signs identically.
    issuer: rcgen::Certificate,
    key: KeyPair,
}

impl Ca {
    /// The CA certificate (PEM); nodes trust it.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The CA private key (PEM); needed only to sign more node certificates.
    pub fn key_pem(&self) -> String {
        self.key.serialize_pem()
    }

    /// Loads a CA written by [`write_cluster_certs`] (or [`Ca::cert_pem`]/[`Ca::key_pem`]) to
    /// sign more node certificates, e.g. for a node added later.
    pub fn from_pem(cert_pem: &str, key_pem: &str) -> Result<Ca, Error> {
        let key = KeyPair::from_pem(key_pem).map_err(|e| tls_error("CA key", e))?;
        // What a signature needs from the issuer is its name, key-id method and key, which are
        // the ones `generate_ca` uses; the certificate itself stays the one the nodes trust.
        let issuer = ca_params()?
            .self_signed(&key)
            .map_err(|e| tls_error("CA", e))?;
        CertificateDer::from_pem_slice(cert_pem.as_bytes())
            .map_err(|e| tls_error("CA certificate", e))?;
        Ok(Ca {
            cert_pem: cert_pem.to_string(),
            issuer,
            key,
        })
    }
}

fn ca_params() -> Result<CertificateParams, Error> {
    let mut params = CertificateParams::new(Vec::new()).map_err(|e| tls_error("CA", e))?;
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, CA_COMMON_NAME);
    params.distinguished_name = name;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    Ok(params)
}

/// Generates a new cluster CA (ECDSA P-256).
pub fn generate_ca() -> Result<Ca, Error> {
    let key = KeyPair::generate().map_err(|e| tls_error("CA key", e))?;
    let issuer = ca_params()?
        .self_signed(&key)
        .map_err(|e| tls_error("CA", e))?;
    Ok(Ca {
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

/// Generates node `node`'s certificate, signed by `ca`: SAN DNS `node-<id>.baton` (its identity)
/// plus `hosts` (DNS names or IP addresses it is reached at), usable as TLS server and client.
pub fn generate_node_cert(ca: &Ca, node: NodeId, hosts: &[String]) -> Result<NodeCert, Error> {
    let mut names = vec![node_server_name(node)];
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

/// Writes a new cluster's certificates into `dir` (created if missing): `ca.pem`, `ca.key`, and
/// per node `node-<id>.pem` and `node-<id>.key`. Each node certificate also names `hosts`.
/// Keys are written readable by the owner only. Refuses to overwrite an existing `ca.pem`, so a
/// second run cannot silently split a cluster into two CAs.
pub fn write_cluster_certs(dir: &Path, nodes: &[NodeId], hosts: &[String]) -> Result<Ca, Error> {
    std::fs::create_dir_all(dir).map_err(|e| tls_error(&dir.display().to_string(), e))?;
    let ca_path = dir.join(CA_CERT_FILE);
    if ca_path.exists() {
        return Err(Error::Tls(format!(
            "{} exists; refusing to replace the cluster CA",
            ca_path.display()
        )));
    }
    let ca = generate_ca()?;
    write_file(&ca_path, ca.cert_pem().as_bytes(), false)?;
    write_file(&dir.join(CA_KEY_FILE), ca.key_pem().as_bytes(), true)?;
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
    /// TLS 1.3, ALPN [`ALPN_PEER`], no 0-RTT (early data could be replayed).
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
        config.alpn_protocols = vec![ALPN_PEER.to_vec()];
        config.max_early_data_size = 0;
        Ok(config)
    }

    /// rustls client configuration: verifies the server against the cluster CA (and the server
    /// name the caller dials, `node-<id>.baton`), presents this node's certificate, TLS 1.3,
    /// ALPN [`ALPN_PEER`], no 0-RTT.
    pub fn client_config(&self) -> Result<rustls::ClientConfig, Error> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| tls_error("client config", e))?
            .with_root_certificates(self.root_store()?)
            .with_client_auth_cert(self.chain.clone(), self.key.clone_key())
            .map_err(|e| tls_error("client certificate", e))?;
        config.alpn_protocols = vec![ALPN_PEER.to_vec()];
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
        config.alpn_protocols = vec![ALPN_PEER.to_vec()];
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
