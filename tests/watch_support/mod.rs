//! Shared helpers for the watcher's integration tests: a kubelet-style directory writer,
//! SIGHUP-counting fixtures, PID namespaces, the watcher process, an HTTP test server, copies
//! of programs to run.
#![allow(dead_code)]

pub mod copies;
pub mod fixture;
pub mod http_server;
/// The kubelet's AtomicWriter, as the fake API server's kubelet writes volumes too.
pub use fake_kube_api::atomic_dir as kubelet;
pub mod nginx;
pub mod pidns;
pub mod scratch;
pub mod watcher;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// Generous bound for "it happens" on a noisy 2-core machine.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// Fails loudly unless running as root (PID namespaces, nsenter, setuid need it; CI is root).
pub fn require_root() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test needs root (unshare --pid, nsenter, setuid): run `cargo test` as root, as CI does"
    );
}

/// Polls `check` every 10 ms until it returns `Some`, or panics with `what` after `timeout`.
pub fn wait_for<T>(what: &str, timeout: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A loopback port that was free a moment ago.
pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local addr").port()
}

/// A minimal HTTP/1.1 GET on loopback: `(status, body)`, or `None` if nothing answered.
pub fn http_get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let status = response.split_whitespace().nth(1)?.parse().ok()?;
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())?;
    Some((status, body))
}

/// Reads one sample from a Prometheus text page (`name{labels}` exactly as printed).
pub fn metric(page: &str, series: &str) -> Option<f64> {
    page.lines()
        .filter(|line| !line.starts_with('#'))
        .find_map(|line| {
            let (name, value) = line.rsplit_once(' ')?;
            (name == series).then(|| value.parse().ok())?
        })
}
