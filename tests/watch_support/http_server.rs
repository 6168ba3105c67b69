//! An HTTP server on 127.0.0.1 that answers reload calls as scripted and records, for each
//! request, what the watched config contained when it arrived.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// How to answer one request.
#[derive(Debug, Clone, Copy)]
pub struct Reply {
    /// HTTP status.
    pub status: u16,
    /// Wait this long before answering.
    pub delay: Duration,
}

impl Reply {
    /// Answer `status` at once.
    pub fn now(status: u16) -> Reply {
        Reply {
            status,
            delay: Duration::ZERO,
        }
    }
}

/// One request seen.
#[derive(Debug, Clone)]
pub struct Hit {
    /// Method and path, e.g. `POST /-/reload`.
    pub request: String,
    /// The watched key's content when the request arrived.
    pub content: Option<String>,
    /// The status answered.
    pub status: u16,
}

type Script = dyn Fn(usize) -> Reply + Send + Sync;

/// The server; stops on drop.
pub struct TestServer {
    addr: SocketAddr,
    hits: Arc<Mutex<Vec<Hit>>>,
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl TestServer {
    /// Starts serving; `script(n)` answers the n-th request (from 0); `watched` is read on
    /// every request to record what the app would load.
    pub fn start(
        watched: PathBuf,
        script: impl Fn(usize) -> Reply + Send + Sync + 'static,
    ) -> TestServer {
        TestServer::start_on(0, watched, script)
    }

    /// Like [`TestServer::start`] on a given loopback port (`0`: any free one), for an app
    /// that comes up late on the port the watcher was told about.
    pub fn start_on(
        port: u16,
        watched: PathBuf,
        script: impl Fn(usize) -> Reply + Send + Sync + 'static,
    ) -> TestServer {
        let listener = TcpListener::bind(("127.0.0.1", port)).expect("bind test server");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("addr");
        let hits = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let script: Arc<Script> = Arc::new(script);
        let thread = {
            let (hits, stop) = (Arc::clone(&hits), Arc::clone(&stop));
            thread::spawn(move || accept_loop(listener, watched, script, hits, stop))
        };
        TestServer {
            addr,
            hits,
            stop,
            thread: Some(thread),
        }
    }

    /// `http://127.0.0.1:PORT/path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Requests seen so far, in arrival order.
    pub fn hits(&self) -> Vec<Hit> {
        self.hits.lock().expect("hits").clone()
    }

    /// Requests answered with a 2xx.
    pub fn successes(&self) -> Vec<Hit> {
        self.hits()
            .into_iter()
            .filter(|hit| (200..300).contains(&hit.status))
            .collect()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn accept_loop(
    listener: TcpListener,
    watched: PathBuf,
    script: Arc<Script>,
    hits: Arc<Mutex<Vec<Hit>>>,
    stop: Arc<AtomicBool>,
) {
    let counter = Arc::new(AtomicUsize::new(0));
    while !stop.load(Ordering::Relaxed) {
        let Ok((stream, _)) = listener.accept() else {
            thread::sleep(Duration::from_millis(2));
            continue;
        };
        let (watched, script, hits, counter) = (
            watched.clone(),
            Arc::clone(&script),
            Arc::clone(&hits),
            Arc::clone(&counter),
        );
        thread::spawn(move || {
            let _ = stream.set_nonblocking(false);
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            let mut reader = BufReader::new(&stream);
            let mut first = String::new();
            if reader.read_line(&mut first).is_err() || first.is_empty() {
                return;
            }
            loop {
                let mut line = String::new();
                match reader.read_line(&mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) if line == "\r\n" => break,
                    Ok(_) => {}
                }
            }
            let content = std::fs::read_to_string(&watched).ok();
            let n = counter.fetch_add(1, Ordering::SeqCst);
            let reply = script(n);
            let request = first
                .split_whitespace()
                .take(2)
                .collect::<Vec<_>>()
                .join(" ");
            hits.lock().expect("hits").push(Hit {
                request,
                content,
                status: reply.status,
            });
            thread::sleep(reply.delay);
            let mut stream = &stream;
            let _ = write!(
                stream,
                "HTTP/1.1 {} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                reply.status
            );
        });
    }
}
