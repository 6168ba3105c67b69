//! ConfigMap/Secret lookups through the Kubernetes API, behind a cache. Entries older than the
//! TTL are served while one background task refreshes them. Objects not cached are fetched in
//! parallel (one request per object, however many reviews want it), and a review waits at most
//! the lookup timeout: what has not answered becomes [`Lookup::Failed`], so the core admits the
//! object with a warning instead of the API server timing the webhook out. Failures are not
//! cached; values are never logged.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use futures_util::future::{BoxFuture, Shared};
use parking_lot::Mutex;

use crate::controller::config_store::StoreReader;
use crate::controller::fetch::{ReadError, read_config};
use crate::hash::{ConfigData, ConfigId, ConfigKind, Lookup, SecretKey};
use crate::object_names::is_object_name;
use crate::webhook::webhook_metrics::Metrics;

/// The reason given for every lookup when the server runs with `--no-kube`.
pub const NO_KUBE: &str = "no Kubernetes API: --no-kube";

/// Tuning of the lookup cache.
#[derive(Debug, Clone, Copy)]
pub struct CacheConfig {
    /// Entries older than this are refreshed in the background (and still served).
    pub ttl: Duration,
    /// Longest one review waits for the objects it needs.
    pub timeout: Duration,
    /// Most entries kept; the oldest is dropped to make room.
    pub max_entries: usize,
    /// Longest one API request may take before it counts as failed (and can be retried);
    /// longer than `timeout`, so a slow answer still fills the cache for later reviews.
    pub request_timeout: Duration,
}

type Key = (String, ConfigKind, String);

struct Entry {
    lookup: Lookup,
    fetched: Instant,
}

/// An API request under way, awaited by every review that needs its object.
type Pending = Shared<BoxFuture<'static, Lookup>>;

struct Inner {
    client: Option<kube::Client>,
    secret_key: Option<SecretKey>,
    config: CacheConfig,
    cache: Mutex<HashMap<Key, Entry>>,
    inflight: Mutex<HashMap<Key, Pending>>,
    metrics: Metrics,
    view: OnceLock<StoreReader>,
}

/// Cached ConfigMap/Secret lookups; cheap to clone (shared cache).
#[derive(Clone)]
pub struct Lookups(Arc<Inner>);

impl Lookups {
    /// Lookups through `client` (`None`, `--no-kube`: every lookup fails with [`NO_KUBE`]);
    /// Secret values are reduced under `secret_key` as they arrive (without one, never asked).
    pub fn new(
        client: Option<kube::Client>,
        secret_key: Option<SecretKey>,
        config: CacheConfig,
        metrics: Metrics,
    ) -> Self {
        Self(Arc::new(Inner {
            client,
            secret_key,
            config,
            cache: Mutex::new(HashMap::new()),
            inflight: Mutex::new(HashMap::new()),
            metrics,
            view: OnceLock::new(),
        }))
    }

    /// Answers from the rollout controller's view from now on, once it has synced: the same
    /// digests the controller hashes, with no API round trip.
    pub fn set_view(&self, store: StoreReader) {
        let _ = self.0.view.set(store);
    }

    /// The objects `refs` in `namespace`, within the lookup timeout: from the controller's
    /// view where it holds them fresh, else from the cache or the API.
    pub async fn fetch(&self, namespace: &str, refs: &BTreeSet<ConfigId>) -> ConfigData {
        let mut data = ConfigData::new();
        let mut rest = refs.clone();
        if let Some(view) = self.0.view.get() {
            view.read(|view| {
                rest.retain(|id| match view.lookup(namespace, id) {
                    Some(lookup) => {
                        data.insert(id.clone(), lookup);
                        false
                    }
                    None => true,
                });
            });
        }
        if rest.is_empty() {
            return data;
        }
        if self.0.client.is_none() {
            for id in &rest {
                self.0.metrics.lookup_failed();
                data.insert(id.clone(), Lookup::Failed(NO_KUBE.to_owned()));
            }
            return data;
        }
        let mut missing = Vec::new();
        let mut stale = Vec::new();
        {
            let now = Instant::now();
            let cache = self.0.cache.lock();
            for id in &rest {
                let key = key(namespace, id);
                match cache.get(&key) {
                    Some(entry) => {
                        data.insert(id.clone(), entry.lookup.clone());
                        if now.duration_since(entry.fetched) >= self.0.config.ttl {
                            stale.push(key);
                        }
                    }
                    None => missing.push((id, key)),
                }
            }
        }
        for key in stale {
            // Served as it is; refreshed behind the scenes (once, however many ask).
            drop(self.pending(key));
        }
        let waits = missing
            .into_iter()
            .map(|(id, key)| (id, self.pending(key)))
            .collect();
        self.wait_all(namespace, waits, &mut data).await;
        data
    }

