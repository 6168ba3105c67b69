//! The real `reload-injector serve` refuses old TLS versions, weak suites and plain HTTP
//! cleanly: a handshake alert or a prompt close, never an HTTP answer, and it keeps serving.
//! The old-TLS client is the system's `openssl s_client` (installed by
//! `scripts/install-test-deps.sh`); Debian's OpenSSL needs `@SECLEVEL=0` to offer TLS 1.0/1.1
//! at all, so the refusal seen is the server's.

use crate::webhook_support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use webhook_support::client::{Conn, Proto};
use webhook_support::process::Server;
use webhook_support::{bundle, check_answer, pod_review, scratch};

fn start(name: &str) -> (Server, String) {
    let dir = scratch(name);
    let b = bundle();
    std::fs::write(dir.join("tls.crt"), &b.cert_pem).unwrap();
    std::fs::write(dir.join("tls.key"), &b.key_pem).unwrap();
    let server = Server::start(
        &dir.join("tls.crt"),
        &dir.join("tls.key"),
        &["--no-kube", "--handshake-timeout", "5s"],
    );
    (server, b.ca_cert_pem)
}

/// `openssl s_client` against `addr` with `args`: (exit success, combined output).
fn s_client(addr: SocketAddr, args: &[&str]) -> (bool, String) {
    let output = Command::new("openssl")
        .arg("s_client")
        .args(["-connect", &addr.to_string()])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|err| {
            panic!(
                "failed to run openssl ({err}): run scripts/install-test-deps.sh, or \
                 apt-get install openssl"
            )
        });
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

/// The line `New, <protocol>, Cipher is <suite>` that s_client prints.
fn negotiated(text: &str) -> &str {
    text.lines()
        .find(|l| l.starts_with("New, "))
        .unwrap_or("(no New line)")
}

async fn still_serves(server: &Server, ca: &str) {
    let mut conn = Conn::connect(server.addr, ca, Proto::H1).await.unwrap();
    check_answer(&conn.review(&pod_review("after")).await, "after");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_1_0_and_1_1_and_weak_suites_are_refused_and_1_2_and_1_3_work() {
    let (server, ca) = start("tls-versions");
    for version in ["-tls1", "-tls1_1"] {
        let (ok, text) = s_client(server.addr, &[version, "-cipher", "DEFAULT@SECLEVEL=0"]);
        assert!(!ok, "{version} was accepted:\n{text}");
        assert!(
            text.contains("alert") && negotiated(&text).contains("(NONE)"),
            "{version}: no handshake alert from the server:\n{text}"
        );
    }
    // TLS 1.2 without forward secrecy or with CBC: no shared suite.
    let weak = "AES128-SHA:AES256-SHA:AES128-GCM-SHA256:ECDHE-ECDSA-AES128-SHA:@SECLEVEL=0";
    let (ok, text) = s_client(server.addr, &["-tls1_2", "-cipher", weak]);
    assert!(
        !ok && text.contains("alert"),
        "weak suites accepted:\n{text}"
    );

    let (ok, text) = s_client(server.addr, &["-tls1_2"]);
    assert!(ok, "{text}");
    let line = negotiated(&text);
    assert!(
        line.contains("TLSv1.2") && line.contains("ECDHE-ECDSA") && line.contains("GCM"),
        "{line}"
    );
    let (ok, text) = s_client(server.addr, &["-tls1_3"]);
    assert!(ok && negotiated(&text).contains("TLSv1.3"), "{text}");
    still_serves(&server, &ca).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_is_refused_promptly_without_an_http_answer() {
    let (server, ca) = start("tls-plain-http");
    for request in [
        "GET /healthz HTTP/1.1\r\nHost: reload-injector\r\n\r\n",
        "POST /mutate HTTP/1.1\r\nHost: reload-injector\r\nContent-Type: application/json\r\n\
         Content-Length: 2\r\n\r\n{}",
        "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    ] {
        let mut stream = TcpStream::connect(server.addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let started = Instant::now();
        stream.write_all(request.as_bytes()).unwrap();
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer);
        let took = started.elapsed();
        // Closed at once (not after the 5 s handshake timeout), with at most a TLS alert
        // record (content type 21), never an HTTP response.
        assert!(took < Duration::from_secs(3), "held for {took:?}");
        assert!(
            !answer.starts_with(b"HTTP/"),
            "{:?}",
            String::from_utf8_lossy(&answer)
        );
        assert!(answer.is_empty() || answer[0] == 21, "{answer:?}");
    }
    still_serves(&server, &ca).await;
}
