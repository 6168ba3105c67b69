//! Certificate hot reload in the real binary: the kubelet's `..data` swap and plain file
//! writes are picked up by the next handshake, a garbage replacement keeps the last good
//! pair, and established connections are not dropped.

use crate::webhook_support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use webhook_support::client::{Conn, Proto, client_config, peer_cert, tls_stream};
use webhook_support::process::Server;
use webhook_support::{bundle, check_answer, kubelet_write, pod_review, scratch};

fn der(pem: &str) -> Vec<u8> {
    CertificateDer::from_pem_slice(pem.as_bytes())
        .unwrap()
        .to_vec()
}

/// The certificate presented to a new handshake.
async fn presented(addr: SocketAddr, cas: &str) -> Vec<u8> {
    let stream = tls_stream(addr, client_config(cas, Proto::H1))
        .await
        .unwrap();
    peer_cert(&stream)
}

/// Polls new handshakes until `want` is presented or 15 s pass.
async fn wait_presented(addr: SocketAddr, cas: &str, want: &[u8]) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while presented(addr, cas).await != want {
        assert!(Instant::now() < deadline, "new certificate never presented");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

const ERRORS: &str = r#"reload_injector_cert_reloads_total{result="error"} "#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubelet_swap_rotates_and_garbage_keeps_the_last_good_pair() {
    let dir = scratch("rotation-kubelet");
    let (first, second) = (bundle(), bundle());
    let cas = format!("{}{}", first.ca_cert_pem, second.ca_cert_pem);
    kubelet_write(
        &dir,
        "2026_11_20_21_00_00.1",
        &first.cert_pem,
        &first.key_pem,
    );
    let server = Server::start(&dir.join("tls.crt"), &dir.join("tls.key"), &["--no-kube"]);
    assert_eq!(presented(server.addr, &cas).await, der(&first.cert_pem));

    // Connections open across the rotation, over both protocols.
    let mut h1 = Conn::connect(server.addr, &cas, Proto::H1).await.unwrap();
    let mut h2 = Conn::connect(server.addr, &cas, Proto::H2).await.unwrap();
    check_answer(&h1.review(&pod_review("before-1")).await, "before-1");
    check_answer(&h2.review(&pod_review("before-2")).await, "before-2");

    kubelet_write(
        &dir,
        "2026_11_20_22_00_00.2",
        &second.cert_pem,
        &second.key_pem,
    );
    wait_presented(server.addr, &cas, &der(&second.cert_pem)).await;
    assert!(server.wait_metric(
        r#"reload_injector_cert_reloads_total{result="success"} "#,
        1.0,
        Duration::from_secs(5)
    ));

    // The established connections still work and still hold the old certificate.
    assert_eq!(h1.peer_cert, der(&first.cert_pem));
    check_answer(&h1.review(&pod_review("after-1")).await, "after-1");
    check_answer(&h2.review(&pod_review("after-2")).await, "after-2");

    // A garbage replacement is refused: counted, and the second pair stays.
    kubelet_write(&dir, "2026_11_20_23_00_00.3", "garbage", "more garbage");
    assert!(
        server.wait_metric(ERRORS, 1.0, Duration::from_secs(15)),
        "bad pair not noticed"
    );
    assert_eq!(presented(server.addr, &cas).await, der(&second.cert_pem));
    let mut conn = Conn::connect(server.addr, &cas, Proto::H2).await.unwrap();
    check_answer(&conn.review(&pod_review("still")).await, "still");
    assert!(
        server
            .log()
            .iter()
            .any(|l| l.contains("keeping the previous serving certificate")),
        "no warning logged"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_file_writes_are_picked_up() {
    let dir = scratch("rotation-plain");
    let (first, second) = (bundle(), bundle());
    let cas = format!("{}{}", first.ca_cert_pem, second.ca_cert_pem);
    std::fs::write(dir.join("tls.crt"), &first.cert_pem).unwrap();
    std::fs::write(dir.join("tls.key"), &first.key_pem).unwrap();
    let server = Server::start(&dir.join("tls.crt"), &dir.join("tls.key"), &["--no-kube"]);
    assert_eq!(presented(server.addr, &cas).await, der(&first.cert_pem));

    // Key first, then certificate: in between the pair does not match and must not be used.
    std::fs::write(dir.join("tls.key"), &second.key_pem).unwrap();
    std::fs::write(dir.join("tls.crt"), &second.cert_pem).unwrap();
    wait_presented(server.addr, &cas, &der(&second.cert_pem)).await;
    let mut conn = Conn::connect(server.addr, &cas, Proto::H1).await.unwrap();
    check_answer(&conn.review(&pod_review("plain")).await, "plain");
}
