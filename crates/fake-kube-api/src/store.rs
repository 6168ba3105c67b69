//! The object store: one global revision counter (like etcd's), every object kept as
//! serialized JSON with a short chain of past versions (so a paginated list reads one
//! consistent snapshot), and a log of changes that watches replay. Pure: no I/O, no clock
//! except the `Instant` stamped on each change.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use serde_json::{Map, Value};

use super::resources::Resource;

/// One stored version of an object.
#[derive(Debug)]
pub struct Stored {
    /// Its resource.
    pub resource: &'static Resource,
    /// Its namespace (empty for cluster-scoped objects).
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The revision that wrote it.
    pub rv: u64,
    /// The object as JSON without `apiVersion`/`kind` (as list items are served).
    pub body: Bytes,
    /// Its `metadata`.
    pub metadata: Value,
}

impl Stored {
    /// The object as JSON with `apiVersion` and `kind` first.
    pub fn full_json(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.body.len() + 64);
        out.extend_from_slice(
            format!(
                "{{\"apiVersion\":\"{}\",\"kind\":\"{}\"",
                self.resource.api_version(),
                self.resource.kind
            )
            .as_bytes(),
        );
        if self.body.len() > 2 {
            out.push(b',');
        }
        out.extend_from_slice(&self.body[1..]);
        out
    }

    /// The object as a `PartialObjectMetadata` JSON document.
    pub fn metadata_json(&self) -> Vec<u8> {
        let mut out =
            br#"{"apiVersion":"meta.k8s.io/v1","kind":"PartialObjectMetadata","metadata":"#
                .to_vec();
        serde_json::to_writer(&mut out, &self.metadata).expect("metadata serializes");
        out.push(b'}');
        out
    }

    /// The object parsed back, with `apiVersion` and `kind`.
    pub fn value(&self) -> Value {
        serde_json::from_slice(&self.full_json()).expect("stored JSON parses")
    }

    /// `namespace/name` as stored.
    pub fn key(&self) -> String {
        key(&self.namespace, &self.name)
    }
}

/// The key an object is stored under: `namespace/name` sorts like etcd's keys.
pub fn key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// What happened to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    /// Created.
    Added,
    /// Replaced or patched.
    Modified,
    /// Deleted.
    Deleted,
}

/// One entry of the change log: what a watch replays.
#[derive(Debug)]
pub struct Change {
    /// The revision of the change.
    pub rv: u64,
    /// What happened.
    pub kind: ChangeKind,
    /// The object after the change (for a deletion: its last state, at the deletion's revision).
    pub object: Arc<Stored>,
    /// The object before the change, if it existed.
    pub previous: Option<Arc<Stored>>,
    /// When the change was committed (and became visible to watches).
    pub at: Instant,
}

/// A revision older than what the store still holds.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("failed to read at revision {requested}: compacted up to {compacted}")]
pub struct Expired {
    /// The revision asked for.
    pub requested: u64,
    /// Everything up to this revision is gone.
    pub compacted: u64,
}

type Chain = Vec<(u64, Option<Arc<Stored>>)>;

/// The store of every resource.
#[derive(Debug)]
pub struct Store {
    revision: u64,
    compacted: u64,
    tables: HashMap<&'static Resource, BTreeMap<String, Chain>>,
    with_history: BTreeSet<(&'static str, &'static str, String)>,
    log: VecDeque<Arc<Change>>,
    history_limit: usize,
}

impl Store {
    /// An empty store that keeps at most `history_limit` changes for watches to replay.
    pub fn new(history_limit: usize) -> Self {
        Store {
            revision: 1,
            compacted: 0,
            tables: HashMap::new(),
            with_history: BTreeSet::new(),
            log: VecDeque::new(),
            history_limit: history_limit.max(1),
        }
    }

    /// The current revision.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// Revisions up to this one can no longer be replayed.
    pub fn compacted(&self) -> u64 {
        self.compacted
    }

    /// Changes how many changes are kept (compacting at once if needed).
    pub fn set_history_limit(&mut self, limit: usize) {
        self.history_limit = limit.max(1);
        self.trim();
    }

    /// The current version of an object.
    pub fn get(
        &self,
        resource: &'static Resource,
        namespace: &str,
        name: &str,
    ) -> Option<Arc<Stored>> {
        self.tables
            .get(resource)?
            .get(&key(namespace, name))?
            .last()?
            .1
            .clone()
    }

    /// Writes a new version of an object (`object` already carries everything but its
    /// `resourceVersion`, which is set here). Returns the change.
    pub fn put(
        &mut self,
        resource: &'static Resource,
        namespace: &str,
        name: &str,
        mut object: Map<String, Value>,
        at: Instant,
    ) -> Arc<Change> {
        self.revision += 1;
        let rv = self.revision;
        object.remove("apiVersion");
        object.remove("kind");
        let metadata = object
            .entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(meta) = metadata {
            meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
        }
        let metadata = metadata.clone();
        let body = compact_bytes(serde_json::to_vec(&object).expect("object serializes"));
        let stored = Arc::new(Stored {
            resource,
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            rv,
            body,
            metadata,
        });
        let previous = self.get(resource, namespace, name);
        let kind = if previous.is_some() {
            ChangeKind::Modified
        } else {
            ChangeKind::Added
        };
        self.push_version(resource, namespace, name, rv, Some(stored.clone()));
        self.record(Change {
            rv,
            kind,
            object: stored,
            previous,
            at,
        })
    }

