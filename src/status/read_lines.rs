//! What a workload reads, one line per key or mounted volume, and what a change of each does
//! (pure): a rollout, a hot reload by the sidecar, or nothing and why; and the findings about
//! those reads (subPath, missing objects, Secrets the webhook cannot hash).

use serde::Serialize;

use super::config_objects::Configs;
use super::findings::{Code, FIX_MISSING, FIX_NO_HASH_KEY, FIX_SUBPATH, Finding};
use super::hash_check::KeyState;
use super::target::Kind;
use crate::hash::{ConfigKind, Consumed};
use crate::inject::describe;
use crate::inject::explain::{Explained, Mode, Via};

/// One key or object a container reads.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadLine {
    pub container: String,
    /// `ConfigMap` or `Secret`.
    pub object_kind: String,
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
    pub on_change: OnChange,
    /// Why, in a few words.
    pub detail: String,
}

/// What a change of a read does (`rollout`, `hotReload`, `restartInPlace` or `nothing` in JSON).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum OnChange {
    /// The pods roll.
    Rollout,
    /// The sidecar reloads the app.
    HotReload,
    /// Each Pod restarts every container in place, wave by wave (`restartInPlace`).
    RestartInPlace,
    /// Nothing, and the detail says why.
    Nothing,
}

/// What a change does to a Secret read through env when the webhook has no hash key.
const UNKEYED_SECRET: &str = "Secret without a hash key";

/// One line per key or volume `explained` reads: how, and what a change of it does.
pub fn read_lines(
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
                (OnChange::Nothing, "not opted in".to_owned())
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
                                (OnChange::HotReload, format!("{how}, after the kubelet's periodic sync (ignored: no refresh)"))
                            } else {
                                (OnChange::HotReload, how)
                            }
                        } else {
                            (OnChange::Nothing, "not watched by the sidecar".to_owned())
                        }
                    }
                    _ if ignored => (OnChange::Nothing,
                        format!("{} is annotated reload-injector.io/ignore", describe(id)),
                    ),
                    _ if id.kind == ConfigKind::Secret && matches!(key, KeyState::NoKey) => {
                        (OnChange::Nothing, UNKEYED_SECRET.to_owned())
                    }
                    _ if explained.in_place.contains(&read.consumed) => (
                        OnChange::RestartInPlace,
                        "read at container start; the pods restart in place, wave by wave".to_owned(),
                    ),
                    _ if !stamped => (OnChange::Nothing, "not stamped".to_owned()),
                    _ if kind == Kind::Pod => (OnChange::Nothing,
                        "this Pod keeps it until replaced (its workload rolls)".to_owned(),
                    ),
                    _ if !super::target::restamped(kind) => (OnChange::Nothing,
                        format!("a {kind}'s pods are never rolled"),
                    ),
                    Via::SubPath => (OnChange::Rollout, "subPath is never updated in place".to_owned()),
                    _ => (OnChange::Rollout, "read at container start".to_owned()),
                }
            };
            let key_name = match &read.consumed {
                Consumed::Key(_, key) => Some(key.clone()),
                Consumed::Whole(_) => None,
            };
            ReadLine {
                container: read.container.clone(),
                object_kind: id.kind.to_string(),
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

/// The findings about `reads`, once per object: `missing-config`, `subpath`,
/// `secret-not-hashed`.
pub fn read_findings(reads: &[ReadLine]) -> Vec<Finding> {
    let mut findings = Vec::new();
    let mut said = std::collections::BTreeSet::new();
    for read in reads {
        let object = format!(
            "{} {}",
            read.object_kind,
            crate::inject::quoted(&read.object)
        );
        if read.exists == Some(false)
            && !read.optional
            && said.insert((Code::MissingConfig, object.clone()))
        {
            findings.push(Finding::new(
                Code::MissingConfig,
                format!(
                    "container {} needs {object}, which does not exist: the pod cannot start until it does",
                    crate::inject::quoted(&read.container)
                ),
                FIX_MISSING,
            ));
        }
        if read.via == "subPath" && said.insert((Code::Subpath, object.clone())) {
            findings.push(Finding::new(
                Code::Subpath,
                format!(
                    "container {} mounts {object} via subPath (never updated); pods roll when it changes",
                    crate::inject::quoted(&read.container)
                ),
                FIX_SUBPATH,
            ));
        }
        if read.detail == UNKEYED_SECRET && said.insert((Code::SecretNotHashed, object.clone())) {
            findings.push(Finding::new(
                Code::SecretNotHashed,
                format!(
                    "container {} reads {object} via {}; no secret hash key, so no restart on change",
                    crate::inject::quoted(&read.container),
                    read.via
                ),
                FIX_NO_HASH_KEY,
            ));
        }
    }
    findings
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
