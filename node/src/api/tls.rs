//! HTTPS for the API (`--tls-cert`, `--tls-key`): rustls with ring, the certificate chain and
//! key read from PEM files, and read again when either file changes, so a renewed certificate
//! (cert-manager, certbot) is served from the next handshake without a restart. A change is
//! looked for at most once per [`RELOAD_CHECK`]; files that cannot be read, do not parse or
//! hold a key that is not the certificate's (one written before the other) keep the
//! certificate served until then, and say why in the log.

pub use crate::options::TlsFiles;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// How often, at most, the files are checked for a change.
pub const RELOAD_CHECK: Duration = Duration::from_secs(1);

/// The TLS configuration of the API, or why the files cannot serve.
pub fn server_config(files: &TlsFiles) -> Result<Arc<rustls::ServerConfig>, String> {
    let resolver = Reloading::new(files.clone())?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(resolver));
    let mut config = config;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The certificate served, and when the files were last looked at.
#[derive(Debug)]
struct Reloading {
    files: TlsFiles,
    state: Mutex<Loaded>,
}

#[derive(Debug)]
struct Loaded {
    key: Arc<CertifiedKey>,
    stamps: (Option<SystemTime>, Option<SystemTime>),
    checked: Instant,
}

impl Reloading {
    fn new(files: TlsFiles) -> Result<Self, String> {
        let key = load(&files)?;
        let state = Mutex::new(Loaded {
            key,
            stamps: stamps(&files),
            checked: Instant::now(),
        });
        Ok(Self { files, state })
    }

    /// The key to serve: the loaded one, loaded again first if the files changed.
    fn current(&self) -> Arc<CertifiedKey> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.checked.elapsed() >= RELOAD_CHECK {
            state.checked = Instant::now();
            let now = stamps(&self.files);
            if now != state.stamps {
                match load(&self.files) {
                    Ok(key) => {
                        tracing::info!(cert = %self.files.cert.display(), "the API's TLS certificate was loaded again");
                        state.key = key;
                        state.stamps = now;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "the API's TLS files changed but cannot serve; the certificate served until now stays")
                    }
                }
            }
        }
        state.key.clone()
    }
}

impl ResolvesServerCert for Reloading {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

/// The files' modification times.
fn stamps(files: &TlsFiles) -> (Option<SystemTime>, Option<SystemTime>) {
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    (modified(&files.cert), modified(&files.key))
}

/// The certificate chain and key the files hold.
fn load(files: &TlsFiles) -> Result<Arc<CertifiedKey>, String> {
    let cert = &files.cert;
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect())
        .map_err(|e| format!("--tls-cert {}: {e}", cert.display()))?;
    if chain.is_empty() {
        return Err(format!("--tls-cert {}: no certificate", cert.display()));
    }
    let key = PrivateKeyDer::from_pem_file(&files.key)
        .map_err(|e| format!("--tls-key {}: {e}", files.key.display()))?;
    let provider = rustls::crypto::ring::default_provider();
    let signing = provider
        .key_provider
        .load_private_key(key)
        .map_err(|e| format!("--tls-key {}: {e}", files.key.display()))?;
    let certified = CertifiedKey::new(chain, signing);
    certified.keys_match().map_err(|e| {
        let (cert, key) = (cert.display(), files.key.display());
        format!("--tls-key {key} is not the key of --tls-cert {cert}: {e}")
    })?;
    Ok(Arc::new(certified))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_pair(dir: &Path, name: &str) -> TlsFiles {
        let cert =
            rcgen::generate_simple_self_signed(vec![name.to_owned()]).expect("a certificate");
        let files = TlsFiles {
            cert: dir.join("api.pem"),
            key: dir.join("api.key"),
        };
        std::fs::write(&files.cert, cert.cert.pem()).expect("write the certificate");
        std::fs::write(&files.key, cert.key_pair.serialize_pem()).expect("write the key");
        files
    }

    #[test]
    fn a_changed_certificate_is_served_from_the_next_check_and_a_broken_one_is_not() {
        let dir = tempfile::tempdir().expect("a directory");
        let files = write_pair(dir.path(), "one.test");
        let resolver = Reloading::new(files.clone()).expect("loads");
        let first = resolver.current().cert[0].clone();
        write_pair(dir.path(), "two.test");
        resolver.state.lock().expect("state").checked -= RELOAD_CHECK;
        let second = resolver.current().cert[0].clone();
        assert_ne!(first, second, "the renewed certificate is served");

        let other = rcgen::generate_simple_self_signed(vec!["three.test".to_owned()])
            .expect("a certificate");
        std::fs::write(&files.key, other.key_pair.serialize_pem()).expect("a key written first");
        resolver.state.lock().expect("state").checked -= RELOAD_CHECK;
        assert_eq!(
            resolver.current().cert[0],
            second,
            "a key without its certificate"
        );

        std::fs::write(&files.key, "not a key").expect("break the key");
        resolver.state.lock().expect("state").checked -= RELOAD_CHECK;
        assert_eq!(
            resolver.current().cert[0],
            second,
            "a broken file changes nothing"
        );
        assert!(server_config(&files).is_err(), "and cannot start a node");
    }
}
