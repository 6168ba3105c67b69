//! Soak: the real `reload-injector serve` under mixed load for a while — valid reviews of every
//! fixture (each `tests/fixtures/inject` case and `tests/fixtures/reviews` file), bad inputs,
//! reconnects over HTTP/1.1 and HTTP/2, and a kubelet-style certificate rotation every minute
//! (more often in short runs).
//!
//! Once a second the load pauses for a quiet reading of the server's RSS and open descriptors:
//! the clients hold a gate for each request, the reader takes it (requests in flight finish,
//! none starts), waits [`QUIET_MARGIN`], reads, and lets go. The load is otherwise continuous.
//! A reading is thus what the server holds, not what happens to be in flight (a 7 MiB bad
//! input, a handshake). Every 30 s (a sixth of the run when shorter) it prints the median of
//! the window's readings, which is the sample judged, and the error count.
//!
//! The server runs as shipped (the allocator's settings included; a `MIMALLOC_*` variable in
//! the environment reaches it). mimalloc hands freed pages back a second after they are freed,
//! and only when the process next allocates, so single quiet readings still vary with the last
//! second's traffic; the median of a window's readings does not (docs/security.md, "Soak").
//!
//! It passes when no valid request failed, every bad input got its 4xx, RSS and descriptors
//! are flat (`soak_support::verdict`: after warm-up, the last sample within 10% of the first
//! one and the least-squares trend within 10% over the same span) and every rotation was picked
//! up: the metric counts it and new handshakes see the new certificate.
//!
//! `cargo test --test admission local::soak` runs 60 s; `scripts/soak.sh DURATION` runs longer
//! (`RELOAD_INJECTOR_SOAK_SECONDS`).

use crate::soak_support;
use crate::webhook_support;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use http::StatusCode;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use serde_json::{Value, json};
use soak_support::reading::{Reading, cpu_time, median, mib, rss_now};
use soak_support::verdict::{Flatness, NotFlat, Rule, Sample, judge};
use tokio::sync::RwLock;
use webhook_support::client::{Conn, Proto, client_config, peer_cert, tls_stream};
use webhook_support::process::Server;
use webhook_support::{bundle, kubelet_write, review_of_case, scratch};

const DEFAULT_SECONDS: u64 = 60;
/// Once no request is in flight, how long the reader waits for the server to drop the last
/// requests' state. Traced readings did not change between 0 ms and 1.2 s after the gate
/// was taken; this is a margin for connection teardown.
const QUIET_MARGIN: Duration = Duration::from_millis(20);
/// How often the load pauses for a quiet reading; a sample is the median of its window's.
const READ_EVERY: Duration = Duration::from_secs(1);
/// Largest change of RSS or descriptors over the run that still counts as flat.
const TOLERANCE: f64 = 0.10;

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

/// What the clients and the reader share.
#[derive(Default)]
struct Shared {
    stop: AtomicBool,
    /// Held (read) by a client for each request; taken (write) by the reader for a quiet point.
    gate: RwLock<()>,
    counts: Counts,
    failures: std::sync::Mutex<Vec<String>>,
}

