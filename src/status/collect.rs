//! The kube I/O of `status`. A forbidden or unserved read becomes a [`Fetched::Failed`]; only
//! an unreachable API server, refused credentials or a missing namespace stop the command.

use futures_util::future::{OptionFuture, join_all};
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace, Pod, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use k8s_openapi::jiff::Timestamp;
use kube::Resource;
use kube::api::{Api, DynamicObject, ListParams, LogParams};
use serde::de::DeserializeOwned;

use super::snapshot::{Fetched, HASH_KEY_SECRET, INSTALL_NAME, Snapshot};
use super::target_arg::Kind;
use crate::controller::write_target::api_resource;

/// Why the reads could not make a snapshot at all (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    #[error("failed to reach the API server: {0}")]
    Unreachable(String),
    #[error("failed to log in to the API server: {0}")]
    Unauthorized(String),
    #[error("namespace {0:?} not found")]
    NamespaceNotFound(String),
}

/// What one read got: `Read(None)` when not found (a LIST: its kind is not served).
type Got<T> = Fetched<Option<T>>;

/// A LIST's answer when its kind is not served.
const NOT_SERVED: &str = "not served";
/// Objects per page of a LIST.
const PAGE: u32 = 500;
/// Lines of a sidecar's log read (`tailLines`).
pub const LOG_TAIL_LINES: i64 = 200;

/// Reads for a report over a client.
pub struct Reader {
    pub client: kube::Client,
}

impl Reader {
    /// Reads everything a report on `namespace` (`None`: all) needs: the installation, then
    /// one LIST per kind at once (the Jobs, for a CronJob's Pods, when `jobs`).
    pub async fn snapshot(
        &self,
        namespace: Option<&str>,
        kinds: &[Kind],
        jobs: bool,
    ) -> Result<Snapshot, CollectError> {
        let mut snapshot = Snapshot::empty(Timestamp::now());
        // The webhook configuration's Service names the namespace the webhook runs in.
        let webhooks = Api::<MutatingWebhookConfiguration>::all(self.client.clone());
        snapshot.set_webhook(classify(webhooks.get(INSTALL_NAME).await)?);
        let webhook_namespace = &snapshot.webhook_namespace;
        let leases = Api::<Lease>::namespaced(self.client.clone(), webhook_namespace);
        let secrets = Api::<Secret>::namespaced(self.client.clone(), webhook_namespace);
        let deployments = Api::<Deployment>::namespaced(self.client.clone(), webhook_namespace);
        let (lease, key, deployment, namespaces) = futures_util::join!(
            leases.get(INSTALL_NAME),
            secrets.get(HASH_KEY_SECRET),
            deployments.get(INSTALL_NAME),
            self.namespaces(namespace),
        );
        snapshot.lease = classify(lease)?;
        snapshot.serve_deployment =
            classify(deployment)?.map(|d| d.and_then(|d| serde_json::to_value(d).ok()));
        snapshot.set_hash_key(classify(key)?);
        snapshot.set_namespaces(namespaces?);
        let path = |kind| DynamicObject::url_path(&api_resource(kind), namespace);
        let read = |kind| async move { (kind, self.list(path(kind)).await) };
        let workloads = kinds.iter().copied().map(read);
        let job_list = OptionFuture::from(jobs.then(|| self.list(path(Kind::Job))));
        let (workloads, config_maps, secrets, pods, events, job_list) = futures_util::join!(
            join_all(workloads),
            self.list(ConfigMap::url_path(&(), namespace)),
            self.list(Secret::url_path(&(), namespace)),
            self.list(path(Kind::Pod)),
            self.list(Event::url_path(&(), namespace)),
            job_list,
        );
        for (kind, got) in workloads {
            let got = got?;
            if let Fetched::Read(None) = got {
                snapshot.unserved.insert(kind);
            }
            let got = got.map(Option::unwrap_or_default);
            snapshot.workloads.insert(kind, got);
        }
        snapshot.config_maps = or_failed(config_maps?, NOT_SERVED);
        snapshot.set_secrets(or_failed(secrets?, NOT_SERVED));
        snapshot.pods = or_failed(pods?, NOT_SERVED);
        snapshot.events = or_failed(events?, NOT_SERVED);
        if let Some(job_list) = job_list {
            snapshot.jobs = or_failed(job_list?, NOT_SERVED);
        }
        Ok(snapshot)
    }

