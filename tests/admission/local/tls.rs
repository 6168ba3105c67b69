//! The real `reload-injector serve` binary over real TLS sockets on 127.0.0.1, talked to the
//! way kube-apiserver does: trusting only the webhook's CA, HTTP/1.1 and HTTP/2, keep-alive.

use crate::webhook_support;

use std::time::{Duration, Instant};

use http::StatusCode;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use webhook_support::client::{Conn, Proto, client_config, tls_stream};
use webhook_support::process::Server;
use webhook_support::{
    Scratch, apply_patch, bundle, check_answer, pod_review, pod_review_bytes, scratch,
};

/// Writes a fresh bundle as plain files; returns (dir, CA PEM).
fn plain_files(name: &str) -> (Scratch, String) {
    let dir = scratch(name);
    let b = bundle();
    std::fs::write(dir.join("tls.crt"), &b.cert_pem).unwrap();
    std::fs::write(dir.join("tls.key"), &b.key_pem).unwrap();
    (dir, b.ca_cert_pem)
}

fn start(dir: &std::path::Path, extra: &[&str]) -> Server {
    let mut flags = vec!["--no-kube"];
    flags.extend_from_slice(extra);
    Server::start(&dir.join("tls.crt"), &dir.join("tls.key"), &flags)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apiserver_like_client_gets_patches_over_http1_and_http2() {
    let (dir, ca) = plain_files("protocols");
    let server = start(&dir, &[]);
    for (proto, alpn) in [(Proto::H1, &b"http/1.1"[..]), (Proto::H2, &b"h2"[..])] {
        let mut conn = Conn::connect(server.addr, &ca, proto).await.unwrap();
        assert_eq!(conn.alpn.as_deref(), Some(alpn));
        // Several reviews on one keep-alive connection.
        for i in 0..3 {
            let uid = format!("uid-{proto:?}-{i}");
            let review = pod_review(&uid);
            let answer = conn.review(&review).await;
            let response = check_answer(&answer, &uid);
            assert_eq!(response["allowed"], true);
            assert_eq!(response["patchType"], "JSONPatch");
            let patched = apply_patch(&response, &review["request"]["object"]);
            let pod: Pod = serde_json::from_value(patched).unwrap();
            assert!(
                pod.spec
                    .unwrap()
                    .containers
                    .iter()
                    .any(|c| c.name == "config-reloader")
            );
            assert!(!response["warnings"].as_array().unwrap().is_empty());
        }
    }
    // One debug line per review, with its uid.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !server.log().iter().any(|l| l.contains("uid-H2-2")) {
        assert!(Instant::now() < deadline, "no review log line");
        std::thread::sleep(Duration::from_millis(20));
    }
    let (status, text) = server.side_get("/metrics").unwrap();
    assert_eq!(status, 200);
    assert!(
        text.lines().any(|l| l
            == r#"reload_injector_reviews_total{kind="Pod",operation="CREATE",outcome="patched"} 6"#),
        "{text}"
    );
    assert_eq!(server.side_get("/healthz").unwrap().0, 200);
    assert_eq!(server.side_get("/readyz").unwrap().0, 200);
}

/// A Pod whose containers earn more warnings than kube-apiserver passes on gets those that fit,
/// problems first, and a last line counting the rest, instead of losing the rest unseen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warnings_past_what_the_api_server_shows_end_in_a_count() {
    let (dir, ca) = plain_files("many-warnings");
    let server = start(&dir, &[]);
    let mut review = pod_review("uid-many");
    // Each container reads its own ConfigMap via env: a warning for the use, and one for the
    // hash that cannot be computed without a cluster.
    review["request"]["object"]["spec"]["containers"] = (0..200)
        .map(|i| {
            json!({"name": format!("app-{i}"), "image": "app", "env": [{"name": "X",
                "valueFrom": {"configMapKeyRef": {"name": format!("settings-{i}"), "key": "x"}}}]})
        })
        .collect();
    let mut conn = Conn::connect(server.addr, &ca, Proto::H1).await.unwrap();
    let answer = conn.review(&review).await;
    let response = check_answer(&answer, "uid-many");
    assert_eq!(response["allowed"], true);
    let warnings: Vec<&str> = response["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    let (last, shown) = warnings.split_last().unwrap();
    assert!(shown.len() >= 30, "{warnings:#?}");
    // The hashes that could not be computed come before the notices of what a change does.
    assert_eq!(
        shown[0],
        "reload-injector: container \"app-0\": could not read ConfigMap \"settings-0\" (no \
         Kubernetes API: --no-kube); hash unchanged"
    );
    for line in shown {
        assert!(line.contains(": could not read ConfigMap"), "{line}");
    }
    assert_eq!(
        *last,
        format!(
            "reload-injector: {} more warnings not shown (the API server passes on 4 KiB); \
             `reload-injector inject -f` lists all",
            400 - shown.len()
        )
    );
    let (status, text) = server.side_get("/metrics").unwrap();
    assert_eq!(status, 200);
    let sent = format!("reload_injector_warnings_total {}", warnings.len());
    assert!(text.lines().any(|l| l == sent), "want {sent:?} in {text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_inputs_get_their_4xx_and_the_server_keeps_serving() {
    let (dir, ca) = plain_files("bad-inputs");
    let server = start(&dir, &[]);
    let good = pod_review_bytes("uid-good");
    let cases: Vec<(&str, Option<&str>, Vec<u8>, StatusCode)> = vec![
        (
            "not JSON",
            Some("application/json"),
            b"{nope".to_vec(),
            StatusCode::BAD_REQUEST,
        ),
        (
            "empty body",
            Some("application/json"),
            vec![],
            StatusCode::BAD_REQUEST,
        ),
        (
            "JSON array",
            Some("application/json"),
            b"[]".to_vec(),
            StatusCode::BAD_REQUEST,
        ),
        (
            "wrong apiVersion",
            Some("application/json"),
            serde_json::to_vec(
                &json!({"apiVersion": "v1", "kind": "AdmissionReview", "request": {"uid": "u"}}),
            )
            .unwrap(),
            StatusCode::BAD_REQUEST,
        ),
        (
            "deeply nested",
            Some("application/json"),
            "[".repeat(10_000).into_bytes(),
            StatusCode::BAD_REQUEST,
        ),
        (
            "wrong content type",
            Some("text/plain"),
            good.clone(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
        ),
        (
            "7 MiB",
            Some("application/json"),
            vec![b' '; 7 << 20],
            StatusCode::PAYLOAD_TOO_LARGE,
        ),
    ];
    for proto in [Proto::H1, Proto::H2] {
        let mut keep = Conn::connect(server.addr, &ca, proto).await.unwrap();
        for (name, ct, body, expected) in &cases {
            let mut conn = Conn::connect(server.addr, &ca, proto).await.unwrap();
            let (status, text) = conn.post(*ct, body.clone()).await.unwrap_or_else(|e| {
                panic!("{name} over {proto:?}: no answer: {e}");
            });
            assert_eq!(status, *expected, "{name} over {proto:?}: {text:?}");
            assert!(
                String::from_utf8_lossy(&text).starts_with("failed to"),
                "{name}: {text:?}"
            );
            // The server still answers, on a connection that was open all along.
            let answer = keep
                .review(&serde_json::from_slice::<Value>(&good).unwrap())
                .await;
            check_answer(&answer, "uid-good");
        }
    }
    // An object it cannot understand: HTTP 200, allowed false, uid echoed.
    let mut review = pod_review("uid-garbage");
    review["request"]["object"] = json!("garbage");
    let mut conn = Conn::connect(server.addr, &ca, Proto::H2).await.unwrap();
    let response = check_answer(&conn.review(&review).await, "uid-garbage");
    assert_eq!(response["allowed"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http1_headers_that_do_not_fit_the_read_buffer_get_431() {
    let (dir, ca) = plain_files("header-size");
    let server = start(&dir, &[]);
    let body = pod_review_bytes("uid-headers");
    // 32 KiB of headers fit the 64 KiB read buffer. hyper checks the buffer's length before
    // each read of at most 64 KiB, so a head is refused for sure past 128 KiB; 256 KiB would
    // fit hyper's default buffer (about 400 KiB).
    for (padding, expected) in [(32 << 10, 200), (256 << 10, 431)] {
        let mut stream = tls_stream(server.addr, client_config(&ca, Proto::H1))
            .await
            .unwrap();
        let head = format!(
            "POST /mutate HTTP/1.1\r\nHost: reload-injector\r\nX-Padding: {}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            "a".repeat(padding),
            body.len()
        );
        // The server may answer and close before reading it all; only the answer counts.
        let _ = stream.write_all(head.as_bytes()).await;
        let _ = stream.write_all(&body).await;
        let _ = stream.flush().await;
        let (status, _) = read_response(&mut stream).await;
        assert_eq!(status, expected, "{padding} bytes of header");
    }
}

/// Reads one HTTP/1.1 response (headers + Content-Length body) from a raw stream.
async fn read_response(stream: &mut (impl AsyncReadExt + Unpin)) -> (u16, Vec<u8>) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let n = stream.read(&mut chunk).await.unwrap();
        assert!(n > 0, "connection closed before a full response: {buf:?}");
        buf.extend_from_slice(&chunk[..n]);
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
        let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .map(|v| v.trim().parse().unwrap())
            .unwrap_or(0);
        if buf.len() >= end + 4 + length {
            return (status, buf[end + 4..end + 4 + length].to_vec());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_completes_the_request_in_flight_and_exits_zero() {
    let (dir, ca) = plain_files("sigterm");
    let mut server = start(&dir, &["--drain-timeout", "20s"]);
    let body = pod_review_bytes("uid-in-flight");
    let mut stream = tls_stream(server.addr, client_config(&ca, Proto::H1))
        .await
        .unwrap();
    // `Expect: 100-continue`: the server answers "100 Continue" when the handler starts
    // reading the body, so the request is provably in flight before SIGTERM is sent.
    let head = format!(
        "POST /mutate HTTP/1.1\r\nHost: reload-injector.reload-injector.svc\r\nContent-Type: application/json\r\nContent-Length: {}\r\nExpect: 100-continue\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.flush().await.unwrap();
    let mut interim = Vec::new();
    while !interim.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        assert_eq!(
            stream.read(&mut byte).await.unwrap(),
            1,
            "closed before 100 Continue"
        );
        interim.push(byte[0]);
    }
    assert!(
        interim.starts_with(b"HTTP/1.1 100"),
        "{}",
        String::from_utf8_lossy(&interim)
    );
    stream.write_all(&body[..body.len() / 2]).await.unwrap();
    stream.flush().await.unwrap();

    server.terminate();
    // Shutdown has begun once /readyz turns 503 (the side port serves until the drain ends).
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.side_get("/readyz").map(|r| r.0).unwrap_or(0) != 503 {
        assert!(
            Instant::now() < deadline,
            "readyz never went 503 after SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // New connections are refused while the old one drains.
    let deadline = Instant::now() + Duration::from_secs(10);
    while tokio::net::TcpStream::connect(server.addr).await.is_ok() {
        assert!(Instant::now() < deadline, "still accepting after SIGTERM");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        server.wait_exit(Duration::from_millis(300)).is_none(),
        "exited with a request in flight"
    );

    stream.write_all(&body[body.len() / 2..]).await.unwrap();
    stream.flush().await.unwrap();
    let (status, answer) = read_response(&mut stream).await;
    assert_eq!(status, 200);
    check_answer(&serde_json::from_slice(&answer).unwrap(), "uid-in-flight");
    drop(stream);

    let status = server
        .wait_exit(Duration::from_secs(15))
        .expect("did not exit after draining");
    assert!(status.success(), "{status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_gives_up_after_the_drain_timeout() {
    let (dir, ca) = plain_files("drain-bound");
    let mut server = start(&dir, &["--drain-timeout", "2s"]);
    let mut stream = tls_stream(server.addr, client_config(&ca, Proto::H1))
        .await
        .unwrap();
    // A request whose body never finishes (the server's own body timeout is 10 s), provably
    // in flight (100 Continue).
    stream
        .write_all(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\nExpect: 100-continue\r\n\r\n")
        .await
        .unwrap();
    stream.flush().await.unwrap();
    let mut interim = [0u8; 12];
    stream.read_exact(&mut interim).await.unwrap();
    assert_eq!(&interim, b"HTTP/1.1 100");
    stream.write_all(b"{").await.unwrap();
    stream.flush().await.unwrap();
    let started = Instant::now();
    server.terminate();
    // Still draining well before the 2 s bound …
    assert!(
        server.wait_exit(Duration::from_millis(500)).is_none(),
        "gave up on the request before the drain timeout"
    );
    // … and gone well before the request's own 10 s body timeout.
    let status = server
        .wait_exit(Duration::from_secs(8))
        .expect("did not exit within the drain bound");
    assert!(status.success(), "{status:?}");
    assert!(started.elapsed() < Duration::from_secs(9));
    drop(stream);
}

#[test]
fn bad_tls_material_fails_fast_with_a_clear_error() {
    let dir = scratch("bad-material");
    let a = bundle();
    let b = bundle();
    std::fs::write(dir.join("garbage.crt"), "not a certificate").unwrap();
    std::fs::write(dir.join("a.crt"), &a.cert_pem).unwrap();
    std::fs::write(dir.join("b.key"), &b.key_pem).unwrap();
    for (cert, key, expected) in [
        ("garbage.crt", "b.key", "failed to find a certificate"),
        ("a.crt", "b.key", "failed to match the private key"),
        ("a.crt", "missing.key", "missing.key"),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_reload-injector"))
            .args(["serve", "--no-kube", "--listen", "127.0.0.1:0"])
            .args(["--metrics-listen", "127.0.0.1:0"])
            .arg("--tls-cert")
            .arg(dir.join(cert))
            .arg("--tls-key")
            .arg(dir.join(key))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains("failed to load the serving certificate"),
            "{stderr}"
        );
        assert!(stderr.contains(expected), "{stderr}");
        assert!(
            !stderr.contains("serving admission reviews"),
            "bound before failing: {stderr}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn info_level_logs_nothing_per_review() {
    let (dir, ca) = plain_files("quiet");
    let mut server = Server::start_logging(
        "info",
        &dir.join("tls.crt"),
        &dir.join("tls.key"),
        &["--no-kube"],
    );
    let mut conn = Conn::connect(server.addr, &ca, Proto::H2).await.unwrap();
    for i in 0..20 {
        check_answer(
            &conn.review(&pod_review(&format!("quiet-{i}"))).await,
            &format!("quiet-{i}"),
        );
    }
    let before = server.log().len();
    server.terminate();
    assert!(server.wait_exit(Duration::from_secs(15)).is_some());
    let log = server.log();
    assert!(log.len() > before, "shutdown is logged at info: {log:?}");
    assert!(
        !log.iter().any(|l| l.contains("quiet-")),
        "a review was logged at info: {log:?}"
    );
    assert!(log.len() < 12, "too chatty at info: {log:?}");
}

#[test]
fn without_a_cluster_serve_says_to_pass_no_kube() {
    let (dir, _) = plain_files("no-cluster");
    let home = scratch("no-cluster-home");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_reload-injector"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--metrics-listen",
            "127.0.0.1:0",
        ])
        .arg("--tls-cert")
        .arg(dir.join("tls.crt"))
        .arg("--tls-key")
        .arg(dir.join("tls.key"))
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .env_remove("RELOAD_INJECTOR_NO_KUBE")
        .env("HOME", &home)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("failed to configure the Kubernetes client"),
        "{stderr}"
    );
    assert!(stderr.contains("--no-kube"), "{stderr}");
}
