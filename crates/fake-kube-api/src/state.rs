//! The server's shared state and the write operations both the HTTP layer and the
//! in-process test API use: create, update, patch, delete, each committed to the store and
//! announced to watches and subscribers.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::AtomicUsize;
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use super::faults::Faults;
use super::objects;
use super::patch::{self, PatchKind};
use super::record::Recorded;
use super::resources::Resource;
use super::status::ApiError;
use super::store::{Change, Store, Stored};

/// Changes kept for watches to replay unless told otherwise.
pub const DEFAULT_HISTORY: usize = 200_000;

/// Network state: bumping `epoch` cuts every open connection; `down_until` closes the
/// listener until then.
#[derive(Debug, Clone, Copy, Default)]
pub struct Net {
    /// Incremented on every outage.
    pub epoch: u64,
    /// The listener stays closed until this instant.
    pub down_until: Option<Instant>,
}

/// Everything the server and the test share.
pub struct State {
    store: Mutex<Store>,
    /// The latest committed revision, for watches to wait on.
    pub revision: tokio::sync::watch::Sender<u64>,
    subscribers: Mutex<Vec<mpsc::Sender<Arc<Change>>>>,
    /// Injected faults.
    pub faults: Mutex<Faults>,
    /// Every request so far.
    pub requests: Mutex<Vec<Recorded>>,
    /// When each revision was first written to a watch stream.
    pub first_sent: Mutex<HashMap<u64, Instant>>,
    /// How often watches with `allowWatchBookmarks=true` get a BOOKMARK.
    pub bookmark_interval: Mutex<Duration>,
    /// Outages.
    pub net: tokio::sync::watch::Sender<Net>,
    /// Open connections by the network epoch they were accepted in.
    pub open_connections: Mutex<BTreeMap<u64, usize>>,
    /// How many watches were answered with 410 `Expired`.
    pub expired_watches: AtomicUsize,
    /// Container logs by (namespace, pod, container), served at `pods/log`.
    pub logs: Mutex<HashMap<(String, String, String), String>>,
}

/// Locks a mutex, ignoring poisoning (a panicking test thread must not wedge the server).
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl State {
    /// A fresh state.
    pub fn new() -> Self {
        State {
            store: Mutex::new(Store::new(DEFAULT_HISTORY)),
            revision: tokio::sync::watch::Sender::new(1),
            subscribers: Mutex::new(Vec::new()),
            faults: Mutex::new(Faults::default()),
            requests: Mutex::new(Vec::new()),
            first_sent: Mutex::new(HashMap::new()),
            bookmark_interval: Mutex::new(Duration::from_secs(1)),
            net: tokio::sync::watch::Sender::new(Net::default()),
            open_connections: Mutex::new(BTreeMap::new()),
            expired_watches: AtomicUsize::new(0),
            logs: Mutex::new(HashMap::new()),
        }
    }

    /// The store, locked.
    pub fn store(&self) -> MutexGuard<'_, Store> {
        lock(&self.store)
    }

    /// A channel receiving every change from now on.
    pub fn subscribe(&self) -> mpsc::Receiver<Arc<Change>> {
        let (tx, rx) = mpsc::channel();
        lock(&self.subscribers).push(tx);
        rx
    }

    /// Runs a write against the locked store, then announces its change (in revision order).
    fn commit(
        &self,
        write: impl FnOnce(&mut Store) -> Result<Option<Arc<Change>>, ApiError>,
    ) -> Result<Option<Arc<Change>>, ApiError> {
        let mut store = self.store();
        let change = write(&mut store)?;
        if let Some(change) = &change {
            lock(&self.subscribers).retain(|s| s.send(change.clone()).is_ok());
            self.revision.send_replace(change.rv);
        }
        Ok(change)
    }

    /// POST: creates an object.
    pub fn create(
        &self,
        resource: &'static Resource,
        namespace: &str,
        value: Value,
        field_manager: Option<&str>,
    ) -> Result<Arc<Stored>, ApiError> {
        let mut prepared = objects::prepare_create(resource, namespace, value)?;
        if let Some(manager) = field_manager {
            objects::record_manager(&mut prepared.object, resource, manager);
        }
        let change = self.commit(|store| {
            if store.get(resource, namespace, &prepared.name).is_some() {
                return Err(ApiError::already_exists(resource, &prepared.name));
            }
            let name = prepared.name.clone();
            Ok(Some(store.put(
                resource,
                namespace,
                &name,
                prepared.object,
                Instant::now(),
            )))
        })?;
        Ok(change.expect("create always changes").object.clone())
    }

    /// PUT, PATCH and in-process apply: computes the next version from the current one
    /// with `edit`, then writes it unless nothing changed (the API server does not write,
    /// nor bump the revision, for a no-op update).
    pub fn update_with(
        &self,
        resource: &'static Resource,
        namespace: &str,
        name: &str,
        field_manager: Option<&str>,
        edit: impl FnOnce(&Stored) -> Result<Value, ApiError>,
    ) -> Result<Arc<Stored>, ApiError> {
        let mut result = None;
        self.commit(|store| {
            let current = store
                .get(resource, namespace, name)
                .ok_or_else(|| ApiError::not_found(resource, name))?;
            let next = edit(&current)?;
            let mut object = objects::prepare_update(resource, &current, next)?;
            if unchanged(&current, &object) {
                result = Some(current);
                return Ok(None);
            }
            if let Some(manager) = field_manager {
                objects::record_manager(&mut object, resource, manager);
            }
            let change = store.put(resource, namespace, name, object, Instant::now());
            result = Some(change.object.clone());
            Ok(Some(change))
        })?;
        Ok(result.expect("update produced a result"))
    }

    /// PATCH.
    pub fn patch(
        &self,
        resource: &'static Resource,
        namespace: &str,
        name: &str,
        kind: PatchKind,
        body: &[u8],
        field_manager: Option<&str>,
    ) -> Result<Arc<Stored>, ApiError> {
        self.update_with(resource, namespace, name, field_manager, |current| {
            patch::apply(&current.value(), kind, body)
        })
    }

    /// DELETE: the object's last state.
    pub fn delete(
        &self,
        resource: &'static Resource,
        namespace: &str,
        name: &str,
    ) -> Result<Arc<Stored>, ApiError> {
        let change = self.commit(|store| {
            store
                .delete(resource, namespace, name, Instant::now())
                .map(Some)
                .ok_or_else(|| ApiError::not_found(resource, name))
        })?;
        Ok(change.expect("delete always changes").object.clone())
    }
}

/// Whether `next` equals `current` apart from `resourceVersion` and `managedFields`.
fn unchanged(current: &Stored, next: &Map<String, Value>) -> bool {
    let strip = |mut value: Value| {
        if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("resourceVersion");
            meta.remove("managedFields");
        }
        value
    };
    strip(current.value()) == strip(Value::Object(next.clone()))
}
