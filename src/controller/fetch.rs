//! Fetching the digests of consumed ConfigMaps/Secrets (I/O, thin): one GET per object, a
//! bounded number at once, reduced to per-key digests as the answer arrives.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::{Api, Client};
use tokio::sync::Semaphore;
use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender};

use super::store::{ConfigKey, Fetched};
use crate::hash::{ConfigKind, ConfigObject, SecretKey};

/// Most GETs in flight at once.
const CONCURRENCY: usize = 16;
/// Longest one GET may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The answer to one fetch.
#[derive(Debug)]
pub struct FetchDone {
    /// Which object.
    pub key: ConfigKey,
    /// Its digests, or why they could not be read (retried by the caller).
    pub result: Result<Fetched, String>,
}

/// Sends GETs and reports their answers.
///
/// A requested fetch waits in a queue as its key; a task exists only for each of the
/// `CONCURRENCY` GETs in flight. (A task per request, waiting for a permit, cost about 2 KB
/// each: 32 MB at the peak of the scale bench's 15,000 initial fetches.)
#[derive(Clone)]
pub struct Fetcher {
    queue: UnboundedSender<(ConfigKey, u64)>,
}

impl Fetcher {
    /// A fetcher reporting to `out`; its dispatcher runs until every handle is dropped.
    pub fn spawn(
        client: Client,
        secret_key: Option<SecretKey>,
        out: UnboundedSender<FetchDone>,
    ) -> Self {
        let (queue, requests) = mpsc::unbounded_channel();
        let getter = Arc::new(Getter { client, secret_key });
        tokio::spawn(dispatch(getter, requests, out));
        Self { queue }
    }

    /// Fetches `key` in the background; `sent` is the view's tick now.
    pub fn fetch(&self, key: ConfigKey, sent: u64) {
        let _ = self.queue.send((key, sent));
    }
}

/// Starts one GET per request, at most [`CONCURRENCY`] at once.
async fn dispatch(
    getter: Arc<Getter>,
    mut requests: UnboundedReceiver<(ConfigKey, u64)>,
    out: UnboundedSender<FetchDone>,
) {
    let permits = Arc::new(Semaphore::new(CONCURRENCY));
    while let Some((key, sent)) = requests.recv().await {
        let Ok(permit) = permits.clone().acquire_owned().await else {
            return;
        };
        let (getter, out) = (getter.clone(), out.clone());
        tokio::spawn(async move {
            let result = tokio::time::timeout(REQUEST_TIMEOUT, getter.get(&key, sent))
                .await
                .unwrap_or_else(|_| Err("timed out".to_owned()));
            drop(permit);
            let _ = out.send(FetchDone { key, result });
        });
    }
}

/// What one GET needs.
struct Getter {
    client: Client,
    secret_key: Option<SecretKey>,
}

impl Getter {
    async fn get(&self, key: &ConfigKey, sent: u64) -> Result<Fetched, String> {
        let (namespace, name) = (&*key.namespace, key.id.name.as_str());
        let found = match (key.id.kind, &self.secret_key) {
            (ConfigKind::ConfigMap, _) => {
                Api::<ConfigMap>::namespaced(self.client.clone(), namespace)
                    .get_opt(name)
                    .await
                    .map(|cm| {
                        cm.map(|cm| {
                            (
                                cm.metadata.resource_version.clone(),
                                ConfigObject::from_config_map(&cm),
                            )
                        })
                    })
            }
            (ConfigKind::Secret, Some(secret_key)) => {
                Api::<Secret>::namespaced(self.client.clone(), namespace)
                    .get_opt(name)
                    .await
                    .map(|s| {
                        s.map(|s| {
                            (
                                s.metadata.resource_version.clone(),
                                ConfigObject::from_secret(&s, secret_key),
                            )
                        })
                    })
            }
            (ConfigKind::Secret, None) => return Err("no secret hash key".to_owned()),
        };
        match found {
            Ok(Some((resource_version, object))) => Ok(Fetched {
                resource_version,
                object: Some(object.into()),
                sent,
            }),
            Ok(None) => Ok(Fetched {
                resource_version: None,
                object: None,
                sent,
            }),
            Err(err) => Err(err.to_string()),
        }
    }
}