    /// The objects `refs` in `namespace` read from the API now, past the view and the cache
    /// (which the answers refresh), within the lookup timeout.
    pub async fn fetch_fresh(&self, namespace: &str, refs: &BTreeSet<ConfigId>) -> ConfigData {
        let mut data = ConfigData::new();
        let waits = refs
            .iter()
            .map(|id| {
                let this = self.clone();
                let key = key(namespace, id);
                let request = tokio::spawn(async move { this.load(key).await });
                let lookup = request.map(|done| {
                    done.unwrap_or_else(|_| Lookup::Failed("lookup task failed".to_owned()))
                });
                (id, lookup)
            })
            .collect();
        self.wait_all(namespace, waits, &mut data).await;
        data
    }

    /// Waits for every lookup until one shared deadline (the lookup timeout); one that misses
    /// it counts as failed, and keeps running to fill the cache for later reviews.
    async fn wait_all(
        &self,
        namespace: &str,
        waits: Vec<(&ConfigId, impl Future<Output = Lookup>)>,
        data: &mut ConfigData,
    ) {
        let timeout = self.0.config.timeout;
        let deadline = tokio::time::Instant::now() + timeout;
        for (id, wait) in waits {
            let lookup = tokio::time::timeout_at(deadline, wait).await;
            let lookup = lookup.unwrap_or_else(|_| timed_out(timeout));
            if let Lookup::Failed(reason) = &lookup {
                self.0.metrics.lookup_failed();
                tracing::debug!(namespace, object = %id, reason, "config lookup failed");
            }
            data.insert(id.clone(), lookup);
        }
    }

    /// Number of cached entries.
    pub fn cached(&self) -> usize {
        self.0.cache.lock().len()
    }

    /// The API request for `key`: the one under way, or a new one. Each request runs in its
    /// own task, so it finishes (and fills the cache) even if every review stops waiting.
    fn pending(&self, key: Key) -> Pending {
        let mut inflight = self.0.inflight.lock();
        if let Some(pending) = inflight.get(&key) {
            return pending.clone();
        }
        let this = self.clone();
        let request_key = key.clone();
        let pending = async move {
            let lookup = this.load(request_key.clone()).await;
            this.0.inflight.lock().remove(&request_key);
            lookup
        }
        .boxed()
        .shared();
        inflight.insert(key, pending.clone());
        tokio::spawn(pending.clone());
        pending
    }

    /// Asks the API for one object and caches the answer (a failed refresh leaves the stale
    /// entry in place).
    async fn load(&self, key: Key) -> Lookup {
        let request_timeout = self.0.config.request_timeout;
        let lookup = match &self.0.client {
            Some(client) => tokio::time::timeout(
                request_timeout,
                get(client.clone(), self.0.secret_key.as_ref(), &key),
            )
            .await
            .unwrap_or_else(|_| timed_out(request_timeout)),
            None => Lookup::Failed(NO_KUBE.to_owned()),
        };
        if matches!(lookup, Lookup::Failed(_)) {
            return lookup;
        }
        let mut cache = self.0.cache.lock();
        if !cache.contains_key(&key)
            && cache.len() >= self.0.config.max_entries
            && let Some(oldest) = cache
                .iter()
                .min_by_key(|(_, e)| e.fetched)
                .map(|(k, _)| k.clone())
        {
            cache.remove(&oldest);
        }
        cache.insert(
            key,
            Entry {
                lookup: lookup.clone(),
                fetched: Instant::now(),
            },
        );
        lookup
    }
}

fn timed_out(after: Duration) -> Lookup {
    let after = humantime::format_duration(after);
    Lookup::Failed(format!("API timed out after {after}"))
}

fn key(namespace: &str, id: &ConfigId) -> Key {
    (namespace.to_owned(), id.kind, id.name.clone())
}

async fn get(
    client: kube::Client,
    secret_key: Option<&SecretKey>,
    (namespace, kind, name): &Key,
) -> Lookup {
    // Names come from the object under review, before the API server validates it: one that
    // no object can have must not become part of an API path (`../secrets/x`, `x?watch=1`).
    if !is_object_name(namespace) {
        return Lookup::Failed("the review names no namespace".to_owned());
    }
    if !is_object_name(name) {
        return Lookup::NotFound;
    }
    let id = ConfigId {
        kind: *kind,
        name: name.clone(),
    };
    match read_config(client, namespace, &id, secret_key).await {
        Ok(Some((_, object))) => Lookup::Found(object),
        Ok(None) => Lookup::NotFound,
        Err(err @ ReadError::NoSecretKey) => Lookup::Failed(err.to_string()),
        Err(ReadError::Api(err)) => {
            tracing::debug!(%kind, namespace, name, error = %crate::report::one_line(&err), "config lookup failed");
            Lookup::Failed(short_reason(&err))
        }
    }
}

/// A reason short enough for a warning (the full error goes to the debug log).
fn short_reason(err: &kube::Error) -> String {
    match err {
        kube::Error::Api(status) => format!("API error {} {}", status.code, status.reason),
        kube::Error::Auth(_) => "API authentication failed".to_owned(),
        _ => "API unreachable".to_owned(),
    }
}
