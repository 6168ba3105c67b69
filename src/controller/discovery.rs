//! Discovery decides which watches run: a kind the API server does not serve (an old server
//! without `batch/v1` CronJob, a cluster without a CRD) is logged once and not watched (so it
//! never blocks `/readyz`), and is picked up at the next [`RECHECK`] after it appears. A kind
//! that stops being served has its watch stopped and its objects forgotten. [`Kinds`] is the
//! pure bookkeeping; [`run`] the thin I/O around it.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList;
use kube::Client;
use tokio::sync::mpsc::Sender;
use tokio::task::JoinHandle;

use super::cluster_watches::{self, Source, Stream, Watched};
use crate::backoff::Backoff;

/// How often discovery is asked again, for kinds that appear or go.
pub const RECHECK: Duration = Duration::from_secs(15);
/// The wait after a discovery request failed: 1 s, doubling, at most 30 s.
const RETRY: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(30));

/// A failed discovery request.
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    /// The request for a group version's resources failed.
    #[error("failed to discover the resources of {0}")]
    RequestFailed(&'static str, #[source] kube::Error),
}

/// What a stream reads: its `apiVersion`, plural resource and kind.
pub fn resource_of(stream: Stream) -> (&'static str, &'static str, &'static str) {
    match stream {
        Stream::Namespaces => ("v1", "namespaces", "Namespace"),
        Stream::Targets(kind) => {
            let table = kind.table();
            (table.api_version(), table.plural(), table.name())
        }
    }
}

/// The resources served per group version (`None`: the group version is not served).
pub type Served = HashMap<&'static str, Option<APIResourceList>>;

/// Whether `served` lists the stream's resource with the verbs a watch needs.
pub fn is_served(served: &Served, stream: Stream) -> bool {
    let (api_version, plural, _) = resource_of(stream);
    served
        .get(api_version)
        .and_then(Option::as_ref)
        .is_some_and(|list| {
            list.resources.iter().any(|r| {
                r.name == plural
                    && ["list", "watch"]
                        .iter()
                        .all(|v| r.verbs.iter().any(|x| x == v))
            })
        })
}

/// Which streams are watched, and which missing ones were already reported.
#[derive(Debug, Default)]
pub struct Kinds {
    watched: HashSet<Stream>,
    reported: HashSet<Stream>,
}

/// What one discovery answer changes.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Changes {
    pub start: Vec<Stream>,
    pub stop: Vec<Stream>,
    /// Streams not served, reported for the first time since they were last served.
    pub missing: Vec<Stream>,
}

impl Kinds {
    pub fn update(&mut self, served: impl Fn(Stream) -> bool) -> Changes {
        let mut changes = Changes::default();
        for stream in Stream::all() {
            let on = served(stream);
            match (on, self.watched.contains(&stream)) {
                (true, false) => {
                    self.watched.insert(stream);
                    changes.start.push(stream);
                }
                (false, true) => {
                    self.watched.remove(&stream);
                    changes.stop.push(stream);
                }
                _ => {}
            }
            if on {
                self.reported.remove(&stream);
            } else if self.reported.insert(stream) {
                changes.missing.push(stream);
            }
        }
        changes
    }

    pub fn watched(&self) -> HashSet<Stream> {
        self.watched.clone()
    }
}

/// Group versions built into every supported API server: once answered, never asked again.
pub const BUILT_IN: [&str; 3] = ["v1", "apps/v1", "batch/v1"];

/// Whether `api_version` is asked again at every check (a built-in one answered is not).
pub fn rechecked(api_version: &str, known: &Served) -> bool {
    !BUILT_IN.contains(&api_version) || !matches!(known.get(api_version), Some(Some(_)))
}

/// Asks the API server what it serves in each group version the streams need, except the
/// built-in ones `known` already has.
pub async fn discover(client: &Client, known: &Served) -> Result<Served, DiscoveryError> {
    let mut served = Served::new();
    for stream in Stream::all() {
        let (api_version, _, _) = resource_of(stream);
        if served.contains_key(api_version) {
            continue;
        }
        if !rechecked(api_version, known) {
            served.insert(api_version, known.get(api_version).cloned().flatten());
            continue;
        }
        let answer = if api_version.contains('/') {
            client.list_api_group_resources(api_version).await
        } else {
            client.list_core_api_resources(api_version).await
        };
        let list = match answer {
            Ok(list) => Some(list),
            Err(kube::Error::Api(status)) if status.code == 404 => None,
            Err(source) => return Err(DiscoveryError::RequestFailed(api_version, source)),
        };
        served.insert(api_version, list);
    }
    Ok(served)
}

