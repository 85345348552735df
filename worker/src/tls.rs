//! The worker's TLS identity: the cluster CA it trusts nodes by, and its own certificate chain and
//! key, which the node reads its grant from (worker id and task types, see
//! [`proto::worker::Grant`]).
//!
//! The rustls client configuration is built once, when the identity is loaded, so a bad file is
//! reported by [`Tls::from_pem`] and not on the first connection. It names the `ring` provider
//! explicitly (no process-wide default needed), speaks TLS 1.3 only, offers ALPN
//! [`ALPN_WORKER`](proto::worker::ALPN_WORKER) and sends no early data (a replayed 0-RTT frame
//! could report a result twice). Nodes are verified against the CA under the server name
//! [`NODE_SERVER_NAME`](proto::worker::NODE_SERVER_NAME), which every node certificate carries.
//!
//! Not here: issuing certificates (`baton worker-cert` does) or reloading them while running.

use crate::Error;
use proto::worker::ALPN_WORKER;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::Path;
use std::sync::Arc;

/// File name of the cluster CA certificate in a certificate directory.
pub const CA_CERT_FILE: &str = "ca.pem";

/// File name of worker `id`'s certificate chain in a certificate directory.
pub fn worker_cert_file(id: &str) -> String {
    format!("worker-{id}.pem")
}

/// File name of worker `id`'s private key in a certificate directory.
pub fn worker_key_file(id: &str) -> String {
    format!("worker-{id}.key")
}

/// A worker's TLS identity, ready to dial nodes. Cheap to clone.
#[derive(Clone)]
pub struct Tls {
    config: Arc<rustls::ClientConfig>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The configuration holds the private key: show nothing of it.
        f.debug_struct("Tls").finish_non_exhaustive()
    }
}

impl Tls {
    /// An identity from PEM text: the cluster CA certificate(s), the worker's certificate chain
    /// (leaf first) and its private key (PKCS#8, PKCS#1 or SEC1).
    pub fn from_pem(
        ca_pem: impl AsRef<[u8]>,
        cert_pem: impl AsRef<[u8]>,
        key_pem: impl AsRef<[u8]>,
    ) -> Result<Tls, Error> {
        let mut roots = rustls::RootCertStore::empty();
        for ca in certificates("CA certificate", ca_pem.as_ref())? {
            roots
                .add(ca)
                .map_err(|e| Error::Tls(format!("CA certificate: {e}")))?;
        }
        let chain = certificates("worker certificate", cert_pem.as_ref())?;
        let key = PrivateKeyDer::from_pem_slice(key_pem.as_ref())
            .map_err(|e| Error::Tls(format!("worker key: {e}")))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| Error::Tls(format!("client config: {e}")))?
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)
            .map_err(|e| Error::Tls(format!("worker certificate and key: {e}")))?;
        config.alpn_protocols = vec![ALPN_WORKER.to_vec()];
        config.enable_early_data = false;
        Ok(Tls {
            config: Arc::new(config),
        })
    }

    /// An identity from three PEM files: the cluster CA, the worker's chain and its key.
    pub fn from_files(
        ca: impl AsRef<Path>,
        cert: impl AsRef<Path>,
        key: impl AsRef<Path>,
    ) -> Result<Tls, Error> {
        Tls::from_pem(
            read(ca.as_ref())?,
            read(cert.as_ref())?,
            read(key.as_ref())?,
        )
    }

    /// Worker `id`'s identity from a directory as `baton worker-cert` writes it:
    /// [`CA_CERT_FILE`], [`worker_cert_file`] and [`worker_key_file`].
    pub fn from_dir(dir: impl AsRef<Path>, id: &str) -> Result<Tls, Error> {
        let dir = dir.as_ref();
        Tls::from_files(
            dir.join(CA_CERT_FILE),
            dir.join(worker_cert_file(id)),
            dir.join(worker_key_file(id)),
        )
    }

    /// The rustls configuration for QUIC (`quinn::crypto::rustls::QuicClientConfig`).
    pub(crate) fn client_config(&self) -> Arc<rustls::ClientConfig> {
        self.config.clone()
    }
}

fn certificates(what: &str, pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, Error> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Error::Tls(format!("{what}: {e}")))?;
    if certs.is_empty() {
        return Err(Error::Tls(format!(
            "{what}: no certificate in the PEM text"
        )));
    }
    Ok(certs)
}

fn read(path: &Path) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|e| Error::Io {
        path: path.to_owned(),
        message: e.to_string(),
    })
}

/// A CA and a certificate it signed, PEM encoded: (ca, cert, key). For tests.
#[cfg(test)]
pub(crate) fn test_pems() -> (String, String, String) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca_params = CertificateParams::new(Vec::new()).expect("CA params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).expect("CA");
    let key = KeyPair::generate().expect("worker key");
    let cert = CertificateParams::new(vec!["w1".to_owned()])
        .expect("worker params")
        .signed_by(&key, &ca, &ca_key)
        .expect("worker certificate");
    (ca.pem(), cert.pem(), key.serialize_pem())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_identity_loads_from_pem_as_a_tls13_mtls_client() {
        let (ca, cert, key) = test_pems();
        let tls = Tls::from_pem(&ca, &cert, &key).expect("identity");
        let config = tls.client_config();
        assert_eq!(config.alpn_protocols, [ALPN_WORKER.to_vec()]);
        assert!(!config.enable_early_data);
        assert!(config.client_auth_cert_resolver.has_certs());
        // The key must match the certificate.
        let (_, _, other_key) = test_pems();
        assert!(matches!(
            Tls::from_pem(&ca, &cert, &other_key),
            Err(Error::Tls(_))
        ));
    }

    #[test]
    fn garbage_is_refused_when_loading_not_when_connecting() {
        let err = Tls::from_pem("nope", "nope", "nope").expect_err("no certificates");
        assert!(matches!(err, Error::Tls(m) if m.contains("CA certificate")));
        let err = Tls::from_dir("/nonexistent-baton-dir", "w1").expect_err("no files");
        assert!(matches!(err, Error::Io { path, .. } if path.ends_with("ca.pem")));
        assert_eq!(worker_cert_file("w1"), "worker-w1.pem");
        assert_eq!(worker_key_file("w1"), "worker-w1.key");
    }
}
