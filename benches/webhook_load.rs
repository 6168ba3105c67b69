//! Load benchmark of the real `reload-injector serve` binary (no API server, `--no-kube`),
//! pinned to CPU 0 with `taskset`, driven over TLS keep-alive from CPU 1 with the realistic
//! 5 KB Pod review:
//!
//! - time from exec to the first review answered (retrying connects),
//! - idle RSS of the server,
//! - closed-loop throughput at 16 connections (HTTP/1.1 and HTTP/2),
//! - latency at a fixed open-loop 5,000 reviews/s over 16 connections.
//!
//! `cargo bench --bench webhook_load` measures; without `--bench` (as `cargo test
//! --all-targets` runs it) every phase runs briefly as a smoke test. Loopback only; every
//! phase is bounded in time.

#[path = "../tests/webhook_support/mod.rs"]
mod webhook_support;

use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use http::StatusCode;
use webhook_support::client::{Conn, Proto};
use webhook_support::{bundle, pod_review_bytes, scratch};

const CONNECTIONS: usize = 16;
const OPEN_LOOP_RATE: f64 = 5_000.0;

struct Plan {
    startups: usize,
    throughput_for: Duration,
    latency_for: Duration,
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let plan = if bench {
        Plan {
            startups: 20,
            throughput_for: Duration::from_secs(5),
            latency_for: Duration::from_secs(5),
        }
    } else {
        Plan {
            startups: 2,
            throughput_for: Duration::from_millis(200),
            latency_for: Duration::from_millis(50),
        }
    };
    let two_cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2;
    if two_cpus {
        // The load generator stays off the server's CPU (threads inherit this).
        let mut set = nix::sched::CpuSet::new();
        set.set(1).unwrap();
        nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set).unwrap();
    } else {
        eprintln!("warning: fewer than 2 CPUs; server and load generator share one");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(run(plan, bench));
}

