use std::net::IpAddr;
use std::time::Duration;

use x509_parser::extensions::{GeneralName, ParsedExtension};
use x509_parser::oid_registry::{OID_EC_P256, OID_KEY_TYPE_EC_PUBLIC_KEY};
use x509_parser::pem::parse_x509_pem;

use super::*;

fn request() -> CertRequest {
    CertRequest {
        service: "reload-injector".into(),
        namespace: "tools".into(),
        dns: vec!["webhook.example.com".into()],
        ips: vec!["127.0.0.1".parse().unwrap(), "::1".parse().unwrap()],
        validity: Duration::from_secs(30 * 24 * 3600),
    }
}

/// Parses one PEM certificate and hands it to `check`.
fn with_cert(pem: &str, check: impl FnOnce(&x509_parser::certificate::X509Certificate<'_>)) {
    let (_, pem) = parse_x509_pem(pem.as_bytes()).expect("PEM");
    let cert = pem.parse_x509().expect("X.509");
    check(&cert);
}

fn sans(cert: &x509_parser::certificate::X509Certificate<'_>) -> (Vec<String>, Vec<IpAddr>) {
    let san = cert
        .subject_alternative_name()
        .expect("well-formed SAN")
        .expect("SAN present");
    let mut dns = Vec::new();
    let mut ips = Vec::new();
    for name in &san.value.general_names {
        match name {
            GeneralName::DNSName(d) => dns.push((*d).to_owned()),
            GeneralName::IPAddress(b) if b.len() == 4 => {
                ips.push(IpAddr::from(<[u8; 4]>::try_from(*b).unwrap()))
            }
            GeneralName::IPAddress(b) => ips.push(IpAddr::from(<[u8; 16]>::try_from(*b).unwrap())),
            other => panic!("unexpected SAN {other:?}"),
        }
    }
    (dns, ips)
}

fn assert_p256(cert: &x509_parser::certificate::X509Certificate<'_>) {
    let spki = cert.public_key();
    assert_eq!(spki.algorithm.algorithm, OID_KEY_TYPE_EC_PUBLIC_KEY);
    let curve = spki
        .algorithm
        .parameters
        .as_ref()
        .and_then(|p| p.as_oid().ok())
        .expect("named curve");
    assert_eq!(curve, OID_EC_P256);
}

#[test]
fn serving_cert_carries_every_service_name_and_the_extras() {
    let bundle = generate(&request()).unwrap();
    with_cert(&bundle.cert_pem, |cert| {
        let (dns, ips) = sans(cert);
        assert_eq!(
            dns,
            [
                "reload-injector",
                "reload-injector.tools",
                "reload-injector.tools.svc",
                "reload-injector.tools.svc.cluster.local",
                "webhook.example.com",
            ]
        );
        assert_eq!(ips, request().ips);
    });
}

#[test]
fn serving_cert_is_for_server_auth_only_and_not_a_ca() {
    let bundle = generate(&request()).unwrap();
    with_cert(&bundle.cert_pem, |cert| {
        let eku = cert.extended_key_usage().unwrap().expect("EKU present");
        assert!(eku.value.server_auth);
        assert!(!eku.value.client_auth && !eku.value.any);
        let is_ca = cert
            .basic_constraints()
            .unwrap()
            .is_some_and(|bc| bc.value.ca);
        assert!(!is_ca);
        assert_p256(cert);
    });
}

#[test]
fn serving_cert_is_signed_by_the_ca_and_lives_as_long_as_asked() {
    let bundle = generate(&request()).unwrap();
    let (_, ca_pem) = parse_x509_pem(bundle.ca_cert_pem.as_bytes()).unwrap();
    let ca = ca_pem.parse_x509().unwrap();
    with_cert(&bundle.cert_pem, |cert| {
        assert_eq!(cert.issuer(), ca.subject());
        cert.verify_signature(Some(ca.public_key()))
            .expect("signed by the CA's key");
        let lifetime =
            cert.validity().not_after.timestamp() - cert.validity().not_before.timestamp();
        let expected = 30 * 24 * 3600 + CLOCK_SKEW.as_secs() as i64;
        assert!((lifetime - expected).abs() <= 2, "{lifetime}");
    });
}

#[test]
fn ca_is_a_p256_ca_valid_for_ten_years() {
    let bundle = generate(&request()).unwrap();
    with_cert(&bundle.ca_cert_pem, |ca| {
        let bc = ca.basic_constraints().unwrap().expect("basic constraints");
        assert!(bc.value.ca);
        let ku = ca.key_usage().unwrap().expect("key usage");
        assert!(ku.value.key_cert_sign());
        ca.verify_signature(None).expect("self-signed");
        assert_p256(ca);
        let secs = ca.validity().not_after.timestamp() - ca.validity().not_before.timestamp();
        let days = secs / (24 * 3600);
        assert!((3650..=3651).contains(&days), "{days}");
        assert!(ca.extensions().iter().any(|e| matches!(
            e.parsed_extension(),
            ParsedExtension::SubjectKeyIdentifier(_)
        )));
    });
}

#[test]
fn key_matches_the_serving_certificate() {
    let bundle = generate(&request()).unwrap();
    let key = KeyPair::from_pem(&bundle.key_pem).expect("PKCS#8 key");
    assert!(bundle.key_pem.starts_with("-----BEGIN PRIVATE KEY-----"));
    with_cert(&bundle.cert_pem, |cert| {
        assert_eq!(
            cert.public_key().subject_public_key.data.as_ref(),
            key.public_key_raw()
        );
    });
}

#[test]
fn every_call_makes_a_new_ca() {
    let a = generate(&request()).unwrap();
    let b = generate(&request()).unwrap();
    assert_ne!(a.ca_cert_pem, b.ca_cert_pem);
    assert_ne!(a.key_pem, b.key_pem);
}

#[test]
fn bad_names_and_validities_are_refused_with_a_reason() {
    let bad_service = CertRequest {
        service: "Reload_Injector".into(),
        ..request()
    };
    let err = generate(&bad_service).unwrap_err().to_string();
    assert!(
        err.starts_with("failed to use \"Reload_Injector\""),
        "{err}"
    );

    for name in ["", "a..b", "-a.b", "has space.example", &"x".repeat(64)] {
        let req = CertRequest {
            dns: vec![name.to_owned()],
            ..request()
        };
        assert!(
            matches!(generate(&req), Err(CertsError::DnsNameRejected { .. })),
            "{name:?}"
        );
    }
    for validity in [Duration::ZERO, CA_VALIDITY + Duration::from_secs(1)] {
        let req = CertRequest {
            validity,
            ..request()
        };
        let err = generate(&req).unwrap_err();
        assert!(matches!(err, CertsError::ValidityRejected { .. }), "{err}");
    }
}

#[test]
fn extras_may_be_wildcards_and_duplicates_are_dropped() {
    let names =
        service_dns_names("svc", "ns", &["*.ns.example".into(), "svc.ns.svc".into()]).unwrap();
    assert_eq!(
        names,
        [
            "svc",
            "svc.ns",
            "svc.ns.svc",
            "svc.ns.svc.cluster.local",
            "*.ns.example"
        ]
    );
}

#[test]
fn hash_key_is_32_random_bytes_in_hex() {
    let key = files::random_hash_key();
    let hex_part = key.strip_suffix('\n').expect("one trailing newline");
    assert_eq!(hex::decode(hex_part).unwrap().len(), 32);
    assert_ne!(key, files::random_hash_key());
}
