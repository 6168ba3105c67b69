//! The report on one workload (pure): from the objects read to what a change of each consumed
//! key does, whether the stamped hash is current, and how its Pods are doing. The text and
//! JSON forms are rendered from [`Report`] ([`super::render`]).

use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::config::Configs;
use super::findings::{FIX_MISSING, FIX_NO_HASH_KEY, FIX_SUBPATH, Finding};
use super::install::{self, Installation, OptIn};
use super::pods::{self, Pods};
use super::select::string_map;
use super::snapshot::{Fetched, Snapshot};
use super::target::Kind;
use crate::hash::{ConfigId, ConfigKind, Consumed, SecretKey};
use crate::inject::explain::{self, Explained, Mode, Via};
use crate::inject::pod::PodSpec;
use crate::inject::{CONFIG_HASH, describe};

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

/// One key or object a container reads.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadLine {
    /// Container name.
    pub container: String,
    /// `ConfigMap` or `Secret`.
    pub object_kind: String,
    /// Its name.
    pub object: String,
    /// The key, or `None` for every key.
    pub key: Option<String>,
    /// `env`, `envFrom`, `subPath`, `initSubPath` or `directory`.
    pub via: &'static str,
    /// The volume, for mounts.
    pub volume: Option<String>,
    /// `optional: true`.
    pub optional: bool,
    /// Whether the object exists (`None`: could not be read).
    pub exists: Option<bool>,
    /// `rollout`, `hotReload` or `nothing`.
    pub on_change: &'static str,
    /// Why, in a few words.
    pub detail: String,
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
    let key = hash_key(snapshot, &mut notes);
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
        hash = hash_check(snapshot, explained, configs, &key, stamped);
        if hash.state == "stale" {
            findings.push(stale_finding(kind, &hash, &installation));
        }
    }
    let events = events(snapshot, kind, &namespace, &name);
    let pods = pods::pods(
        snapshot,
        kind,
        object,
        configs,
        key.key(),
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

/// What the hash key lets the report check.
pub enum KeyState<'a> {
    /// The webhook's key was read: Secrets are checked like the webhook hashes them.
    Key(&'a SecretKey),
    /// The webhook has no key: it hashes no Secret, and neither does the check.
    NoKey,
    /// The key could not be read: Secrets cannot be checked.
    Unreadable,
}

impl KeyState<'_> {
    fn checks_secrets(&self) -> bool {
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

fn hash_key<'a>(snapshot: &'a Snapshot, notes: &mut Vec<String>) -> KeyState<'a> {
    match &snapshot.hash_key {
        Fetched::Read(Some(key)) => KeyState::Key(key),
        Fetched::Read(None) => KeyState::NoKey,
        Fetched::Failed(reason) => {
            notes.push(format!(
                "Secrets cannot be checked: the webhook's Secret-hash key cannot be read ({reason})"
            ));
            KeyState::Unreadable
        }
    }
}

