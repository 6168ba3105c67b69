//! `reload-injector certs`: a CA, a serving certificate and a Secret-hash key, for installs
//! without cert-manager. [`generate`] builds them in memory (pure apart from randomness);
//! [`run`] writes the files (see [`write_bundle`]).
//!
//! Imports: only `cli`.

mod dns_names;
mod files;

use std::io::Write;
use std::net::IpAddr;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType, SerialNumber,
};
use time::OffsetDateTime;

use crate::cli::CertsArgs;

pub use dns_names::{service_dns_names, validate_dns_name};
pub use files::{FILE_NAMES, write_bundle};

/// How long the generated CA is valid: 10 years. Rotating the serving certificate inside it
/// does not require touching the webhook's `caBundle`.
pub const CA_VALIDITY: Duration = Duration::from_secs(3650 * 24 * 60 * 60);

/// How far `notBefore` is set in the past, so that clocks a little behind still accept
/// a certificate generated a moment ago.
const CLOCK_SKEW: Duration = Duration::from_secs(5 * 60);

/// What to put into the serving certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertRequest {
    /// Name of the webhook's Service.
    pub service: String,
    /// Namespace of the webhook's Service.
    pub namespace: String,
    /// Extra DNS names (besides the four Service names).
    pub dns: Vec<String>,
    /// Extra IP addresses.
    pub ips: Vec<IpAddr>,
    /// Validity of the serving certificate (at most [`CA_VALIDITY`]).
    pub validity: Duration,
}

/// A generated CA and serving certificate, all PEM.
#[derive(Debug, Clone)]
pub struct Bundle {
    /// The CA certificate (what goes, base64-encoded, into `caBundle`).
    pub ca_cert_pem: String,
    /// The serving certificate, signed by the CA.
    pub cert_pem: String,
    /// The serving certificate's private key (PKCS#8).
    pub key_pem: String,
}

/// What went wrong while generating or writing certificates.
#[derive(Debug, thiserror::Error)]
pub enum CertsError {
    /// A name for the certificate was not a valid DNS name.
    #[error("failed to use {name:?} as a DNS name: {reason}")]
    DnsNameRejected {
        name: String,
        /// Why it was rejected.
        reason: &'static str,
    },
    /// The requested validity was zero or longer than the CA's.
    #[error(
        "failed to accept validity {validity:?}: it must be more than zero and at most the CA's 10 years"
    )]
    ValidityRejected {
        /// The requested validity, humanised.
        validity: String,
    },
    /// rcgen could not create a key or sign a certificate.
    #[error("failed to {step}")]
    CryptoFailed {
        step: &'static str,
        #[source]
        source: rcgen::Error,
    },
    /// Some output files exist and `--force` was not given; nothing was written.
    #[error(
        "failed to write into {dir}: {files} already exist (nothing was written; pass --force to overwrite)"
    )]
    FilesExisted {
        dir: String,
        /// The existing files, comma-separated.
        files: String,
    },
    /// A file or directory could not be created or written.
    #[error("failed to {action} {path}")]
    WriteFailed {
        /// What was being done (`create directory`, `write`, `rename`...).
        action: &'static str,
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// Generates a fresh ECDSA P-256 CA (valid 10 years) and a serving certificate signed by it,
/// for the Service's DNS names plus the extras in `req`, with the `serverAuth` usage.
pub fn generate(req: &CertRequest) -> Result<Bundle, CertsError> {
    if req.validity.is_zero() || req.validity > CA_VALIDITY {
        return Err(CertsError::ValidityRejected {
            validity: humantime::format_duration(req.validity).to_string(),
        });
    }
    let dns = service_dns_names(&req.service, &req.namespace, &req.dns)?;
    let now = OffsetDateTime::now_utc();

    let ca_key = new_key("generate the CA key")?;
    let ca_name = format!("reload-injector CA ({})", req.namespace);
    let mut ca_params = params(&ca_name, now, CA_VALIDITY);
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca_params
        .self_signed(&ca_key)
        .map_err(crypto("sign the CA certificate"))?;
    let issuer = Issuer::new(ca_params, &ca_key);

    let key = new_key("generate the serving key")?;
    let mut params = params(&dns[2], now, req.validity);
    params.subject_alt_names = dns
        .iter()
        .map(|name| {
            name.clone()
                .try_into()
                .map(SanType::DnsName)
                .map_err(crypto("encode a DNS name"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    params
        .subject_alt_names
        .extend(req.ips.iter().copied().map(SanType::IpAddress));
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    let cert = params
        .signed_by(&key, &issuer)
        .map_err(crypto("sign the serving certificate"))?;

    Ok(Bundle {
        ca_cert_pem: ca_cert.pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// Generates the certificates and a Secret-hash key and writes them into `--out`.
pub fn run(args: CertsArgs) -> anyhow::Result<()> {
    let req = CertRequest {
        service: args.service,
        namespace: args.namespace,
        dns: args.dns,
        ips: args.ip,
        validity: args.validity,
    };
    let bundle = generate(&req)?;
    let written = write_bundle(&args.out, &bundle, &files::random_hash_key(), args.force)?;
    let names = service_dns_names(&req.service, &req.namespace, &req.dns)?;
    // Written with `writeln!`, not `println!`: a closed stdout (`| head`) is an error, not a panic.
    let mut out = std::io::stdout().lock();
    writeln!(out, "wrote into {}:", args.out.display())?;
    for path in &written {
        writeln!(out, "  {}", path.display())?;
    }
    writeln!(out, "serving certificate for: {}", names.join(", "))?;
    writeln!(
        out,
        "next: create the Secrets and set caBundle, e.g. with certs/generate.sh, or:\n  \
         kubectl -n {ns} create secret tls reload-injector-tls --cert={dir}/tls.crt --key={dir}/tls.key\n  \
         kubectl -n {ns} create secret generic reload-injector-hash-key --from-file={dir}/secret-hash.key\n  \
         and put the content of {dir}/ca-bundle.b64 into the webhooks' clientConfig.caBundle",
        ns = req.namespace,
        dir = args.out.display(),
    )?;
    Ok(())
}

fn new_key(step: &'static str) -> Result<KeyPair, CertsError> {
    KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(crypto(step))
}

fn crypto(step: &'static str) -> impl FnOnce(rcgen::Error) -> CertsError {
    move |source| CertsError::CryptoFailed { step, source }
}

/// The parameters every certificate here shares: the common name `name`, valid from a little
/// before `now` (see [`CLOCK_SKEW`]) for `validity`, and a random serial number.
fn params(name: &str, now: OffsetDateTime, validity: Duration) -> CertificateParams {
    let mut params = CertificateParams::default();
    params.distinguished_name.push(DnType::CommonName, name);
    params.not_before = now - CLOCK_SKEW;
    params.not_after = now + validity;
    params.serial_number = Some(random_serial());
    params
}

/// A random positive 128-bit serial number (RFC 5280 asks for unique, positive, ≤ 20 bytes).
fn random_serial() -> SerialNumber {
    let mut bytes: [u8; 16] = rand::random();
    bytes[0] = (bytes[0] & 0x7f) | 0x01;
    SerialNumber::from_slice(&bytes)
}

#[cfg(test)]
mod tests;
