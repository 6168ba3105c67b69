//! The rollout controller inside `serve`: keeps the promise of the admission hash after
//! admission.
//!
//! Every replica keeps one watch-fed view ([`discovery`] → [`watches`] → [`run`]: only kinds the
//! API server serves are watched): which namespaces opted in,
//! the ConfigMaps/Secrets of those namespaces only (watched per namespace by [`scoped`] and
//! reduced to per-key digests on arrival, into the [`store`] the webhook reads too; [`fetch`]
//! GETs only what no watch knows), and the stamped workloads and sidecar Pods reduced to what
//! they consume ([`reduce`], [`view`]). The replica holding the Lease
//! ([`leader`]) decides ([`reconcile`]) and writes ([`writer`]): a workload whose env-consumed
//! config changed gets its `config-hash` re-stamped (a rolling update); a sidecar Pod whose
//! mounted config changed gets its `mounted-config-hash` patched, so the kubelet refreshes the
//! files at once.

pub mod discovery;
pub mod fetch;
pub mod intern;
pub mod leader;
pub mod metrics;
#[cfg(test)]
mod mock_api;
pub mod rate;
pub mod reconcile;
pub mod reduce;
pub mod run;
pub mod scoped;
pub mod store;
pub mod target;
pub mod view;
pub mod watches;
pub mod waves;
pub mod writer;

use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use crate::hash::SecretKey;
use metrics::ControllerMetrics;
use store::ConfigStore;

/// Name of the Lease the replicas elect a writer with.
pub const LEASE_NAME: &str = "reload-injector";

/// How the controller runs.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The webhook's own namespace: the Lease lives there, and it is never acted on.
    pub own_namespace: String,
    /// The HMAC key for Secrets (without one, Secrets are neither fetched nor hashed).
    pub secret_key: Option<SecretKey>,
    /// `--rollout-delay`: changes this close together become one rollout per workload.
    pub rollout_delay: Duration,
    /// `--max-writes-per-second`.
    pub max_writes_per_second: f64,
    /// `--lease-duration`.
    pub lease_duration: Duration,
}

/// A running controller: the view's config half (for the webhook) and whether it has synced.
#[derive(Debug, Clone)]
pub struct Controller {
    /// Config metadata and digests, read by the webhook's lookups.
    pub store: Arc<RwLock<ConfigStore>>,
    /// `true` once every watch has listed (`/readyz` waits for it).
    pub synced: watch::Receiver<bool>,
}

/// Starts the watches, the election, the writer and the loop. `shutdown` completes on SIGTERM:
/// the Lease is then handed over at once.
pub fn start(
    client: kube::Client,
    settings: Settings,
    metrics: ControllerMetrics,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Controller {
    let store = Arc::new(RwLock::new(ConfigStore::default()));
    let (synced_tx, synced) = watch::channel(false);
    let (watched_tx, watched) = mpsc::channel(watches::BUFFER);
    let (fetched_tx, fetched) = mpsc::unbounded_channel();
    let (outcomes_tx, outcomes) = mpsc::unbounded_channel();
    let (leader_tx, leader) = watch::channel(false);

    let scoped = scoped::ScopedWatches::new(
        client.clone(),
        watched_tx.clone(),
        settings.secret_key.clone(),
    );
    tokio::spawn(discovery::run(client.clone(), watched_tx));
    let lease = leader::LeaseConfig {
        namespace: settings.own_namespace.clone(),
        name: LEASE_NAME.to_owned(),
        identity: leader::identity(),
        lease_duration: settings.lease_duration,
    };
    tracing::info!(identity = lease.identity, "starting the rollout controller");
    tokio::spawn(leader::run(client.clone(), lease, leader_tx, shutdown));
    let writer = writer::Writer::spawn(
        client.clone(),
        writer::WriterConfig {
            max_writes_per_second: settings.max_writes_per_second,
            request_timeout: Duration::from_secs(10),
        },
        leader.clone(),
        outcomes_tx,
        writer_counters(&metrics),
    );
    let fetcher = fetch::Fetcher::spawn(client, settings.secret_key.clone(), fetched_tx);
    let controller_loop = run::Loop::new(run::Parts {
        own_namespace: settings.own_namespace,
        store: store.clone(),
        fetcher,
        scoped,
        writer,
        secret_key: settings.secret_key,
        rollout_delay: settings.rollout_delay,
        metrics,
        synced: synced_tx,
    });
    tokio::spawn(controller_loop.run(run::Inputs {
        watched,
        fetched,
        outcomes,
        leader,
    }));
    Controller { store, synced }
}

/// The writer's counters feed the controller's metrics (its held writes are its part of
/// `pending_writes`).
fn writer_counters(metrics: &ControllerMetrics) -> writer::Counters {
    let (written, held) = (metrics.clone(), metrics.pending_share());
    writer::Counters {
        written: Arc::new(move |kind| written.written(kind)),
        held: Arc::new(move |count| held.set(count)),
    }
}
