//! The real `reload-injector serve` binary as a child process.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

/// A running `reload-injector serve`, killed on drop.
pub struct Server {
    child: Child,
    /// The HTTPS address (`--listen 127.0.0.1:0`, as logged).
    pub addr: SocketAddr,
    /// The plain side port (`--metrics-listen 127.0.0.1:0`, as logged).
    pub side_addr: SocketAddr,
    log: Arc<Mutex<Vec<String>>>,
}

impl Server {
    /// Starts `serve` with the TLS files and extra flags, both ports on 127.0.0.1:0, JSON
    /// logs at debug; returns once both addresses have been logged.
    pub fn start(cert: &Path, key: &Path, extra: &[&str]) -> Self {
        Self::start_logging("reload_injector=debug", cert, key, extra)
    }

    /// Like [`Server::start`] with the given `--log-level` (it must include info lines).
    pub fn start_logging(level: &str, cert: &Path, key: &Path, extra: &[&str]) -> Self {
        Self::start_with_env(level, cert, key, extra, &[])
    }

    /// Like [`Server::start_logging`] with extra environment variables (e.g. `KUBECONFIG`).
    pub fn start_with_env(
        level: &str,
        cert: &Path,
        key: &Path,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_reload-injector"))
            .envs(env.iter().copied())
            .args(["--log-format", "json", "--log-level", level])
            .arg("serve")
            .args(["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"])
            .arg("--tls-cert")
            .arg(cert)
            .arg("--tls-key")
            .arg(key)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("failed to start reload-injector serve");
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let log_w = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Ok(v) = serde_json::from_str::<Value>(&line)
                    && let (Some(msg), Some(addr)) = (v["message"].as_str(), v["addr"].as_str())
                {
                    let _ = tx.send((msg.to_owned(), addr.parse::<SocketAddr>().unwrap()));
                }
                log_w.lock().unwrap().push(line);
            }
        });
        let (mut addr, mut side_addr) = (None, None);
        let deadline = Instant::now() + Duration::from_secs(20);
        while addr.is_none() || side_addr.is_none() {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok((msg, a)) if msg.contains("admission reviews") => addr = Some(a),
                Ok((msg, a)) if msg.contains("/metrics") => side_addr = Some(a),
                Ok(_) => {}
                Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!(
                        "serve did not log its addresses in time; stderr:\n{}",
                        log.lock().unwrap().join("\n")
                    );
                }
            }
        }
        Self {
            child,
            addr: addr.unwrap(),
            side_addr: side_addr.unwrap(),
            log,
        }
    }

    /// The stderr lines so far.
    pub fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    /// The process id.
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.pid()),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
    }

    /// Waits for the process to exit, at most `limit`.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// GETs `path` on the side port: (status, body).
    pub fn side_get(&self, path: &str) -> std::io::Result<(u16, String)> {
        http_get(self.side_addr, path)
    }

    /// Polls `/metrics` until the sample `series` (name with labels) is at least `min`, or
    /// `limit` passes.
    pub fn wait_metric(&self, series: &str, min: f64, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Ok((_, text)) = self.side_get("/metrics")
                && text.lines().any(|l| {
                    l.strip_prefix(series)
                        .and_then(|v| v.trim().parse::<f64>().ok())
                        .is_some_and(|v| v >= min)
                })
            {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A minimal plain-HTTP GET (HTTP/1.0, connection closed by the server).
pub fn http_get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n")?;
    let mut text = String::new();
    stream.read_to_string(&mut text)?;
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_owned();
    Ok((status, body))
}
