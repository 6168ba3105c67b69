//! Is the stamped `config-hash` the live data's? (pure): the check, and the `stale` finding.

use std::collections::BTreeSet;

use serde::Serialize;

use super::age;
use super::config_objects::{Configs, Written};
use super::findings::{Code, Finding};
use super::snapshot::{Fetched, HASH_KEY_SECRET, Snapshot};
use super::target_arg::Kind;
use crate::controller::write_target::TargetKind;
use crate::hash::{ConfigId, ConfigKind, SecretKey};
use crate::workload::consumption::Consumption;
use crate::workload::explain::Explained;

/// What the hash key lets the report check.
#[derive(Debug, Clone, Copy)]
pub enum KeyState<'a> {
    /// The webhook's key was read: Secrets are checked like the webhook hashes them.
    Key(&'a SecretKey),
    /// The webhook has no key: it hashes no Secret, and neither does the check.
    NoKey,
    /// The key could not be read: Secrets cannot be checked.
    Unreadable,
}

impl KeyState<'_> {
    /// Whether Secrets can enter a hash the way the webhook computes it.
    pub fn checks_secrets(&self) -> bool {
        !matches!(self, KeyState::Unreadable)
    }

    /// The key to hash with.
    pub fn key(&self) -> Option<&SecretKey> {
        match self {
            KeyState::Key(key) => Some(key),
            _ => None,
        }
    }
}

/// A stamped hash against the live data's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum HashState {
    Current,
    Stale,
    NotStamped,
    NothingToHash,
    /// The live data's hash cannot be made.
    #[default]
    Unknown,
}

/// The stamped `config-hash` against the hash of the live data.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HashCheck {
    pub state: HashState,
    pub stamped: Option<String>,
    pub live: Option<String>,
    /// Whether Secrets entered the check (the hash key was readable, or the webhook has none).
    pub secrets_checked: bool,
    /// The consumed objects with the time their data was last written, newest first.
    pub written: Vec<Written>,
    /// The stamp is the hash of what an earlier version counted over the live data: the
    /// controller leaves it until that data changes.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub earlier: bool,
}

/// A stamped hash against the live data's.
pub fn state_of(stamped: &Option<String>, live: &Option<String>) -> HashState {
    match (stamped, live) {
        (None, _) => HashState::NotStamped,
        (Some(_), None) => HashState::Unknown,
        (Some(s), Some(l)) if s == l => HashState::Current,
        _ => HashState::Stale,
    }
}

/// What the webhook's Secret-hash key lets the report check, and the note when it cannot. With
/// no key Secret where the manifests keep it, the webhook is taken to have no key only if the
/// stamp says so: an install that keeps its key elsewhere must not be told Secrets are unhashed.
pub fn hash_key<'a>(
    snapshot: &'a Snapshot,
    explained: Option<&Explained>,
    configs: &Configs,
    stamped: Option<&str>,
) -> (KeyState<'a>, Option<String>) {
    let missing = |why: &str| {
        format!(
            "Secrets cannot be checked: there is no Secret {}/{HASH_KEY_SECRET} (where the \
             shipped manifests keep the webhook's key), and {why}",
            snapshot.webhook_namespace
        )
    };
    match &snapshot.hash_key {
        Fetched::Read(Some(key)) => (KeyState::Key(key), None),
        Fetched::Failed(reason) => (KeyState::Unreadable, Some(key_unreadable(reason))),
        Fetched::Read(None) => {
            let secret =
                |ids: &BTreeSet<&ConfigId>| ids.iter().any(|id| id.kind == ConfigKind::Secret);
            let Some(explained) = explained else {
                return (KeyState::NoKey, None);
            };
            let ids = explained.restart_only.ids();
            let why = if secret(&ids) {
                let data = configs.data(ids);
                let without_key = explained.restart_only.hash(&data, None);
                if stamped.is_some() && without_key.hash.as_deref() == stamped {
                    return (KeyState::NoKey, None);
                }
                "the stamped hash is not the one without Secrets"
            } else {
                // Nothing read through env tells whether the webhook has a key: that matters
                // only if the sidecar watches a Secret (its hash is keyed when there is one).
                let watcher = explained.watcher.as_ref();
                if !watcher.is_some_and(|w| secret(&w.consumption.ids())) {
                    return (KeyState::NoKey, None);
                }
                "nothing read through env shows whether the webhook has one"
            };
            (KeyState::Unreadable, Some(missing(why)))
        }
    }
}

