//! What a Pod that restarts in place gets besides its sidecar (the sidecar's arguments, mounts
//! and restart rule, the volumes they name, its env hash), and what a `config-reloader` already
//! there says it restarts its Pod for. Pure.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::{
    Decision, ENV_HASH_FILE, ENV_ROOT, HASH_FILE_FLAG, IN_PLACE, POD_INFO_DIR, RESTART_CODE,
    STATE_DIR, env_reads,
};
use crate::hash::{self, ConfigData, ConfigId, Consumed};
use crate::workload::analysis::is_ours;
use crate::workload::object::{remove_entry, set_entry};
use crate::workload::pod::{Container, PodSpec};
use crate::workload::rules::Use;
use crate::workload::sidecar::{read_only_mount, small_memory_dir};
use crate::workload::{ENV_HASH, ENV_RESTART};

const POD_INFO_VOLUME: &str = "reload-injector-pod";
const STATE_VOLUME: &str = "reload-injector-state";
const ENV_VOLUME: &str = "reload-injector-env";

/// The pod's `config-reloader` container, if it has one.
pub fn existing_sidecar(spec: &PodSpec) -> Option<&Container> {
    spec.all_containers().find(|c| is_ours(c))
}

/// Whether a `config-reloader` container restarts its Pod in place.
pub fn restarts_in_place(sidecar: &Container) -> bool {
    sidecar.args.iter().flatten().any(|a| a == HASH_FILE_FLAG)
}

/// What a `config-reloader` container restarts its Pod in place for, from its arguments (as
/// the sidecar reads them); `None` for one that does not restart in place.
pub fn sidecar_reads(sidecar: &Container) -> Option<BTreeSet<Consumed>> {
    if !restarts_in_place(sidecar) {
        return None;
    }
    let args = sidecar.args.as_deref().unwrap_or_default();
    let (mut keys, mut objects) = (Vec::new(), Vec::new());
    for pair in args.windows(2) {
        match pair[0].as_str() {
            "--env-key" => keys.push(pair[1].clone()),
            "--env-object" => objects.push(pair[1].clone()),
            _ => {}
        }
    }
    parse_reads(&keys, &objects).ok()
}

/// A `--env-key` value that does not name a ConfigMap and a key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("failed to read --env-key {0:?}: write NAME/KEY (a ConfigMap and one of its keys)")]
pub struct BadEnvKey(pub String);

/// What the sidecar's `--env-key NAME/KEY` and `--env-object NAME` values name.
pub fn parse_reads(keys: &[String], objects: &[String]) -> Result<BTreeSet<Consumed>, BadEnvKey> {
    let mut consumed = BTreeSet::new();
    for text in keys {
        match text.split_once('/') {
            Some((name, key)) if !name.is_empty() && !key.is_empty() && !key.contains('/') => {
                consumed.insert(Consumed::Key(ConfigId::config_map(name), key.to_owned()));
            }
            _ => return Err(BadEnvKey(text.clone())),
        }
    }
    for name in objects.iter().filter(|n| !n.is_empty()) {
        consumed.insert(Consumed::Whole(ConfigId::config_map(name)));
    }
    Ok(consumed)
}

/// The env reads a pod (template) restarts in place for, as its [`ENV_RESTART`] and its
/// sidecar's arguments record them.
pub fn recorded_reads(
    annotations: &BTreeMap<String, String>,
    spec: &PodSpec,
    uses: &[Use],
) -> BTreeSet<Consumed> {
    let mut reads = BTreeSet::new();
    if annotations.get(ENV_RESTART).map(|v| v.trim()) == Some(IN_PLACE) {
        reads.extend(env_reads(uses).into_iter().map(|u| u.consumed));
    }
    reads.extend(
        existing_sidecar(spec)
            .and_then(sidecar_reads)
            .into_iter()
            .flatten(),
    );
    reads
}

/// Records the decision: on a template, `env-restart: in-place` (removed when it rolls); on a
/// Pod whose sidecar restarts it (`plan`), its env hash (none when a lookup failed: the sidecar
/// waits, and the controller writes one when the config changes).
pub fn stamp(
    pod: &mut Value,
    (annotations, template): (&BTreeMap<String, String>, bool),
    decision: &Decision,
    plan: Option<&EnvPlan>,
    configs: &ConfigData,
) {
    let current = |key: &str| annotations.get(key).map(String::as_str);
    if template {
        match (decision.applies(), current(ENV_RESTART)) {
            (true, Some(IN_PLACE)) | (false, None) => {}
            (true, _) => set_entry(pod, "annotations", ENV_RESTART, IN_PLACE),
            (false, Some(_)) => remove_entry(pod, "annotations", ENV_RESTART),
        }
        return;
    }
    if let Some(hash) = plan.and_then(|plan| plan.hash(configs))
        && current(ENV_HASH) != Some(hash.as_str())
    {
        set_entry(pod, "annotations", ENV_HASH, &hash);
    }
}

