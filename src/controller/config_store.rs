//! What every replica knows of the ConfigMaps and Secrets of opted-in namespaces (pure): their
//! metadata and per-key digests, from their watch or a GET. The webhook reads it too.
//!
//! One writer (the loop's [`StoreWriter`]), many [`StoreReader`]s, through one
//! `parking_lot::RwLock` reached only by closures, so no guard outlives a call. `parking_lot`:
//! its locks do not poison, so one panicking reader cannot wedge the webhook's reviews. Not
//! `arc-swap`: copying tens of thousands of entries per watch event costs far more than a
//! read lock held for microseconds.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use parking_lot::RwLock;

use crate::hash::{ConfigId, ConfigKind, ConfigObject, Digest, Lookup};

/// One ConfigMap or Secret in one namespace.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConfigKey {
    /// `metadata.namespace` (shared by every record of the namespace).
    pub namespace: Arc<str>,
    pub id: ConfigId,
}

impl std::fmt::Display for ConfigKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}/{}", self.id.kind, self.namespace, self.id.name)
    }
}

/// What the metadata watch says of an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    pub resource_version: String,
    /// Annotated `reload-injector.io/ignore: "true"` (or Reloader's `ignore`): its changes
    /// never cause a write.
    pub ignore: bool,
    /// Annotated `reloader.stakater.com/match: "true"`: it counts for Reloader's `search`.
    pub matched: bool,
}

/// An object's digests as last fetched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// `metadata.resourceVersion` of what was read (`None`: the object did not exist).
    pub resource_version: Option<String>,
    /// The digests (`None`: the object did not exist).
    pub object: Option<Digests>,
    /// The view's tick when the request was sent: the data is at least as new as that moment.
    pub sent: u64,
}

impl Fetched {
    /// The answer the webhook's hash function takes.
    pub fn lookup(&self) -> Lookup {
        match &self.object {
            Some(digests) => Lookup::Found(digests.to_object()),
            None => Lookup::NotFound,
        }
    }
}

/// An object's per-key digests, sorted by key in one boxed slice (a `BTreeMap`'s first node
/// takes about 630 bytes even for one key).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Digests(Box<[(Box<str>, Digest)]>);

impl From<ConfigObject> for Digests {
    fn from(object: ConfigObject) -> Self {
        Self(
            object
                .digests
                .into_iter()
                .map(|(key, digest)| (key.into_boxed_str(), digest))
                .collect(),
        )
    }
}

impl Digests {
    /// The digests as the webhook's hash function takes them.
    pub fn to_object(&self) -> ConfigObject {
        ConfigObject {
            digests: self
                .0
                .iter()
                .map(|(key, digest)| (key.to_string(), *digest))
                .collect(),
        }
    }

    pub fn get(&self, key: &str) -> Option<&Digest> {
        let at = self.0.binary_search_by(|(k, _)| (**k).cmp(key)).ok()?;
        Some(&self.0[at].1)
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(key, _)| &**key)
    }
}

/// How an object's data changed between two fetches.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// It was created or deleted.
    pub existence: bool,
    /// Keys added, removed or with another value.
    pub keys: BTreeSet<String>,
}

impl Changes {
    /// Whether `key` (or, with `None`, anything) of the object changed.
    pub fn touches(&self, key: Option<&str>) -> bool {
        self.existence || key.map_or(!self.keys.is_empty(), |k| self.keys.contains(k))
    }
}

/// What is known of one object: one map entry (and one copy of its key) for both halves.
#[derive(Debug, Default)]
struct Entry {
    /// `None`: the watch does not know it.
    meta: Option<Meta>,
    /// `None`: never fetched.
    fetched: Option<Fetched>,
}

/// Config metadata and digests.
#[derive(Debug, Default)]
pub struct ConfigStore {
    entries: HashMap<ConfigKey, Entry>,
    synced: bool,
    /// Namespaces and kinds whose watch is listing (again, after a 410 Gone or a lost
    /// connection): what the view holds there may be older than the cluster.
    listing: HashSet<(Arc<str>, ConfigKind)>,
}

impl ConfigStore {
    /// Records an object seen by the metadata watch; returns whether its resourceVersion moved.
    pub fn set_meta(&mut self, key: ConfigKey, meta: Meta) -> bool {
        let entry = self.entries.entry(key).or_default();
        let moved = entry
            .meta
            .as_ref()
            .is_none_or(|old| old.resource_version != meta.resource_version);
        entry.meta = Some(meta);
        moved
    }