/// The note when the webhook's Secret-hash key cannot be read.
pub fn key_unreadable(reason: &str) -> String {
    format!("Secrets cannot be checked: the webhook's Secret-hash key cannot be read ({reason})")
}

/// The stamped hash against the live data `explained` reads through env; a stale one also
/// against what an earlier version counted (`earlier`), as the controller does.
pub fn hash_check(
    snapshot: &Snapshot,
    explained: &Explained,
    configs: &Configs,
    key: &KeyState<'_>,
    stamped: Option<String>,
    earlier: impl FnOnce() -> Consumption,
) -> HashCheck {
    let consumption = &explained.restart_only;
    let ids = consumption.ids();
    let data = configs.data(ids.iter().copied());
    let report = consumption.hash(&data, key.key());
    let secrets_read = ids.iter().any(|id| id.kind == ConfigKind::Secret);
    let checks_secrets = key.checks_secrets();
    let written = ids
        .iter()
        .filter_map(|id| configs.written(id, snapshot.now));
    let mut written: Vec<Written> = written.collect();
    written.sort_by_key(|w| w.seconds_ago);
    let state = match state_of(&stamped, &report.hash) {
        _ if consumption.is_empty() => HashState::NothingToHash,
        HashState::NotStamped => HashState::NotStamped,
        _ if secrets_read && !checks_secrets => HashState::Unknown,
        state => state,
    };
    // As the controller does: a hash an earlier version stamped over data unchanged since.
    let earlier = state == HashState::Stale && {
        let earlier = earlier();
        let data = || configs.data(earlier.ids().iter().copied());
        earlier != *consumption && earlier.hash(&data(), key.key()).hash == stamped
    };
    HashCheck {
        state: if earlier { HashState::Current } else { state },
        stamped,
        live: report.hash,
        secrets_checked: checks_secrets || !secrets_read,
        written,
        earlier,
    }
}

/// A data write this recent may not be re-stamped yet (`--rollout-delay` plus the rate limit).
const RECENT_SECONDS: i64 = 5;

/// The `stale` finding on a `kind` workload, its fix depending on whether a controller runs.
pub fn stale_finding(kind: Kind, hash: &HashCheck, controller_running: bool) -> Finding {
    let newest = hash.written.first();
    let recent = newest.is_some_and(|w| w.seconds_ago <= RECENT_SECONDS);
    let newest = newest.map(|w| {
        format!(
            "; the newest data write: {} {} {} ago",
            w.object_kind,
            crate::workload::quoted(&w.object),
            age(w.seconds_ago)
        )
    });
    let message = format!(
        "the stamped config-hash is not the hash of the live data: a consumed key changed since it was stamped{} \
         (the hash cannot tell which key)",
        newest.unwrap_or_default()
    );
    let fix = if kind == Kind::Pod {
        "a Pod keeps the config it started with: its workload's template is re-stamped, or recreate it"
            .to_owned()
    } else if !TargetKind::WORKLOADS.iter().any(|t| t.table() == kind) {
        // The rollout controller never re-stamps its template.
        format!("a {kind} is never re-stamped: recreate it to read the new config")
    } else if controller_running && recent {
        "the change is seconds old: the controller re-stamps within --rollout-delay (1s by default) \
         and a leader is running; run status again in a few seconds"
            .to_owned()
    } else if controller_running {
        "the controller re-stamps within --rollout-delay (1s by default) of a change and a leader is running: \
         check its log for errors"
            .to_owned()
    } else {
        "the controller re-stamps within --rollout-delay (1s by default) of a change, but none is running: \
         start it (see no-controller)"
            .to_owned()
    };
    Finding::new(Code::Stale, message, fix)
}
