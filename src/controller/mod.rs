//! The rollout controller inside `serve`: keeps the promise of the admission hash after
//! admission. Every replica keeps one watch-fed view ([`view`], and the [`config_store`] the
//! webhook reads too); the replica holding the Lease ([`leader`]) decides ([`reconcile`]) and
//! writes ([`writer`]): a workload's `config-hash` re-stamped, a sidecar Pod's
//! `mounted-config-hash` patched so the kubelet refreshes the files at once. [`rollout_loop`]
//! ties the pure owners together.
//!
//! Imports: the shared domain (`hash`, `workload`, `kinds`, `policy`) and the helpers `backoff`
//! and `report`; never `webhook`, `watch`, `status`, `certs` or `offline`.

pub mod cluster_watches;
pub mod config_store;
pub mod config_watches;
pub mod controller_metrics;
pub mod discovery;
pub mod fetch;
pub mod fetch_book;
pub mod intern;
pub mod leader;
pub mod listings;
#[cfg(test)]
mod mock_api;
pub mod rate;
pub mod reconcile;
pub mod reduce;
pub mod restart_waves;
pub mod rollout_loop;
pub mod schedule;
#[cfg(test)]
mod test_fixtures;
pub mod view;
pub mod waves;
pub mod write_book;
pub mod write_target;
pub mod writer;

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use crate::hash::SecretKey;
use config_store::{ConfigStore, StoreReader, StoreWriter};
use controller_metrics::ControllerMetrics;

/// Name of the Lease the replicas elect a writer with.
pub const LEASE_NAME: &str = "reload-injector";

/// How the controller runs (the rest are `serve`'s flags of the same names).
#[derive(Debug, Clone)]
pub struct Settings {
    /// The webhook's own namespace: the Lease lives there, and it is never acted on.
    pub own_namespace: String,
    /// The HMAC key for Secrets (without one, Secrets are neither fetched nor hashed).
    pub secret_key: Option<SecretKey>,
    pub rollout_delay: Duration,
    pub max_writes_per_second: f64,
    pub lease_duration: Duration,
    pub reloader_retired: bool,
}

/// A running controller: the view's config half (for the webhook) and whether it has synced.
#[derive(Debug, Clone)]
pub struct Controller {
    pub store: StoreReader,
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
    let store = StoreWriter::new(ConfigStore::default());
    let reader = store.reader();
    let (synced_tx, synced) = watch::channel(false);
    let (watched_tx, watched) = mpsc::channel(cluster_watches::BUFFER);
    let (fetched_tx, fetched) = mpsc::unbounded_channel();
    let (outcomes_tx, outcomes) = mpsc::unbounded_channel();
    let (leader_tx, leader) = watch::channel(false);

    let config_watches = config_watches::ConfigWatches::new(
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
    let out = rollout_loop::Outputs {
        fetcher,
        config_watches,
        writer,
        synced: synced_tx,
        metrics,
    };
    let controller_loop = rollout_loop::Loop::new(
        view::View::new(&settings.own_namespace, settings.reloader_retired),
        store,
        settings.secret_key,
        settings.rollout_delay,
        out,
    );
    let inputs = rollout_loop::Inputs {
        watched,
        fetched,
        outcomes,
        leader,
    };
    tokio::spawn(controller_loop.run(inputs));
    Controller {
        store: reader,
        synced,
    }
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

/// Capacity a work map keeps however empty it is.
const SPARE: usize = 64;

/// Gives back the room a work map kept after a burst (the initial sync), once it is less than a
/// quarter full (so a steady load does not make it grow and shrink over and over).
fn shrink_spare<K: Eq + Hash, V>(map: &mut HashMap<K, V>) {
    if map.len() * 4 < map.capacity() && map.capacity() > SPARE {
        map.shrink_to_fit();
    }
}
