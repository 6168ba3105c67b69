//! Abusive clients against the real `reload-injector serve` over TLS on 127.0.0.1: idle
//! connections, headers one byte per second, a handshake flood, and many 6 MiB bodies. While
//! each runs, a steady well-behaved client (one keep-alive connection, like kube-apiserver)
//! must see no error and a bounded p99, and the server's memory and descriptors stay bounded.
//!
//! Every load loop is bounded in count and in time. The tests take turns (one lock), since
//! they measure latency on a shared machine.

use crate::webhook_support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use webhook_support::client::{Conn, Proto, client_config, tls_stream};
use webhook_support::load::{Steady, open_fds, raise_fd_limit, rss_kib, steady_client};
use webhook_support::process::Server;
use webhook_support::{Scratch, bundle, scratch};

/// The webhook's timeout is 10 s; the steady client's p99 must stay well below it, even on a
/// shared two-core machine running a debug build and the attacking client.
const P99_BOUND: Duration = Duration::from_secs(5);

/// Short timeouts so that abusive clients are cut off quickly.
const SHORT_TIMEOUTS: [&str; 6] = [
    "--handshake-timeout",
    "1s",
    "--header-read-timeout",
    "2s",
    "--body-read-timeout",
    "3s",
];

static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Starts `serve --no-kube` with `flags` (all the limits the test wants); its TLS files are in
/// the scratch directory returned, removed when that is dropped.
fn start(name: &str, flags: &[&str]) -> (Server, String, Scratch) {
    raise_fd_limit(8192);
    let dir = scratch(name);
    let b = bundle();
    std::fs::write(dir.join("tls.crt"), &b.cert_pem).unwrap();
    std::fs::write(dir.join("tls.key"), &b.key_pem).unwrap();
    let mut all = vec!["--no-kube"];
    all.extend_from_slice(flags);
    // Info level: a debug line per review would be the bottleneck, not the server.
    let server = Server::start_logging("info", &dir.join("tls.crt"), &dir.join("tls.key"), &all);
    (server, b.ca_cert_pem, dir)
}

/// The steady client, started before the abuse.
struct Witness {
    stop: Arc<AtomicBool>,
    task: JoinHandle<Steady>,
}

impl Witness {
    async fn start(addr: SocketAddr, ca: &str) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn(steady_client(
            addr,
            ca.to_owned(),
            Duration::from_millis(20),
            stop.clone(),
        ));
        // Let it establish its connection and answer a few reviews first.
        tokio::time::sleep(Duration::from_millis(500)).await;
        Self { stop, task }
    }

    async fn finish(self, what: &str) -> Steady {
        self.stop.store(true, Ordering::Relaxed);
        let seen = self.task.await.expect("steady client panicked");
        eprintln!("{what}: {}", seen.summary());
        assert!(seen.errors.is_empty(), "{what}: {:?}", seen.errors);
        assert!(seen.ok >= 20, "{what}: only {} reviews answered", seen.ok);
        assert!(
            seen.quantile(0.99) < P99_BOUND,
            "{what}: p99 {:?} (bound {P99_BOUND:?})",
            seen.quantile(0.99)
        );
        seen
    }
}

