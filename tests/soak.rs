//! Soak: the real `reload-injector serve` under mixed load for a while — valid reviews of every
//! fixture (each `tests/fixtures/inject` case and `tests/fixtures/reviews` file), bad inputs,
//! reconnects over HTTP/1.1 and HTTP/2, and a kubelet-style certificate rotation every minute
//! (more often in short runs). Every 30 s (more often in short runs) it prints the server's
//! RSS, open descriptors and the error count.
//!
//! It passes when no valid request failed, RSS and descriptors are flat (the last sample at most
//! 10% above the first one after warm-up, 50% for runs under five minutes; an RSS sample is the
//! lowest reading of its window) and every rotation was picked up: the metric counts it
//! and new handshakes see the new certificate.
//!
//! `cargo test --test soak` runs 60 s; `scripts/soak.sh DURATION` runs longer
//! (`RELOAD_INJECTOR_SOAK_SECONDS`).

mod webhook_support;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use http::StatusCode;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use serde_json::{Value, json};
use webhook_support::client::{Conn, Proto, client_config, peer_cert, tls_stream};
use webhook_support::load::{open_fds, rss_kib};
use webhook_support::process::Server;
use webhook_support::{bundle, kubelet_write, review_of_case, scratch};

const DEFAULT_SECONDS: u64 = 60;

/// Every valid review the soak sends: (name, review without uid).
fn valid_reviews() -> Vec<(String, Value)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut out = Vec::new();
    let mut cases: Vec<_> = std::fs::read_dir(root.join("inject"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_str().unwrap();
            name.ends_with(".yaml") && !name.ends_with(".golden.yaml")
        })
        .collect();
    cases.sort();
    for path in cases {
        let text = std::fs::read_to_string(&path).unwrap();
        let case: Value = serde_saphyr::from_str(&text).unwrap();
        let name = path.file_stem().unwrap().to_str().unwrap().to_owned();
        out.push((name, review_of_case(&case)));
    }
    for entry in std::fs::read_dir(root.join("reviews")).unwrap() {
        let path = entry.unwrap().path();
        let review: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        out.push((
            path.file_name().unwrap().to_str().unwrap().to_owned(),
            review,
        ));
    }
    assert!(out.len() > 40, "only {} fixtures found", out.len());
    out
}

/// Bad inputs and the status each must get.
fn bad_inputs() -> Vec<(&'static str, Option<&'static str>, Vec<u8>, u16)> {
    vec![
        (
            "not json",
            Some("application/json"),
            b"{not json".to_vec(),
            400,
        ),
        ("no content type", None, b"{}".to_vec(), 415),
        (
            "wrong content type",
            Some("text/yaml"),
            b"a: b".to_vec(),
            415,
        ),
        (
            "wrong kind",
            Some("application/json"),
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"Pod","request":{"uid":"x"}}"#.to_vec(),
            400,
        ),
        (
            "too large",
            Some("application/json"),
            vec![b' '; 7 * 1024 * 1024],
            413,
        ),
    ]
}

#[derive(Default)]
struct Counts {
    valid_ok: AtomicU64,
    valid_failed: AtomicU64,
    bad_ok: AtomicU64,
    bad_failed: AtomicU64,
    reconnects: AtomicU64,
}

/// One client: a connection over `proto`, replaced every `reconnect_every` requests; valid
/// reviews in turn, a bad input every 20th request.
async fn worker(
    id: usize,
    addr: SocketAddr,
    cas: Arc<String>,
    proto: Proto,
    stop: Arc<AtomicBool>,
    counts: Arc<Counts>,
    failures: Arc<std::sync::Mutex<Vec<String>>>,
) {
    let reviews = valid_reviews();
    let bad = bad_inputs();
    let reconnect_every = 50 + 13 * id;
    let mut conn: Option<Conn> = None;
    let mut n = 0usize;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        if conn.is_none() || n.is_multiple_of(reconnect_every) {
            match Conn::connect(addr, &cas, proto).await {
                Ok(c) => conn = Some(c),
                Err(err) => {
                    counts.valid_failed.fetch_add(1, Ordering::Relaxed);
                    failures.lock().unwrap().push(format!("connect: {err}"));
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            }
            counts.reconnects.fetch_add(1, Ordering::Relaxed);
        }
        let c = conn.as_mut().unwrap();
        if n.is_multiple_of(20) {
            let (what, content_type, body, want) = &bad[(n / 20) % bad.len()];
            match c.post(*content_type, body.clone()).await {
                Ok((status, _)) if status.as_u16() == *want => {
                    counts.bad_ok.fetch_add(1, Ordering::Relaxed);
                }
                other => {
                    counts.bad_failed.fetch_add(1, Ordering::Relaxed);
                    failures
                        .lock()
                        .unwrap()
                        .push(format!("{what}: wanted {want}, got {other:?}"));
                    conn = None;
                }
            }
            continue;
        }
        let (name, review) = &reviews[(n + id) % reviews.len()];
        let uid = format!("soak-{id}-{n}");
        let mut review = review.clone();
        review["request"]["uid"] = json!(uid);
        let body = serde_json::to_vec(&review).unwrap();
        let result = c.post(Some("application/json"), body).await;
        let problem = match result {
            Ok((StatusCode::OK, bytes)) => match serde_json::from_slice::<Value>(&bytes) {
                Ok(answer)
                    if answer["kind"] == "AdmissionReview"
                        && answer["response"]["uid"] == uid.as_str()
                        && answer["response"]["allowed"].is_boolean() =>
                {
                    None
                }
                _ => Some(format!(
                    "{name}: bad answer {}",
                    String::from_utf8_lossy(&bytes)
                )),
            },
            Ok((status, bytes)) => Some(format!(
                "{name}: HTTP {status}: {}",
                String::from_utf8_lossy(&bytes)
            )),
            Err(err) => {
                conn = None;
                Some(format!("{name}: {err}"))
            }
        };
        match problem {
            None => counts.valid_ok.fetch_add(1, Ordering::Relaxed),
            Some(problem) => {
                failures.lock().unwrap().push(problem);
                counts.valid_failed.fetch_add(1, Ordering::Relaxed)
            }
        };
    }
}

