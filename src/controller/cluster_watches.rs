//! The cluster-wide watches (I/O, thin): kube-runtime watchers whose objects are reduced on
//! arrival and sent to the loop. Namespaces metadata-only; workloads and Pods as untyped objects
//! (one malformed object is one log line, not a stuck watch), filtered on the server by the
//! label the webhook sets. [`forward`] is the one event loop of every watch, config ones too.

use std::collections::HashSet;
use std::sync::Arc;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, DynamicObject};
use kube::core::PartialObjectMeta;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Config, Event};
use tokio::sync::mpsc::Sender;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;

use super::config_store::{ConfigKey, Digests, Meta};
use super::config_watches::Scope;
use super::intern::Interner;
use super::reduce::{self, Consumer, ReduceError};
use super::waves::{self, Budget};
use super::write_target::{Target, TargetKind};
use crate::workload::{MANAGED_LABEL, SIDECAR_LABEL};

/// Most events waiting for the loop. A full channel holds the watches back (they stop reading
/// their list or watch response) instead of buffering a whole initial list in memory.
pub const BUFFER: usize = 256;

/// Objects per list page of workloads and Pods: a page is held whole, parsed, and these objects
/// are large (whole pod specs).
pub const TARGET_PAGE: u32 = 100;

/// One cluster-wide watch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stream {
    Namespaces,
    Targets(TargetKind),
}

/// Where one watch lists: a cluster-wide stream, or one kind of config in one namespace.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Source {
    Cluster(Stream),
    Config(Scope),
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Cluster(stream) => write!(f, "{stream:?}"),
            Source::Config(scope) => scope.fmt(f),
        }
    }
}

impl Stream {
    pub fn all() -> Vec<Stream> {
        let mut all = vec![Stream::Namespaces];
        all.extend(TargetKind::WORKLOADS.map(Stream::Targets));
        all.push(Stream::Targets(TargetKind::Pod));
        all
    }
}

/// An object as the loop receives it.
#[derive(Debug)]
pub enum Item {
    /// A namespace and whether it carries the opt-in label.
    Namespace { name: String, labelled: bool },
    Config {
        key: ConfigKey,
        meta: Meta,
        /// `None` on deletion, and for Secrets without a hash key.
        digests: Option<Digests>,
    },
    /// A workload or Pod, reduced (`Ok(None)`: one the controller must never write to).
    Target {
        target: Target,
        reduced: Result<Option<Consumer>, ReduceError>,
        budget: Option<Budget>,
        /// A sidecar Pod as its env hash ([`Target::env_twin`]), when it restarts in place.
        in_place: Option<Box<Consumer>>,
    },
}

impl Item {
    pub fn source(&self) -> Source {
        match self {
            Item::Namespace { .. } => Source::Cluster(Stream::Namespaces),
            Item::Config { key, .. } => Source::Config(Scope::of(key)),
            Item::Target { target, .. } => Source::Cluster(Stream::Targets(target.kind)),
        }
    }

    /// The item with its namespace's shared name (one copy for every record of a namespace).
    pub fn interned(mut self, names: &mut Interner) -> Item {
        match &mut self {
            Item::Config { key, .. } => key.namespace = names.intern(&key.namespace),
            Item::Target { target, .. } => target.namespace = names.intern(&target.namespace),
            Item::Namespace { .. } => {}
        }
        self
    }

    /// Its name within its source (a relist keeps the names it listed).
    pub fn listed_name(&self) -> String {
        match self {
            Item::Namespace { name, .. } => name.clone(),
            Item::Config { key, .. } => key.id.name.clone(),
            Item::Target { target, .. } => target_name(target),
        }
    }
}

/// A workload's or Pod's name within its source.
pub fn target_name(target: &Target) -> String {
    format!("{}/{}", target.namespace, target.name)
}

/// What a watch (or discovery) says.
#[derive(Debug)]
pub enum Watched {
    /// Discovery: these streams are watched now (the view has synced once each has listed).
    Served(HashSet<Stream>),
    /// A (re)list starts (or must: a config watch got 410 Gone): objects not applied before
    /// [`Watched::InitDone`] are gone, and until then the view there may be stale.
    Init(Source),
    /// An object was listed, added or modified.
    Apply(Item),
    Delete(Item),
    InitDone(Source),
    /// The API server refused to list one namespace's ConfigMaps or Secrets (RBAC); said once
    /// until it lists.
    Refused(Scope),
}

/// Starts one watch (discovery decides which, see [`super::discovery`]); it sends what it sees
/// to `out` until the receiver is dropped or the task is aborted.
pub fn spawn(client: &Client, stream: Stream, out: &Sender<Watched>) -> JoinHandle<()> {
    let (client, out) = (client.clone(), out.clone());
    let source = Source::Cluster(stream);
    tokio::spawn(async move {
        let Stream::Targets(kind) = stream else {
            // An `Api` of `PartialObjectMeta` asks the API server for metadata only.
            let api = Api::<PartialObjectMeta<Namespace>>::all(client);
            let events = watcher::watcher(api, Config::default()).default_backoff();
            let reduce = |object: PartialObjectMeta<Namespace>| {
                Some(Item::Namespace {
                    labelled: crate::policy::labelled_in(object.metadata.labels.as_ref()),
                    name: object.metadata.name?,
                })
            };
            forward(events, source, &out, None, reduce).await;
            return;
        };
        let api = Api::<DynamicObject>::all_with(client, &kind.api_resource());
        let label = match kind {
            TargetKind::Pod => SIDECAR_LABEL,
            _ => MANAGED_LABEL,
        };
        let config = Config::default().page_size(TARGET_PAGE);
        let config = config.labels(&format!("{label}=true"));
        let events = watcher::watcher(api, config).default_backoff();
        forward(events, source, &out, None, |object| {
            target_item(kind, object)
        })
        .await;
    })
}

