//! Watch streams: newline-delimited JSON events after a resourceVersion, honouring
//! selectors, `timeoutSeconds`, bookmarks, `sendInitialEvents`, and answering a version
//! older than the history with one `ERROR` event (410 `Expired`), as the API server does.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::json;
use tokio::sync::mpsc;

use super::resources::Resource;
use super::selectors::{FieldSelector, LabelSelector};
use super::state::{State, lock};
use super::status::ApiError;
use super::store::{ChangeKind, Stored};

/// Where a watch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// No version or `0`: synthetic ADDED events for the current state, then changes.
    CurrentState,
    /// Changes after this revision.
    After(u64),
}

/// What a watch request asked for.
#[derive(Debug, Clone)]
pub struct WatchSpec {
    /// The resource watched.
    pub resource: &'static Resource,
    /// Namespace from the path.
    pub namespace: Option<String>,
    /// `labelSelector`.
    pub labels: LabelSelector,
    /// `fieldSelector`.
    pub fields: FieldSelector,
    /// Objects as `PartialObjectMetadata`.
    pub metadata_only: bool,
    /// `allowWatchBookmarks=true`.
    pub bookmarks: bool,
    /// `sendInitialEvents=true`.
    pub send_initial_events: bool,
    /// `timeoutSeconds`.
    pub timeout: Option<Duration>,
    /// Where to start.
    pub start: Start,
}

impl WatchSpec {
    fn selects(&self, object: &Stored) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|ns| ns == object.namespace)
            && self.labels.matches(&object.metadata)
            && self.fields.matches(&object.namespace, &object.name)
    }

    fn object_json(&self, object: &Stored) -> Vec<u8> {
        if self.metadata_only {
            object.metadata_json()
        } else {
            object.full_json()
        }
    }

    fn event(&self, kind: &str, object: &Stored, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{\"type\":\"");
        out.extend_from_slice(kind.as_bytes());
        out.extend_from_slice(b"\",\"object\":");
        out.extend_from_slice(&self.object_json(object));
        out.extend_from_slice(b"}\n");
    }

    fn bookmark(&self, rv: u64, initial_end: bool) -> Bytes {
        let (api_version, kind) = if self.metadata_only {
            ("meta.k8s.io/v1".to_owned(), "PartialObjectMetadata")
        } else {
            (self.resource.api_version(), self.resource.kind)
        };
        let mut metadata = json!({"resourceVersion": rv.to_string(), "creationTimestamp": null});
        if initial_end {
            metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let event = json!({
            "type": "BOOKMARK",
            "object": {"apiVersion": api_version, "kind": kind, "metadata": metadata},
        });
        line(&event)
    }
}

fn line(value: &serde_json::Value) -> Bytes {
    let mut out = serde_json::to_vec(value).expect("event serializes");
    out.push(b'\n');
    Bytes::from(out)
}

/// The single event a watch from a compacted version gets.
pub fn expired_event(requested: u64, oldest: u64) -> Bytes {
    let status = ApiError::expired(format!("too old resource version: {requested} ({oldest})"));
    line(&json!({"type": "ERROR", "object": status.status()}))
}

/// Feeds `tx` with the watch's events until the client goes away, the timeout passes, or
/// the history it needs is gone.
pub async fn run(state: Arc<State>, spec: WatchSpec, tx: mpsc::Sender<Bytes>) {
    let mut revisions = state.revision.subscribe();
    let deadline = spec.timeout.map(|t| tokio::time::Instant::now() + t);
    let interval = *lock(&state.bookmark_interval);
    let mut next_bookmark = tokio::time::Instant::now() + interval;
    let mut cursor = match spec.start {
        Start::After(rv) => rv,
        Start::CurrentState => {
            revisions.borrow_and_update();
            let (objects, at) = {
                let store = state.store();
                let at = store.revision();
                let keep = |o: &Stored| spec.selects(o);
                let (objects, _) = store
                    .list(
                        spec.resource,
                        spec.namespace.as_deref(),
                        at,
                        None,
                        None,
                        &keep,
                    )
                    .expect("the current revision is never compacted");
                (objects, at)
            };
            for chunk in objects.chunks(256) {
                let mut out = Vec::new();
                for object in chunk {
                    spec.event("ADDED", object, &mut out);
                }
                if tx.send(Bytes::from(out)).await.is_err() {
                    return;
                }
            }
            if spec.send_initial_events
                && spec.bookmarks
                && tx.send(spec.bookmark(at, true)).await.is_err()
            {
                return;
            }
            at
        }
    };
    loop {
        revisions.borrow_and_update();
        let batch = {
            let store = state.store();
            let batch = store.changes_after(cursor, 512);
            if matches!(&batch, Ok(b) if b.is_empty()) {
                cursor = cursor.max(store.revision());
            }
            batch
        };
        let batch = match batch {
            Ok(batch) => batch,
            Err(expired) => {
                state.expired_watches.fetch_add(1, Ordering::Relaxed);
                let _ = tx
                    .send(expired_event(expired.requested, expired.compacted + 1))
                    .await;
                return;
            }
        };
        if !batch.is_empty() {
            let mut out = Vec::new();
            let mut sent = Vec::new();
            for change in &batch {
                cursor = change.rv;
                if change.object.resource != spec.resource {
                    continue;
                }
                let now_selected = spec.selects(&change.object);
                let was_selected = change.previous.as_ref().is_some_and(|p| spec.selects(p));
                let kind = match (change.kind, was_selected, now_selected) {
                    (ChangeKind::Deleted, true, _) => "DELETED",
                    (ChangeKind::Deleted, false, _) => continue,
                    (_, true, true) => "MODIFIED",
                    (_, false, true) => "ADDED",
                    (_, true, false) => "DELETED",
                    (_, false, false) => continue,
                };
                spec.event(kind, &change.object, &mut out);
                sent.push(change.rv);
            }
            if !out.is_empty() {
                if tx.send(Bytes::from(out)).await.is_err() {
                    return;
                }
                let now = Instant::now();
                let mut first_sent = lock(&state.first_sent);
                for rv in sent {
                    first_sent.entry(rv).or_insert(now);
                }
            }
            continue;
        }
        tokio::select! {
            changed = revisions.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            () = tokio::time::sleep_until(next_bookmark), if spec.bookmarks => {
                next_bookmark = tokio::time::Instant::now() + interval;
                if tx.send(spec.bookmark(cursor, false)).await.is_err() {
                    return;
                }
            }
            () = sleep_until_opt(deadline) => return,
            () = tx.closed() => return,
        }
    }
}

async fn sleep_until_opt(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}
