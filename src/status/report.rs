//! The report on one workload (pure): from the objects read to what a change of each consumed
//! key does, whether the stamped hash is current, and how its Pods are doing. The text and
//! JSON forms are rendered from [`Report`] ([`super::render`]).

use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::config::Configs;
use super::findings::Finding;
use super::install::{self, Installation, OptIn};
use super::pods::{self, Pods};
pub use super::reads::{KeyState, ReadLine, mode_text};
use super::reads::{read_findings, read_lines};
use super::snapshot::{Fetched, HASH_KEY_SECRET, Snapshot};
use super::target::Kind;
use crate::controller::waves::REFRESH_STOPPED;
use crate::hash::ConfigKind;
use crate::inject::explain::{self, Explained};
use crate::inject::pod::PodSpec;
use crate::inject::string_map;
use crate::inject::{CONFIG_HASH, MANAGED_LABEL};

/// The whole report on one workload. Field names are the stable `-o json` form.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// `Deployment`, `StatefulSet`, …
    pub kind: Kind,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// 1. Opt-in.
    pub opt_in: OptIn,
    /// 2. The installation.
    pub installation: Installation,
    /// 3. What is consumed, and what a change of each does.
    pub reads: Vec<ReadLine>,
    /// How the sidecar reloads the app, when one would be injected.
    pub reload: Option<String>,
    /// 4. Is the stamped hash current?
    pub hash: HashCheck,
    /// The last `ConfigChanged` Events on it, newest first.
    pub events: Vec<EventLine>,
    /// 5. Its Pods.
    pub pods: Pods,
    /// What keeps changes from reaching the pods; empty when all is well.
    pub findings: Vec<Finding>,
    /// What could not be checked, and why (reads that failed, Secrets without the key).
    pub notes: Vec<String>,
}

/// The stamped `config-hash` against the hash of the live data.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HashCheck {
    /// `current`, `stale`, `notStamped`, `nothingToHash` or `unknown`.
    pub state: &'static str,
    /// The annotation on the pod template.
    pub stamped: Option<String>,
    /// The hash of the live data, by the webhook's own function.
    pub live: Option<String>,
    /// Whether Secrets entered the check (the hash key was readable, or the webhook has none).
    pub secrets_checked: bool,
    /// The consumed objects with the time their data was last written, newest first.
    pub written: Vec<Written>,
}

/// When a consumed object's data was last written.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Written {
    /// `ConfigMap` or `Secret`.
    pub object_kind: String,
    /// Its name.
    pub object: String,
    /// RFC 3339.
    pub at: String,
    /// Seconds before the report.
    pub seconds_ago: i64,
}

/// One `ConfigChanged` Event.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventLine {
    /// Last seen, RFC 3339.
    pub at: Option<String>,
    /// Seconds before the report.
    pub seconds_ago: Option<i64>,
    /// The message (names objects and keys, never a value).
    pub message: String,
}

/// The report on the workload (or Pod) `kind`/`name` in `namespace`, or `None` when the
/// snapshot does not hold it. A Pod is reported like a workload whose template is the Pod.
pub fn workload(snapshot: &Snapshot, kind: Kind, namespace: &str, name: &str) -> Option<Report> {
    let objects = match kind {
        Kind::Pod => snapshot.pods.ok()?,
        _ => snapshot.workloads.get(&kind)?.ok()?,
    };
    let object = objects.iter().find(|o| {
        meta_str(o, "namespace") == Some(namespace) && meta_str(o, "name") == Some(name)
    })?;
    Some(report(snapshot, kind, object))
}

/// The report on `object`, a workload of `kind`.
pub fn report(snapshot: &Snapshot, kind: Kind, object: &Value) -> Report {
    let namespace = meta_str(object, "namespace").unwrap_or_default();
    report_with(snapshot, kind, object, &Configs::of(snapshot, namespace))
}

