//! The ConfigMap/Secret contents a review is hashed against, as fetched by the I/O layer.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};

use super::ConfigId;

/// The keys and values of one ConfigMap (`data` and `binaryData`) or Secret (`data`, decoded).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigObject {
    /// Key → value bytes.
    pub data: BTreeMap<String, Vec<u8>>,
}

impl ConfigObject {
    /// The contents of a ConfigMap.
    pub fn from_config_map(cm: &ConfigMap) -> Self {
        let mut data = BTreeMap::new();
        for (k, v) in cm.data.iter().flatten() {
            data.insert(k.clone(), v.clone().into_bytes());
        }
        for (k, v) in cm.binary_data.iter().flatten() {
            data.insert(k.clone(), v.0.clone());
        }
        Self { data }
    }

    /// The contents of a Secret (`stringData` is write-only and never stored, so only `data`).
    pub fn from_secret(secret: &Secret) -> Self {
        let mut data = BTreeMap::new();
        for (k, v) in secret.data.iter().flatten() {
            data.insert(k.clone(), v.0.clone());
        }
        for (k, v) in secret.string_data.iter().flatten() {
            data.entry(k.clone())
                .or_insert_with(|| v.clone().into_bytes());
        }
        Self { data }
    }
}

/// The outcome of looking one object up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// The object exists.
    Found(ConfigObject),
    /// The API said 404.
    NotFound,
    /// The lookup failed (API down, slow, forbidden): the reason, without any value.
    Failed(String),
}

/// Lookups for every object a review consumes. An object that is not in the map counts
/// as not found, which is what offline `inject` wants for objects it was not given.
#[derive(Debug, Clone, Default)]
pub struct ConfigData {
    objects: BTreeMap<ConfigId, Lookup>,
}

impl ConfigData {
    /// An empty set: every object counts as not found.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records the lookup of `id`.
    pub fn insert(&mut self, id: ConfigId, lookup: Lookup) {
        self.objects.insert(id, lookup);
    }

    /// The lookup of `id`, if recorded.
    pub fn get(&self, id: &ConfigId) -> Option<&Lookup> {
        self.objects.get(id)
    }
}
