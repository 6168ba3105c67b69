use std::collections::VecDeque;
use std::io::IoSlice;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

/// What the wrapped stream does on each read.
enum Step {
    /// Bytes that arrived (a read takes what fits and leaves the rest for the next).
    Data(Vec<u8>),
    /// Nothing yet: `Pending`.
    Wait,
    /// The socket failed.
    Fail,
}

/// A stream that plays `steps` and records the size of every read asked of it.
#[derive(Default)]
struct Scripted {
    steps: VecDeque<Step>,
    asked: Vec<usize>,
}

impl Scripted {
    fn new(steps: impl IntoIterator<Item = Step>) -> Self {
        Self {
            steps: steps.into_iter().collect(),
            asked: Vec::new(),
        }
    }
}

impl AsyncRead for Scripted {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.asked.push(out.remaining());
        match this.steps.pop_front() {
            None => Poll::Ready(Ok(())),
            Some(Step::Wait) => {
                cx.waker().wake_by_ref();
                Poll::Pending
            }
            Some(Step::Fail) => Poll::Ready(Err(io::Error::other("connection reset"))),
            Some(Step::Data(mut data)) => {
                let n = out.remaining().min(data.len());
                out.put_slice(&data[..n]);
                if n < data.len() {
                    this.steps.push_front(Step::Data(data.split_off(n)));
                }
                Poll::Ready(Ok(()))
            }
        }
    }
}

fn bytes(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 % 251) as u8).collect()
}

/// Reads `reader` to its end `size` bytes at a time, as rustls does (it asks for 4 KiB).
async fn read_all<R: AsyncRead + Unpin>(reader: &mut R, size: usize) -> Vec<u8> {
    let mut all = Vec::new();
    let mut chunk = vec![0; size];
    loop {
        let n = reader.read(&mut chunk).await.unwrap();
        if n == 0 {
            return all;
        }
        all.extend_from_slice(&chunk[..n]);
    }
}

#[tokio::test]
async fn a_review_that_arrived_whole_is_read_from_the_socket_once() {
    let review = bytes(5_300);
    let mut reader = ReadBuffer::new(Scripted::new([Step::Data(review.clone())]), 16 * 1024);
    assert_eq!(read_all(&mut reader, 4096).await, review);
    // One read took the review, one more found the end.
    assert_eq!(reader.inner.asked, [16 * 1024, 16 * 1024]);

    let mut unbuffered = Scripted::new([Step::Data(review.clone())]);
    assert_eq!(read_all(&mut unbuffered, 4096).await, review);
    assert_eq!(
        unbuffered.asked.len(),
        3,
        "precondition: 4 KiB reads take two"
    );
}

#[tokio::test]
async fn bytes_come_out_in_order_whatever_the_sizes_on_either_side() {
    let data = bytes(100_000);
    for (arrivals, reads) in [
        (1, 1),
        (7, 4096),
        (4096, 7),
        (16 * 1024 + 3, 4096),
        (9_000, 100_000),
    ] {
        let steps = data
            .chunks(arrivals)
            .flat_map(|c| [Step::Wait, Step::Data(c.to_vec())]);
        let mut reader = ReadBuffer::new(Scripted::new(steps), 16 * 1024);
        let got = read_all(&mut reader, reads).await;
        assert!(
            got == data,
            "arriving {arrivals} at a time, read {reads} at a time"
        );
        assert!(!reader.holds_memory());
    }
}

#[tokio::test]
async fn memory_is_held_only_while_bytes_wait_in_it() {
    let steps = [Step::Data(bytes(6_000)), Step::Wait, Step::Data(bytes(10))];
    let mut reader = ReadBuffer::new(Scripted::new(steps), 16 * 1024);
    assert!(!reader.holds_memory(), "nothing before the first read");
    let mut chunk = [0; 4096];
    assert_eq!(reader.read(&mut chunk).await.unwrap(), 4096);
    assert!(reader.holds_memory(), "1,904 bytes still wait");
    assert_eq!(reader.read(&mut chunk).await.unwrap(), 1_904);
    assert!(!reader.holds_memory(), "given back once empty");
    // The next read waits once (the connection is idle) before its bytes arrive: nothing is
    // held while it waits.
    let mut cx = Context::from_waker(std::task::Waker::noop());
    let mut out = ReadBuf::new(&mut chunk);
    let read = Pin::new(&mut reader).poll_read(&mut cx, &mut out);
    assert!(read.is_pending());
    assert!(!reader.holds_memory(), "an idle connection holds no buffer");
    assert_eq!(reader.read(&mut chunk).await.unwrap(), 10);
    assert!(!reader.holds_memory());
}

#[tokio::test]
async fn reads_as_large_as_the_buffer_go_straight_to_the_socket() {
    let data = bytes(40_000);
    let mut reader = ReadBuffer::new(Scripted::new([Step::Data(data.clone())]), 16 * 1024);
    let mut chunk = vec![0; 32 * 1024];
    assert_eq!(reader.read(&mut chunk).await.unwrap(), 32 * 1024);
    assert_eq!(chunk, data[..32 * 1024]);
    assert_eq!(reader.inner.asked, [32 * 1024]);
    assert!(!reader.holds_memory(), "nothing went through the buffer");
}

#[tokio::test]
async fn a_failed_socket_read_is_returned_and_holds_nothing() {
    let steps = [Step::Data(bytes(100)), Step::Fail];
    let mut reader = ReadBuffer::new(Scripted::new(steps), 16 * 1024);
    let mut chunk = [0; 4096];
    assert_eq!(reader.read(&mut chunk).await.unwrap(), 100);
    let err = reader.read(&mut chunk).await.unwrap_err();
    assert_eq!(err.to_string(), "connection reset");
    assert!(!reader.holds_memory());
}

#[tokio::test]
async fn writes_go_straight_through_vectored() {
    let mut writer = ReadBuffer::new(Vec::<u8>::new(), 16 * 1024);
    assert!(
        writer.is_write_vectored(),
        "rustls writes its records vectored"
    );
    let parts = [IoSlice::new(b"HTTP/1.1 200 OK\r\n"), IoSlice::new(b"\r\n")];
    let n = writer.write_vectored(&parts).await.unwrap();
    writer.flush().await.unwrap();
    assert_eq!(n, 19);
    assert_eq!(writer.inner, b"HTTP/1.1 200 OK\r\n\r\n");
}

#[tokio::test]
async fn accepted_sockets_get_nodelay() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let client = tokio::spawn(async move { TcpStream::connect(addr).await.unwrap() });
    let (accepted, _) = listener.accept().await.unwrap();
    assert!(!accepted.nodelay().unwrap(), "precondition: off by default");
    prepare_socket(&accepted).unwrap();
    assert!(accepted.nodelay().unwrap());
    drop(client.await.unwrap());
}
