//! The listener: HTTP/1.1 on 127.0.0.1, one task per connection, and outages (listener
//! closed, every open connection cut, then the same port bound again).

use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use super::http;
use super::state::{Net, State, lock};

/// Accepts connections until `shutdown` fires. `net` is subscribed to `state.net` before the
/// server starts, so an outage asked for at once is not taken for the starting state.
pub async fn serve(
    state: Arc<State>,
    listener: std::net::TcpListener,
    mut net: tokio::sync::watch::Receiver<Net>,
    mut shutdown: tokio::sync::oneshot::Receiver<()>,
    outage_ack: std::sync::mpsc::Sender<()>,
) {
    let addr = listener.local_addr().expect("listener address");
    listener
        .set_nonblocking(true)
        .expect("nonblocking listener");
    let mut listener = Some(TcpListener::from_std(listener).expect("tokio listener"));
    // The epoch of the last change this loop acted on: a connection accepted now belongs to it,
    // and is cut by any later one, even one made before the connection's task starts.
    let mut epoch = net.borrow().epoch;
    loop {
        let Some(active) = &listener else {
            // `borrow`, not `borrow_and_update`: an outage asked for since the last look must
            // still wake `changed` below, which acknowledges it.
            let until = net.borrow().down_until.unwrap_or_else(Instant::now);
            tokio::select! {
                () = tokio::time::sleep_until(until.into()) => {
                    match TcpListener::bind(addr).await {
                        Ok(bound) => listener = Some(bound),
                        // The port is not free yet (a client may even have connected to itself
                        // from it): try again in a moment, still answering outage requests in
                        // between rather than looping here unseen.
                        Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
                    }
                }
                changed = net.changed() => {
                    // Another outage while down: it replaces the end of this one.
                    if changed.is_err() {
                        return;
                    }
                    epoch = net.borrow().epoch;
                    let _ = outage_ack.send(());
                }
                _ = &mut shutdown => return,
            }
            continue;
        };
        tokio::select! {
            accepted = active.accept() => {
                if let Ok((stream, _)) = accepted {
                    let _ = stream.set_nodelay(true);
                    let open = Open::new(&state, epoch);
                    tokio::spawn(connection(state.clone(), stream, open));
                }
            }
            changed = net.changed() => {
                if changed.is_err() {
                    return;
                }
                let (now, down) = {
                    let net = net.borrow_and_update();
                    (net.epoch, net.down_until.is_some())
                };
                epoch = now;
                if down {
                    listener = None;
                    let _ = outage_ack.send(());
                }
            }
            _ = &mut shutdown => return,
        }
    }
}

/// A connection counted open in the epoch it was accepted in, until dropped (so an outage can
/// wait until every earlier connection is cut).
struct Open {
    state: Arc<State>,
    epoch: u64,
}

impl Open {
    fn new(state: &Arc<State>, epoch: u64) -> Self {
        *lock(&state.open_connections).entry(epoch).or_default() += 1;
        Open {
            state: state.clone(),
            epoch,
        }
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        let mut open = lock(&self.state.open_connections);
        if let Some(count) = open.get_mut(&self.epoch) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.epoch);
            }
        }
    }
}

/// Serves one connection until it ends or the network epoch moves past its own.
async fn connection(state: Arc<State>, stream: tokio::net::TcpStream, open: Open) {
    let epoch = open.epoch;
    let mut net = state.net.subscribe();
    let service = {
        let state = state.clone();
        service_fn(move |request| {
            let state = state.clone();
            async move { Ok::<_, std::convert::Infallible>(http::handle(state, request).await) }
        })
    };
    let served = http1::Builder::new().serve_connection(TokioIo::new(stream), service);
    tokio::select! {
        _ = served => {}
        () = async {
            loop {
                if net.borrow_and_update().epoch != epoch {
                    return;
                }
                if net.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        } => {}
    }
}
