//! `reload-injector serve`: the HTTPS admission webhook.
//!
//! Wiring only; each concern has its module: [`review`] (AdmissionReview bytes in and out),
//! [`handler`] (one review through the core), [`router`] (HTTP checks), [`server`] (TLS accept
//! loop and drain) and [`read_buffer`] (its socket reads), [`tls`] and [`reload`] (certificate
//! and its hot reload), [`lookup`] (cached ConfigMap/Secret lookups), [`health`] and
//! [`metrics`] (the plain side port), [`startup`] (settings from flags, Kubernetes client,
//! sidecar mode).

pub mod handler;
pub mod health;
pub mod limits;
pub mod lookup;
pub mod metrics;
pub mod read_buffer;
pub mod reload;
pub mod review;
pub mod router;
pub mod server;
pub mod startup;
pub mod tls;

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;

use crate::cli::ServeArgs;

pub use handler::AppState;
pub use router::app;

/// Quiet period merging certificate-file events.
const CERT_DEBOUNCE: Duration = Duration::from_millis(200);
/// Safety-net re-read of the certificate files.
const CERT_RESYNC: Duration = Duration::from_secs(60);
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

/// The controller's settings from the flags.
fn controller_settings(
    args: &ServeArgs,
    secret_key: Option<crate::hash::SecretKey>,
) -> crate::controller::Settings {
    crate::controller::Settings {
        own_namespace: args.namespace.clone(),
        secret_key,
        rollout_delay: args.rollout_delay,
        max_writes_per_second: args.max_writes_per_second,
        lease_duration: args.lease_duration,
    }
}

/// The whole life of the server: check the TLS files, set up, bind, serve until `shutdown`
/// completes, drain.
pub async fn serve(
    args: ServeArgs,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    // Fail fast, before binding anything, on TLS material that cannot work.
    let pair = tls::load_pair(&args.tls_cert, &args.tls_key)
        .context("failed to load the serving certificate")?;
    let resolver = Arc::new(tls::CertResolver::new(pair));
    let metrics = metrics::Metrics::new();
    let secret_key = startup::secret_key(args.secret_hash_key_file.as_deref())?;
    let client = startup::kube_client(args.no_kube).await?;
    let native = startup::native_sidecars(args.native_sidecars, client.as_ref()).await;
    let settings = startup::settings(&args, native, secret_key.clone());
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
    let controller = match (&client, args.rollouts) {
        (Some(client), true) => {
            let mut terminating = terminating.clone();
            let handed_over = async move {
                let _ = terminating.wait_for(|t| *t).await;
            };
            let controller = crate::controller::start(
                client.clone(),
                controller_settings(&args, settings.secret_key.clone()),
                metrics.controller().clone(),
                handed_over,
            );
            lookups.set_view(controller.store.clone());
            Some(controller)
        }
        _ => None,
    };
    let state = AppState::new(settings, lookups, metrics.clone());

    let listener = TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("failed to listen on {} (--listen)", args.listen))?;
    let side = TcpListener::bind(args.metrics_listen)
        .await
        .with_context(|| {
            format!(
                "failed to listen on {} (--metrics-listen)",
                args.metrics_listen
            )
        })?;
    reload::spawn(
        resolver.clone(),
        reload::ReloadConfig {
            cert: args.tls_cert.clone(),
            key: args.tls_key.clone(),
            debounce: CERT_DEBOUNCE,
            resync: CERT_RESYNC,
        },
        metrics.clone(),
    )?;

    let ready = health::Readiness::default();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let side_addr = side.local_addr()?;
    let side_task = tokio::spawn({
        let mut stop_rx = stop_rx.clone();
        let app = health::app(ready.clone(), metrics);
        async move {
            let stopped = async move {
                let _ = stop_rx.wait_for(|stop| *stop).await;
            };
            axum::serve(side, app).with_graceful_shutdown(stopped).await
        }
    });
    tracing::info!(addr = %side_addr, "serving /healthz, /readyz and /metrics");
    tracing::info!(addr = %listener.local_addr()?, "serving admission reviews on /mutate");
    match controller {
        None => ready.set(true),
        // Ready once the view has synced, so that reviews and the controller hash alike.
        Some(controller) => {
            let (ready, terminating) = (ready.clone(), terminating.clone());
            let mut synced = controller.synced;
            tokio::spawn(async move {
                if synced.wait_for(|s| *s).await.is_ok() && !*terminating.borrow() {
                    ready.set(true);
                }
            });
        }
    }

    let stopping = {
        let ready = ready.clone();
        async move {
            shutdown.await;
            let _ = terminating_tx.send(true);
            ready.set(false);
        }
    };
    let (limits, http) = startup::limits(&args);
    let drained = server::serve(
        listener,
        tls::server_config(resolver),
        router::app_with(state, http),
        limits,
        stopping,
    )
    .await;
    let _ = stop_tx.send(true);
    let _ = tokio::time::timeout(Duration::from_secs(1), side_task).await;
    tracing::info!(drained, "stopped");
    Ok(())
}
