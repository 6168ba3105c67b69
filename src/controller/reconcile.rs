//! The decision for one target (pure): compute its hash from the view's digests with the
//! webhook's own function, compare, and say what to write — or which digests must be fetched
//! first, because a hash may only be replaced with one computed from data at least as new as the
//! moment the view saw that hash.

use std::collections::{BTreeMap, BTreeSet};

use super::config_store::{ConfigKey, ConfigStore};
use super::reduce::Consumer;
use super::view::View;
use super::write_target::{Target, TargetKind, Write};
use crate::hash::{self, ConfigData, ConfigKind, SecretKey};
use crate::workload::{describe, quoted};

/// The data changes that made a target due: object → changed keys (empty: created or deleted).
pub type Causes = BTreeMap<ConfigKey, BTreeSet<String>>;

/// Longest Event message (the API server's limit is 1 KiB).
const MAX_MESSAGE: usize = 1000;

/// What to do about one target now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Its hash is right, or it must be left alone.
    Nothing,
    /// Fetch these digests, then decide again.
    Fetch(Vec<ConfigKey>),
    Write(Write),
}

/// Decides on `target`. `causes` are the data changes seen since it was last written (empty when
/// the check comes from start-up, a new leader, or the target's own update).
pub fn evaluate(
    view: &View,
    store: &ConfigStore,
    target: &Target,
    causes: &Causes,
    secret_key: Option<&SecretKey>,
) -> Verdict {
    let Some(tracked) = view.consumer(target) else {
        return Verdict::Nothing;
    };
    if !view.acts_on(target) {
        return Verdict::Nothing;
    }
    let keys: BTreeSet<ConfigKey> = view
        .keys_of(target)
        .into_iter()
        .filter(|k| k.id.kind == ConfigKind::ConfigMap || secret_key.is_some())
        .collect();
    let Gathered {
        data,
        missing,
        older_than_seen,
    } = gather(store, &keys, tracked.seen);
    if !missing.is_empty() {
        return Verdict::Fetch(missing);
    }
    let Some(hash) = hash_of(target.kind, &tracked.consumer, &data, secret_key) else {
        return Verdict::Nothing;
    };
    let current = tracked.consumer.hash.as_ref();
    if current == Some(&hash) {
        return Verdict::Nothing;
    }
    if causes.is_empty() {
        // A Pod without a mounted hash is left alone until its config changes; a mismatch an
        // ignored object (or one Reloader's `search` counts only with `match`, and without it)
        // may explain is never acted on.
        let ignored = keys.iter().any(|k| {
            store
                .meta(k)
                .is_some_and(|m| m.ignore || !view.counts_change(target, &k.id, m.matched))
        });
        if current.is_none() || ignored {
            return Verdict::Nothing;
        }
        // A value a stopped run held back from this Pod (a leader before this one, maybe) waits
        // for the config to change again.
        if tracked.consumer.held_back.as_deref() == Some(hash.as_str()) {
            return Verdict::Nothing;
        }
        // A hash stamped before restart-strategy mounts counted, over config unchanged since.
        let earlier = tracked.consumer.earlier.as_ref();
        if earlier
            .and_then(|e| e.hash(&data, secret_key).hash)
            .as_ref()
            == current
        {
            return Verdict::Nothing;
        }
    }
    // The hash there may have been computed from newer data than the view holds (another
    // replica's webhook, a GET during admission): confirm with data fetched after it was seen.
    if !older_than_seen.is_empty() {
        return Verdict::Fetch(older_than_seen);
    }
    let event = target
        .kind
        .is_workload()
        .then(|| event_message(causes, &keys));
    Verdict::Write(Write::hash(
        target.clone(),
        tracked.consumer.uid.clone(),
        current.cloned(),
        hash,
        event,
    ))
}

/// The data of a target's keys as the store has it.
struct Gathered {
    data: ConfigData,
    missing: Vec<ConfigKey>,
    /// Keys whose digests were fetched no later than the target's hash was seen: the hash may
    /// come from newer data.
    older_than_seen: Vec<ConfigKey>,
}

fn gather(store: &ConfigStore, keys: &BTreeSet<ConfigKey>, seen: u64) -> Gathered {
    let mut gathered = Gathered {
        data: ConfigData::new(),
        missing: Vec::new(),
        older_than_seen: Vec::new(),
    };
    for key in keys {
        let Some(fetched) = store.fresh(key) else {
            gathered.missing.push(key.clone());
            continue;
        };
        if fetched.sent <= seen {
            gathered.older_than_seen.push(key.clone());
        }
        gathered.data.insert(key.id.clone(), fetched.lookup());
    }
    gathered
}

/// The hash a target of `kind` carries for what `consumer` reads, over `data`: the webhook's, or for a Pod
/// that restarts in place its env hash (ConfigMaps only, as its sidecar hashes them).
fn hash_of(
    kind: TargetKind,
    consumer: &Consumer,
    data: &ConfigData,
    secret_key: Option<&SecretKey>,
) -> Option<String> {
    let reads = &consumer.consumption;
    match kind {
        TargetKind::PodEnv => hash::env_hash(&reads.consumed().iter().cloned().collect(), data),
        _ => reads.hash(data, secret_key).hash,
    }
}

/// The Event message: the objects and keys that changed, never a value.
pub fn event_message(causes: &Causes, keys: &BTreeSet<ConfigKey>) -> String {
    let what = if causes.is_empty() {
        let objects: Vec<String> = keys.iter().map(|k| describe(&k.id).to_string()).collect();
        format!(
            "config changed since the hash was stamped ({})",
            objects.join(", ")
        )
    } else {
        let parts: Vec<String> = causes
            .iter()
            .map(|(key, changed)| match changed.len() {
                0 => format!("{} was created or deleted", describe(&key.id)),
                1 => format!("{} changed (key {})", describe(&key.id), list(changed)),
                _ => format!("{} changed (keys {})", describe(&key.id), list(changed)),
            })
            .collect();
        parts.join("; ")
    };
    let mut message = format!("reload-injector: {what}; rolling out the new config hash");
    if message.len() > MAX_MESSAGE {
        let mut cut = MAX_MESSAGE - 3;
        while !message.is_char_boundary(cut) {
            cut -= 1;
        }
        message.truncate(cut);
        message.push_str("...");
    }
    message
}

fn list(keys: &BTreeSet<String>) -> String {
    keys.iter()
        .map(|k| quoted(k).to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests;
