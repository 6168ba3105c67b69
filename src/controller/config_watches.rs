//! The ConfigMap and Secret watches (I/O, thin): one per kind and opted-in namespace, so no byte
//! of a namespace that never opted in crosses the wire. Objects are reduced to per-key digests
//! on arrival. The initial list is a streaming list where served (no page is held), else pages
//! of [`PAGE`], at most [`LISTS`] at once, so memory does not grow with the data. Without a
//! Secret hash key, Secrets are watched metadata-only. A refused namespace (RBAC) is reported
//! once and retried; the others go on.

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::Api;
use kube::core::PartialObjectMeta;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Config};
use kube::{Client, Resource};
use tokio::sync::Semaphore;
use tokio::sync::mpsc::Sender;
use tokio::task::JoinHandle;

use super::cluster_watches::{Item, Source, Watched, forward};
use super::config_store::{ConfigKey, Digests, Meta};
use crate::hash::{ConfigId, ConfigKind, ConfigObject, SecretKey};

/// Objects per list page when streaming lists are not served: a page is held whole, parsed,
/// until each of its objects is digested (at 20 KB an object, about 2 MB).
pub const PAGE: u32 = 100;
/// Most paginated initial lists under way at once.
pub const LISTS: usize = 4;

/// Where one watch reads: a kind in a namespace.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Scope {
    pub kind: ConfigKind,
    pub namespace: Arc<str>,
}

impl Scope {
    pub fn new(kind: ConfigKind, namespace: &str) -> Self {
        Self {
            kind,
            namespace: namespace.into(),
        }
    }

    /// The watch that lists `key`.
    pub fn of(key: &ConfigKey) -> Self {
        let namespace = key.namespace.clone();
        Self {
            kind: key.id.kind,
            namespace,
        }
    }
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}s in {}", self.kind, self.namespace)
    }
}

/// The running per-namespace watches.
pub struct ConfigWatches {
    task: Task,
    tasks: HashMap<Arc<str>, Vec<JoinHandle<()>>>,
}

impl ConfigWatches {
    pub fn new(client: Client, out: Sender<Watched>, secret_key: Option<SecretKey>) -> Self {
        let task = Task {
            client,
            out,
            secret_key,
            streaming: Arc::new(AtomicBool::new(true)),
            lists: Arc::new(Semaphore::new(LISTS)),
        };
        Self {
            task,
            tasks: HashMap::new(),
        }
    }

    /// Starts the ConfigMap and Secret watches of `namespace` (once).
    pub fn start(&mut self, namespace: &Arc<str>) {
        if self.tasks.contains_key(namespace) {
            return;
        }
        let tasks = [ConfigKind::ConfigMap, ConfigKind::Secret]
            .into_iter()
            .map(|kind| {
                let scope = Scope {
                    kind,
                    namespace: namespace.clone(),
                };
                tokio::spawn(self.task.clone().run(scope))
            })
            .collect();
        self.tasks.insert(namespace.clone(), tasks);
    }

    pub fn stop(&mut self, namespace: &str) {
        for task in self.tasks.remove(namespace).into_iter().flatten() {
            task.abort();
        }
    }
}

impl Drop for ConfigWatches {
    fn drop(&mut self) {
        for task in self.tasks.drain().flat_map(|(_, tasks)| tasks) {
            task.abort();
        }
    }
}

#[derive(Clone)]
struct Task {
    client: Client,
    out: Sender<Watched>,
    secret_key: Option<SecretKey>,
    /// Cleared (for every watch) the first time the API server refuses a streaming list.
    streaming: Arc<AtomicBool>,
    lists: Arc<Semaphore>,
}

impl Task {
    async fn run(self, scope: Scope) {
        loop {
            let streaming = self.streaming.load(Ordering::Relaxed);
            let no_streaming = match (scope.kind, self.secret_key.clone()) {
                (ConfigKind::ConfigMap, _) => {
                    self.watch::<ConfigMap>(&scope, streaming, |cm| {
                        let digests = ConfigObject::from_config_map(&cm).into();
                        (cm.metadata, Some(digests))
                    })
                    .await
                }
                (ConfigKind::Secret, Some(key)) => {
                    self.watch::<Secret>(&scope, streaming, move |secret| {
                        let digests = ConfigObject::from_secret(&secret, &key).into();
                        (secret.metadata, Some(digests))
                    })
                    .await
                }
                (ConfigKind::Secret, None) => {
                    self.watch::<PartialObjectMeta<Secret>>(&scope, streaming, |secret| {
                        (secret.metadata, None)
                    })
                    .await
                }
            };
            if !no_streaming {
                return;
            }
            if self.streaming.swap(false, Ordering::Relaxed) {
                tracing::info!(
                    "the API server does not serve streaming lists; listing config in pages"
                );
            }
        }
    }

    /// Runs one watcher until the receiver goes (`false`) or streaming lists are not served.
    async fn watch<K>(
        &self,
        scope: &Scope,
        streaming: bool,
        reduce: impl Fn(K) -> (ObjectMeta, Option<Digests>),
    ) -> bool
    where
        K: Resource<DynamicType = (), Scope = NamespaceResourceScope>,
        K: Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    {
        let api = Api::<K>::namespaced(self.client.clone(), &scope.namespace);
        let config = if streaming {
            Config::default().streaming_lists()
        } else {
            Config::default().page_size(PAGE)
        };
        let events = watcher::watcher(api, config).default_backoff();
        let lists = (!streaming).then_some(&self.lists);
        let source = Source::Config(scope.clone());
        forward(events, source, &self.out, lists, |object| {
            let (metadata, digests) = reduce(object);
            let annotations = metadata.annotations.as_ref();
            let meta = Meta {
                resource_version: metadata.resource_version.unwrap_or_default(),
                ignore: crate::policy::ignored(annotations),
                matched: crate::policy::reloader::matched(annotations),
            };
            let (namespace, name) = (metadata.namespace?.into(), metadata.name?);
            let id = ConfigId {
                kind: scope.kind,
                name,
            };
            let key = ConfigKey { namespace, id };
            Some(Item::Config { key, meta, digests })
        })
        .await
    }
}
