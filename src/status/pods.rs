//! The Pods of a workload (pure): how many run the current template, how many carry the
//! sidecar, whether each sidecar Pod's `mounted-config-hash` matches the live data, and the
//! `config-reloader` container's restarts and last reload lines.

use serde::Serialize;
use serde_json::Value;

use super::common::meta_str;
use super::config_objects::Configs;
use super::findings::{Code, Finding};
use super::hash_check::{HashState, KeyState};
use super::select::{matches, owned_by};
use super::sidecar_log;
use super::snapshot::{Fetched, Snapshot};
use super::target_arg::Kind;
use crate::hash::{self, ConfigKind, Consumed};
use crate::workload::explain::is_ours;
use crate::workload::pod::PodSpec;
use crate::workload::string_map;
use crate::workload::{CONFIG_HASH, MOUNTED_CONFIG_HASH, MOUNTED_CONFIG_HELD_BACK, SIDECAR_NAME};
use crate::workload::{ENV_HASH, ENV_HASH_HELD_BACK, consumption, in_place};
use serde::Deserialize;

/// The Pods part of a report.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Pods {
    pub total: usize,
    /// Pods whose `config-hash` is the template's (`None` when the template is not stamped).
    pub current_hash: Option<usize>,
    /// The workload's own count of updated replicas and of replicas wanted, when it keeps one.
    pub updated: Option<(i64, i64)>,
    /// Pods carrying the `config-reloader` sidecar.
    pub with_sidecar: usize,
    /// One line per Pod, by name.
    pub items: Vec<PodLine>,
}

/// One Pod.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodLine {
    pub name: String,
    /// `status.phase`.
    pub phase: Option<String>,
    /// Whether its `config-hash` is the template's.
    pub current_hash: Option<bool>,
    pub sidecar: bool,
    /// Its `mounted-config-hash`.
    pub mounted_stamped: Option<String>,
    /// The hash of the live data it mounts (`None`: not computable).
    pub mounted_live: Option<String>,
    /// Its `mounted-config-hash` against the live data (sidecar Pods only).
    pub mounted_state: Option<HashState>,
    /// Its `env-hash` (a Pod that restarts in place): the env its containers are to run with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub env_stamped: Option<String>,
    /// The env hash of the live data it reads through env (`None`: not computable).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub env_live: Option<String>,
    /// Its `env-hash` against the live data (Pods that restart in place only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub env_state: Option<HashState>,
    /// Its stale `mounted-config-hash` is the one a stopped refresh held back from it (its
    /// `mounted-config-held-back` is the live data's hash): it stays until the config changes.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub mounted_held_back: bool,
    /// Its stale `env-hash` is the one stopped restarts in place held back from it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub env_held_back: bool,
    /// Restarts of the `config-reloader` container.
    pub sidecar_restarts: Option<i64>,
    /// The `config-reloader` last ended with the restart code: the Pod restarted in place
    /// (its restarts are then the product's own doing).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub restarted_in_place: bool,
    /// The last reload lines of its log, oldest first.
    pub reloads: Vec<String>,
    /// Why its log could not be read.
    pub log_failed: Option<String>,
}

/// The Pods part for `object`, a `kind` workload, and its findings. `expect_sidecar`: the
/// template's Pods should carry one.
pub fn pods(
    snapshot: &Snapshot,
    kind: Kind,
    object: &Value,
    configs: &Configs,
    key: KeyState<'_>,
    expect_sidecar: bool,
) -> (Pods, Vec<Finding>) {
    let Some(all) = snapshot.pods.ok() else {
        return (Pods::default(), Vec::new());
    };
    let mut findings = Vec::new();
    let namespace = meta_str(object, "namespace").unwrap_or_default();
    let owned: Vec<&Value> = owned_pods(snapshot, kind, object, namespace, all);
    let stamped = object
        .pointer(super::target_arg::template_pointer(kind))
        .map(|t| string_map(t, "annotations"))
        .and_then(|a| a.get(CONFIG_HASH).cloned());
    let mut out = Pods {
        total: owned.len(),
        updated: updated(kind, object),
        ..Pods::default()
    };
    let mut current = 0;
    for pod in owned {
        let line = pod_line(snapshot, pod, configs, key, stamped.as_deref());
        current += usize::from(line.current_hash == Some(true));
        out.with_sidecar += usize::from(line.sidecar);
        out.items.push(line);
    }
    out.items.sort_by(|a, b| a.name.cmp(&b.name));
    out.current_hash = stamped.as_ref().map(|_| current);
    let behind = out.current_hash.is_some_and(|c| c < out.total);
    let rolling = out
        .updated
        .is_some_and(|(updated, wanted)| updated < wanted);
    if behind || rolling {
        let current = (out.current_hash.filter(|_| behind))
            .map(|c| format!("{c} of {} pods carry the current config-hash", out.total));
        let updated = (out.updated.filter(|_| rolling))
            .map(|(updated, wanted)| format!("{updated} of {wanted} replicas are updated"));
        let message: Vec<String> = current.into_iter().chain(updated).collect();
        findings.push(Finding::new(
            Code::PodsNotCurrent,
            format!(
                "{}: a rolling update is in progress or stuck",
                message.join("; ")
            ),
            format!(
                "kubectl rollout status {}/{} -n {namespace}",
                kind.short(),
                meta_str(object, "name").unwrap_or_default()
            ),
        ));
    }
    for line in &out.items {
        findings.extend(line_findings(line, expect_sidecar, namespace));
    }
    (out, findings)
}