/// What a Pod that restarts in place gets besides its sidecar: the sidecar's arguments,
/// mounts and restart rule, and the volumes they name (each named so as not to meet the pod's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvPlan {
    /// The ConfigMap keys and objects restarted in place.
    pub consumed: BTreeSet<Consumed>,
    /// One volume per ConfigMap: (volume name, ConfigMap name).
    config_maps: Vec<(String, String)>,
    pod_info: String,
    state: String,
}

impl EnvPlan {
    /// The plan for a Pod whose `decision` is to restart in place (`None` otherwise).
    pub fn new(decision: &Decision, spec: &PodSpec) -> Option<Self> {
        let consumed = decision.consumed();
        if consumed.is_empty() {
            return None;
        }
        let mut taken: BTreeSet<String> = spec
            .volumes
            .iter()
            .flatten()
            .map(|v| v.name.clone())
            .collect();
        let mut free = |base: &str| {
            let mut names = (1..).map(|n| format!("{base}-{n}"));
            let name = std::iter::once(base.to_owned())
                .chain(&mut names)
                .find(|name| !taken.contains(name))
                .unwrap_or_default();
            taken.insert(name.clone());
            name
        };
        let names: BTreeSet<&str> = consumed.iter().map(|c| c.id().name.as_str()).collect();
        let config_maps = names
            .into_iter()
            .map(|name| (free(ENV_VOLUME), name.to_owned()))
            .collect();
        Some(Self {
            config_maps,
            pod_info: free(POD_INFO_VOLUME),
            state: free(STATE_VOLUME),
            consumed,
        })
    }

    /// The Pod's env hash over `configs` (`None` when a lookup failed).
    pub fn hash(&self, configs: &ConfigData) -> Option<String> {
        hash::env_hash(&self.consumed, configs)
    }

    /// Adds the arguments, mounts and restart rule to the `config-reloader` container.
    pub fn extend(&self, container: &mut Value) {
        let mut args = vec![
            HASH_FILE_FLAG.to_owned(),
            format!("{POD_INFO_DIR}/{ENV_HASH_FILE}"),
            "--env-state-dir".to_owned(),
            STATE_DIR.to_owned(),
        ];
        for consumed in &self.consumed {
            match consumed {
                Consumed::Key(id, key) => {
                    args.extend(["--env-key".to_owned(), format!("{}/{key}", id.name)])
                }
                Consumed::Whole(id) => args.extend(["--env-object".to_owned(), id.name.clone()]),
            }
        }
        let mut mounts: Vec<Value> = self
            .config_maps
            .iter()
            .map(|(volume, name)| read_only_mount(volume, &format!("{ENV_ROOT}/{name}")))
            .collect();
        mounts.push(read_only_mount(&self.pod_info, POD_INFO_DIR));
        mounts.push(json!({"name": self.state, "mountPath": STATE_DIR}));
        let rule = json!({
            "action": "RestartAllContainers",
            "exitCodes": {"operator": "In", "values": [RESTART_CODE]},
        });
        let Some(container) = container.as_object_mut() else {
            return;
        };
        if let Some(Value::Array(list)) = container.get_mut("args") {
            list.extend(args.into_iter().map(Value::String));
        }
        if let Some(Value::Array(list)) = container.get_mut("volumeMounts") {
            list.extend(mounts);
        }
        container.insert("restartPolicyRules".to_owned(), Value::Array(vec![rule]));
    }

    /// The volumes the sidecar's mounts name: each ConfigMap (`optional`, so that a missing one
    /// never keeps the sidecar from starting), the downward API file and the state directory.
    pub fn volumes(&self) -> Vec<Value> {
        let mut volumes: Vec<Value> = self
            .config_maps
            .iter()
            .map(|(volume, name)| json!({"name": volume, "configMap": {"name": name, "optional": true}}))
            .collect();
        let field = format!("metadata.annotations['{}']", ENV_HASH);
        let item = json!({"path": ENV_HASH_FILE, "fieldRef": {"fieldPath": field}});
        volumes.push(json!({"name": self.pod_info, "downwardAPI": {"items": [item]}}));
        volumes.push(json!({"name": self.state, "emptyDir": small_memory_dir()}));
        volumes
    }
}
