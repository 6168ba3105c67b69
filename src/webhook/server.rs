//! The HTTPS accept loop: at most `--max-connections` open, TCP_NODELAY on every socket, a
//! bounded TLS handshake, HTTP/1.1 or HTTP/2 by ALPN with a header-read timeout, and a
//! bounded drain on shutdown.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::Router;
use bytes::{Buf, BytesMut};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use hyper_util::service::TowerToHyperService;
use rustls::ServerConfig;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::OwnedSemaphorePermit;
use tokio_rustls::TlsAcceptor;
use tokio_util::io::poll_read_buf;

use super::limits::ConnectionLimit;

/// Largest read buffer of an HTTP/1.1 connection (hyper's default is about 400 KiB; request
/// headers must fit). A large body then arrives in 64 KiB pieces, not pieces the size of
/// hyper's grown buffer, which the allocator kept: quiet RSS under a mix with 7 MiB bodies
/// varied by up to 9.6 MiB with the default, 1.6 MiB with this.
const H1_READ_BUFFER: usize = 64 * 1024;

/// Bytes read from a socket at once, beneath TLS (see [`ReadBuffer`]): a 5 KB review in one
/// `recvfrom` instead of two. Measured under `wrk -t1 -c16` with the 5 KB review: 4–6% more
/// reviews per second on one core.
const TLS_READ_BUFFER: usize = 16 * 1024;

/// Bounds of the connections and of the drain.
#[derive(Debug, Clone)]
pub struct Limits {
    pub connections: ConnectionLimit,
    /// Longest a TLS handshake may take.
    pub handshake: Duration,
    /// Longest the headers of an HTTP/1.1 request may take to arrive.
    pub header_read: Duration,
    /// Longest shutdown waits for in-flight requests.
    pub drain: Duration,
}

/// Sets TCP_NODELAY: without it, Nagle's algorithm and the client's delayed ACKs add ~40 ms
/// stalls to small responses.
pub fn prepare_socket(stream: &TcpStream) -> std::io::Result<()> {
    stream.set_nodelay(true)
}

/// Serves `app` over TLS on `listener` until `shutdown` completes, then waits up to
/// `limits.drain` for open connections to finish; `true` when everything drained in time.
pub async fn serve(
    listener: TcpListener,
    tls: Arc<ServerConfig>,
    app: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
) -> bool {
    let acceptor = TlsAcceptor::from(tls);
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    while let Some((slot, stream)) = accept(&listener, &limits, &mut shutdown).await {
        if let Err(err) = prepare_socket(&stream) {
            tracing::debug!(error = %err, "failed to set TCP_NODELAY; dropping the connection");
            continue;
        }
        let (acceptor, app, limits) = (acceptor.clone(), app.clone(), limits.clone());
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let _slot = slot;
            connection(stream, acceptor, app, &limits, watcher).await;
        });
    }
    drop(listener);
    tracing::info!(
        open = graceful.count(),
        "stopped accepting; draining connections"
    );
    let drained = tokio::time::timeout(limits.drain, graceful.shutdown()).await;
    if drained.is_err() {
        tracing::warn!(
            drain_timeout = %humantime::format_duration(limits.drain),
            "connections still open after the drain timeout; exiting anyway"
        );
    }
    drained.is_ok()
}

/// The next connection with its slot, or `None` once `shutdown` completes. A slot comes first:
/// at the limit, new clients wait in the kernel's accept queue.
async fn accept(
    listener: &TcpListener,
    limits: &Limits,
    shutdown: &mut std::pin::Pin<&mut impl Future<Output = ()>>,
) -> Option<(OwnedSemaphorePermit, TcpStream)> {
    let slot = tokio::select! {
        biased;
        () = shutdown.as_mut() => return None,
        slot = limits.connections.acquire() => slot?,
    };
    loop {
        tokio::select! {
            biased;
            () = shutdown.as_mut() => return None,
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => return Some((slot, stream)),
                Err(err) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(error = %err, "failed to accept a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
        }
    }
}

/// The TLS handshake within its time limit (a failed or slow one is logged at debug), then
/// HTTP until the client or the drain ends it.
async fn connection(
    stream: TcpStream,
    acceptor: TlsAcceptor,
    app: Router,
    limits: &Limits,
    watcher: Watcher,
) {
    let stream = ReadBuffer::new(stream, TLS_READ_BUFFER);
    let tls = match tokio::time::timeout(limits.handshake, acceptor.accept(stream)).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(err)) => return tracing::debug!(error = %err, "TLS handshake failed"),
        Err(_) => return tracing::debug!("TLS handshake timed out"),
    };
    // HTTP/2 over TLS is only ever negotiated by ALPN (RFC 9113 §3.2); without it the
    // connection is HTTP/1.1, whose header reads are time-limited.
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read)
        .max_buf_size(H1_READ_BUFFER);
    builder.http2().timer(TokioTimer::new());
    let builder = if tls.get_ref().1.alpn_protocol() == Some(b"h2") {
        builder.http2_only()
    } else {
        builder.http1_only()
    };
    // A connection must start its first request within the header-read timeout. HTTP/1.1
    // has that from hyper; this also covers an HTTP/2 client that sends nothing after the
    // handshake.
    let first = Arc::new(tokio::sync::Notify::new());
    let service = TowerToHyperService::new(tower::ServiceExt::map_request(app, {
        let first = first.clone();
        move |request: http::Request<hyper::body::Incoming>| {
            first.notify_one();
            request
        }
    }));
    let conn = watcher.watch(builder.serve_connection(TokioIo::new(tls), service));
    tokio::pin!(conn);
    let ended = tokio::select! {
        ended = &mut conn => ended,
        started = tokio::time::timeout(limits.header_read, first.notified()) => {
            if started.is_err() {
                tracing::debug!("no request within the header-read timeout; closing");
                return;
            }
            conn.await
        }
    };
    if let Err(err) = ended {
        tracing::debug!(error = %err, "connection ended with an error");
    }
}

/// A read buffer beneath TLS that holds memory only while it holds bytes: `inner`, read
/// `capacity` bytes at a time (writes go straight through). rustls reads at most 4 KiB at a
/// time: unbuffered, a 5 KB review costs two `recvfrom` calls and a 1 MB one about 260. Unlike
/// `tokio::io::BufReader`, it gives its memory back whenever it is empty, so an idle keep-alive
/// connection costs nothing more.
#[derive(Debug)]
pub struct ReadBuffer<T> {
    inner: T,
    pending: BytesMut,
    capacity: usize,
}

impl<T> ReadBuffer<T> {
    /// Wraps `inner`; nothing is allocated until a read needs it.
    pub fn new(inner: T, capacity: usize) -> Self {
        Self {
            inner,
            pending: BytesMut::new(),
            capacity,
        }
    }

    /// Whether the buffer holds memory now: only while bytes wait in it.
    pub fn holds_memory(&self) -> bool {
        self.pending.capacity() > 0
    }

    fn release_if_empty(&mut self) {
        if self.pending.is_empty() {
            self.pending = BytesMut::new();
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for ReadBuffer<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.pending.is_empty() {
            if out.remaining() >= this.capacity {
                return Pin::new(&mut this.inner).poll_read(cx, out);
            }
            this.pending.reserve(this.capacity);
            let read = poll_read_buf(Pin::new(&mut this.inner), cx, &mut this.pending);
            // Waiting, failed or at the end: nothing to keep.
            this.release_if_empty();
            ready!(read)?;
        }
        let n = out.remaining().min(this.pending.len());
        out.put_slice(&this.pending[..n]);
        this.pending.advance(n);
        this.release_if_empty();
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for ReadBuffer<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests;