/// Waits until the server holds at most `fds` descriptors, or `limit` passes; returns the last
/// count.
async fn settle_fds(pid: i32, fds: usize, limit: Duration) -> usize {
    let deadline = Instant::now() + limit;
    loop {
        let now = open_fds(pid);
        if now <= fds || Instant::now() >= deadline {
            return now;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Reads until EOF or error; returns how long the server took to close, or `None` if it was
/// still open after `limit`.
async fn closed_within<R: AsyncReadExt + Unpin>(
    reader: &mut R,
    limit: Duration,
) -> Option<Duration> {
    let started = Instant::now();
    let mut buf = [0u8; 1024];
    let read_all = async {
        loop {
            match reader.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(limit, read_all)
        .await
        .ok()
        .map(|()| started.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_idle_connections_are_cut_off_by_the_handshake_timeout() {
    let _turn = TURN.lock().await;
    let (server, ca, _dir) = start("abuse-idle", &SHORT_TIMEOUTS);
    let pid = server.pid();
    let baseline_fds = open_fds(pid);
    let witness = Witness::start(server.addr, &ca).await;

    let mut idle = Vec::new();
    for _ in 0..1000 {
        idle.push(TcpStream::connect(server.addr).await.expect("connect"));
    }
    let held = open_fds(pid);
    eprintln!("idle: server fds {baseline_fds} before, {held} with 1000 idle clients");
    // Every one is closed by the server within the handshake timeout (1s) plus slack.
    let closes: Vec<_> = idle
        .into_iter()
        .map(|mut stream| {
            tokio::spawn(async move { closed_within(&mut stream, Duration::from_secs(10)).await })
        })
        .collect();
    let mut slowest = Duration::ZERO;
    for close in closes {
        let took = close
            .await
            .unwrap()
            .expect("an idle connection was never closed");
        slowest = slowest.max(took);
    }
    eprintln!("idle: the last idle connection was closed after {slowest:?}");
    let after = settle_fds(pid, baseline_fds + 4, Duration::from_secs(5)).await;
    witness.finish("idle").await;
    assert!(after <= baseline_fds + 4, "fds {baseline_fds} -> {after}");
    let (rss, peak) = rss_kib(pid);
    eprintln!("idle: RSS {rss} KiB, peak {peak} KiB");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_connections_that_never_send_a_request_are_cut_off() {
    let _turn = TURN.lock().await;
    let (server, ca, _dir) = start("abuse-idle-h2", &SHORT_TIMEOUTS);
    let (addr, pid) = (server.addr, server.pid());
    let baseline_fds = open_fds(pid);
    let witness = Witness::start(addr, &ca).await;
    let config = client_config(&ca, Proto::H2);
    let mut idle = Vec::new();
    for _ in 0..200 {
        let stream = tls_stream(addr, config.clone()).await.expect("handshake");
        assert_eq!(stream.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
        idle.push(stream);
    }
    let closes: Vec<_> = idle
        .into_iter()
        .map(|mut stream| {
            tokio::spawn(async move { closed_within(&mut stream, Duration::from_secs(10)).await })
        })
        .collect();
    let mut slowest = Duration::ZERO;
    for close in closes {
        let took = close
            .await
            .unwrap()
            .expect("an idle HTTP/2 connection was never closed");
        slowest = slowest.max(took);
    }
    eprintln!("idle h2: the last of 200 silent HTTP/2 connections was closed after {slowest:?}");
    let after = settle_fds(pid, baseline_fds + 4, Duration::from_secs(5)).await;
    witness.finish("idle h2").await;
    assert!(after <= baseline_fds + 4, "fds {baseline_fds} -> {after}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_byte_per_second_headers_are_cut_off_by_the_header_timeout() {
    let _turn = TURN.lock().await;
    let (server, ca, _dir) = start(
        "abuse-slow-headers",
        &["--handshake-timeout", "2s", "--header-read-timeout", "4s"],
    );
    let (addr, pid) = (server.addr, server.pid());
    let baseline_fds = open_fds(pid);
    let witness = Witness::start(addr, &ca).await;

    let config = client_config(&ca, Proto::H1);
    let request =
        b"POST /mutate HTTP/1.1\r\nHost: reload-injector\r\nContent-Type: application/json\r\n";
    // At most 50 handshakes at a time; the slow clients themselves all overlap.
    let handshakes = Arc::new(tokio::sync::Semaphore::new(50));
    let connected = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let mut clients = Vec::new();
    for _ in 0..1000 {
        let (config, handshakes) = (config.clone(), handshakes.clone());
        let (connected, peak) = (connected.clone(), peak.clone());
        clients.push(tokio::spawn(async move {
            let permit = handshakes.acquire_owned().await.unwrap();
            let mut tls = tls_stream(addr, config).await.expect("handshake");
            drop(permit);
            let now = connected.fetch_add(1, Ordering::Relaxed) + 1;
            peak.fetch_max(now, Ordering::Relaxed);
            let opened = Instant::now();
            let mut cut_off = false;
            for byte in request {
                if tls.write_all(&[*byte]).await.is_err() || tls.flush().await.is_err() {
                    cut_off = true;
                    break;
                }
                // One byte per second; anything read (EOF, an error, a 408) means the server
                // ended the request.
                let mut buf = [0u8; 512];
                if tokio::time::timeout(Duration::from_secs(1), tls.read(&mut buf))
                    .await
                    .is_ok()
                {
                    cut_off = true;
                    break;
                }
            }
            connected.fetch_sub(1, Ordering::Relaxed);
            (cut_off, opened.elapsed())
        }));
    }
    let mut slowest = Duration::ZERO;
    for client in clients {
        let (cut_off, took) = client.await.expect("slow client");
        assert!(cut_off, "a slow client sent its whole header over {took:?}");
        slowest = slowest.max(took);
    }
    eprintln!(
        "slow headers: up to {} slow clients connected at once; the last was cut off {slowest:?} \
         after its handshake",
        peak.load(Ordering::Relaxed)
    );
    assert!(
        slowest < Duration::from_secs(8),
        "header timeout is 4s, took {slowest:?}"
    );
    assert!(
        peak.load(Ordering::Relaxed) >= 200,
        "the slow clients did not overlap"
    );
    let after = settle_fds(pid, baseline_fds + 4, Duration::from_secs(5)).await;
    witness.finish("slow headers").await;
    assert!(after <= baseline_fds + 4, "fds {baseline_fds} -> {after}");
    let (rss, peak) = rss_kib(pid);
    eprintln!("slow headers: RSS {rss} KiB, peak {peak} KiB");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handshake_flood_of_500_per_second_leaves_the_steady_client_alone() {
    let _turn = TURN.lock().await;
    let (server, ca, _dir) = start("abuse-flood", &["--handshake-timeout", "3s"]);
    let (addr, pid) = (server.addr, server.pid());
    let baseline_fds = open_fds(pid);
    let witness = Witness::start(addr, &ca).await;

    let config = client_config(&ca, Proto::H1);
    let (done, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let in_flight = Arc::new(tokio::sync::Semaphore::new(1000));
    let mut tick = tokio::time::interval(Duration::from_millis(2));
    let started = Instant::now();
    let mut launched = 0;
    // 500 new connections per second for 4 s: 2,000 handshakes.
    while launched < 2000 && started.elapsed() < Duration::from_secs(8) {
        tick.tick().await;
        let Ok(permit) = in_flight.clone().try_acquire_owned() else {
            continue;
        };
        launched += 1;
        let (config, done, failed) = (config.clone(), done.clone(), failed.clone());
        tokio::spawn(async move {
            match tokio::time::timeout(Duration::from_secs(5), tls_stream(addr, config)).await {
                Ok(Ok(_tls)) => done.fetch_add(1, Ordering::Relaxed),
                _ => failed.fetch_add(1, Ordering::Relaxed),
            };
            drop(permit);
        });
    }
    let launching = started.elapsed();
    let _ = in_flight.acquire_many(1000).await.unwrap();
    let elapsed = started.elapsed();
    let (done, failed) = (done.load(Ordering::Relaxed), failed.load(Ordering::Relaxed));
    eprintln!(
        "flood: {launched} connections launched in {launching:?}, {done} handshakes completed \
         and {failed} failed in {elapsed:?} ({:.0}/s)",
        done as f64 / elapsed.as_secs_f64()
    );
    let after = settle_fds(pid, baseline_fds + 4, Duration::from_secs(5)).await;
    witness.finish("flood").await;
    assert_eq!(launched, 2000);
    // Handshakes queued longer than the handshake timeout are shed; most complete.
    assert!(done >= 1000, "{done} of {launched} handshakes completed");
    assert!(after <= baseline_fds + 4, "fds {baseline_fds} -> {after}");
    let (rss, peak) = rss_kib(pid);
    eprintln!("flood: RSS {rss} KiB, peak {peak} KiB");
}

/// A valid Pod review of `size` bytes: the realistic Pod with a long annotation.
fn big_review(uid: &str, size: usize) -> Vec<u8> {
    let mut review = webhook_support::pod_review(uid);
    review["request"]["object"]["metadata"]["annotations"]["example.test/padding"] =
        serde_json::json!("");
    let base = serde_json::to_vec(&review).unwrap().len();
    review["request"]["object"]["metadata"]["annotations"]["example.test/padding"] =
        serde_json::json!("x".repeat(size - base));
    let bytes = serde_json::to_vec(&review).unwrap();
    assert_eq!(bytes.len(), size);
    bytes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_concurrent_6_mib_bodies_stay_within_the_body_budget() {
    let _turn = TURN.lock().await;
    let budget_mib = 24;
    let budget = format!("{budget_mib}Mi");
    let mut flags = SHORT_TIMEOUTS.to_vec();
    // Long enough for a queued body to get its turn on a slow machine.
    flags[5] = "10s";
    flags.extend_from_slice(&["--max-inflight-body-bytes", &budget]);
    let (server, ca, _dir) = start("abuse-bodies", &flags);
    let (addr, pid) = (server.addr, server.pid());
    let (rss_before, _) = rss_kib(pid);
    let witness = Witness::start(addr, &ca).await;

    let size = 6 * 1024 * 1024;
    let body = big_review("big", size);
    let started = Instant::now();
    let senders: Vec<_> = (0..50)
        .map(|_| {
            let (ca, body) = (ca.clone(), body.clone());
            tokio::spawn(async move {
                let mut conn = Conn::connect(addr, &ca, Proto::H1).await.expect("connect");
                let (status, _) = conn
                    .post(Some("application/json"), body)
                    .await
                    .expect("a big body got no HTTP answer");
                status.as_u16()
            })
        })
        .collect();
    let mut statuses = std::collections::BTreeMap::new();
    for sender in senders {
        *statuses.entry(sender.await.unwrap()).or_insert(0) += 1;
    }
    let took = started.elapsed();
    let (rss_after, peak) = rss_kib(pid);
    eprintln!(
        "bodies: 50 x 6 MiB in {took:?}: statuses {statuses:?}; RSS {rss_before} KiB before, \
         {rss_after} KiB after, peak {peak} KiB (budget {budget_mib} MiB)"
    );
    witness.finish("bodies").await;
    // Each body is answered: reviewed (200) or, if the budget stayed full too long, 503.
    assert!(
        statuses.keys().all(|s| *s == 200 || *s == 503),
        "{statuses:?}"
    );
    assert!(
        statuses.get(&200).copied().unwrap_or(0) >= 10,
        "{statuses:?}"
    );
    // 50 bodies unbounded would be 300 MiB of body alone, several times that parsed.
    let bound_kib = 320 * 1024;
    assert!(
        peak < bound_kib,
        "peak RSS {peak} KiB (bound {bound_kib} KiB)"
    );
}