async fn run(plan: Plan, bench: bool) {
    let dir = scratch("bench-load");
    let b = bundle();
    std::fs::write(dir.join("tls.crt"), &b.cert_pem).unwrap();
    std::fs::write(dir.join("tls.key"), &b.key_pem).unwrap();
    let ca = b.ca_cert_pem;
    let body = pod_review_bytes("5f2d8a8e-3c1b-4a1e-9d7e-0b6f4c2a9e11");

    let mut startup: Vec<Duration> = Vec::new();
    for _ in 0..plan.startups {
        let ((mut child, _), took) = start_and_first_review(&dir, &ca, &body).await;
        startup.push(took);
        stop(&mut child);
    }
    startup.sort();

    let (mut server, _) = start_and_first_review(&dir, &ca, &body).await;
    let addr = server.1;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_idle = rss_kib(server.0.id());

    let pid = server.0.id();
    let h1 = throughput(addr, &ca, &body, Proto::H1, plan.throughput_for, pid).await;
    let h2 = throughput(addr, &ca, &body, Proto::H2, plan.throughput_for, pid).await;
    let OpenLoop {
        sched,
        service,
        late,
    } = open_loop(addr, &ca, &body, plan.latency_for).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_after = rss_kib(server.0.id());
    stop(&mut server.0);

    println!(
        "realistic Pod review: {} bytes, server pinned to CPU 0 (--no-kube)",
        body.len()
    );
    println!(
        "exec -> first review answered: median {:.1} ms, max {:.1} ms ({} starts)",
        ms(startup[startup.len() / 2]),
        ms(*startup.last().unwrap()),
        startup.len()
    );
    println!(
        "idle RSS after start: {:.1} MiB; after the load runs: {:.1} MiB",
        mib(rss_idle),
        mib(rss_after)
    );
    for (name, t) in [("HTTP/1.1", &h1), ("HTTP/2  ", &h2)] {
        println!(
            "throughput, {CONNECTIONS} connections, {name}: {:.0} reviews/s; server CPU {:.1} µs/review \
             (= {:.0} reviews per CPU-second), server CPU busy {:.0}%, load generator CPU busy {:.0}%",
            t.per_second,
            t.server_cpu_us,
            1e6 / t.server_cpu_us,
            t.server_busy * 100.0,
            t.client_busy * 100.0,
        );
    }
    println!(
        "open loop {OPEN_LOOP_RATE:.0}/s over {CONNECTIONS} HTTP/1.1 connections ({} reviews): \
         from send p50 {:.3} ms p99 {:.3} ms max {:.3} ms; \
         from schedule p50 {:.3} ms p99 {:.3} ms; \
         {late} sends were due while their connection was still busy",
        service.len(),
        pct(&service, 50.0),
        pct(&service, 99.0),
        pct(&service, 100.0),
        pct(&sched, 50.0),
        pct(&sched, 99.0),
    );
    if !bench {
        assert!(h1.per_second > 0.0 && h2.per_second > 0.0 && !service.is_empty());
        println!("(smoke run only; run `cargo bench --bench webhook_load` to measure)");
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Execs the server on CPU 0 and retries until the first review is answered.
async fn start_and_first_review(
    dir: &Path,
    ca: &str,
    body: &[u8],
) -> ((Child, SocketAddr), Duration) {
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let started = Instant::now();
    let mut child = Command::new("taskset")
        .args(["-c", "0"])
        .arg(binary())
        .args(["--log-level", "warn", "serve", "--no-kube"])
        .arg("--listen")
        .arg(addr.to_string())
        .args(["--metrics-listen", "127.0.0.1:0"])
        .arg("--tls-cert")
        .arg(dir.join("tls.crt"))
        .arg("--tls-key")
        .arg(dir.join("tls.key"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .expect("failed to run taskset (util-linux) with reload-injector");
    let deadline = started + Duration::from_secs(20);
    loop {
        if let Ok(mut conn) = Conn::connect(addr, ca, Proto::H1).await
            && let Ok((StatusCode::OK, _)) =
                conn.post(Some("application/json"), body.to_vec()).await
        {
            return ((child, addr), started.elapsed());
        }
        if Instant::now() > deadline || child.try_wait().unwrap().is_some() {
            stop(&mut child);
            panic!("server did not answer its first review within 20 s");
        }
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
}

/// The server binary: this build's, or `RELOAD_INJECTOR_BENCH_BINARY` (e.g. a build with
/// symbols, for `perf`).
fn binary() -> std::path::PathBuf {
    std::env::var_os("RELOAD_INJECTOR_BENCH_BINARY")
        .map_or_else(|| env!("CARGO_BIN_EXE_reload-injector").into(), Into::into)
}

fn stop(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// The result of a closed-loop run.
struct Throughput {
    per_second: f64,
    /// Server CPU time (user + system) per review.
    server_cpu_us: f64,
    /// Share of one CPU the server used.
    server_busy: f64,
    /// Share of one CPU the load generator used.
    client_busy: f64,
}

/// Closed loop: every connection sends its next review as soon as the last is answered.
async fn throughput(
    addr: SocketAddr,
    ca: &str,
    body: &[u8],
    proto: Proto,
    run_for: Duration,
    server_pid: u32,
) -> Throughput {
    let mut conns = Vec::new();
    for _ in 0..CONNECTIONS {
        conns.push(Conn::connect(addr, ca, proto).await.unwrap());
    }
    let (server_cpu0, client_cpu0) = (cpu_seconds(&server_pid.to_string()), cpu_seconds("self"));
    let started = Instant::now();
    let deadline = started + run_for;
    let tasks: Vec<_> = conns
        .into_iter()
        .map(|mut conn| {
            let body = body.to_vec();
            tokio::spawn(async move {
                let mut done = 0u64;
                while Instant::now() < deadline {
                    let (status, _) = conn
                        .post(Some("application/json"), body.clone())
                        .await
                        .unwrap();
                    assert_eq!(status, StatusCode::OK);
                    done += 1;
                }
                done
            })
        })
        .collect();
    let mut total = 0;
    for task in tasks {
        total += task.await.unwrap();
    }
    let elapsed = started.elapsed().as_secs_f64();
    let server_cpu = cpu_seconds(&server_pid.to_string()) - server_cpu0;
    let client_cpu = cpu_seconds("self") - client_cpu0;
    Throughput {
        per_second: total as f64 / elapsed,
        server_cpu_us: server_cpu * 1e6 / total.max(1) as f64,
        server_busy: server_cpu / elapsed,
        client_busy: client_cpu / elapsed,
    }
}

/// User + system CPU seconds of a process (`self` or a pid), from /proc.
fn cpu_seconds(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .unwrap_or(100) as f64;
    ticks / hz
}

/// Open loop at [`OPEN_LOOP_RATE`]: a pacer thread (precise `std::thread::sleep`, unlike
/// tokio's millisecond timer) hands each scheduled send to the next connection in turn.
/// Returns latencies from the scheduled time and from the actual send.
async fn open_loop(addr: SocketAddr, ca: &str, body: &[u8], run_for: Duration) -> OpenLoop {
    let interval = Duration::from_secs_f64(1.0 / OPEN_LOOP_RATE);
    let total = (run_for.as_secs_f64() * OPEN_LOOP_RATE) as u32;
    let mut senders = Vec::new();
    let mut tasks = Vec::new();
    for _ in 0..CONNECTIONS {
        let mut conn = Conn::connect(addr, ca, Proto::H1).await.unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Instant>();
        senders.push(tx);
        let body = body.to_vec();
        tasks.push(tokio::spawn(async move {
            let mut out = Vec::new();
            let mut late = 0u32;
            let mut previous_done = Instant::now();
            while let Some(scheduled) = rx.recv().await {
                if previous_done > scheduled {
                    // Due while the previous answer was still awaited: queueing that the
                    // "from schedule" figure includes.
                    late += 1;
                }
                let sent = Instant::now();
                let (status, _) = conn
                    .post(Some("application/json"), body.clone())
                    .await
                    .unwrap();
                assert_eq!(status, StatusCode::OK);
                let done = Instant::now();
                previous_done = done;
                out.push((ms(done - scheduled), ms(done - sent)));
            }
            (out, late)
        }));
    }
    let pacer = std::thread::spawn(move || {
        let t0 = Instant::now() + Duration::from_millis(20);
        for k in 0..total {
            let scheduled = t0 + interval * k;
            let now = Instant::now();
            if scheduled > now {
                std::thread::sleep(scheduled - now);
            }
            senders[k as usize % CONNECTIONS].send(scheduled).unwrap();
        }
    });
    let (mut sched, mut service, mut late) = (Vec::new(), Vec::new(), 0);
    for task in tasks {
        let (out, task_late) = task.await.unwrap();
        late += task_late;
        for (a, b) in out {
            sched.push(a);
            service.push(b);
        }
    }
    pacer.join().unwrap();
    sched.sort_by(f64::total_cmp);
    service.sort_by(f64::total_cmp);
    OpenLoop {
        sched,
        service,
        late,
    }
}

/// Latencies (ms, sorted) of an open-loop run.
struct OpenLoop {
    /// From the scheduled send time (includes any wait for a busy connection).
    sched: Vec<f64>,
    /// From the actual send.
    service: Vec<f64>,
    /// Sends that were due while the connection still waited for the previous answer.
    late: u32,
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[i]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// VmRSS of a process, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/<pid>/status")
}
