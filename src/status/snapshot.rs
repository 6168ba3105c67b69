//! The objects `status` read, the input of the pure report: a failed read makes a partial one.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace, Secret};
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use super::meta_str;
use super::target_arg::Kind;
use crate::hash::{ConfigObject, SecretKey};

/// The outcome of one read.
#[derive(Debug, Clone)]
pub enum Fetched<T> {
    /// What the API answered.
    Read(T),
    /// Why it could not be read, in a few words (`forbidden: …`); never a value.
    Failed(String),
}

impl<T> Fetched<T> {
    /// The value, if read.
    pub fn ok(&self) -> Option<&T> {
        match self {
            Fetched::Read(value) => Some(value),
            Fetched::Failed(_) => None,
        }
    }

    /// The value mapped by `f`; a failure stays one.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Fetched<U> {
        match self {
            Fetched::Read(value) => Fetched::Read(f(value)),
            Fetched::Failed(reason) => Fetched::Failed(reason),
        }
    }

    /// The reason, if not read.
    pub fn failure(&self) -> Option<&str> {
        match self {
            Fetched::Read(_) => None,
            Fetched::Failed(reason) => Some(reason),
        }
    }
}

impl<T: Default> Default for Fetched<T> {
    fn default() -> Self {
        Fetched::Read(T::default())
    }
}

/// A Secret as `status` keeps it: values are reduced to digests as read, and never kept.
#[derive(Debug, Clone)]
pub struct SecretSeen {
    pub metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    pub digests: Option<ConfigObject>,
    /// The names of its keys (`data` and `stringData`), sorted.
    pub keys: Vec<String>,
}

/// Everything read for one report or summary.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// When the reads were made (ages are measured from it).
    pub now: Timestamp,
    pub namespaces: Fetched<BTreeMap<String, Namespace>>,
    /// `None` (here and below): not found.
    pub webhook: Fetched<Option<MutatingWebhookConfiguration>>,
    /// From the webhook configuration's Service; else the default.
    pub webhook_namespace: String,
    pub lease: Fetched<Option<Lease>>,
    /// The webhook's Deployment (its `serve` flags say whether Reloader is gone).
    pub serve_deployment: Fetched<Option<Value>>,
    /// The webhook's Secret-hash key (`None`: no Secret; the webhook hashes no Secret either).
    pub hash_key: Fetched<Option<SecretKey>>,
    /// Workloads by kind (a kind not served is empty, and in `unserved`).
    pub workloads: BTreeMap<Kind, Fetched<Vec<Value>>>,
    pub unserved: BTreeSet<Kind>,
    pub config_maps: Fetched<Vec<ConfigMap>>,
    pub secrets: Fetched<Vec<SecretSeen>>,
    pub pods: Fetched<Vec<Value>>,
    pub jobs: Fetched<Vec<Value>>,
    pub events: Fetched<Vec<Event>>,
    /// The last lines of the `config-reloader` log of some sidecar Pods, by `namespace/name`.
    pub logs: BTreeMap<String, Fetched<String>>,
}

impl Snapshot {
    /// An empty snapshot at `now`: every list read and empty, nothing else found.
    pub fn empty(now: Timestamp) -> Self {
        Snapshot {
            now,
            webhook_namespace: DEFAULT_WEBHOOK_NAMESPACE.to_owned(),
            ..Snapshot::default()
        }
    }

    /// Keeps the webhook configuration as read; its Service names the webhook's namespace.
    pub fn set_webhook(&mut self, webhook: Fetched<Option<MutatingWebhookConfiguration>>) {
        let service = (webhook.ok().and_then(Option::as_ref))
            .and_then(|config| config.webhooks.as_ref())
            .and_then(|hooks| hooks.iter().find_map(|h| h.client_config.service.as_ref()));
        if let Some(service) = service {
            self.webhook_namespace = service.namespace.clone();
        }
        self.webhook = webhook;
    }

    /// Keeps the webhook's hash key from its Secret as read (`None`: no Secret, or no key).
    pub fn set_hash_key(&mut self, secret: Fetched<Option<Secret>>) {
        self.hash_key = secret.map(|secret| {
            let data = secret?.data?;
            SecretKey::new(&data.get(HASH_KEY_FILE)?.0)
        });
    }

    /// Keeps the Namespaces as read, by name.
    pub fn set_namespaces(&mut self, namespaces: Fetched<Vec<Namespace>>) {
        self.namespaces = namespaces.map(|list| {
            let by_name = |ns: Namespace| (ns.metadata.name.clone().unwrap_or_default(), ns);
            list.into_iter().map(by_name).collect()
        });
    }

    /// Keeps the Secrets as read, reduced at once under the hash key (kept first).
    pub fn set_secrets(&mut self, secrets: Fetched<Vec<Secret>>) {
        let key = self.hash_key.ok().cloned().flatten();
        let reduce = |secret: Secret| {
            let data = secret.data.iter().flat_map(|d| d.keys());
            let string_data = secret.string_data.iter().flat_map(|d| d.keys());
            let keys: BTreeSet<&String> = data.chain(string_data).collect();
            let digests = key.as_ref().map(|k| ConfigObject::from_secret(&secret, k));
            SecretSeen {
                keys: keys.into_iter().cloned().collect(),
                digests,
                metadata: secret.metadata,
            }
        };
        self.secrets = secrets.map(|list| list.into_iter().map(reduce).collect());
    }

    /// Every workload read (in `namespace`, or everywhere), with its kind, in `WORKLOADS` order.
    pub fn workload_objects<'a>(
        &'a self,
        namespace: Option<&'a str>,
    ) -> impl Iterator<Item = (Kind, &'a Value)> {
        super::target_arg::WORKLOADS
            .into_iter()
            .flat_map(move |kind| {
                let list = self.workloads.get(&kind).and_then(Fetched::ok);
                let objects = list.into_iter().flatten();
                objects
                    .filter(move |o| {
                        namespace.is_none_or(|ns| meta_str(o, "namespace") == Some(ns))
                    })
                    .map(move |o| (kind, o))
            })
    }

    /// The namespace-wide reads that failed, named (`could not read pods: forbidden: …`).
    pub fn failed_reads(&self) -> Vec<String> {
        [
            ("namespaces", self.namespaces.failure()),
            ("configmaps", self.config_maps.failure()),
            ("secrets", self.secrets.failure()),
            ("pods", self.pods.failure()),
            ("events", self.events.failure()),
            ("jobs", self.jobs.failure()),
        ]
        .into_iter()
        .filter_map(|(what, reason)| Some(format!("could not read {what}: {}", reason?)))
        .collect()
    }
}

/// Where the shipped manifests install the webhook.
pub const DEFAULT_WEBHOOK_NAMESPACE: &str = "reload-injector";
/// The name of the MutatingWebhookConfiguration and of the Lease.
pub const INSTALL_NAME: &str = "reload-injector";
/// The Secret holding the webhook's `--secret-hash-key-file` in the shipped manifests.
pub const HASH_KEY_SECRET: &str = "reload-injector-hash-key";
/// Its key.
pub const HASH_KEY_FILE: &str = "secret-hash.key";
