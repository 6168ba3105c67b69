//! The ConfigMap/Secret contents a review is hashed against, as fetched by the I/O layer.

use std::collections::BTreeMap;

use hmac::{Hmac, Mac};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use sha2::{Digest as _, Sha256};

use super::{ConfigId, ConfigKind, SecretKey};

/// What hashing keeps of one value: its SHA-256 for a ConfigMap, an HMAC-SHA256 bound to the
/// Secret's name and key for a Secret. Values themselves are never kept.
pub type Digest = [u8; 32];

/// The keys of one ConfigMap (`data` and `binaryData`) or Secret (`data`, decoded), each
/// reduced to its [`Digest`] the moment it is read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigObject {
    /// Key → digest of its value.
    pub digests: BTreeMap<String, Digest>,
}

impl ConfigObject {
    /// Reduces the values of `id`. A Secret needs `key` (its values are only ever kept keyed);
    /// without one it gives `None`.
    pub fn from_values<K, V>(
        id: &ConfigId,
        values: impl IntoIterator<Item = (K, V)>,
        key: Option<&SecretKey>,
    ) -> Option<Self>
    where
        K: Into<String>,
        V: AsRef<[u8]>,
    {
        let secret_key = match id.kind {
            ConfigKind::ConfigMap => None,
            ConfigKind::Secret => Some(key?),
        };
        let digests = values
            .into_iter()
            .map(|(name, value)| {
                let name = name.into();
                let digest = match secret_key {
                    None => Sha256::digest(value.as_ref()).into(),
                    Some(key) => keyed_digest(key, &id.name, &name, value.as_ref()),
                };
                (name, digest)
            })
            .collect();
        Some(Self { digests })
    }

    /// The digests of a ConfigMap.
    pub fn from_config_map(cm: &ConfigMap) -> Self {
        let id = ConfigId::config_map(cm.metadata.name.clone().unwrap_or_default());
        let text = cm.data.iter().flatten().map(|(k, v)| (k, v.as_bytes()));
        let binary = cm.binary_data.iter().flatten().map(|(k, v)| (k, &v.0[..]));
        let values = text.chain(binary).map(|(k, v)| (k.clone(), v));
        Self::from_values(&id, values, None).unwrap_or_default()
    }

    /// The digests of a Secret under `key` (`stringData` is write-only and normally never
    /// stored; a value there counts only where `data` has none).
    pub fn from_secret(secret: &Secret, key: &SecretKey) -> Self {
        let id = ConfigId::secret(secret.metadata.name.clone().unwrap_or_default());
        let string_data = secret
            .string_data
            .iter()
            .flatten()
            .map(|(k, v)| (k, v.as_bytes()));
        let data = secret.data.iter().flatten().map(|(k, v)| (k, &v.0[..]));
        // Collected after `stringData`, a key's `data` value replaces its `stringData` one.
        let values: BTreeMap<&String, &[u8]> = string_data.chain(data).collect();
        let values = values.into_iter().map(|(k, v)| (k.clone(), v));
        Self::from_values(&id, values, Some(key)).unwrap_or_default()
    }
}

/// HMAC-SHA256 of a Secret value, bound to where it came from (name and key).
fn keyed_digest(key: &SecretKey, name: &str, key_name: &str, value: &[u8]) -> Digest {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(&key.0).expect("HMAC-SHA256 accepts keys of any length");
    for part in [name.as_bytes(), key_name.as_bytes(), value] {
        mac.update(&(part.len() as u64).to_be_bytes());
        mac.update(part);
    }
    mac.finalize().into_bytes().into()
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
pub type ConfigData = BTreeMap<ConfigId, Lookup>;