    /// Forgets an object the watch saw deleted; returns its last metadata.
    pub fn remove_meta(&mut self, key: &ConfigKey) -> Option<Meta> {
        let entry = self.entries.get_mut(key)?;
        let meta = entry.meta.take();
        if entry.fetched.is_none() {
            self.entries.remove(key);
        }
        meta
    }

    /// The metadata of `key`, if the watch has seen it.
    pub fn meta(&self, key: &ConfigKey) -> Option<&Meta> {
        self.entries.get(key)?.meta.as_ref()
    }

    /// Forgets an object whole (deleted, and nothing consumes it).
    pub fn remove(&mut self, key: &ConfigKey) {
        self.entries.remove(key);
    }

    /// Forgets every object of `namespace` (it opted out: its watches stopped).
    pub fn forget_namespace(&mut self, namespace: &str) {
        self.entries.retain(|key, _| &*key.namespace != namespace);
        self.listing.retain(|(ns, _)| &**ns != namespace);
    }

    /// Marks the `kind` objects of `namespace` as being listed (their view may be stale, so
    /// [`ConfigStore::lookup`] leaves them to the API server) or listed again.
    pub fn set_listing(&mut self, namespace: &Arc<str>, kind: ConfigKind, listing: bool) {
        if listing {
            self.listing.insert((namespace.clone(), kind));
        } else {
            self.listing.remove(&(namespace.clone(), kind));
        }
    }

    /// Drops the digests of every object `keep` refuses (the metadata stays): after the first
    /// sync, only what something consumes keeps its digests.
    pub fn retain_digests(&mut self, keep: impl Fn(&ConfigKey) -> bool) {
        self.entries.retain(|key, entry| {
            if !keep(key) {
                entry.fetched = None;
            }
            entry.meta.is_some() || entry.fetched.is_some()
        });
        self.entries.shrink_to_fit();
    }

    /// The view's tick when the digests of `key` were last read (`None`: never).
    pub fn sent(&self, key: &ConfigKey) -> Option<u64> {
        Some(self.entries.get(key)?.fetched.as_ref()?.sent)
    }

    /// Every object the metadata watch knows (for a relist's sweep).
    pub fn keys(&self) -> impl Iterator<Item = &ConfigKey> {
        self.entries
            .iter()
            .filter(|(_, entry)| entry.meta.is_some())
            .map(|(key, _)| key)
    }

    /// Records digests; returns what changed since the last fetch (`None` for the first fetch,
    /// which is a baseline, or when nothing changed).
    pub fn set_fetched(&mut self, key: ConfigKey, fetched: Fetched) -> Option<Changes> {
        let entry = self.entries.entry(key).or_default();
        let previous = entry.fetched.replace(fetched)?;
        let changes = diff(
            previous.object.as_ref(),
            entry.fetched.as_ref().and_then(|f| f.object.as_ref()),
        );
        (changes != Changes::default()).then_some(changes)
    }

    /// The digests of `key` if they are as new as the metadata watch: fetched at the watched
    /// resourceVersion, or known absent while the watch knows no such object.
    pub fn fresh(&self, key: &ConfigKey) -> Option<&Fetched> {
        let entry = self.entries.get(key)?;
        let fetched = entry.fetched.as_ref()?;
        let current = match (&entry.meta, &fetched.resource_version) {
            (Some(meta), Some(rv)) => &meta.resource_version == rv,
            (None, None) => true,
            _ => false,
        };
        current.then_some(fetched)
    }

    /// Marks the first sync done (a later relist marks only its own scope: `set_listing`).
    pub fn set_synced(&mut self, synced: bool) {
        self.synced = synced;
    }

    /// The webhook's answer for `id` in `namespace` from the view, when the view has it fresh:
    /// synced, not being listed, and fetched at the watched resourceVersion.
    pub fn lookup(&self, namespace: &str, id: &ConfigId) -> Option<Lookup> {
        let key = ConfigKey {
            namespace: namespace.into(),
            id: id.clone(),
        };
        if !self.synced || self.listing.contains(&(key.namespace.clone(), id.kind)) {
            return None;
        }
        Some(self.fresh(&key)?.lookup())
    }