fn read_lines(
    kind: Kind,
    explained: &Explained,
    configs: &Configs,
    key: &KeyState<'_>,
    stamped: bool,
    active: bool,
) -> Vec<ReadLine> {
    let watched: Vec<&str> = explained
        .watcher
        .as_ref()
        .map(|w| w.volumes.iter().map(String::as_str).collect())
        .unwrap_or_default();
    explained
        .reads
        .iter()
        .map(|read| {
            let id = read.consumed.id();
            let seen = configs.get(id);
            let ignored = seen.is_some_and(|s| s.ignored);
            let (on_change, detail) = if !active {
                ("nothing", "not opted in".to_owned())
            } else {
                match read.via {
                    Via::Directory => {
                        if read.volume.as_deref().is_some_and(|v| watched.contains(&v)) {
                            let how = explained
                                .watcher
                                .as_ref()
                                .map(|w| mode_text(&w.mode))
                                .unwrap_or_default();
                            if ignored {
                                ("hotReload", format!("{how}, after the kubelet's periodic sync (ignored: no refresh)"))
                            } else {
                                ("hotReload", how)
                            }
                        } else {
                            ("nothing", "not watched by the sidecar".to_owned())
                        }
                    }
                    _ if ignored => (
                        "nothing",
                        format!("{} is annotated reload-injector.io/ignore", describe(id)),
                    ),
                    _ if id.kind == ConfigKind::Secret && matches!(key, KeyState::NoKey) => {
                        ("nothing", "Secret without a hash key".to_owned())
                    }
                    _ if !stamped => ("nothing", "not stamped".to_owned()),
                    _ if kind == Kind::Pod => (
                        "nothing",
                        "this Pod keeps it until replaced (its workload rolls)".to_owned(),
                    ),
                    _ if !kind.restamped() => (
                        "nothing",
                        format!("a {kind}'s pods are never rolled"),
                    ),
                    Via::SubPath => ("rollout", "subPath is never updated in place".to_owned()),
                    _ => ("rollout", "read at container start".to_owned()),
                }
            };
            let (key_name, object_kind) = match &read.consumed {
                Consumed::Key(id, key) => (Some(key.clone()), id.kind),
                Consumed::Whole(id) => (None, id.kind),
            };
            ReadLine {
                container: read.container.clone(),
                object_kind: object_kind.to_string(),
                object: id.name.clone(),
                key: key_name,
                via: via_name(read.via),
                volume: read.volume.clone(),
                optional: read.optional,
                exists: configs.exists(id),
                on_change,
                detail,
            }
        })
        .collect()
}

fn read_findings(reads: &[ReadLine], findings: &mut Vec<Finding>) {
    let mut said = std::collections::BTreeSet::new();
    for read in reads {
        let object = format!(
            "{} {}",
            read.object_kind,
            crate::inject::quoted(&read.object)
        );
        if read.exists == Some(false) && !read.optional && said.insert(("missing", object.clone()))
        {
            findings.push(Finding::new(
                "missing-config",
                format!(
                    "container {} needs {object}, which does not exist: the pod cannot start until it does",
                    crate::inject::quoted(&read.container)
                ),
                FIX_MISSING,
            ));
        }
        if read.via == "subPath" && said.insert(("subpath", object.clone())) {
            findings.push(Finding::new(
                "subpath",
                format!(
                    "container {} mounts {object} via subPath (never updated); pods roll when it changes",
                    crate::inject::quoted(&read.container)
                ),
                FIX_SUBPATH,
            ));
        }
        if read.detail == "Secret without a hash key" && said.insert(("unkeyed", object.clone())) {
            findings.push(Finding::new(
                "secret-not-hashed",
                format!(
                    "container {} reads {object} via {}; no secret hash key, so no restart on change",
                    crate::inject::quoted(&read.container),
                    read.via
                ),
                FIX_NO_HASH_KEY,
            ));
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

/// How the sidecar reloads: `SIGHUP to "nginx"`, `SIGHUP to each app container's main
/// process`, `POST http://…`.
pub fn mode_text(mode: &Mode) -> String {
    match mode {
        Mode::Signal {
            signal,
            process: Some(process),
        } => format!("{signal} to {}", crate::inject::quoted(process)),
        Mode::Signal {
            signal,
            process: None,
        } => format!("{signal} to each app container's main process"),
        Mode::Http { url } => format!("POST {}", crate::inject::quoted(url)),
    }
}

fn via_name(via: Via) -> &'static str {
    match via {
        Via::Env => "env",
        Via::EnvFrom => "envFrom",
        Via::SubPath => "subPath",
        Via::InitSubPath => "initSubPath",
        Via::Directory => "directory",
    }
}

/// `metadata.<field>` as a string.
pub fn meta_str<'v>(object: &'v Value, field: &str) -> Option<&'v str> {
    object.get("metadata")?.get(field)?.as_str()
}

/// Whole seconds from `then` to `now` (0 when `then` is later).
pub fn seconds_between(then: Timestamp, now: Timestamp) -> i64 {
    (now.as_second() - then.as_second()).max(0)
}

/// Consumed objects as `ConfigMap "a", Secret "b"`.
pub fn objects_text<'a>(ids: impl IntoIterator<Item = &'a ConfigId>) -> String {
    ids.into_iter()
        .map(|id| describe(id).to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
