//! Canonical config hashing (pure: no I/O).
//!
//! The hash covers exactly what a pod consumes restart-only: one key for a
//! `configMapKeyRef`/`secretKeyRef` or a subPath file, the whole object for `envFrom`. Items are
//! sorted and length-prefixed, so the digest does not depend on the order of containers, env
//! entries or map keys. An absent object or key hashes as "absent", so creating an `optional`
//! ConfigMap later changes the hash.
//!
//! Values enter only as per-key digests ([`ConfigObject`]), made the moment an object is read:
//! the SHA-256 of a ConfigMap value, and for a Secret value an HMAC-SHA256 with a key the
//! webhook holds (so the public annotation cannot be brute-forced back to a short secret). The
//! webhook, the offline `inject` and the rollout controller's watch-fed view therefore keep no
//! values, and compute the same hash from the same digests.
//!
//! Imports: nothing of the crate; every module may import it.

mod data;
mod env;

use std::collections::BTreeSet;
use std::fmt;

use sha2::{Digest as _, Sha256};

pub use data::{ConfigData, ConfigObject, Digest, Lookup};
pub use env::env_hash;

/// A ConfigMap or a Secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ConfigKind {
    /// A `v1/ConfigMap`.
    ConfigMap,
    /// A `v1/Secret`.
    Secret,
}

impl fmt::Display for ConfigKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ConfigKind::ConfigMap => "ConfigMap",
            ConfigKind::Secret => "Secret",
        })
    }
}

/// A ConfigMap or Secret in the namespace of the object under review.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConfigId {
    pub kind: ConfigKind,
    /// `metadata.name`.
    pub name: String,
}

impl ConfigId {
    /// A ConfigMap named `name`.
    pub fn config_map(name: impl Into<String>) -> Self {
        Self {
            kind: ConfigKind::ConfigMap,
            name: name.into(),
        }
    }

    /// A Secret named `name`.
    pub fn secret(name: impl Into<String>) -> Self {
        Self {
            kind: ConfigKind::Secret,
            name: name.into(),
        }
    }
}

impl fmt::Display for ConfigId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {:?}", self.kind, self.name)
    }
}

/// What a pod reads from one ConfigMap/Secret: one key, or every key.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Consumed {
    /// One key (`configMapKeyRef`, `secretKeyRef`, a subPath file).
    Key(ConfigId, String),
    /// The whole object (`envFrom`, a subPath that is not a single known key).
    Whole(ConfigId),
}

impl Consumed {
    /// The object this reads from.
    pub fn id(&self) -> &ConfigId {
        match self {
            Consumed::Key(id, _) | Consumed::Whole(id) => id,
        }
    }
}

/// The HMAC key for Secret values (`--secret-hash-key-file`).
#[derive(Clone)]
pub struct SecretKey(Vec<u8>);

impl SecretKey {
    /// Wraps key bytes; surrounding whitespace (a trailing newline in a file) is trimmed.
    /// Returns `None` for an empty key, which would make the HMAC worthless.
    pub fn new(bytes: &[u8]) -> Option<Self> {
        let trimmed = bytes.trim_ascii();
        (!trimmed.is_empty()).then(|| Self(trimmed.to_vec()))
    }
}

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretKey(<redacted>)")
    }
}

/// The result of hashing what a pod consumes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HashReport {
    /// `sha256:<hex>`, or `None` when nothing could be hashed or a lookup failed (then the
    /// existing annotation must be left as it is).
    pub hash: Option<String>,
    /// Secrets left out because there is no HMAC key.
    pub unkeyed_secrets: Vec<ConfigId>,
    /// Objects whose lookup failed, with the reason.
    pub failed: Vec<(ConfigId, String)>,
    /// Non-optional objects that do not exist (the pod will not start until they do).
    pub missing: Vec<ConfigId>,
}

/// Hashes `consumed` against `data`. `optional` lists the objects whose every reference is
/// `optional: true`; a missing non-optional object is reported in [`HashReport::missing`]
/// (it still hashes as absent).
pub fn config_hash(
    consumed: &BTreeSet<Consumed>,
    optional: &BTreeSet<ConfigId>,
    data: &ConfigData,
    key: Option<&SecretKey>,
) -> HashReport {
    let mut report = HashReport::default();
    let mut hasher = Sha256::new();
    let mut hashed_any = false;
    let mut reported = BTreeSet::new();
    for item in consumed {
        let id = item.id();
        let first_for_id = reported.insert(id);
        if id.kind == ConfigKind::Secret && key.is_none() {
            if first_for_id {
                report.unkeyed_secrets.push(id.clone());
            }
            continue;
        }
        let object = match data.get(id) {
            Some(Lookup::Found(object)) => Some(object),
            Some(Lookup::NotFound) | None => {
                if first_for_id && !optional.contains(id) {
                    report.missing.push(id.clone());
                }
                None
            }
            Some(Lookup::Failed(reason)) => {
                if first_for_id {
                    report.failed.push((id.clone(), reason.clone()));
                }
                continue;
            }
        };
        hashed_any = true;
        match item {
            Consumed::Key(_, name) => {
                let digest = object.map(|o| o.digests.get(name));
                write_item(&mut hasher, id, Some(name), digest);
            }
            Consumed::Whole(_) => match object {
                None => write_item(&mut hasher, id, None, None),
                Some(object) => {
                    write_item(&mut hasher, id, None, Some(None));
                    for (name, digest) in &object.digests {
                        write_item(&mut hasher, id, Some(name), Some(Some(digest)));
                    }
                }
            },
        }
    }
    if hashed_any && report.failed.is_empty() {
        report.hash = Some(format!("sha256:{}", hex::encode(hasher.finalize())));
    }
    report
}

/// Feeds one (kind, name, key, value digest) record. `object` is `None` when the object is
/// absent, `Some(None)` when it exists but the key does not (or for the "object exists"
/// marker of a whole-object record), `Some(Some(d))` for the digest of a value.
fn write_item(
    hasher: &mut Sha256,
    id: &ConfigId,
    key_name: Option<&String>,
    object: Option<Option<&Digest>>,
) {
    hasher.update([match id.kind {
        ConfigKind::ConfigMap => b'c',
        ConfigKind::Secret => b's',
    }]);
    write_field(hasher, id.name.as_bytes());
    match key_name {
        Some(name) => {
            hasher.update([b'k']);
            write_field(hasher, name.as_bytes());
        }
        None => hasher.update([b'*']),
    }
    match object {
        None => hasher.update([b'0']),
        Some(None) => hasher.update([b'1']),
        Some(Some(digest)) => {
            hasher.update([b'v']);
            write_field(hasher, digest);
        }
    }
}

fn write_field(hasher: &mut Sha256, bytes: &[u8]) {
    hasher.update((bytes.len() as u64).to_be_bytes());
    hasher.update(bytes);
}

#[cfg(test)]
mod tests;