fn owned_pods<'a>(
    snapshot: &Snapshot,
    kind: Kind,
    object: &Value,
    namespace: &str,
    all: &'a [Value],
) -> Vec<&'a Value> {
    let in_namespace = all
        .iter()
        .filter(move |p| meta_str(p, "namespace") == Some(namespace));
    if kind == Kind::Pod {
        let uid = meta_str(object, "uid");
        let name = meta_str(object, "name");
        return in_namespace
            .filter(|p| meta_str(p, "name") == name && meta_str(p, "uid") == uid)
            .collect();
    }
    if kind == Kind::CronJob {
        let uid = meta_str(object, "uid").unwrap_or_default();
        let jobs: Vec<&str> = snapshot
            .jobs
            .ok()
            .into_iter()
            .flatten()
            .filter(|j| meta_str(j, "namespace") == Some(namespace) && owned_by(j, uid))
            .filter_map(|j| meta_str(j, "uid"))
            .collect();
        return in_namespace
            .filter(|p| jobs.iter().any(|uid| owned_by(p, uid)))
            .collect();
    }
    let Some(selector) = object.pointer("/spec/selector") else {
        return Vec::new();
    };
    in_namespace
        .filter(|p| matches(selector, &p["metadata"]["labels"]))
        .collect()
}

/// The workload's own `(updated, wanted)` replica counts, once its controller has seen the
/// current generation.
fn updated(kind: Kind, object: &Value) -> Option<(i64, i64)> {
    let status = object.get("status")?;
    let int = |v: &Value, f: &str| v.get(f).and_then(Value::as_i64);
    let observed = int(status, "observedGeneration");
    if observed.is_none() || observed != int(&object["metadata"], "generation") {
        return None;
    }
    match kind {
        Kind::Deployment | Kind::StatefulSet | Kind::Rollout => Some((
            int(status, "updatedReplicas").unwrap_or(0),
            int(&object["spec"], "replicas").unwrap_or(1),
        )),
        Kind::DaemonSet => Some((
            int(status, "updatedNumberScheduled").unwrap_or(0),
            int(status, "desiredNumberScheduled")?,
        )),
        _ => None,
    }
}

fn pod_line(
    snapshot: &Snapshot,
    pod: &Value,
    configs: &Configs,
    key: KeyState<'_>,
    stamped: Option<&str>,
) -> PodLine {
    let name = meta_str(pod, "name").unwrap_or_default().to_owned();
    let namespace = meta_str(pod, "namespace").unwrap_or_default();
    let annotations = string_map(pod, "annotations");
    let spec = PodSpec::deserialize(pod.get("spec").unwrap_or(&Value::Null)).ok();
    // Ours as the core knows it (our `watch` command line): prometheus-operator names its own
    // reloader `config-reloader` too.
    let sidecar = spec.as_ref().is_some_and(|s| {
        let mut containers = s.init_containers.iter().flatten().chain(&s.containers);
        containers.any(is_ours)
    });
    let mut line = PodLine {
        name: name.clone(),
        phase: pod
            .pointer("/status/phase")
            .and_then(Value::as_str)
            .map(str::to_owned),
        current_hash: stamped.map(|s| annotations.get(CONFIG_HASH).map(String::as_str) == Some(s)),
        sidecar,
        mounted_stamped: annotations.get(MOUNTED_CONFIG_HASH).cloned(),
        ..PodLine::default()
    };
    if !sidecar {
        return line;
    }
    if let Some(reads) = spec
        .as_ref()
        .and_then(in_place::existing_sidecar)
        .and_then(in_place::sidecar_reads)
    {
        line.env_stamped = annotations.get(ENV_HASH).cloned();
        let data = configs.data(reads.iter().map(Consumed::id));
        line.env_live = hash::env_hash(&reads, &data);
        line.env_state = Some(state_of(&line.env_stamped, &line.env_live));
    }
    if let Some(spec) = &spec {
        let mounted = consumption::mounted(spec);
        let ids = mounted.ids();
        // Without the webhook's key a mounted Secret's digest cannot be made: no comparison.
        let comparable =
            key.checks_secrets() || !ids.iter().any(|id| id.kind == ConfigKind::Secret);
        if comparable {
            let data = configs.data(ids.iter().copied());
            line.mounted_live = mounted.hash(&data, key.key()).hash;
        }
    }
    // A sidecar that only restarts its Pod in place mounts nothing to hash.
    let mounts = spec
        .as_ref()
        .is_some_and(|s| !consumption::mounted(s).is_empty());
    line.mounted_state = mounts.then(|| state_of(&line.mounted_stamped, &line.mounted_live));
    let held = |annotation| annotations.get(annotation);
    line.env_held_back = held_back(line.env_state, held(ENV_HASH_HELD_BACK), &line.env_live);
    let mounted_held = held(MOUNTED_CONFIG_HELD_BACK);
    line.mounted_held_back = held_back(line.mounted_state, mounted_held, &line.mounted_live);
    let status = ["containerStatuses", "initContainerStatuses"]
        .iter()
        .filter_map(|f| pod.pointer(&format!("/status/{f}"))?.as_array())
        .flatten()
        .find(|s| s.get("name").and_then(Value::as_str) == Some(SIDECAR_NAME));
    line.sidecar_restarts = status.and_then(|s| s.get("restartCount")?.as_i64());
    let last_exit = status.and_then(|s| s.pointer("/lastState/terminated/exitCode")?.as_i64());
    line.restarted_in_place = last_exit == Some(i64::from(in_place::RESTART_CODE));
    match snapshot.logs.get(&format!("{namespace}/{name}")) {
        Some(Fetched::Read(text)) => line.reloads = sidecar_log::reload_lines(text, 3),
        Some(Fetched::Failed(reason)) => line.log_failed = Some(reason.clone()),
        None => {}
    }
    line
}

