//! Fetching the digests of consumed ConfigMaps/Secrets (I/O, thin): one GET per object, a
//! bounded number at once, reduced to per-key digests as the answer arrives.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::{Api, Client};
use tokio::sync::Semaphore;
use tokio::sync::mpsc::UnboundedSender;

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
#[derive(Clone)]
pub struct Fetcher {
    client: Client,
    secret_key: Option<SecretKey>,
    permits: Arc<Semaphore>,
    out: UnboundedSender<FetchDone>,
}

impl Fetcher {
    /// A fetcher reporting to `out`.
    pub fn new(
        client: Client,
        secret_key: Option<SecretKey>,
        out: UnboundedSender<FetchDone>,
    ) -> Self {
        Self {
            client,
            secret_key,
            permits: Arc::new(Semaphore::new(CONCURRENCY)),
            out,
        }
    }

    /// Fetches `key` in the background; `sent` is the view's tick now.
    pub fn fetch(&self, key: ConfigKey, sent: u64) {
        let this = self.clone();
        tokio::spawn(async move {
            let Ok(_permit) = this.permits.acquire().await else {
                return;
            };
            let result = tokio::time::timeout(REQUEST_TIMEOUT, this.get(&key, sent))
                .await
                .unwrap_or_else(|_| Err("timed out".to_owned()));
            let _ = this.out.send(FetchDone { key, result });
        });
    }

    async fn get(&self, key: &ConfigKey, sent: u64) -> Result<Fetched, String> {
        let (namespace, name) = (key.namespace.as_str(), key.id.name.as_str());
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
                object: Some(object),
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