    /// The namespace reported on (a missing one stops the command), or every namespace.
    async fn namespaces(
        &self,
        namespace: Option<&str>,
    ) -> Result<Fetched<Vec<Namespace>>, CollectError> {
        let api = Api::<Namespace>::all(self.client.clone());
        let got = match namespace {
            Some(name) => classify(api.get(name).await)?.map(|ns| ns.map(|ns| vec![ns])),
            None => self.list(Namespace::url_path(&(), None)).await?,
        };
        match got {
            Fetched::Read(None) => {
                let name = namespace.unwrap_or_default().to_owned();
                Err(CollectError::NamespaceNotFound(name))
            }
            got => Ok(got.map(Option::unwrap_or_default)),
        }
    }

    /// Reads the `config-reloader` log tail of each of `pods` (`namespace/name`) into `snapshot`.
    pub async fn logs(&self, snapshot: &mut Snapshot, pods: &[String]) -> Result<(), CollectError> {
        let params = &LogParams {
            container: Some(crate::workload::SIDECAR_NAME.to_owned()),
            tail_lines: Some(LOG_TAIL_LINES),
            ..LogParams::default()
        };
        let reads = pods.iter().map(|key| async move {
            let (namespace, name) = key.split_once('/').unwrap_or(("", key));
            let api = Api::<Pod>::namespaced(self.client.clone(), namespace);
            (key.clone(), classify(api.logs(name, params).await))
        });
        for (key, got) in join_all(reads).await {
            snapshot.logs.insert(key, or_failed(got?, "not found"));
        }
        Ok(())
    }

    /// Every object at `path`, page by page. Workloads and Pods stay JSON: an unreadable pod
    /// template is one finding, not a failed LIST.
    async fn list<T: DeserializeOwned>(&self, path: String) -> Result<Got<Vec<T>>, CollectError> {
        let mut items = Vec::new();
        let mut params = ListParams::default().limit(PAGE);
        loop {
            let request = kube::core::Request::new(&path).list(&params);
            let page = match request.map_err(kube::Error::BuildRequest) {
                Ok(request) => self.client.request::<Page<T>>(request).await,
                Err(e) => Err(e),
            };
            let page = match classify(page)? {
                Fetched::Read(Some(page)) => page,
                got => return Ok(got.map(|_| None)),
            };
            items.extend(page.items.into_iter().flatten());
            match page.metadata.continue_.filter(|token| !token.is_empty()) {
                Some(token) => params = params.continue_token(&token),
                None => return Ok(Fetched::Read(Some(items))),
            }
        }
    }
}

/// One page of a list. `items` may be missing or `null` in an empty list (API servers send
/// both); either reads as no items.
#[derive(serde::Deserialize)]
struct Page<T> {
    #[serde(default)]
    metadata: ListMeta,
    items: Option<Vec<T>>,
}

/// Sorts a kube answer into found, not found, a failure the report names, or a stopping error.
fn classify<T>(result: Result<T, kube::Error>) -> Result<Got<T>, CollectError> {
    match result {
        Ok(value) => Ok(Fetched::Read(Some(value))),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(Fetched::Read(None)),
        Err(kube::Error::Api(status)) if status.code == 401 => {
            Err(CollectError::Unauthorized(first_line(&status.message)))
        }
        Err(kube::Error::Api(status)) => {
            let what = match status.code {
                403 => "forbidden".to_owned(),
                code => format!("HTTP {code}"),
            };
            let reason = format!("{what}: {}", first_line(&status.message));
            Ok(Fetched::Failed(reason))
        }
        Err(kube::Error::SerdeError(e)) => Ok(Fetched::Failed(format!("unreadable answer: {e}"))),
        Err(other) => Err(CollectError::Unreachable(crate::report::one_line(&other))),
    }
}

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().trim().to_owned()
}

/// What was read, or `missing` as the failure when nothing was there.
fn or_failed<T>(got: Got<T>, missing: &str) -> Fetched<T> {
    match got {
        Fetched::Read(Some(value)) => Fetched::Read(value),
        Fetched::Read(None) => Fetched::Failed(missing.to_owned()),
        Fetched::Failed(reason) => Fetched::Failed(reason),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::Page;

    #[test]
    fn an_empty_list_reads_whether_items_is_null_missing_or_empty() {
        for text in [
            r#"{"metadata":{},"items":null}"#,
            r#"{"metadata":{}}"#,
            r#"{"items":[]}"#,
        ] {
            let page: Page<ConfigMap> = serde_json::from_str(text).unwrap();
            assert!(page.items.unwrap_or_default().is_empty(), "{text}");
        }
        let page: Page<ConfigMap> = serde_json::from_str(
            r#"{"metadata":{"continue":"x"},"items":[{"metadata":{"name":"a"}}]}"#,
        )
        .unwrap();
        assert_eq!(page.items.unwrap_or_default().len(), 1);
        assert_eq!(page.metadata.continue_.as_deref(), Some("x"));
    }
}