    /// Deletes an object; `None` if it did not exist.
    pub fn delete(
        &mut self,
        resource: &'static Resource,
        namespace: &str,
        name: &str,
        at: Instant,
    ) -> Option<Arc<Change>> {
        let previous = self.get(resource, namespace, name)?;
        self.revision += 1;
        let rv = self.revision;
        let mut metadata = previous.metadata.clone();
        metadata["resourceVersion"] = Value::String(rv.to_string());
        let mut object: Map<String, Value> =
            serde_json::from_slice(&previous.body).expect("stored JSON parses");
        object.insert("metadata".into(), metadata.clone());
        let last = Arc::new(Stored {
            resource,
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            rv,
            body: compact_bytes(serde_json::to_vec(&object).expect("object serializes")),
            metadata,
        });
        self.push_version(resource, namespace, name, rv, None);
        Some(self.record(Change {
            rv,
            kind: ChangeKind::Deleted,
            object: last,
            previous: Some(previous),
            at,
        }))
    }

    fn push_version(
        &mut self,
        resource: &'static Resource,
        namespace: &str,
        name: &str,
        rv: u64,
        version: Option<Arc<Stored>>,
    ) {
        let chain = self
            .tables
            .entry(resource)
            .or_default()
            .entry(key(namespace, name))
            .or_default();
        chain.push((rv, version));
        if chain.len() > 1 {
            self.with_history
                .insert((resource.group, resource.plural, key(namespace, name)));
        }
    }

    fn record(&mut self, change: Change) -> Arc<Change> {
        let change = Arc::new(change);
        self.log.push_back(change.clone());
        if self.log.len() > self.history_limit + self.history_limit / 2 {
            self.trim();
        }
        change
    }

    fn trim(&mut self) {
        if self.log.len() > self.history_limit {
            let drop = self.log.len() - self.history_limit;
            let up_to = self.log[drop - 1].rv;
            self.compact_to(up_to);
        }
    }

    /// Forgets every change up to now: watches and lists from an older revision get 410.
    pub fn compact(&mut self) {
        self.compact_to(self.revision);
    }

    fn compact_to(&mut self, up_to: u64) {
        if up_to <= self.compacted {
            return;
        }
        self.compacted = up_to;
        while self.log.front().is_some_and(|c| c.rv <= up_to) {
            self.log.pop_front();
        }
        let keys: Vec<_> = self.with_history.iter().cloned().collect();
        for entry in keys {
            let (group, plural, key) = &entry;
            let Some(table) = self
                .tables
                .iter_mut()
                .find_map(|(r, t)| (r.group == *group && r.plural == *plural).then_some(t))
            else {
                continue;
            };
            let Some(chain) = table.get_mut(key) else {
                self.with_history.remove(&entry);
                continue;
            };
            // Keep the newest version at or before `up_to` (the state as of then) and later ones.
            let keep_from = chain.iter().rposition(|(rv, _)| *rv <= up_to).unwrap_or(0);
            chain.drain(..keep_from);
            if chain.len() == 1 && chain[0].1.is_none() {
                table.remove(key);
                self.with_history.remove(&entry);
            } else if chain.len() == 1 {
                self.with_history.remove(&entry);
            }
        }
    }

    /// Up to `limit` changes after revision `after`, oldest first; `Err` if some of them
    /// were compacted away.
    pub fn changes_after(&self, after: u64, limit: usize) -> Result<Vec<Arc<Change>>, Expired> {
        if after < self.compacted {
            return Err(Expired {
                requested: after,
                compacted: self.compacted,
            });
        }
        let start = self.log.partition_point(|c| c.rv <= after);
        Ok(self.log.range(start..).take(limit).cloned().collect())
    }

    /// Objects of `resource` as of revision `at`, in key order, starting after `start_after`,
    /// restricted to `namespace` if given, keeping those `keep` accepts, at most `limit` of
    /// them. Returns the objects and whether more remain.
    #[allow(clippy::too_many_arguments)]
    pub fn list(
        &self,
        resource: &'static Resource,
        namespace: Option<&str>,
        at: u64,
        start_after: Option<&str>,
        limit: Option<usize>,
        keep: &dyn Fn(&Stored) -> bool,
    ) -> Result<(Vec<Arc<Stored>>, bool), Expired> {
        if at < self.compacted {
            return Err(Expired {
                requested: at,
                compacted: self.compacted,
            });
        }
        let Some(table) = self.tables.get(resource) else {
            return Ok((Vec::new(), false));
        };
        let prefix = namespace.map(|ns| format!("{ns}/"));
        let lower = match (start_after, &prefix) {
            (Some(after), _) => Bound::Excluded(after.to_owned()),
            (None, Some(prefix)) => Bound::Included(prefix.clone()),
            (None, None) => Bound::Unbounded,
        };
        let mut items = Vec::new();
        for (key, chain) in table.range((lower, Bound::Unbounded)) {
            if let Some(prefix) = &prefix
                && !key.starts_with(prefix.as_str())
            {
                break;
            }
            let Some(version) = version_at(chain, at) else {
                continue;
            };
            if !keep(&version) {
                continue;
            }
            if limit.is_some_and(|l| items.len() >= l) {
                return Ok((items, true));
            }
            items.push(version);
        }
        Ok((items, false))
    }
}

/// Bytes without the spare capacity serialization leaves (up to half of a big object).
fn compact_bytes(mut json: Vec<u8>) -> Bytes {
    json.shrink_to_fit();
    Bytes::from(json)
}

/// The version of an object visible at revision `at`.
fn version_at(chain: &Chain, at: u64) -> Option<Arc<Stored>> {
    let index = chain.partition_point(|(rv, _)| *rv <= at);
    chain.get(index.checked_sub(1)?)?.1.clone()
}
