//! Certificate hot reload: inotify on the directories of `--tls-cert`/`--tls-key` (where the
//! kubelet's swap of a mounted Secret shows up), debounced; only a good, different pair replaces
//! the served one. A slow periodic re-check catches what inotify could not see.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use inotify::{Inotify, WatchMask};

use super::tls::{CertResolver, load_pair};
use super::webhook_metrics::Metrics;

/// The watch could not be set up: inotify refused to start or to watch a directory.
#[derive(Debug, thiserror::Error)]
#[error("failed to watch {} for certificate changes", path.display())]
pub struct ReloadError {
    path: PathBuf,
    #[source]
    source: std::io::Error,
}

/// Quiet time that ends a burst of events (a kubelet swap is several).
const DEBOUNCE: Duration = Duration::from_millis(200);
/// Period of the re-check.
const RESYNC: Duration = Duration::from_secs(60);

/// Starts watching the pair `cert`/`key`; the returned task runs until the runtime stops.
pub fn spawn(
    resolver: Arc<CertResolver>,
    cert: PathBuf,
    key: PathBuf,
    metrics: Metrics,
) -> Result<tokio::task::JoinHandle<()>, ReloadError> {
    let failed = |path: &PathBuf| {
        let path = path.clone();
        move |source| ReloadError { path, source }
    };
    let inotify = Inotify::init().map_err(failed(&cert))?;
    let mask = WatchMask::CREATE
        | WatchMask::MOVED_TO
        | WatchMask::CLOSE_WRITE
        | WatchMask::DELETE
        | WatchMask::MOVED_FROM;
    let mut dirs = vec![parent(&cert)];
    if parent(&key) != dirs[0] {
        dirs.push(parent(&key));
    }
    for dir in &dirs {
        inotify.watches().add(dir, mask).map_err(failed(dir))?;
    }
    let events = inotify.into_event_stream(vec![0u8; 4096]);
    let events = events.map_err(failed(&dirs[0]))?;
    Ok(tokio::spawn(watch(events, resolver, (cert, key), metrics)))
}

fn parent(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    }
}

async fn watch(
    mut events: inotify::EventStream<Vec<u8>>,
    resolver: Arc<CertResolver>,
    (cert, key): (PathBuf, PathBuf),
    metrics: Metrics,
) {
    let mut resync = tokio::time::interval(RESYNC);
    resync.tick().await;
    let mut watching = true;
    loop {
        tokio::select! {
            event = events.next(), if watching => match event {
                Some(Ok(_)) => {
                    // Merge the burst (a kubelet swap is several events).
                    while let Ok(Some(_)) = tokio::time::timeout(DEBOUNCE, events.next()).await {}
                }
                Some(Err(err)) => {
                    tracing::warn!(error = %err, "certificate watch failed; relying on the periodic re-check");
                    watching = false;
                }
                None => return,
            },
            _ = resync.tick() => {}
        }
        reload(&resolver, &cert, &key, &metrics);
    }
}

/// Re-reads the pair; swaps it in when it is good and different.
fn reload(resolver: &CertResolver, cert: &Path, key: &Path, metrics: &Metrics) {
    match load_pair(cert, key) {
        Ok(pair) if pair.cert == resolver.current().cert => {}
        Ok(pair) => {
            resolver.replace(pair);
            metrics.cert_reload(true);
            tracing::info!(cert = %cert.display(), "serving certificate reloaded");
        }
        Err(err) => {
            metrics.cert_reload(false);
            tracing::warn!(
                error = %crate::report::one_line(&err),
                "keeping the previous serving certificate"
            );
        }
    }
}