    /// How many objects of each kind the watch knows: (ConfigMaps, Secrets).
    pub fn counts(&self) -> (usize, usize) {
        self.keys()
            .fold((0, 0), |(maps, secrets), key| match key.id.kind {
                ConfigKind::ConfigMap => (maps + 1, secrets),
                ConfigKind::Secret => (maps, secrets + 1),
            })
    }
}

/// The controller's handle on the store: the only one that writes.
#[derive(Debug, Default)]
pub struct StoreWriter(Arc<RwLock<ConfigStore>>);

/// A read-only handle on the store (the webhook's); cheap to clone.
#[derive(Debug, Clone)]
pub struct StoreReader(Arc<RwLock<ConfigStore>>);

impl StoreWriter {
    pub fn new(store: ConfigStore) -> Self {
        Self(Arc::new(RwLock::new(store)))
    }

    pub fn reader(&self) -> StoreReader {
        StoreReader(self.0.clone())
    }

    /// Changes the store; readers wait for the change to be whole.
    pub fn write<T>(&self, change: impl FnOnce(&mut ConfigStore) -> T) -> T {
        change(&mut self.0.write())
    }

    /// Reads the store.
    pub fn read<T>(&self, look: impl FnOnce(&ConfigStore) -> T) -> T {
        look(&self.0.read())
    }
}

impl StoreReader {
    /// Reads the store.
    pub fn read<T>(&self, look: impl FnOnce(&ConfigStore) -> T) -> T {
        look(&self.0.read())
    }
}

