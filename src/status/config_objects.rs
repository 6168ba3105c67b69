//! The ConfigMaps and Secrets of a snapshot as the report needs them. Pure.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;

use serde::Serialize;

use super::seconds_between;
use super::snapshot::Snapshot;
use crate::hash::{ConfigData, ConfigId, ConfigKind, ConfigObject, Lookup};

/// One object as seen.
#[derive(Debug, Clone)]
pub struct Seen {
    /// Annotated `reload-injector.io/ignore: "true"` (or Reloader's `ignore`).
    pub ignored: bool,
    /// Annotated `reloader.stakater.com/match: "true"` (it counts for Reloader's `search`).
    pub matched: bool,
    /// When its data was last written, as far as the API tells (see [`data_written`]).
    pub written: Option<Timestamp>,
    /// Its digests, when they could be made.
    pub digests: Option<ConfigObject>,
    pub keys: Vec<String>,
}

/// The config objects of one namespace.
#[derive(Debug, Clone, Default)]
pub struct Configs {
    objects: BTreeMap<ConfigId, Seen>,
    config_maps_failed: Option<String>,
    secrets_failed: Option<String>,
}

impl Configs {
    /// The ConfigMaps and Secrets of `namespace` in `snapshot`.
    pub fn of(snapshot: &Snapshot, namespace: &str) -> Configs {
        let mut configs = Configs::default();
        let mut add = |id: fn(String) -> ConfigId, meta: &ObjectMeta, digests, keys| {
            if meta.namespace.as_deref() == Some(namespace) {
                let seen = Seen {
                    ignored: crate::policy::ignored(meta.annotations.as_ref()),
                    matched: crate::policy::reloader::matched(meta.annotations.as_ref()),
                    written: data_written(meta),
                    digests,
                    keys,
                };
                let name = meta.name.clone().unwrap_or_default();
                configs.objects.insert(id(name), seen);
            }
        };
        for cm in snapshot.config_maps.ok().into_iter().flatten() {
            let data = cm.data.iter().flat_map(|d| d.keys());
            let keys = data.chain(cm.binary_data.iter().flat_map(|d| d.keys()));
            let (digests, keys) = (Some(ConfigObject::from_config_map(cm)), keys.cloned());
            add(ConfigId::config_map, &cm.metadata, digests, keys.collect());
        }
        for secret in snapshot.secrets.ok().into_iter().flatten() {
            let (digests, keys) = (secret.digests.clone(), secret.keys.clone());
            add(ConfigId::secret, &secret.metadata, digests, keys);
        }
        configs.config_maps_failed = snapshot.config_maps.failure().map(str::to_owned);
        configs.secrets_failed = snapshot.secrets.failure().map(str::to_owned);
        configs
    }

    /// The object, if it was read and exists.
    pub fn get(&self, id: &ConfigId) -> Option<&Seen> {
        self.objects.get(id)
    }

    /// Whether it exists (`None`: its kind could not be read).
    pub fn exists(&self, id: &ConfigId) -> Option<bool> {
        if self.failed(id.kind).is_some() {
            return None;
        }
        Some(self.objects.contains_key(id))
    }

    /// Why objects of `kind` could not be read.
    pub fn failed(&self, kind: ConfigKind) -> Option<&str> {
        match kind {
            ConfigKind::ConfigMap => self.config_maps_failed.as_deref(),
            ConfigKind::Secret => self.secrets_failed.as_deref(),
        }
    }

    /// When `id`'s data was last written, `now` being the report's time.
    pub fn written(&self, id: &ConfigId, now: Timestamp) -> Option<Written> {
        let at = self.objects.get(id)?.written?;
        Some(Written {
            object_kind: id.kind.to_string(),
            object: id.name.clone(),
            at: at.to_string(),
            seconds_ago: seconds_between(at, now),
        })
    }

    /// The hash core's lookups for `ids`: found, not found, or failed with the reason.
    pub fn data<'a>(&self, ids: impl IntoIterator<Item = &'a ConfigId>) -> ConfigData {
        let mut data = ConfigData::new();
        for id in ids {
            let lookup = match (self.failed(id.kind), self.objects.get(id)) {
                (Some(reason), _) => Lookup::Failed(reason.to_owned()),
                (None, None) => Lookup::NotFound,
                (None, Some(seen)) => match &seen.digests {
                    Some(digests) => Lookup::Found(digests.clone()),
                    None => Lookup::Failed("its values could not be hashed".to_owned()),
                },
            };
            data.insert(id.clone(), lookup);
        }
        data
    }
}

/// When a consumed object's data was last written.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Written {
    pub object_kind: String,
    pub object: String,
    /// RFC 3339.
    pub at: String,
    pub seconds_ago: i64,
}

/// When an object's data was last written: the newest `managedFields` entry that owns its data,
/// else its creation (the API records no more).
pub fn data_written(meta: &ObjectMeta) -> Option<Timestamp> {
    let owns_data = |fields: &serde_json::Value| {
        ["f:data", "f:binaryData", "f:stringData"]
            .iter()
            .any(|f| fields.get(f).is_some())
    };
    meta.managed_fields
        .iter()
        .flatten()
        .filter(|entry| entry.fields_v1.as_ref().is_some_and(|f| owns_data(&f.0)))
        .filter_map(|entry| entry.time.as_ref().map(|t| t.0))
        .max()
        .or_else(|| meta.creation_timestamp.as_ref().map(|t| t.0))
}
