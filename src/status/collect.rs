//! The thin kube I/O of `status`: one LIST per kind per namespace (paged), a few GETs of the
//! installation, and the `config-reloader` log of at most a few Pods. A forbidden or unserved
//! read becomes a [`Fetched::Failed`]; only an unreachable API server stops the command.

use futures_util::future::join_all;
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace, Secret};
use k8s_openapi::jiff::Timestamp;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::snapshot::{
    Fetched, HASH_KEY_FILE, HASH_KEY_SECRET, INSTALL_NAME, SecretSeen, Snapshot,
};
use super::target::Kind;
use crate::hash::SecretKey;

/// Why the reads could not make a snapshot at all (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    /// The API server could not be reached.
    #[error("failed to reach the API server: {0}")]
    Unreachable(String),
    /// The API server refused the credentials.
    #[error("failed to log in to the API server: {0}")]
    Unauthorized(String),
    /// The namespace does not exist.
    #[error("namespace {0:?} not found")]
    NamespaceNotFound(String),
}

/// Objects per page of a LIST.
const PAGE: usize = 500;
/// Lines of a sidecar's log read (`tailLines`).
pub const LOG_TAIL_LINES: usize = 200;

/// What one read got.
enum Got<T> {
    Found(T),
    NotFound,
    Failed(String),
}

/// Reads for a report: `namespace` (or every namespace), the workload kinds in `kinds`.
pub struct Reader {
    client: kube::Client,
}

impl Reader {
    /// A reader over `client`.
    pub fn new(client: kube::Client) -> Self {
        Reader { client }
    }

    /// Reads everything a report on `namespace` (`None`: every namespace) needs, with the
    /// workloads of `kinds`.
    pub async fn snapshot(
        &self,
        namespace: Option<&str>,
        kinds: &[Kind],
        jobs: bool,
    ) -> Result<Snapshot, CollectError> {
        let mut snapshot = Snapshot::empty(Timestamp::now());
        let webhook = self
            .get::<MutatingWebhookConfiguration>(&format!(
                "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{INSTALL_NAME}"
            ))
            .await?;
        snapshot.webhook = match webhook {
            Got::Found(config) => {
                if let Some(ns) = config.webhooks.iter().flatten().find_map(|h| {
                    h.client_config
                        .service
                        .as_ref()
                        .map(|s| s.namespace.clone())
                }) {
                    snapshot.webhook_namespace = ns;
                }
                Fetched::Read(Some(config))
            }
            Got::NotFound => Fetched::Read(None),
            Got::Failed(reason) => Fetched::Failed(reason),
        };
        let ns = snapshot.webhook_namespace.clone();
        let lease_path =
            format!("/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{INSTALL_NAME}");
        let key_path = format!("/api/v1/namespaces/{ns}/secrets/{HASH_KEY_SECRET}");
        let namespaces_path = match namespace {
            Some(name) => format!("/api/v1/namespaces/{name}"),
            None => "/api/v1/namespaces".to_owned(),
        };
        let (lease, key, namespaces) = futures_util::join!(
            self.get::<Lease>(&lease_path),
            self.get::<Secret>(&key_path),
            async {
                match namespace {
                    Some(_) => self
                        .get::<Namespace>(&namespaces_path)
                        .await
                        .map(|g| match g {
                            Got::Found(ns) => Got::Found(vec![ns]),
                            Got::NotFound => Got::NotFound,
                            Got::Failed(reason) => Got::Failed(reason),
                        }),
                    None => self.list::<Namespace>(&namespaces_path).await,
                }
            }
        );
        snapshot.lease = optional(lease?);
        snapshot.hash_key = match key? {
            Got::Found(secret) => Fetched::Read(
                secret
                    .data
                    .as_ref()
                    .and_then(|d| d.get(HASH_KEY_FILE))
                    .and_then(|v| SecretKey::new(&v.0)),
            ),
            Got::NotFound => Fetched::Read(None),
            Got::Failed(reason) => Fetched::Failed(reason),
        };
        snapshot.namespaces = match namespaces? {
            Got::Found(list) => Fetched::Read(
                list.into_iter()
                    .map(|ns| (ns.metadata.name.clone().unwrap_or_default(), ns))
                    .collect(),
            ),
            Got::NotFound => {
                return Err(CollectError::NamespaceNotFound(
                    namespace.unwrap_or_default().to_owned(),
                ));
            }
            Got::Failed(reason) => Fetched::Failed(reason),
        };
        let base = |group: &str, version: &str, plural: &str| {
            let prefix = if group.is_empty() {
                format!("/api/{version}")
            } else {
                format!("/apis/{group}/{version}")
            };
            match namespace {
                Some(ns) => format!("{prefix}/namespaces/{ns}/{plural}"),
                None => format!("{prefix}/{plural}"),
            }
        };
        let workload_reads = kinds.iter().map(|kind| {
            let (group, version, plural) = kind.resource();
            let path = base(group, version, plural);
            // Kubernetes before 1.21 serves CronJobs as batch/v1beta1 only.
            let older = (*kind == Kind::CronJob).then(|| base(group, "v1beta1", plural));
            async move {
                let got = match (self.list::<Value>(&path).await, older) {
                    (Ok(Got::NotFound), Some(older)) => self.list::<Value>(&older).await,
                    (got, _) => got,
                };
                (*kind, got)
            }
        });
        let (cm_path, secret_path) = (base("", "v1", "configmaps"), base("", "v1", "secrets"));
        let (pod_path, event_path) = (base("", "v1", "pods"), base("", "v1", "events"));
        let (workloads, config_maps, secrets, pods, events, job_list) = futures_util::join!(
            join_all(workload_reads),
            self.list::<ConfigMap>(&cm_path),
            self.list::<Secret>(&secret_path),
            self.list::<Value>(&pod_path),
            self.list::<Event>(&event_path),
            async {
                if jobs {
                    Some(self.list::<Value>(&base("batch", "v1", "jobs")).await)
                } else {
                    None
                }
            }
        );
        for (kind, got) in workloads {
            let fetched = match got? {
                Got::Found(list) => Fetched::Read(list),
                Got::NotFound => {
                    snapshot.unserved.insert(kind);
                    Fetched::Read(Vec::new())
                }
                Got::Failed(reason) => Fetched::Failed(reason),
            };
            snapshot.workloads.insert(kind, fetched);
        }
        snapshot.config_maps = listed(config_maps?);
        let key = snapshot.hash_key.ok().cloned().flatten();
        snapshot.secrets = match listed(secrets?) {
            Fetched::Read(list) => Fetched::Read(
                list.iter()
                    .map(|s| SecretSeen::reduce(s, key.as_ref()))
                    .collect(),
            ),
            Fetched::Failed(reason) => Fetched::Failed(reason),
        };
        snapshot.pods = listed(pods?);
        snapshot.events = listed(events?);
        if let Some(job_list) = job_list {
            snapshot.jobs = listed(job_list?);
        }
        Ok(snapshot)
    }

