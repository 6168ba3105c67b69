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

/// Where the pair lives, and the debounce and re-check periods.
#[derive(Debug, Clone)]
pub struct ReloadConfig {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub debounce: Duration,
    pub resync: Duration,
}

/// Starts watching; the returned task runs until the runtime stops.
pub fn spawn(
    resolver: Arc<CertResolver>,
    config: ReloadConfig,
    metrics: Metrics,
) -> Result<tokio::task::JoinHandle<()>, ReloadError> {
    let failed = |path: &PathBuf| {
        let path = path.clone();
        move |source| ReloadError { path, source }
    };
    let inotify = Inotify::init().map_err(failed(&config.cert))?;
    let mask = WatchMask::CREATE
        | WatchMask::MOVED_TO
        | WatchMask::CLOSE_WRITE
        | WatchMask::DELETE
        | WatchMask::MOVED_FROM;
    let mut dirs = vec![parent(&config.cert)];
    if parent(&config.key) != dirs[0] {
        dirs.push(parent(&config.key));
    }
    for dir in &dirs {
        inotify.watches().add(dir, mask).map_err(failed(dir))?;
    }
    let events = inotify.into_event_stream(vec![0u8; 4096]);
    let events = events.map_err(failed(&dirs[0]))?;
    Ok(tokio::spawn(watch(events, resolver, config, metrics)))
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
    config: ReloadConfig,
    metrics: Metrics,
) {
    let mut resync = tokio::time::interval(config.resync);
    resync.tick().await;
    let mut watching = true;
    loop {
        tokio::select! {
            event = events.next(), if watching => match event {
                Some(Ok(_)) => {
                    // Merge the burst (a kubelet swap is several events).
                    while let Ok(Some(_)) = tokio::time::timeout(config.debounce, events.next()).await {}
                }
                Some(Err(err)) => {
                    tracing::warn!(error = %err, "certificate watch failed; relying on the periodic re-check");
                    watching = false;
                }
                None => return,
            },
            _ = resync.tick() => {}
        }
        reload(&resolver, &config, &metrics);
    }
}

/// Re-reads the pair; swaps it in when it is good and different. Returns whether it swapped.
pub fn reload(resolver: &CertResolver, config: &ReloadConfig, metrics: &Metrics) -> bool {
    match load_pair(&config.cert, &config.key) {
        Ok(pair) => {
            if pair.cert == resolver.current().cert {
                return false;
            }
            resolver.replace(pair);
            metrics.cert_reload(true);
            tracing::info!(cert = %config.cert.display(), "serving certificate reloaded");
            true
        }
        Err(err) => {
            metrics.cert_reload(false);
            tracing::warn!(
                error = %crate::report::one_line(&err),
                "keeping the previous serving certificate"
            );
            false
        }
    }
}
