//! TLS material: loading and checking the certificate/key pair, and a certificate resolver
//! whose pair can be swapped while the server runs (see [`super::cert_reload`]).

use parking_lot::RwLock;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::ServerConfig;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::{Error as PemError, PemObject};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// What went wrong with the TLS files (messages name the file and its flag).
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("failed to read the {what} file {} ({flag})", path.display())]
    FileUnreadable {
        /// `certificate` or `private key`.
        what: &'static str,
        /// `--tls-cert` or `--tls-key`.
        flag: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to read a PEM {what} from {} ({flag}): {reason}", path.display())]
    PemInvalid {
        what: &'static str,
        flag: &'static str,
        path: PathBuf,
        reason: String,
    },
    #[error("failed to find a certificate in {} (--tls-cert)", .0.display())]
    NoCertificate(PathBuf),
    #[error("failed to use the private key in {} (--tls-key)", path.display())]
    KeyUnusable {
        path: PathBuf,
        #[source]
        source: rustls::Error,
    },
    #[error(
        "failed to match the private key {} (--tls-key) to the certificate {} (--tls-cert)",
        key.display(),
        cert.display()
    )]
    KeyMismatched {
        cert: PathBuf,
        key: PathBuf,
        #[source]
        source: rustls::Error,
    },
}

impl TlsError {
    fn pem(what: &'static str, flag: &'static str, path: &Path, err: PemError) -> Self {
        let path = path.to_owned();
        let reason = match err {
            PemError::Io(source) => {
                return TlsError::FileUnreadable {
                    what,
                    flag,
                    path,
                    source,
                };
            }
            PemError::NoItemsFound if what == "certificate" => {
                return TlsError::NoCertificate(path);
            }
            PemError::NoItemsFound => "no private key found".to_owned(),
            other => other.to_string(),
        };
        TlsError::PemInvalid {
            what,
            flag,
            path,
            reason,
        }
    }
}

/// Reads and checks a PEM certificate chain and its private key.
pub fn load_pair(cert: &Path, key: &Path) -> Result<CertifiedKey, TlsError> {
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|err| TlsError::pem("certificate", "--tls-cert", cert, err))?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate(cert.to_owned()));
    }
    let private = PrivateKeyDer::from_pem_file(key)
        .map_err(|err| TlsError::pem("private key", "--tls-key", key, err))?;
    let signer = rustls::crypto::ring::sign::any_supported_type(&private).map_err(|source| {
        TlsError::KeyUnusable {
            path: key.to_owned(),
            source,
        }
    })?;
    let pair = CertifiedKey::new(chain, signer);
    pair.keys_match()
        .map_err(|source| TlsError::KeyMismatched {
            cert: cert.to_owned(),
            key: key.to_owned(),
            source,
        })?;
    Ok(pair)
}

/// Serves the current certificate to every handshake; [`CertResolver::replace`] swaps it.
#[derive(Debug)]
pub struct CertResolver {
    current: RwLock<Arc<CertifiedKey>>,
}

impl CertResolver {
    /// A resolver serving `pair`.
    pub fn new(pair: CertifiedKey) -> Self {
        Self {
            current: RwLock::new(Arc::new(pair)),
        }
    }

    /// The pair served now.
    pub fn current(&self) -> Arc<CertifiedKey> {
        self.current.read().clone()
    }

    /// Serves `pair` from the next handshake on; established connections keep theirs.
    pub fn replace(&self, pair: CertifiedKey) {
        *self.current.write() = Arc::new(pair);
    }
}

impl ResolvesServerCert for CertResolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

/// The rustls server configuration: TLS 1.3 and 1.2 only, no client auth, ALPN `h2` then
/// `http/1.1`. With the ring provider the TLS 1.2 suites are all ECDHE with AEAD ciphers
/// (AES-GCM, ChaCha20-Poly1305): no CBC, no RSA key exchange, no SSLv3/TLS 1.0/1.1 (rustls
/// implements none of them).
pub fn server_config(resolver: Arc<CertResolver>) -> Arc<ServerConfig> {
    let versions = [&rustls::version::TLS13, &rustls::version::TLS12];
    let mut config = ServerConfig::builder_with_protocol_versions(&versions)
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Arc::new(config)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scratch::Scratch;

    fn write_pair(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
        let key = rcgen::KeyPair::generate().unwrap();
        let params = rcgen::CertificateParams::new(vec![format!("{name}.test")]).unwrap();
        let cert = params.self_signed(&key).unwrap();
        let (c, k) = (
            dir.join(format!("{name}.crt")),
            dir.join(format!("{name}.key")),
        );
        std::fs::write(&c, cert.pem()).unwrap();
        std::fs::write(&k, key.serialize_pem()).unwrap();
        (c, k)
    }

    #[test]
    fn loads_a_matching_pair() {
        let scratch = Scratch::new("tls-ok");
        let dir = &scratch.0;
        let (c, k) = write_pair(dir, "a");
        let pair = load_pair(&c, &k).unwrap();
        assert_eq!(pair.cert.len(), 1);
    }

    #[test]
    fn rejects_a_key_of_another_certificate() {
        let scratch = Scratch::new("tls-mismatch");
        let dir = &scratch.0;
        let (c, _) = write_pair(dir, "a");
        let (_, k) = write_pair(dir, "b");
        let err = load_pair(&c, &k).unwrap_err();
        assert!(matches!(err, TlsError::KeyMismatched { .. }), "{err}");
        assert!(err.to_string().starts_with("failed to match"), "{err}");
    }

    #[test]
    fn rejects_garbage_and_missing_files() {
        let scratch = Scratch::new("tls-garbage");
        let dir = &scratch.0;
        let (c, k) = write_pair(dir, "a");
        let junk = dir.join("junk");
        std::fs::write(&junk, "not a pem").unwrap();
        assert!(matches!(
            load_pair(&junk, &k),
            Err(TlsError::NoCertificate(_))
        ));
        assert!(matches!(
            load_pair(&c, &junk),
            Err(TlsError::PemInvalid { .. })
        ));
        let missing = dir.join("missing");
        let err = load_pair(&missing, &k).unwrap_err();
        assert!(err.to_string().contains("missing"), "{err}");
    }
}
