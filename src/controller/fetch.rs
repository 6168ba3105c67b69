//! Fetching the digests of consumed ConfigMaps/Secrets (I/O, thin): one GET per object, a
//! bounded number at once, reduced to per-key digests as the answer arrives.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::{Api, Client};
use tokio::sync::Semaphore;
use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender};

use super::config_store::{ConfigKey, Fetched};
use crate::hash::{ConfigId, ConfigKind, ConfigObject, SecretKey};

/// Most GETs in flight at once.
const CONCURRENCY: usize = 16;
/// Longest one GET may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The answer to one fetch.
#[derive(Debug)]
pub struct FetchDone {
    pub key: ConfigKey,
    /// Its digests, or why they could not be read (retried by the caller).
    pub result: Result<Fetched, String>,
}

/// Sends GETs and reports their answers. A request waits in a queue as its key; a task exists
/// only per GET in flight (a task per request cost 32 MB at the scale bench's initial sync).
#[derive(Clone)]
pub struct Fetcher {
    queue: UnboundedSender<(ConfigKey, u64)>,
}

impl Fetcher {
    /// A fetcher reporting to `out`, until every handle is dropped.
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

struct Getter {
    client: Client,
    secret_key: Option<SecretKey>,
}

impl Getter {
    async fn get(&self, key: &ConfigKey, sent: u64) -> Result<Fetched, String> {
        let secret_key = self.secret_key.as_ref();
        let read = read_config(self.client.clone(), &key.namespace, &key.id, secret_key)
            .await
            .map_err(|e| e.to_string())?;
        let (resource_version, object) = read.map_or((None, None), |(version, object)| {
            (version, Some(object.into()))
        });
        Ok(Fetched {
            resource_version,
            object,
            sent,
        })
    }
}

/// Why a ConfigMap or Secret could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// A Secret, and no key to hash its values with: it is never asked for.
    #[error("no secret hash key")]
    NoSecretKey,
    #[error(transparent)]
    Api(#[from] kube::Error),
}

/// GETs the ConfigMap or Secret `id` and reduces it at once to its digests, with its
/// resourceVersion; `None` when it does not exist. The webhook's lookups read through it too.
pub async fn read_config(
    client: Client,
    namespace: &str,
    id: &ConfigId,
    secret_key: Option<&SecretKey>,
) -> Result<Option<(Option<String>, ConfigObject)>, ReadError> {
    let name = id.name.as_str();
    Ok(match (id.kind, secret_key) {
        (ConfigKind::ConfigMap, _) => Api::<ConfigMap>::namespaced(client, namespace)
            .get_opt(name)
            .await?
            .map(|cm| {
                (
                    cm.metadata.resource_version.clone(),
                    ConfigObject::from_config_map(&cm),
                )
            }),
        (ConfigKind::Secret, Some(key)) => Api::<Secret>::namespaced(client, namespace)
            .get_opt(name)
            .await?
            .map(|s| {
                (
                    s.metadata.resource_version.clone(),
                    ConfigObject::from_secret(&s, key),
                )
            }),
        (ConfigKind::Secret, None) => return Err(ReadError::NoSecretKey),
    })
}
