//! A read buffer beneath TLS that holds memory only while it holds bytes. rustls reads at most
//! 4 KiB at a time: unbuffered, a 5 KB review costs two `recvfrom` calls and a 1 MB one about
//! 260. Unlike `tokio::io::BufReader`, [`ReadBuffer`] gives its memory back whenever it is
//! empty, so an idle keep-alive connection costs nothing more.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_util::io::poll_read_buf;

/// `inner`, read `capacity` bytes at a time; writes go straight through.
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