/// Sends a watcher's events on as `source`, reduced by `reduce`, until the receiver goes
/// (`false`) or a config watch on streaming lists learns they are not served (`true`). A
/// paginated config list waits for a turn of `lists` first. Errors are logged (the watcher
/// retries), but a config watch's 410 and 403, which the loop must know.
pub async fn forward<K>(
    events: impl futures_util::Stream<Item = Result<Event<K>, watcher::Error>>,
    source: Source,
    out: &Sender<Watched>,
    lists: Option<&Arc<Semaphore>>,
    reduce: impl Fn(K) -> Option<Item>,
) -> bool {
    let mut events = std::pin::pin!(events);
    let mut permit: Option<OwnedSemaphorePermit> = None;
    let mut refused = false;
    while let Some(event) = events.next().await {
        let watched = match event {
            Ok(Event::Init) => {
                if let Some(lists) = lists {
                    // The next poll sends the first page: wait for a turn first.
                    permit = lists.clone().acquire_owned().await.ok();
                }
                Some(Watched::Init(source.clone()))
            }
            Ok(Event::InitDone) => {
                permit = None;
                refused = false;
                Some(Watched::InitDone(source.clone()))
            }
            Ok(Event::Apply(object) | Event::InitApply(object)) => {
                reduce(object).map(Watched::Apply)
            }
            Ok(Event::Delete(object)) => reduce(object).map(Watched::Delete),
            Err(err) => {
                permit = None;
                match (&source, classify(&err)) {
                    // Only a watch on streaming lists has no `lists` turn to wait for.
                    (Source::Config(_), Failure::NoStreaming) if lists.is_none() => return true,
                    // What changed since is unknown until the list is done: from now on, the
                    // view of this namespace is not to be trusted.
                    (Source::Config(_), Failure::Gone) => Some(Watched::Init(source.clone())),
                    // Said once (by the loop) until the namespace lists again.
                    (Source::Config(scope), Failure::Refused) => {
                        (!std::mem::replace(&mut refused, true))
                            .then(|| Watched::Refused(scope.clone()))
                    }
                    _ => {
                        tracing::warn!(
                            watch = %source,
                            error = %crate::report::one_line(&err),
                            "watch failed; retrying"
                        );
                        None
                    }
                }
            }
        };
        if let Some(watched) = watched
            && out.send(watched).await.is_err()
        {
            return false;
        }
    }
    drop(permit);
    false
}

/// What a watch error means here.
#[derive(Debug, PartialEq, Eq)]
enum Failure {
    /// 403: RBAC refuses this namespace.
    Refused,
    /// The server rejected the streaming-list request itself (400/422, or 501).
    NoStreaming,
    /// 410: the watch lists again.
    Gone,
    Other,
}

fn classify(err: &watcher::Error) -> Failure {
    let status = match err {
        watcher::Error::InitialListFailed(kube::Error::Api(status))
        | watcher::Error::WatchStartFailed(kube::Error::Api(status))
        | watcher::Error::WatchFailed(kube::Error::Api(status)) => status.code,
        watcher::Error::WatchError(status) => status.code,
        _ => return Failure::Other,
    };
    match (status, err) {
        (403, _) => Failure::Refused,
        (400 | 422 | 501, watcher::Error::WatchStartFailed(_)) => Failure::NoStreaming,
        (410, _) => Failure::Gone,
        _ => Failure::Other,
    }
}

fn target_item(kind: TargetKind, object: DynamicObject) -> Option<Item> {
    let metadata = &object.metadata;
    let target = Target {
        kind,
        namespace: metadata.namespace.as_deref()?.into(),
        name: metadata.name.as_deref()?.into(),
    };
    let uid = metadata.uid.clone().unwrap_or_default();
    let (reduced, in_place) = match kind {
        TargetKind::Pod => {
            let annotations = metadata.annotations.clone().unwrap_or_default();
            let labels = metadata.labels.clone().unwrap_or_default();
            let owner = waves::owner_of(&target.namespace, metadata);
            let meta = (&labels, &annotations);
            let in_place = reduce::pod_env(&uid, meta, &object.data, owner.clone()).map(Box::new);
            let reduced = reduce::pod(&uid, meta, &object.data, owner).map(Some);
            (reduced, in_place)
        }
        _ => (reduce::workload(kind, &uid, &object.data), None),
    };
    let budget = Budget::of(kind, &uid, &object.data);
    Some(Item::Target {
        target,
        reduced,
        budget,
        in_place,
    })
}