/// [`report`] with the ConfigMaps and Secrets of its namespace already laid out (a summary
/// lays them out once per namespace).
pub fn report_with(snapshot: &Snapshot, kind: Kind, object: &Value, configs: &Configs) -> Report {
    let namespace = meta_str(object, "namespace").unwrap_or_default().to_owned();
    let name = meta_str(object, "name").unwrap_or_default().to_owned();
    let mut findings = Vec::new();
    let mut notes = Vec::new();
    let template = object.pointer(kind.template_pointer());
    let annotations = template
        .map(|t| string_map(t, "annotations"))
        .unwrap_or_default();
    let labels = template
        .map(|t| string_map(t, "labels"))
        .unwrap_or_default();
    let opt_in = install::opt_in(snapshot, &namespace, &annotations, &labels, &mut findings);
    let installation = install::installation(snapshot, &mut findings, &mut notes);
    let workload_ref = object
        .pointer("/spec/workloadRef/name")
        .and_then(Value::as_str)
        .filter(|_| kind == Kind::Rollout);
    let explained = match template {
        None if workload_ref.is_some() => {
            notes.push(format!(
                "its pod template is Deployment {:?}'s (workloadRef): reload-injector stamps that one; \
                 run status deploy/{} for it",
                workload_ref.unwrap_or_default(),
                workload_ref.unwrap_or_default()
            ));
            None
        }
        None => {
            findings.push(Finding::new(
                "unreadable-spec",
                format!("no pod template at {}", kind.template_pointer()),
                "nothing: reload-injector cannot act on it either",
            ));
            None
        }
        Some(template) => {
            match PodSpec::deserialize(template.get("spec").unwrap_or(&Value::Null)) {
                Ok(spec) => Some(explain::explain(&annotations, &spec, true)),
                Err(err) => {
                    findings.push(Finding::new(
                        "unreadable-spec",
                        format!("the pod template cannot be read: {err}"),
                        "fix the pod spec; reload-injector cannot act on it either",
                    ));
                    None
                }
            }
        }
    };
    let stamped = annotations.get(CONFIG_HASH).cloned();
    let key = hash_key(
        snapshot,
        explained.as_ref(),
        configs,
        stamped.as_deref(),
        &mut notes,
    );
    let active = opt_in.opted_in && opt_in.opted_out_by.is_none();
    let mut reads = Vec::new();
    let mut reload = None;
    let mut hash = HashCheck {
        state: "unknown",
        stamped: stamped.clone(),
        live: None,
        secrets_checked: key.checks_secrets(),
        written: Vec::new(),
    };
    if let Some(explained) = &explained {
        reload = explained.watcher.as_ref().map(|w| mode_text(&w.mode));
        reads = read_lines(kind, explained, configs, &key, stamped.is_some(), active);
        read_findings(&reads, &mut findings);
        if active && stamped.is_none() && !explained.restart_only.is_empty() {
            findings.push(Finding::new(
                "not-stamped",
                format!(
                    "the pod template has no {CONFIG_HASH}: a change of what it reads through env never rolls it"
                ),
                match kind {
                    Kind::Pod => "recreate it (through its workload) in an opted-in namespace".to_owned(),
                    _ => format!(
                        "send it through the webhook once: kubectl rollout restart {}/{name} -n {namespace}",
                        kind.short()
                    ),
                },
            ));
        }
        let watched = string_map(object, "labels")
            .get(MANAGED_LABEL)
            .map(String::as_str)
            == Some("true");
        if active && kind != Kind::Pod && stamped.is_some() && !watched {
            findings.push(Finding::new(
                "not-watched",
                format!(
                    "it carries a {CONFIG_HASH} but not the label {MANAGED_LABEL}=true (stamped by an \
                     earlier version): the controller does not watch it, so a change of what it reads never rolls it"
                ),
                format!(
                    "label it once (or re-apply it: the webhook labels it): kubectl label {}/{name} -n {namespace} {MANAGED_LABEL}=true",
                    kind.short()
                ),
            ));
        }
        hash = hash_check(snapshot, explained, configs, &key, stamped);
        if hash.state == "stale" {
            findings.push(stale_finding(kind, &hash, &installation));
        }
    }
    let events = events(snapshot, kind, &namespace, &name);
    if let Some(stop) = events
        .first()
        .filter(|e| e.message.contains(REFRESH_STOPPED))
    {
        findings.push(Finding::new(
            "refresh-stopped",
            format!(
                "{}/{name}: the last refresh of its mounted config stopped: {}",
                kind.short(),
                stop.message
            ),
            format!(
                "check why the pod went unready (kubectl describe pod -n {namespace}); the next config change refreshes the rest"
            ),
        ));
    }
    let pods = pods::pods(
        snapshot,
        kind,
        object,
        configs,
        key,
        explained
            .as_ref()
            .and_then(|e| e.watcher.as_ref())
            .is_some()
            && active,
        &mut findings,
    );
    for failure in failed_reads(snapshot) {
        notes.push(failure);
    }
    Report {
        kind,
        namespace,
        name,
        opt_in,
        installation,
        reads,
        reload,
        hash,
        events,
        pods,
        findings,
        notes,
    }
}