/// One client: a connection over `proto`, replaced every `reconnect_every` requests; valid
/// reviews in turn, a bad input every 20th request.
async fn worker(id: usize, addr: SocketAddr, cas: Arc<String>, proto: Proto, shared: Arc<Shared>) {
    let Shared {
        stop,
        gate,
        counts,
        failures,
    } = &*shared;
    let reviews = valid_reviews();
    let bad = bad_inputs();
    let reconnect_every = 50 + 13 * id;
    let mut conn: Option<Conn> = None;
    let mut n = 0usize;
    while !stop.load(Ordering::Relaxed) {
        // Held for the whole request: the sampler takes the gate to read a quiet server.
        let _turn = gate.read().await;
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

/// The server at a quiet point: with the gate taken no request is in flight or starts. Also
/// how long no new request could start (from asking for the gate to letting it go).
async fn quiet_reading(pid: i32, gate: &RwLock<()>) -> (Reading, Duration) {
    let asked = Instant::now();
    let _quiet = gate.write().await;
    tokio::time::sleep(QUIET_MARGIN).await;
    (Reading::of(pid), asked.elapsed())
}

/// One series of the samples, for the verdict.
fn series(samples: &[(Duration, Reading)], value: fn(&Reading) -> f64) -> Vec<Sample> {
    samples
        .iter()
        .map(|(at, r)| Sample {
            at: at.as_secs_f64(),
            value: value(r),
        })
        .collect()
}

fn show(verdict: &Result<Flatness, NotFlat>) -> String {
    match verdict {
        Ok(figures) => format!("flat: {figures}"),
        Err(why) => format!("NOT flat: {why}"),
    }
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
    // Warm-up: at least 30 s and two samples; until then the allocator's working set grows.
    let warm_up = Duration::from_secs(30).max(sample_every * 2);
    let purge_delay =
        std::env::var("MIMALLOC_PURGE_DELAY").unwrap_or_else(|_| "unset (default)".to_owned());

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

    let shared = Arc::new(Shared::default());
    let workers: Vec<_> = (0..4)
        .map(|id| {
            let proto = if id % 2 == 0 { Proto::H1 } else { Proto::H2 };
            tokio::spawn(worker(id, addr, cas.clone(), proto, shared.clone()))
        })
        .collect();
    let Shared {
        stop,
        gate,
        counts,
        failures,
    } = &*shared;

    let started = Instant::now();
    // RSS under load, read every 200 ms between samples: shown beside each quiet reading.
    let mut peak = 0u64;
    // At least five readings per sample.
    let per_sample = (sample_every.as_secs_f64() / READ_EVERY.as_secs_f64()).max(5.0) as u32;
    let read_every = sample_every / per_sample;
    let mut window: Vec<Reading> = Vec::new();
    let mut paused = Duration::ZERO;
    let mut samples: Vec<(Duration, Reading)> = Vec::new();
    let mut next_reading = read_every;
    let mut next_rotation = rotate_every;
    let mut rotated = 0;
    let mut picked_up = Vec::new();
    println!(
        "soak: {seconds}s, a rotation every {rotate_every:?}, a sample every {sample_every:?} \
         (the median of {per_sample} quiet readings), warm-up {warm_up:?}, server pid \
         {pid} with MIMALLOC_PURGE_DELAY={purge_delay}"
    );
    // Until the last sample, which is due at the end of the run.
    let sample_count = (duration.as_secs_f64() / sample_every.as_secs_f64()).round() as usize;
    while samples.len() < sample_count {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = started.elapsed();
        peak = peak.max(rss_now(pid));
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
            let served_after = rotated_at.elapsed();
            let reloads = metric(
                &server,
                r#"reload_injector_cert_reloads_total{result="success"} "#,
            );
            println!(
                "soak: rotation {rotated} served after {served_after:.2?} (cert_reloads_total success {reloads})"
            );
            picked_up.push((seen, reloads, served_after));
        }
        if now >= next_reading {
            next_reading += read_every;
            let (reading, pause) = quiet_reading(pid, gate).await;
            window.push(reading);
            paused += pause;
        }
        if window.len() == per_sample as usize {
            let at = started.elapsed();
            let r = median(&window).expect("a full window");
            let lowest = window.iter().map(|r| r.rss_kib).min().unwrap_or_default();
            let highest = window.iter().map(|r| r.rss_kib).max().unwrap_or_default();
            let failed = counts.valid_failed.load(Ordering::Relaxed)
                + counts.bad_failed.load(Ordering::Relaxed);
            println!(
                "soak: t={:>4}s  rss {} MiB (anon {}, file {}; quiet readings {}-{}, peak under \
                 load {})  fds {}  valid ok {}  bad ok {}  reconnects {}  errors {failed}",
                at.as_secs(),
                mib(r.rss_kib),
                mib(r.anon_kib),
                mib(r.file_kib),
                mib(lowest),
                mib(highest),
                mib(peak),
                r.fds,
                counts.valid_ok.load(Ordering::Relaxed),
                counts.bad_ok.load(Ordering::Relaxed),
                counts.reconnects.load(Ordering::Relaxed),
            );
            samples.push((at, r));
            window.clear();
            peak = 0;
        }
    }
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.await.expect("worker panicked");
    }
    let elapsed = started.elapsed();
    let (end, _) = quiet_reading(pid, gate).await;
    let cpu = cpu_time(pid);
    let (valid_ok, valid_failed, bad_ok, bad_failed) = (
        counts.valid_ok.load(Ordering::Relaxed),
        counts.valid_failed.load(Ordering::Relaxed),
        counts.bad_ok.load(Ordering::Relaxed),
        counts.bad_failed.load(Ordering::Relaxed),
    );
    let slowest = picked_up
        .iter()
        .map(|(_, _, d)| *d)
        .max()
        .unwrap_or_default();
    println!(
        "soak: result after {elapsed:.1?}: {valid_ok} valid ok, {valid_failed} valid failed, \
         {bad_ok} bad inputs refused as expected, {bad_failed} not; {} reconnects; rotations \
         {}/{rotations} picked up (slowest {slowest:.2?}); load paused for readings {paused:.1?} \
         ({:.1}% of the run); server CPU {cpu:.1?} ({:.0} µs per request); after the load \
         (clients gone) rss {} MiB (anon {}), fds {}",
        counts.reconnects.load(Ordering::Relaxed),
        picked_up.iter().filter(|(seen, _, _)| *seen).count(),
        100.0 * paused.as_secs_f64() / elapsed.as_secs_f64(),
        cpu.as_secs_f64() * 1e6 / (valid_ok + bad_ok).max(1) as f64,
        mib(end.rss_kib),
        mib(end.anon_kib),
        end.fds,
    );
    let rule = Rule {
        warm_up: warm_up.as_secs_f64(),
        tolerance: TOLERANCE,
    };
    let rss = judge(&series(&samples, |r| r.rss_kib as f64), rule);
    let fds = judge(&series(&samples, |r| r.fds as f64), rule);
    println!("soak: RSS (KiB) {}", show(&rss));
    println!("soak: fds {}", show(&fds));

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
    assert_eq!(picked_up.len(), rotations, "rotations done");
    for (i, (seen, reloads, _)) in picked_up.iter().enumerate() {
        assert!(seen, "rotation {} was never served", i + 1);
        assert!(
            *reloads >= (i + 1) as f64,
            "rotation {} not counted: cert_reloads_total {reloads}",
            i + 1
        );
    }
    assert!(rss.is_ok(), "RSS {}", show(&rss));
    assert!(fds.is_ok(), "fds {}", show(&fds));
}