    /// Reads the last [`LOG_TAIL_LINES`] lines of the `config-reloader` log of each Pod in
    /// `pods` (`namespace/name`) into `snapshot`.
    pub async fn logs(&self, snapshot: &mut Snapshot, pods: &[String]) -> Result<(), CollectError> {
        let reads = pods.iter().map(|key| async move {
            let (ns, name) = key.split_once('/').unwrap_or(("", key));
            let path = format!(
                "/api/v1/namespaces/{ns}/pods/{name}/log?container={}&tailLines={LOG_TAIL_LINES}",
                crate::inject::SIDECAR_NAME
            );
            let request = http::Request::get(path).body(Vec::new());
            let got = match request {
                Ok(request) => classify(self.client.request_text(request).await),
                Err(e) => Ok(Got::Failed(e.to_string())),
            };
            (key.clone(), got)
        });
        for (key, got) in join_all(reads).await {
            let fetched = match got? {
                Got::Found(text) => Fetched::Read(text),
                Got::NotFound => Fetched::Failed("not found".to_owned()),
                Got::Failed(reason) => Fetched::Failed(reason),
            };
            snapshot.logs.insert(key, fetched);
        }
        Ok(())
    }

    async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<Got<T>, CollectError> {
        let request = http::Request::get(path)
            .body(Vec::new())
            .map_err(|e| CollectError::Unreachable(e.to_string()))?;
        classify(self.client.request::<T>(request).await)
    }

    /// Every item of a collection, page by page.
    async fn list<T: DeserializeOwned>(&self, path: &str) -> Result<Got<Vec<T>>, CollectError> {
        let mut items = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut url = format!("{path}?limit={PAGE}");
            if let Some(token) = &token {
                url.push_str("&continue=");
                url.push_str(&percent(token));
            }
            let page = match self.get::<Page<T>>(&url).await? {
                Got::Found(page) => page,
                Got::NotFound => return Ok(Got::NotFound),
                Got::Failed(reason) => return Ok(Got::Failed(reason)),
            };
            items.extend(page.items);
            token = page
                .metadata
                .and_then(|m| m.continue_)
                .filter(|t| !t.is_empty());
            if token.is_none() {
                return Ok(Got::Found(items));
            }
        }
    }
}

/// One page of a LIST.
#[derive(serde::Deserialize)]
struct Page<T> {
    #[serde(default = "Vec::new")]
    items: Vec<T>,
    metadata: Option<ListMeta>,
}

#[derive(serde::Deserialize)]
struct ListMeta {
    #[serde(rename = "continue")]
    continue_: Option<String>,
}

/// Sorts a kube answer into found, not found, a failure the report names (forbidden, server
/// errors), or an unreachable API server (the command cannot do its job).
fn classify<T>(result: Result<T, kube::Error>) -> Result<Got<T>, CollectError> {
    match result {
        Ok(value) => Ok(Got::Found(value)),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(Got::NotFound),
        Err(kube::Error::Api(status)) if status.code == 401 => {
            Err(CollectError::Unauthorized(first_line(&status.message)))
        }
        Err(kube::Error::Api(status)) => {
            let what = match status.code {
                403 => "forbidden".to_owned(),
                code => format!("HTTP {code}"),
            };
            Ok(Got::Failed(format!(
                "{what}: {}",
                first_line(&status.message)
            )))
        }
        Err(kube::Error::SerdeError(e)) => Ok(Got::Failed(format!("unreadable answer: {e}"))),
        Err(other) => Err(CollectError::Unreachable(crate::report::one_line(&other))),
    }
}

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().trim().to_owned()
}

fn optional<T>(got: Got<T>) -> Fetched<Option<T>> {
    match got {
        Got::Found(value) => Fetched::Read(Some(value)),
        Got::NotFound => Fetched::Read(None),
        Got::Failed(reason) => Fetched::Failed(reason),
    }
}

fn listed<T>(got: Got<Vec<T>>) -> Fetched<Vec<T>> {
    match got {
        Got::Found(list) => Fetched::Read(list),
        Got::NotFound => Fetched::Failed("not served".to_owned()),
        Got::Failed(reason) => Fetched::Failed(reason),
    }
}

/// Percent-encodes a continue token for a query.
fn percent(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