/// Watches what the API server serves, now and every [`RECHECK`], until `out` is closed.
pub async fn run(client: Client, out: Sender<Watched>) {
    let mut kinds = Kinds::default();
    let mut tasks: HashMap<Stream, JoinHandle<()>> = HashMap::new();
    let mut failures = 0;
    let mut first = true;
    let mut known = Served::new();
    loop {
        match discover(&client, &known).await {
            Ok(served) => known = served,
            Err(err) => {
                tracing::warn!(
                    error = %crate::report::one_line(&err),
                    "failed to discover which kinds the API server serves; retrying"
                );
                failures += 1;
                tokio::time::sleep(RETRY.delay(failures)).await;
                continue;
            }
        }
        failures = 0;
        let changes = kinds.update(|stream| is_served(&known, stream));
        for &stream in &changes.missing {
            let (api_version, plural, kind) = resource_of(stream);
            tracing::info!(
                kind,
                api_version,
                "{kind} is not served by this API server (it needs {api_version} {plural}); \
                 not watched until it is"
            );
        }
        for stream in &changes.stop {
            if let Some(task) = tasks.remove(stream) {
                task.abort();
            }
            // A relist that finds nothing: the loop forgets every object of the kind.
            let source = Source::Cluster(*stream);
            for watched in [Watched::Init(source.clone()), Watched::InitDone(source)] {
                if out.send(watched).await.is_err() {
                    return;
                }
            }
        }
        let moves = !changes.start.is_empty() || !changes.stop.is_empty();
        if moves && out.send(Watched::Served(kinds.watched())).await.is_err() {
            return;
        }
        for stream in changes.start {
            if !first {
                let (api_version, _, kind) = resource_of(stream);
                tracing::info!(kind, api_version, "{kind} is now served; watching it");
            }
            tasks.insert(stream, cluster_watches::spawn(&client, stream, &out));
        }
        first = false;
        if out.is_closed() {
            return;
        }
        tokio::time::sleep(RECHECK).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::write_target::TargetKind;

    const CRONJOBS: Stream = Stream::Targets(TargetKind::CronJob);

    #[test]
    fn a_missing_kind_is_reported_once_and_started_when_it_appears() {
        let mut kinds = Kinds::default();
        let first = kinds.update(|s| s != CRONJOBS);
        assert_eq!(first.missing, vec![CRONJOBS]);
        assert_eq!(first.start.len(), Stream::all().len() - 1);
        assert!(!first.start.contains(&CRONJOBS));

        let again = kinds.update(|s| s != CRONJOBS);
        assert_eq!(again, Changes::default(), "nothing new, nothing said");

        let appears = kinds.update(|_| true);
        assert_eq!(appears.start, vec![CRONJOBS]);
        assert!(appears.missing.is_empty() && appears.stop.is_empty());
        assert!(kinds.watched().contains(&CRONJOBS));
    }

    #[test]
    fn a_kind_that_goes_is_stopped_and_reported_again() {
        let mut kinds = Kinds::default();
        kinds.update(|_| true);
        let gone = kinds.update(|s| s != CRONJOBS);
        assert_eq!(gone.stop, vec![CRONJOBS]);
        assert_eq!(gone.missing, vec![CRONJOBS]);
        assert!(!kinds.watched().contains(&CRONJOBS));
    }

    fn list(api_version: &str, resources: &[(&str, &[&str])]) -> APIResourceList {
        serde_json::from_value(serde_json::json!({
            "groupVersion": api_version,
            "resources": resources.iter().map(|(name, verbs)| serde_json::json!({
                "name": name, "singularName": "", "namespaced": true, "kind": "X", "verbs": verbs,
            })).collect::<Vec<_>>(),
        }))
        .unwrap()
    }

    #[test]
    fn only_group_versions_whose_kinds_can_come_and_go_are_asked_again() {
        let mut known = Served::new();
        assert!(rechecked("apps/v1", &known), "never answered");
        known.insert("v1", Some(list("v1", &[])));
        known.insert("apps/v1", Some(list("apps/v1", &[])));
        known.insert("batch/v1", None);
        known.insert(
            "argoproj.io/v1alpha1",
            Some(list("argoproj.io/v1alpha1", &[])),
        );
        assert!(!rechecked("apps/v1", &known), "built in and answered");
        assert!(rechecked("batch/v1", &known), "built in, not answered yet");
        assert!(rechecked("argoproj.io/v1alpha1", &known), "a CRD's");
        let asked: HashSet<&str> = Stream::all()
            .into_iter()
            .map(|s| resource_of(s).0)
            .filter(|v| rechecked(v, &known))
            .collect();
        assert_eq!(asked, HashSet::from(["batch/v1", "argoproj.io/v1alpha1"]));
    }

    #[test]
    fn served_means_listed_with_list_and_watch() {
        let cronjobs = |list: Option<APIResourceList>| {
            is_served(&Served::from([("batch/v1", list)]), CRONJOBS)
        };
        let jobs = list("batch/v1", &[("jobs", &["list", "watch"])]);
        assert!(!cronjobs(Some(jobs)), "batch/v1 without cronjobs");
        let status: (&str, &[&str]) = ("cronjobs/status", &["get"]);
        let no_watch = list("batch/v1", &[status, ("cronjobs", &["get", "list"])]);
        assert!(!cronjobs(Some(no_watch)), "no watch verb");
        let watched = list("batch/v1", &[("cronjobs", &["list", "watch", "patch"])]);
        assert!(cronjobs(Some(watched)));
        assert!(!cronjobs(None), "group version not served");
        assert!(
            !is_served(&Served::new(), Stream::Namespaces),
            "never asked"
        );
    }
}
