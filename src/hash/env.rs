//! The env hash of a Pod that restarts in place: `sha256:` over the ConfigMap keys its containers
//! read through env or envFrom, from the per-key digests the webhook and the controller keep
//! and that the sidecar computes from its own mounted copy of the same ConfigMaps (the file of a
//! key holds exactly its value). The sidecar cannot tell a ConfigMap that does not exist from
//! one without keys (an `optional` volume of either is an empty directory), so here both hash
//! alike, as do a missing object and a missing key; the env the app gets is the same in each case.
//! Secrets never count: the sidecar holds no key to hash them with.

use std::collections::BTreeSet;

use sha2::{Digest as _, Sha256};

use super::{ConfigData, ConfigKind, Consumed, Lookup, write_item};

/// The env hash of the ConfigMaps in `consumed` over `data` (an object not in `data` counts as
/// absent), or `None` when a lookup failed. Secrets in `consumed` are skipped.
pub fn env_hash(consumed: &BTreeSet<Consumed>, data: &ConfigData) -> Option<String> {
    let mut hasher = Sha256::new();
    for item in consumed {
        let id = item.id();
        if id.kind != ConfigKind::ConfigMap {
            continue;
        }
        let digests = match data.get(id) {
            Some(Lookup::Found(object)) => Some(&object.digests),
            Some(Lookup::NotFound) | None => None,
            Some(Lookup::Failed(_)) => return None,
        };
        match item {
            Consumed::Key(_, name) => {
                let digest = digests.and_then(|d| d.get(name));
                write_item(&mut hasher, id, Some(name), Some(digest));
            }
            Consumed::Whole(_) => {
                write_item(&mut hasher, id, None, Some(None));
                for (name, digest) in digests.into_iter().flatten() {
                    write_item(&mut hasher, id, Some(name), Some(Some(digest)));
                }
            }
        }
    }
    Some(format!("sha256:{}", hex::encode(hasher.finalize())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::{ConfigId, ConfigObject};

    fn found(pairs: &[(&str, &str)]) -> Lookup {
        let values = pairs.iter().map(|(k, v)| (*k, v.as_bytes()));
        let id = ConfigId::config_map("app");
        Lookup::Found(ConfigObject::from_values(&id, values, None).unwrap())
    }

    fn hash(consumed: &[Consumed], app: Option<Lookup>) -> Option<String> {
        let data = app
            .map(|lookup| ConfigData::from([(ConfigId::config_map("app"), lookup)]))
            .unwrap_or_default();
        env_hash(&consumed.iter().cloned().collect(), &data)
    }

    fn key(name: &str) -> Consumed {
        Consumed::Key(ConfigId::config_map("app"), name.to_owned())
    }

    #[test]
    fn a_consumed_key_counts_and_no_other_does() {
        let before = hash(&[key("a")], Some(found(&[("a", "1"), ("b", "1")])));
        let other = hash(&[key("a")], Some(found(&[("a", "1"), ("b", "2")])));
        let changed = hash(&[key("a")], Some(found(&[("a", "2"), ("b", "1")])));
        assert_eq!(before, other);
        assert_ne!(before, changed);
        assert!(before.unwrap().starts_with("sha256:"));
    }

    #[test]
    fn an_absent_object_an_empty_one_and_a_missing_key_hash_alike() {
        let whole = [Consumed::Whole(ConfigId::config_map("app"))];
        assert_eq!(hash(&whole, None), hash(&whole, Some(Lookup::NotFound)));
        assert_eq!(hash(&whole, None), hash(&whole, Some(found(&[]))));
        assert_ne!(hash(&whole, None), hash(&whole, Some(found(&[("a", "")]))));
        let missing_key = hash(&[key("a")], Some(found(&[("b", "1")])));
        assert_eq!(missing_key, hash(&[key("a")], None));
        assert_ne!(missing_key, hash(&[key("a")], Some(found(&[("a", "")]))));
    }

    #[test]
    fn a_failed_lookup_gives_no_hash_and_secrets_never_count() {
        assert_eq!(hash(&[key("a")], Some(Lookup::Failed("down".into()))), None);
        let secret = Consumed::Key(ConfigId::secret("s"), "a".into());
        assert_eq!(hash(&[key("a"), secret], None), hash(&[key("a")], None));
    }

    #[test]
    fn the_same_keys_through_env_and_envfrom_differ() {
        let data = Some(found(&[("a", "1")]));
        let whole = Consumed::Whole(ConfigId::config_map("app"));
        assert_ne!(hash(&[key("a")], data.clone()), hash(&[whole], data));
    }
}
