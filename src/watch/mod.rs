//! `reload-injector watch`: the sidecar that reloads the app when its config changes, wired
//! together by [`runner`] on a single-threaded runtime.
//!
//! Imports: the shared domain (`hash`, `workload`) and the helpers `backoff`, `cli`, `report`,
//! `scratch`, `telemetry`; never `webhook`, `controller`, `status`, `certs` or `offline`.

pub mod app_reload;
pub mod content;
pub mod env_view;
pub mod events;
pub mod http;
pub mod inotify_watches;
pub mod procfs;
pub mod retry;
pub mod runner;
pub mod signal;
pub mod trim;
pub mod watch_metrics;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use tracing::warn;

use crate::cli::WatchArgs;
use crate::workload::values;
use app_reload::Action;
use http::Endpoint;
use signal::Signaller;

/// Everything the watcher needs, validated.
#[derive(Debug, Clone)]
pub struct Config {
    pub dirs: Vec<PathBuf>,
    /// Which of `dirs` hold Secret data (their shown hash is keyed with `private_key`).
    pub private: Vec<bool>,
    /// Random per-process key for the shown hash of Secret data.
    pub private_key: [u8; 32],
    pub action: Action,
    /// Checked after each reload, if set.
    pub verify: Option<Endpoint>,
    /// Signal mode: how long a signalled process is watched for an exit.
    pub reload_grace: Duration,
    pub debounce: Duration,
    pub resync: Duration,
    pub metrics_listen: Option<SocketAddr>,
    /// Restart in place, when the Pod does.
    pub in_place: Option<env_view::EnvWatch>,
}

/// How the watcher ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// SIGTERM or SIGINT.
    Stopped,
    /// Its Pod is to restart every container in place: exit with
    /// [`crate::workload::in_place::RESTART_CODE`].
    RestartPod,
}

impl Config {
    /// Validates the command line (bad signal names, https URLs, ...) before anything starts.
    pub fn from_args(args: WatchArgs) -> anyhow::Result<Config> {
        if args.dirs.is_empty() && args.secret_dirs.is_empty() && args.env_hash_file.is_none() {
            anyhow::bail!("failed to start: no --dir, --secret-dir or --env-hash-file given");
        }
        if args.resync.is_zero() || args.resync > Duration::from_secs(24 * 3600) {
            anyhow::bail!("failed to start: --resync must be longer than 0s and at most 1 day");
        }
        if args.debounce > Duration::from_secs(3600) {
            anyhow::bail!("failed to start: --debounce must be at most 1 hour");
        }
        let action = match &args.url {
            Some(url) => {
                if args.process.is_some() {
                    warn!("--process is ignored in HTTP mode (--url is set)");
                }
                // The core's parser first, as admission read the annotation.
                let url = values::parse_reload_url(url).context("--url")?;
                Action::Http(Endpoint::new(&args.method, url, args.timeout).context("--url")?)
            }
            None => Action::Signal(Signaller::new(
                signal::parse_signal(&args.signal).context("--signal")?,
                args.process
                    .as_deref()
                    .map(values::parse_process)
                    .transpose()
                    .context("--process")?
                    .map(str::to_owned),
                PathBuf::from("/proc"),
                i32::try_from(std::process::id()).context("own PID")?,
            )),
        };
        let verify = args
            .verify_url
            .as_deref()
            .map(|url| Endpoint::new("GET", url, args.timeout))
            .transpose()
            .context("--verify-url")?;
        let private = std::iter::repeat_n(false, args.dirs.len())
            .chain(std::iter::repeat_n(true, args.secret_dirs.len()))
            .collect();
        let in_place = match (args.env_hash_file, args.env_state_dir) {
            (Some(hash_file), Some(state_dir)) => Some(env_view::EnvWatch {
                hash_file,
                state_dir,
                root: args.env_root,
                consumed: crate::workload::in_place::parse_reads(
                    &args.env_keys,
                    &args.env_objects,
                )?,
                resync: args.resync,
            }),
            _ => None,
        };
        let dirs = args.dirs.into_iter().chain(args.secret_dirs).collect();
        Ok(Config {
            in_place,
            dirs,
            private,
            private_key: rand::random(),
            action,
            verify,
            reload_grace: args.reload_grace,
            debounce: args.debounce,
            resync: args.resync,
            metrics_listen: args.metrics_listen,
        })
    }
}

/// Runs the watcher until SIGTERM or SIGINT, or until its Pod is to restart in place, on a
/// single-threaded runtime (no idle threads, no idle timers faster than `--resync`).
pub fn run(args: WatchArgs) -> anyhow::Result<Ended> {
    let mut config = Config::from_args(args)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .context("failed to start the async runtime")?;
    let in_place = config.in_place.take();
    runtime.block_on(async move {
        let reload = async move {
            if config.dirs.is_empty() {
                // Nothing to hot-reload.
                termination()?.await;
                tracing::info!("stopping");
                Ok(())
            } else {
                runner::run(config).await
            }
        };
        match in_place {
            None => reload.await.map(|()| Ended::Stopped),
            Some(env) => tokio::select! {
                ended = reload => ended.map(|()| Ended::Stopped),
                restart = env_view::run(env) => restart.map(|()| Ended::RestartPod),
            },
        }
    })
}

/// Completes on SIGTERM or SIGINT, which it handles from now on.
fn termination() -> std::io::Result<impl Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = terminate.recv() => {}
            _ = interrupt.recv() => {}
        }
    })
}