/// Several readings a moment apart, the smallest: connections being replaced at the instant
/// of a single reading would count twice.
async fn settled_sample(pid: i32) -> (u64, usize) {
    let mut fds = usize::MAX;
    for _ in 0..5 {
        fds = fds.min(open_fds(pid));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (rss_kib(pid).0, fds)
}

fn der(pem: &str) -> Vec<u8> {
    CertificateDer::from_pem_slice(pem.as_bytes())
        .unwrap()
        .to_vec()
}

fn metric(server: &Server, series: &str) -> f64 {
    let (_, text) = server.side_get("/metrics").unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(series))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak() {
    let seconds: u64 = std::env::var("RELOAD_INJECTOR_SOAK_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_SECONDS);
    let duration = Duration::from_secs(seconds);
    // A rotation every minute and a sample every 30 s; short runs scale both down.
    let rotate_every = Duration::from_secs(60).min(duration / 4);
    let sample_every = Duration::from_secs(30).min(duration / 6);
    let rotations = (duration.as_secs() / rotate_every.as_secs()) as usize;

    let dir = scratch("soak");
    let bundles: Vec<_> = (0..=rotations).map(|_| bundle()).collect();
    let cas: String = bundles.iter().map(|b| b.ca_cert_pem.as_str()).collect();
    let cas = Arc::new(cas);
    let stamp = |i: usize| format!("2026_11_23_00_00_{i:02}.1");
    kubelet_write(&dir, &stamp(0), &bundles[0].cert_pem, &bundles[0].key_pem);
    let server = Server::start_logging(
        "info",
        &dir.join("tls.crt"),
        &dir.join("tls.key"),
        &["--no-kube"],
    );
    let (addr, pid) = (server.addr, server.pid());

    let stop = Arc::new(AtomicBool::new(false));
    let counts = Arc::new(Counts::default());
    let failures = Arc::new(std::sync::Mutex::new(Vec::new()));
    let workers: Vec<_> = (0..4)
        .map(|id| {
            let proto = if id % 2 == 0 { Proto::H1 } else { Proto::H2 };
            tokio::spawn(worker(
                id,
                addr,
                cas.clone(),
                proto,
                stop.clone(),
                counts.clone(),
                failures.clone(),
            ))
        })
        .collect();

    let started = Instant::now();
    // RSS swings with whatever is in flight at the instant of a reading (a 7 MiB bad input,
    // the allocator's retained pages); a leak raises the floor. Each sample is the lowest
    // reading of its window (read every 200 ms), with the highest beside it.
    let (mut floor, mut peak) = (u64::MAX, 0u64);
    let mut samples: Vec<(Duration, u64, usize)> = Vec::new();
    let mut next_sample = sample_every;
    let mut next_rotation = rotate_every;
    let mut rotated = 0;
    let mut picked_up = Vec::new();
    println!(
        "soak: {seconds}s, a rotation every {rotate_every:?}, a sample every {sample_every:?}"
    );
    while started.elapsed() < duration {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = started.elapsed();
        let rss_now = rss_kib(pid).0;
        floor = floor.min(rss_now);
        peak = peak.max(rss_now);
        if now >= next_rotation && rotated < rotations {
            rotated += 1;
            next_rotation += rotate_every;
            let b = &bundles[rotated];
            kubelet_write(&dir, &stamp(rotated), &b.cert_pem, &b.key_pem);
            // The kubelet removes the previous version once `..data` points at the new one.
            let _ = std::fs::remove_dir_all(dir.join(format!("..{}", stamp(rotated - 1))));
            let rotated_at = Instant::now();
            let want = der(&b.cert_pem);
            let mut seen = false;
            while rotated_at.elapsed() < Duration::from_secs(15) {
                let stream = tls_stream(addr, client_config(&cas, Proto::H1)).await;
                if stream.is_ok_and(|s| peer_cert(&s) == want) {
                    seen = true;
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let reloads = metric(
                &server,
                r#"reload_injector_cert_reloads_total{result="success"} "#,
            );
            println!(
                "soak: rotation {rotated} served after {:?} (cert_reloads_total success {reloads})",
                rotated_at.elapsed()
            );
            picked_up.push((seen, reloads));
        }
        if now >= next_sample {
            next_sample += sample_every;
            let (rss, fds) = settled_sample(pid).await;
            let rss = floor.min(rss);
            let failed = counts.valid_failed.load(Ordering::Relaxed)
                + counts.bad_failed.load(Ordering::Relaxed);
            println!(
                "soak: t={:>4}s rss={rss} KiB (window peak {peak} KiB) fds={fds} valid_ok={} bad_ok={} reconnects={} errors={failed}",
                now.as_secs(),
                counts.valid_ok.load(Ordering::Relaxed),
                counts.bad_ok.load(Ordering::Relaxed),
                counts.reconnects.load(Ordering::Relaxed),
            );
            samples.push((now, rss, fds));
            (floor, peak) = (u64::MAX, 0);
        }
    }
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.await.expect("worker panicked");
    }
    let (rss_end, fds_end) = settled_sample(pid).await;
    let (valid_ok, valid_failed, bad_ok, bad_failed) = (
        counts.valid_ok.load(Ordering::Relaxed),
        counts.valid_failed.load(Ordering::Relaxed),
        counts.bad_ok.load(Ordering::Relaxed),
        counts.bad_failed.load(Ordering::Relaxed),
    );
    // Warm-up: at least 30 s and two windows; until then the allocator's working set grows.
    let warm_up = Duration::from_secs(30).max(sample_every * 2);
    let warm = samples
        .iter()
        .copied()
        .find(|(t, _, _)| *t >= warm_up)
        .expect("no sample after warm-up");
    assert!(samples.len() >= 3, "only {} samples", samples.len());
    let last = samples.last().copied().unwrap();
    println!(
        "soak: result after {:?}: {valid_ok} valid ok, {valid_failed} valid failed, {bad_ok} bad \
         inputs refused as expected, {bad_failed} not; {} reconnects; rotations {}/{rotations} \
         picked up; RSS {} KiB after warm-up (t={}s) -> {} KiB last sample -> {rss_end} KiB \
         after the load; fds {} -> {} -> {fds_end}",
        started.elapsed(),
        counts.reconnects.load(Ordering::Relaxed),
        picked_up.iter().filter(|(seen, _)| *seen).count(),
        warm.1,
        warm.0.as_secs(),
        last.1,
        warm.2,
        last.2,
    );
    let failures = failures.lock().unwrap();
    assert_eq!(
        valid_failed,
        0,
        "valid requests failed: {:?}",
        &failures[..failures.len().min(10)]
    );
    assert_eq!(
        bad_failed,
        0,
        "bad inputs mishandled: {:?}",
        &failures[..failures.len().min(10)]
    );
    assert!(valid_ok > 100, "only {valid_ok} valid reviews");
    // A leak shows as growth; memory given back to the system is not one. A run shorter than
    // five minutes is still inside the allocator's warm-up (RSS floors of a 60 s debug run
    // wander by ±15%), so it only catches gross growth; the long run holds to 10%.
    let tolerance = if duration >= Duration::from_secs(300) {
        1.10
    } else {
        1.50
    };
    let within = |a: f64, b: f64| b <= a * tolerance;
    assert!(
        within(warm.1 as f64, last.1 as f64),
        "RSS not flat: {} KiB -> {} KiB",
        warm.1,
        last.1
    );
    assert!(
        within(warm.2 as f64, last.2 as f64),
        "fds not flat: {} -> {}",
        warm.2,
        last.2
    );
    assert_eq!(picked_up.len(), rotations, "rotations done");
    for (i, (seen, reloads)) in picked_up.iter().enumerate() {
        assert!(seen, "rotation {} was never served", i + 1);
        assert!(
            *reloads >= (i + 1) as f64,
            "rotation {} not counted: cert_reloads_total {reloads}",
            i + 1
        );
    }
}
