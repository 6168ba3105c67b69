//! `reload-injector serve`: the HTTPS admission webhook. Wiring only; each concern has its
//! module (each says what it does).
//!
//! Imports: the shared domain (`hash`, `workload`, `kinds`, `object_names`), the `controller` it
//! starts (its store, its metrics), and the helpers `cli`, `report`, `scratch`, `telemetry`; never `watch`,
//! `status`, `certs` or `offline`.

pub mod admission_review;
pub mod cert_reload;
pub mod handler;
pub mod health;
pub mod limits;
pub mod lookup;
pub mod router;
pub mod server;
pub mod startup;
pub mod tls;
pub mod webhook_metrics;

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;

use crate::cli::ServeArgs;

pub use handler::AppState;
pub use router::app;

/// Longest one ConfigMap/Secret GET may take (reviews stop waiting after `--lookup-timeout`).
const LOOKUP_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Most ConfigMaps/Secrets kept in the lookup cache.
const CACHE_ENTRIES: usize = 10_000;

/// Runs the webhook until SIGTERM or SIGINT, then drains within `--drain-timeout`.
pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    // One CPU (a pod with a 1-CPU limit, or `taskset`): a single-threaded runtime avoids the
    // cross-thread hand-offs of a work-stealing pool. More CPUs: one worker per CPU.
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut builder = if cpus == 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        tokio::runtime::Builder::new_multi_thread()
    };
    let runtime = builder
        .enable_all()
        .build()
        .context("failed to start the async runtime")?;
    runtime.block_on(serve(args, startup::termination()))
}

/// The whole life of the server: check the TLS files, set up, bind, serve until `shutdown`
/// completes, drain.
pub async fn serve(
    args: ServeArgs,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    // Fails fast, before binding anything, on TLS material that cannot work.
    let pair = tls::load_pair(&args.tls_cert, &args.tls_key)
        .context("failed to load the serving certificate")?;
    let resolver = Arc::new(tls::CertResolver::new(pair));
    let metrics = webhook_metrics::Metrics::new();
    let secret_key = startup::secret_key(args.injection.secret_hash_key_file.as_deref())?;
    let client = startup::kube_client(args.no_kube).await?;
    let support = startup::cluster_support(args.injection.native_sidecars, client.as_ref()).await;
    let settings = startup::settings(&args, support, secret_key.clone());
    let lookups = lookup::Lookups::new(
        client.clone(),
        secret_key,
        lookup::CacheConfig {
            ttl: args.cache_ttl,
            timeout: args.lookup_timeout,
            max_entries: CACHE_ENTRIES,
            request_timeout: LOOKUP_REQUEST_TIMEOUT,
        },
        metrics.clone(),
    );
    let (terminating_tx, terminating) = tokio::sync::watch::channel(false);
    let controller = start_controller(&args, client, &settings, &lookups, &metrics, &terminating);
    let state = AppState::new(settings, lookups, metrics.clone());
    let bind = |addr, flag| async move {
        let listener = TcpListener::bind(addr).await;
        listener.with_context(|| format!("failed to listen on {addr} ({flag})"))
    };
    let listener = bind(args.listen, "--listen").await?;
    let side = bind(args.metrics_listen, "--metrics-listen").await?;
    let (cert, key) = (args.tls_cert.clone(), args.tls_key.clone());
    cert_reload::spawn(resolver.clone(), cert, key, metrics.clone())?;
    let ready = health::Readiness::default();
    let side = health::SidePort::start(side, ready.clone(), metrics)?;
    tracing::info!(addr = %side.addr, "serving /healthz, /readyz and /metrics");
    tracing::info!(addr = %listener.local_addr()?, "serving admission reviews on /mutate");
    match controller {
        None => ready.set(true),
        // Once its view has synced (so that reviews and the controller hash alike), unless
        // termination began meanwhile.
        Some(controller) => {
            let (ready, mut synced) = (ready.clone(), controller.synced);
            tokio::spawn(async move {
                if synced.wait_for(|s| *s).await.is_ok() && !*terminating.borrow() {
                    ready.set(true);
                }
            });
        }
    }
    // Tells the controller (`terminating`) and `/readyz` once `shutdown` completes.
    let stopping = async move {
        shutdown.await;
        let _ = terminating_tx.send(true);
        ready.set(false);
    };
    let (limits, http) = startup::limits(&args);
    let app = router::app_with(state, http);
    let tls = tls::server_config(resolver);
    let drained = server::serve(listener, tls, app, limits, stopping).await;
    side.stop().await;
    tracing::info!(drained, "stopped");
    Ok(())
}

/// Starts the rollout controller when `--rollouts` is on and there is a Kubernetes client,
/// and lets the lookups read its view. It hands its Lease over once `terminating` turns true.
fn start_controller(
    args: &ServeArgs,
    client: Option<kube::Client>,
    settings: &crate::workload::Settings,
    lookups: &lookup::Lookups,
    metrics: &webhook_metrics::Metrics,
    terminating: &tokio::sync::watch::Receiver<bool>,
) -> Option<crate::controller::Controller> {
    let client = client.filter(|_| args.rollouts)?;
    let mut terminating = terminating.clone();
    let handed_over = async move {
        let _ = terminating.wait_for(|t| *t).await;
    };
    let controller_settings = crate::controller::Settings {
        own_namespace: args.namespace.clone(),
        secret_key: settings.secret_key.clone(),
        rollout_delay: args.rollout_delay,
        max_writes_per_second: args.max_writes_per_second,
        lease_duration: args.lease_duration,
        reloader_retired: args.injection.reloader_retired,
    };
    let controller = crate::controller::start(
        client,
        controller_settings,
        metrics.controller().clone(),
        handed_over,
    );
    lookups.set_view(controller.store.clone());
    Some(controller)
}