fn diff(old: Option<&Digests>, new: Option<&Digests>) -> Changes {
    let none = Digests::default();
    let (before, after) = (old.unwrap_or(&none), new.unwrap_or(&none));
    let changed = before.0.iter().filter(|(k, v)| after.get(k) != Some(v));
    let added = after.keys().filter(|k| before.get(k).is_none());
    Changes {
        existence: old.is_some() != new.is_some(),
        keys: changed
            .map(|(k, _)| &**k)
            .chain(added)
            .map(str::to_owned)
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> ConfigKey {
        key_in("shop", "web")
    }

    fn key_in(namespace: &str, name: &str) -> ConfigKey {
        ConfigKey {
            namespace: namespace.into(),
            id: ConfigId::config_map(name),
        }
    }

    fn object(pairs: &[(&str, &str)]) -> Option<Digests> {
        let values = pairs.iter().map(|(k, v)| (*k, v.as_bytes()));
        ConfigObject::from_values(&key().id, values, None).map(Digests::from)
    }

    fn fetched(rv: &str, pairs: &[(&str, &str)], sent: u64) -> Fetched {
        Fetched {
            resource_version: Some(rv.into()),
            object: object(pairs),
            sent,
        }
    }

    fn meta(rv: &str) -> Meta {
        Meta {
            resource_version: rv.into(),
            ignore: false,
            matched: false,
        }
    }

    #[test]
    fn the_first_fetch_is_a_baseline_and_only_data_changes_count() {
        let mut store = ConfigStore::default();
        assert_eq!(
            store.set_fetched(key(), fetched("1", &[("a", "1"), ("b", "2")], 1)),
            None
        );
        assert_eq!(
            store.set_fetched(key(), fetched("2", &[("a", "1"), ("b", "2")], 2)),
            None,
            "the same data rewritten (or a label edit) is no change"
        );
        let changes = store
            .set_fetched(key(), fetched("3", &[("a", "9"), ("c", "3")], 3))
            .expect("changed");
        assert!(!changes.existence);
        assert_eq!(
            changes.keys,
            BTreeSet::from(["a".into(), "b".into(), "c".into()])
        );
        assert!(changes.touches(Some("a")) && !changes.touches(Some("z")) && changes.touches(None));
        let gone = Fetched {
            resource_version: None,
            object: None,
            sent: 4,
        };
        let changes = store.set_fetched(key(), gone).expect("deleted");
        assert!(changes.existence && changes.touches(Some("never-there")));
    }

    #[test]
    fn compact_digests_keep_every_key_in_order() {
        let id = ConfigId::config_map("web");
        let values = [("b", "2"), ("a", "1"), ("c", "3")].map(|(k, v)| (k, v.as_bytes()));
        let object = ConfigObject::from_values(&id, values, None).unwrap();
        let digests = Digests::from(object.clone());
        assert_eq!(digests.to_object(), object);
        assert_eq!(digests.keys().collect::<Vec<_>>(), ["a", "b", "c"]);
        assert_eq!(digests.get("b"), object.digests.get("b"));
        assert_eq!(digests.get("z"), None);
    }

    #[test]
    fn metadata_and_digests_share_an_entry_that_outlives_neither() {
        let mut store = ConfigStore::default();
        store.set_meta(key(), meta("1"));
        assert_eq!(store.keys().count(), 1);
        assert_eq!(store.remove_meta(&key()), Some(meta("1")));
        assert_eq!(store.keys().count(), 0);
        assert!(store.entries.is_empty(), "nothing fetched: the entry goes");
        store.set_meta(key(), meta("2"));
        store.set_fetched(key(), fetched("2", &[("a", "1")], 1));
        store.remove_meta(&key());
        assert_eq!(store.counts(), (0, 0), "the watch no longer knows it");
        assert!(
            store.fresh(&key()).is_none(),
            "fetched at 2, and the watch saw it deleted"
        );
    }

    #[test]
    fn a_namespace_is_forgotten_whole_and_the_newest_read_is_known() {
        let mut store = ConfigStore::default();
        store.set_meta(key(), meta("1"));
        store.set_fetched(key(), fetched("1", &[("a", "1")], 7));
        assert_eq!(store.sent(&key()), Some(7));
        let other = key_in("other", "web");
        store.set_meta(other.clone(), meta("1"));
        store.forget_namespace("shop");
        assert_eq!(store.sent(&key()), None);
        assert_eq!(store.counts(), (1, 0));
        store.remove(&other);
        assert_eq!(store.counts(), (0, 0));
    }

    #[test]
    fn digests_nothing_consumes_are_dropped_and_their_metadata_kept() {
        let mut store = ConfigStore::default();
        store.set_meta(key(), meta("1"));
        store.set_fetched(key(), fetched("1", &[("a", "1")], 1));
        let gone = key_in("shop", "absent");
        store.set_fetched(gone.clone(), fetched("1", &[], 2));
        store.retain_digests(|_| false);
        assert_eq!(store.counts(), (1, 0), "the metadata stays");
        assert!(store.fresh(&key()).is_none(), "no digests: a GET if needed");
        assert_eq!(store.sent(&gone), None, "nothing left of it");
        assert_eq!(store.entries.len(), 1);
    }

    #[test]
    fn digests_are_fresh_only_at_the_watched_resource_version_and_after_sync() {
        let mut store = ConfigStore::default();
        store.set_fetched(key(), fetched("5", &[("a", "1")], 1));
        assert_eq!(store.lookup("shop", &key().id), None, "not synced yet");
        store.set_synced(true);
        assert_eq!(
            store.lookup("shop", &key().id),
            None,
            "the watch has not seen it"
        );
        assert!(store.set_meta(key(), meta("5")));
        assert!(matches!(
            store.lookup("shop", &key().id),
            Some(Lookup::Found(_))
        ));
        assert!(!store.set_meta(key(), meta("5")), "same resourceVersion");
        assert!(store.set_meta(key(), meta("6")));
        assert_eq!(
            store.lookup("shop", &key().id),
            None,
            "stale: the webhook GETs instead"
        );
        assert_eq!(store.lookup("other", &key().id), None);
    }

    #[test]
    fn a_namespace_listing_again_answers_no_lookup_until_it_has_listed() {
        let mut store = ConfigStore::default();
        store.set_synced(true);
        assert!(store.set_meta(key(), meta("5")));
        store.set_fetched(key(), fetched("5", &[("a", "1")], 1));
        assert!(store.lookup("shop", &key().id).is_some());
        // A 410 Gone: the watch lists again; changes made meanwhile are not in the view yet.
        let shop: Arc<str> = "shop".into();
        store.set_listing(&shop, ConfigKind::ConfigMap, true);
        assert_eq!(store.lookup("shop", &key().id), None, "maybe stale");
        store.set_listing(&shop, ConfigKind::Secret, false);
        assert_eq!(
            store.lookup("shop", &key().id),
            None,
            "only its own kind ends it"
        );
        store.set_listing(&shop, ConfigKind::ConfigMap, false);
        assert!(store.lookup("shop", &key().id).is_some());
        store.set_listing(&shop, ConfigKind::ConfigMap, true);
        store.forget_namespace("shop");
        assert!(
            store.listing.is_empty(),
            "an opted-out namespace leaves nothing behind"
        );
    }
}
