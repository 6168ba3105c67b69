//! `reload-injector serve` against the TLS floor, measured the way users and peers measure:
//! `wrk -t1 -c16` with `post.lua`, over TLS keep-alive, against the real server pinned alone to
//! CPU 0, and in the same run against nginx (Debian `nginx-light`, one worker, also on CPU 0)
//! terminating the same TLS traffic, reading the same body and returning a fixed
//! AdmissionReview. Runs alternate between the two servers; the ratio of their throughputs is
//! the figure to compare across machines.
//!
//! Bodies: the realistic 5 KB Pod review, and the same Pod grown to 50 KB and 1 MB (more
//! containers, long env lists, managedFields), with server CPU per review and per KB. With
//! `--bench`, also the latency at a fixed 5,000 reviews/s (open loop, oha `-q`).
//!
//! `cargo bench --bench tls_floor` measures (needs `scripts/install-bench-deps.sh`); without
//! `--bench` (as `cargo test --all-targets` runs it) a one-second run against each server on
//! the 5 KB and 1 MB bodies checks that both answer every request (needs
//! `scripts/install-test-deps.sh`).

#[path = "../../tests/webhook_support/mod.rs"]
mod webhook_support;

mod bodies;
mod tools;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use http::StatusCode;
use tools::{Proc, WrkRun};
use webhook_support::client::{Conn, Proto};
use webhook_support::{bundle, check_answer, pod_review, scratch};

const CONNECTIONS: usize = 16;
const OPEN_LOOP_RATE: u32 = 5_000;
const UID: &str = "5f2d8a8e-3c1b-4a1e-9d7e-0b6f4c2a9e11";

struct Plan {
    sizes: &'static [(&'static str, usize)],
    rounds: usize,
    run_for: Duration,
    open_loop_for: Option<Duration>,
}

/// One measured run of one server.
struct Sample {
    wrk: WrkRun,
    /// Server CPU (user + system, whole process tree) per request, µs.
    cpu_us: f64,
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let plan = if bench {
        Plan {
            sizes: &[("5 KB", 0), ("50 KB", 50_000), ("1 MB", 1_000_000)],
            rounds: 3,
            run_for: Duration::from_secs(4),
            open_loop_for: Some(Duration::from_secs(10)),
        }
    } else {
        // The 1 MB body too: 16 concurrent large reviews is where the in-flight budget first
        // turned requests away (503s that the 5 KB body never showed).
        Plan {
            sizes: &[("5 KB", 0), ("1 MB", 1_000_000)],
            rounds: 1,
            run_for: Duration::from_secs(1),
            open_loop_for: None,
        }
    };
    assert!(
        std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2,
        "the floor bench needs 2 CPUs: the servers on CPU 0, the load generator on CPU 1"
    );
    let dir = scratch("bench-floor");
    let certs = bundle();
    std::fs::write(dir.join("tls.crt"), &certs.cert_pem).unwrap();
    std::fs::write(dir.join("tls.key"), &certs.key_pem).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();

    let base = pod_review(UID);
    let bodies: Vec<(&str, PathBuf, usize)> = plan
        .sizes
        .iter()
        .map(|&(name, size)| {
            let bytes = if size == 0 {
                serde_json::to_vec(&base).unwrap()
            } else {
                bodies::grown_pod_review(&base, size)
            };
            let path = dir.join(format!("review-{}.json", name.replace(' ', "")));
            std::fs::write(&path, &bytes).unwrap();
            (name, path, bytes.len())
        })
        .collect();

    let serve_port = tools::free_port();
    let serve = start_serve(&dir, serve_port);
    let serve_addr: SocketAddr = ([127, 0, 0, 1], serve_port).into();
    // Every body gets a real, patched answer before anything is timed; the 5 KB answer is the
    // one nginx returns.
    let mut fixed_answer = String::new();
    for (name, path, _) in &bodies {
        let body = std::fs::read(path).unwrap();
        let answer = runtime.block_on(first_answer(serve_addr, &certs.ca_cert_pem, &body));
        let response = check_answer(&serde_json::from_slice(&answer).unwrap(), UID);
        assert_eq!(response["allowed"], true, "{name}: {response}");
        assert!(
            response.get("patch").is_some(),
            "{name}: the Pod must be patched"
        );
        if fixed_answer.is_empty() {
            fixed_answer = String::from_utf8(answer).unwrap();
        }
    }
    let nginx_port = tools::free_port();
    let nginx = tools::start_nginx(&dir, nginx_port, &fixed_answer);
    let url = |port: u16| format!("https://127.0.0.1:{port}/mutate");