/// Whether a hash in `state` is stale because a stopped run held the live value back: `held`,
/// the Pod's held-back annotation, is the live data's hash.
fn held_back(state: Option<HashState>, held: Option<&String>, live: &Option<String>) -> bool {
    state == Some(HashState::Stale) && live.is_some() && held == live.as_ref()
}

/// A stamped hash against the live data's.
fn state_of(stamped: &Option<String>, live: &Option<String>) -> HashState {
    match (stamped, live) {
        (None, _) => HashState::NotStamped,
        (Some(_), None) => HashState::Unknown,
        (Some(s), Some(l)) if s == l => HashState::Current,
        _ => HashState::Stale,
    }
}

/// The findings about one Pod: `no-sidecar`, `mounted-stale`, `env-stale`, `sidecar-restarts`,
/// `reload-failed`.
fn line_findings(line: &PodLine, expect_sidecar: bool, namespace: &str) -> Vec<Finding> {
    let mut findings = Vec::new();
    let pod = &line.name;
    if expect_sidecar && !line.sidecar {
        findings.push(Finding::new(
            Code::NoSidecar,
            format!("pod {pod:?} has no config-reloader sidecar: its mounted config is never reloaded"),
            "the Pod webhook (failurePolicy Ignore) was not reachable when it was created: recreate the pod",
        ));
    }
    let held_back = "a Pod of the workload failed with the new data and the run stopped (the \
        workload's Event names the Pod): fix the config; its next change reaches every Pod";
    let stale = [
        (
            line.mounted_state,
            line.mounted_held_back,
            Code::MountedStale,
            "its mounted-config-hash is older than the live data, which was held back from it",
            "the mounted-config-hash is not the hash of the live data it mounts",
            "the controller patches it at once when a mounted object changes: check that one is running",
        ),
        (
            line.env_state,
            line.env_held_back,
            Code::EnvStale,
            "it runs with env older than the live ConfigMaps, which were held back from it",
            "its env-hash is not the hash of the live ConfigMaps it reads through env: it runs with older values",
            "the controller restarts the pods in place, wave by wave: check that one runs, and for a stopped refresh",
        ),
    ];
    for (state, held, code, held_message, message, fix) in stale {
        if state == Some(HashState::Stale) {
            let (message, fix) = if held {
                (held_message, held_back)
            } else {
                (message, fix)
            };
            findings.push(Finding::new(code, format!("pod {pod:?}: {message}"), fix));
        }
    }
    let restarts = line.sidecar_restarts.filter(|_| !line.restarted_in_place);
    if let Some(restarts) = restarts.filter(|r| *r > 0) {
        findings.push(Finding::new(
            Code::SidecarRestarts,
            format!("pod {pod:?}: the config-reloader container restarted {restarts} times"),
            format!("kubectl logs -n {namespace} {pod} -c {SIDECAR_NAME} --previous"),
        ));
    }
    if let Some(last) = line.reloads.last().filter(|l| !sidecar_log::succeeded(l)) {
        let fix = if sidecar_log::permission_denied(last) {
            "set `runAsUser` on the pod or container: the sidecar then runs as that UID (or allow CAP_KILL)".to_owned()
        } else if sidecar_log::target_exited(last) {
            "the app died of the reload signal: annotate the pod template reload-injector.io/on-change: restart, \
             or set reload-injector.io/signal (or reload-url) to what it reloads on"
                .to_owned()
        } else {
            format!("kubectl logs -n {namespace} {pod} -c {SIDECAR_NAME}")
        };
        findings.push(Finding::new(
            Code::ReloadFailed,
            format!("pod {pod:?}: the last reload failed: {last}"),
            fix,
        ));
    }
    findings
}
