//! Load-test helpers: a steady well-behaved client with latency figures, and readings of a
//! process's memory and file descriptors from `/proc`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::client::{Conn, Proto};
use super::{check_answer, pod_review};

/// What the steady client saw.
#[derive(Debug, Clone, Default)]
pub struct Steady {
    /// Reviews answered correctly.
    pub ok: usize,
    /// Failures (transport errors, wrong status, wrong answer), with what went wrong.
    pub errors: Vec<String>,
    /// Latency of every answered review.
    pub latencies: Vec<Duration>,
}

impl Steady {
    /// The `q` quantile (0.0–1.0) of the latencies; zero when there are none.
    pub fn quantile(&self, q: f64) -> Duration {
        let mut sorted = self.latencies.clone();
        sorted.sort();
        if sorted.is_empty() {
            return Duration::ZERO;
        }
        let index = ((sorted.len() as f64 - 1.0) * q).round() as usize;
        sorted[index.min(sorted.len() - 1)]
    }

    /// One line for the test output and the docs.
    pub fn summary(&self) -> String {
        format!(
            "steady client: {} ok, {} errors, p50 {:?}, p99 {:?}, max {:?}",
            self.ok,
            self.errors.len(),
            self.quantile(0.5),
            self.quantile(0.99),
            self.quantile(1.0),
        )
    }
}

/// Sends a realistic Pod review every `pace` on one keep-alive connection (as kube-apiserver
/// does) until `stop` is set; every answer is checked.
pub async fn steady_client(
    addr: SocketAddr,
    ca: String,
    pace: Duration,
    stop: Arc<AtomicBool>,
) -> Steady {
    let mut seen = Steady::default();
    let mut conn = match Conn::connect(addr, &ca, Proto::H1).await {
        Ok(conn) => conn,
        Err(err) => {
            seen.errors.push(format!("connect: {err}"));
            return seen;
        }
    };
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        i += 1;
        let uid = format!("steady-{i}");
        let body = serde_json::to_vec(&pod_review(&uid)).unwrap();
        let started = Instant::now();
        match conn.post(Some("application/json"), body).await {
            Ok((status, bytes)) if status == http::StatusCode::OK => {
                seen.latencies.push(started.elapsed());
                let answer: serde_json::Value = match serde_json::from_slice(&bytes) {
                    Ok(answer) => answer,
                    Err(err) => {
                        seen.errors.push(format!("{uid}: not JSON: {err}"));
                        continue;
                    }
                };
                let response = check_answer(&answer, &uid);
                if response["allowed"] == true && response["patch"].is_string() {
                    seen.ok += 1;
                } else {
                    seen.errors
                        .push(format!("{uid}: unexpected answer {answer}"));
                }
            }
            Ok((status, bytes)) => seen.errors.push(format!(
                "{uid}: HTTP {status}: {}",
                String::from_utf8_lossy(&bytes)
            )),
            Err(err) => {
                seen.errors.push(format!("{uid}: {err}"));
                // The connection is gone; kube-apiserver would dial again.
                match Conn::connect(addr, &ca, Proto::H1).await {
                    Ok(fresh) => conn = fresh,
                    Err(err) => seen.errors.push(format!("reconnect: {err}")),
                }
            }
        }
        tokio::time::sleep(pace).await;
    }
    seen
}

/// Resident memory of `pid` in KiB (`VmRSS`), and its peak (`VmHWM`).
pub fn rss_kib(pid: i32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Open file descriptors of `pid`.
pub fn open_fds(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// Raises this process's soft limit of open files to `want` (at most the hard limit), so that
/// a test can hold many sockets; child processes inherit it.
pub fn raise_fd_limit(want: u64) {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let hard = limit.maximum.unwrap_or(u64::MAX);
    let current = limit.current.unwrap_or(u64::MAX);
    if current < want {
        let _ = setrlimit(
            Resource::Nofile,
            Rlimit {
                current: Some(want.min(hard)),
                maximum: limit.maximum,
            },
        );
    }
}