    println!(
        "wrk -t1 -c{CONNECTIONS} on CPU 1, each server alone on CPU 0, TLS keep-alive, \
         {} s per run, {} alternating rounds (best round shown)",
        plan.run_for.as_secs_f64(),
        plan.rounds
    );
    println!("idle CPUs: {}", tools::idle_policy());
    println!(
        "{:>7} {:>9} | {:>12} {:>10} {:>9} | {:>12} {:>10} {:>9} | {:>6}",
        "body",
        "bytes",
        "serve req/s",
        "µs/review",
        "µs/KB",
        "nginx req/s",
        "µs/req",
        "µs/KB",
        "ratio"
    );
    for (name, path, len) in &bodies {
        let mut serve_best: Option<Sample> = None;
        let mut nginx_best: Option<Sample> = None;
        for _ in 0..plan.rounds {
            for (best, proc, port) in [
                (&mut nginx_best, &nginx, nginx_port),
                (&mut serve_best, &serve, serve_port),
            ] {
                let s = sample(proc, &url(port), path, plan.run_for);
                assert!(s.wrk.requests > 0, "{name}: no request was answered");
                assert_eq!(s.wrk.failures, 0, "{name}: wrk saw failed requests");
                if best
                    .as_ref()
                    .is_none_or(|b| s.wrk.per_second > b.wrk.per_second)
                {
                    *best = Some(s);
                }
            }
        }
        let (s, n) = (serve_best.unwrap(), nginx_best.unwrap());
        let kb = *len as f64 / 1000.0;
        println!(
            "{name:>7} {len:>9} | {:>12.0} {:>10.1} {:>9.2} | {:>12.0} {:>10.1} {:>9.2} | {:>6.2}",
            s.wrk.per_second,
            s.cpu_us,
            s.cpu_us / kb,
            n.wrk.per_second,
            n.cpu_us,
            n.cpu_us / kb,
            s.wrk.per_second / n.wrk.per_second,
        );
    }
    if let Some(run_for) = plan.open_loop_for {
        let path = &bodies[0].1;
        for (server, port) in [("serve", serve_port), ("nginx", nginx_port)] {
            let o = tools::oha(&url(port), path, OPEN_LOOP_RATE, CONNECTIONS, run_for);
            println!(
                "open loop (oha -q {OPEN_LOOP_RATE} -c {CONNECTIONS} --latency-correction, 5 KB, {} s) {server}: \
                 p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms; {} requests, {} failed",
                run_for.as_secs_f64(),
                o.p50,
                o.p99,
                o.max,
                o.requests,
                o.failures
            );
            assert_eq!(o.failures, 0, "{server}: oha saw failed requests");
        }
    } else {
        println!("(smoke run only; run `cargo bench --bench tls_floor` to measure)");
    }
    drop(nginx);
    drop(serve);
    // Nothing of either may outlive the bench (a killed nginx master leaves its worker).
    for (server, port) in [("nginx", nginx_port), ("serve", serve_port)] {
        assert!(
            std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
            "{server} still listens on {port} after the bench"
        );
    }
}

/// One wrk run against the server `proc`, with the server's CPU time over the run.
fn sample(proc: &Proc, url: &str, body: &Path, run_for: Duration) -> Sample {
    let pid = proc.0.id();
    let cpu0 = tools::tree_cpu_seconds(pid);
    let wrk = tools::wrk(url, body, CONNECTIONS, run_for);
    let cpu = tools::tree_cpu_seconds(pid) - cpu0;
    Sample {
        wrk,
        cpu_us: cpu * 1e6 / wrk.requests.max(1) as f64,
    }
}

/// `reload-injector serve --no-kube` alone on CPU 0 (this build's binary, or
/// `RELOAD_INJECTOR_BENCH_BINARY`, e.g. another build to compare in the same run).
fn start_serve(dir: &Path, port: u16) -> Proc {
    let binary = std::env::var_os("RELOAD_INJECTOR_BENCH_BINARY").map_or_else(
        || env!("CARGO_BIN_EXE_reload-injector").into(),
        PathBuf::from,
    );
    let child = Command::new("taskset")
        .args(["-c", "0"])
        .arg(binary)
        .args(["--log-level", "warn", "serve", "--no-kube"])
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .args(["--metrics-listen", "127.0.0.1:0"])
        .arg("--tls-cert")
        .arg(dir.join("tls.crt"))
        .arg("--tls-key")
        .arg(dir.join("tls.key"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        // rustls warns about every wrk connection (wrk sends the IP address as SNI).
        .stderr(std::fs::File::create(dir.join("serve.stderr")).unwrap())
        .spawn()
        .expect("failed to run taskset (util-linux) with reload-injector");
    Proc(child)
}

/// The answer to `body`, retrying connects until the server listens (20 s at most).
async fn first_answer(addr: SocketAddr, ca: &str, body: &[u8]) -> Vec<u8> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(mut conn) = Conn::connect(addr, ca, Proto::H1).await
            && let Ok((status, answer)) = conn.post(Some("application/json"), body.to_vec()).await
        {
            assert_eq!(
                status,
                StatusCode::OK,
                "{}",
                String::from_utf8_lossy(&answer)
            );
            return answer.to_vec();
        }
        assert!(
            Instant::now() < deadline,
            "serve did not answer within 20 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