/// What the webhook's Secret-hash key lets the report check. The key's Secret is looked for
/// where the shipped manifests keep it; when it is not there, the webhook is taken to have no
/// key only if the stamped hash agrees (it is the hash without Secrets): an install that keeps
/// its key elsewhere must not be told its Secrets are not hashed.
fn hash_key<'a>(
    snapshot: &'a Snapshot,
    explained: Option<&Explained>,
    configs: &Configs,
    stamped: Option<&str>,
    notes: &mut Vec<String>,
) -> KeyState<'a> {
    match &snapshot.hash_key {
        Fetched::Read(Some(key)) => KeyState::Key(key),
        Fetched::Read(None) => {
            let Some(consumption) = explained.map(|e| &e.restart_only) else {
                return KeyState::NoKey;
            };
            let ids = consumption.ids();
            if !ids.iter().any(|id| id.kind == ConfigKind::Secret) {
                // Nothing read through env tells whether the webhook has a key: that matters
                // only if the sidecar watches a Secret (its hash is keyed when there is one).
                let mounts_secret = explained.and_then(|e| e.watcher.as_ref()).is_some_and(|w| {
                    w.consumption
                        .ids()
                        .iter()
                        .any(|id| id.kind == ConfigKind::Secret)
                });
                if !mounts_secret {
                    return KeyState::NoKey;
                }
                notes.push(format!(
                    "Secrets cannot be checked: there is no Secret {}/{HASH_KEY_SECRET} (where the \
                     shipped manifests keep the webhook's key), and nothing read through env shows \
                     whether the webhook has one",
                    snapshot.webhook_namespace
                ));
                return KeyState::Unreadable;
            }
            let without_key = consumption.hash(&configs.data(ids.iter().copied()), None);
            if stamped.is_some() && without_key.hash.as_deref() == stamped {
                return KeyState::NoKey;
            }
            notes.push(format!(
                "Secrets cannot be checked: there is no Secret {}/{HASH_KEY_SECRET} (where the shipped \
                 manifests keep the webhook's key), and the stamped hash is not the one without Secrets",
                snapshot.webhook_namespace
            ));
            KeyState::Unreadable
        }
        Fetched::Failed(reason) => {
            notes.push(format!(
                "Secrets cannot be checked: the webhook's Secret-hash key cannot be read ({reason})"
            ));
            KeyState::Unreadable
        }
    }
}

fn hash_check(
    snapshot: &Snapshot,
    explained: &Explained,
    configs: &Configs,
    key: &KeyState<'_>,
    stamped: Option<String>,
) -> HashCheck {
    let consumption = &explained.restart_only;
    let ids = consumption.ids();
    let data = configs.data(ids.iter().copied());
    let report = consumption.hash(&data, key.key());
    let secrets_read = ids.iter().any(|id| id.kind == ConfigKind::Secret);
    let checks_secrets = key.checks_secrets();
    let mut written: Vec<Written> = ids
        .iter()
        .filter_map(|id| {
            let at = configs.get(id)?.written?;
            Some(Written {
                object_kind: id.kind.to_string(),
                object: id.name.clone(),
                at: at.to_string(),
                seconds_ago: seconds_between(at, snapshot.now),
            })
        })
        .collect();
    written.sort_by_key(|w| w.seconds_ago);
    let state = match (&stamped, &report.hash) {
        _ if consumption.is_empty() => "nothingToHash",
        (None, _) => "notStamped",
        _ if secrets_read && !checks_secrets => "unknown",
        (Some(_), None) => "unknown",
        (Some(stamped), Some(live)) if stamped == live => "current",
        (Some(_), Some(_)) => "stale",
    };
    HashCheck {
        state,
        stamped,
        live: report.hash,
        secrets_checked: checks_secrets || !secrets_read,
        written,
    }
}

/// A data write this recent may not have been re-stamped yet (`--rollout-delay` plus the
/// controller's rate limit).
const RECENT_SECONDS: i64 = 5;

fn stale_finding(kind: Kind, hash: &HashCheck, installation: &Installation) -> Finding {
    let newest = hash.written.first().map(|w| {
        format!(
            "; the newest data write: {} {} {} ago",
            w.object_kind,
            crate::inject::quoted(&w.object),
            super::render::age(w.seconds_ago)
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
    } else if !kind.restamped() {
        format!("a {kind} is never re-stamped: recreate it to read the new config")
    } else if installation.controller_running
        && hash
            .written
            .first()
            .is_some_and(|w| w.seconds_ago <= RECENT_SECONDS)
    {
        "the change is seconds old: the controller re-stamps within --rollout-delay (1s by default) \
         and a leader is running; run status again in a few seconds"
            .to_owned()
    } else if installation.controller_running {
        "the controller re-stamps within --rollout-delay (1s by default) of a change and a leader is running: \
         check its log for errors"
            .to_owned()
    } else {
        "the controller re-stamps within --rollout-delay (1s by default) of a change, but none is running: \
         start it (see no-controller)"
            .to_owned()
    };
    Finding::new("stale", message, fix)
}

fn events(snapshot: &Snapshot, kind: Kind, namespace: &str, name: &str) -> Vec<EventLine> {
    let Some(list) = snapshot.events.ok() else {
        return Vec::new();
    };
    let mut events: Vec<(Option<Timestamp>, EventLine)> = list
        .iter()
        .filter(|e| {
            e.reason.as_deref() == Some("ConfigChanged")
                && e.involved_object.kind.as_deref() == Some(kind.name())
                && e.involved_object.name.as_deref() == Some(name)
                && e.metadata.namespace.as_deref() == Some(namespace)
        })
        .map(|e| {
            let at = e
                .last_timestamp
                .as_ref()
                .map(|t| t.0)
                .or_else(|| e.event_time.as_ref().map(|t| t.0))
                .or_else(|| e.first_timestamp.as_ref().map(|t| t.0));
            let line = EventLine {
                at: at.map(|t| t.to_string()),
                seconds_ago: at.map(|t| seconds_between(t, snapshot.now)),
                message: e.message.clone().unwrap_or_default(),
            };
            (at, line)
        })
        .collect();
    events.sort_by_key(|e| std::cmp::Reverse(e.0));
    events.into_iter().take(3).map(|(_, line)| line).collect()
}

/// The reads that failed, named.
pub fn failed_reads(snapshot: &Snapshot) -> Vec<String> {
    let mut out = Vec::new();
    let mut note = |what: &str, reason: Option<&str>| {
        if let Some(reason) = reason {
            out.push(format!("could not read {what}: {reason}"));
        }
    };
    note("namespaces", snapshot.namespaces.failure());
    note("configmaps", snapshot.config_maps.failure());
    note("secrets", snapshot.secrets.failure());
    note("pods", snapshot.pods.failure());
    note("events", snapshot.events.failure());
    note("jobs", snapshot.jobs.failure());
    out
}

/// `metadata.<field>` as a string.
pub fn meta_str<'v>(object: &'v Value, field: &str) -> Option<&'v str> {
    object.get("metadata")?.get(field)?.as_str()
}

/// Whole seconds from `then` to `now` (0 when `then` is later).
pub fn seconds_between(then: Timestamp, now: Timestamp) -> i64 {
    (now.as_second() - then.as_second()).max(0)
}
