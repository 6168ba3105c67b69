//! The Pods of a workload (pure): which it owns, whether they run the current template and carry
//! the sidecar, and each sidecar's hashes, restarts and last reload lines.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::config_objects::Configs;
use super::findings::{Code, Finding};
use super::hash_check::{HashState, KeyState, state_of};
use super::meta_str;
use super::snapshot::{Fetched, Snapshot};
use super::target_arg::Kind;
use crate::hash::{self, ConfigKind, Consumed};
use crate::workload::explain::is_ours;
use crate::workload::pod::PodSpec;
use crate::workload::string_map;
use crate::workload::{CONFIG_HASH, MOUNTED_CONFIG_HASH, MOUNTED_CONFIG_HELD_BACK, SIDECAR_NAME};
use crate::workload::{ENV_HASH, ENV_HASH_HELD_BACK, consumption, in_place};

/// The Pods part of a report.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Pods {
    pub total: usize,
    /// Pods whose `config-hash` is the template's (`None` when the template is not stamped).
    pub current_hash: Option<usize>,
    /// The workload's own count of updated replicas and of replicas wanted, when it keeps one.
    pub updated: Option<(i64, i64)>,
    pub with_sidecar: usize,
    /// One line per Pod, by name.
    pub items: Vec<PodLine>,
}

/// One Pod.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodLine {
    pub name: String,
    pub phase: Option<String>,
    /// Whether its `config-hash` is the template's.
    pub current_hash: Option<bool>,
    pub sidecar: bool,
    /// Its `mounted-config-hash` against the live data's (sidecar Pods; `None`: not computable).
    pub mounted_stamped: Option<String>,
    pub mounted_live: Option<String>,
    pub mounted_state: Option<HashState>,
    /// The same for its `env-hash` (a Pod that restarts in place), against the env it reads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub env_stamped: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub env_live: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub env_state: Option<HashState>,
    /// Its stale `mounted-config-hash` is the one a stopped refresh held back from it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub mounted_held_back: bool,
    /// Its stale `env-hash` is the one stopped restarts in place held back from it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub env_held_back: bool,
    pub sidecar_restarts: Option<i64>,
    /// The `config-reloader` last exited with the restart code: its restarts are our own.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub restarted_in_place: bool,
    /// The last reload lines of its log, oldest first.
    pub reloads: Vec<String>,
    pub log_failed: Option<String>,
}

/// The Pods part for `object`, a `kind` workload whose template carries the `stamped`
/// `config-hash`, and its findings. `expect_sidecar`: the template's Pods should carry one.
pub fn pods(
    snapshot: &Snapshot,
    kind: Kind,
    object: &Value,
    configs: &Configs,
    key: KeyState<'_>,
    stamped: Option<&str>,
    expect_sidecar: bool,
) -> (Pods, Vec<Finding>) {
    let Some(all) = snapshot.pods.ok() else {
        return (Pods::default(), Vec::new());
    };
    let mut findings = Vec::new();
    let namespace = meta_str(object, "namespace").unwrap_or_default();
    let owned = owned_pods(snapshot, kind, object, namespace, all);
    let line = |pod| pod_line(snapshot, pod, configs, key, stamped);
    let mut items: Vec<PodLine> = owned.into_iter().map(line).collect();
    items.sort_by(|a, b| a.name.cmp(&b.name));
    let current = items.iter().filter(|l| l.current_hash == Some(true));
    let current = current.count();
    let out = Pods {
        total: items.len(),
        current_hash: stamped.map(|_| current),
        updated: updated(kind, object),
        with_sidecar: items.iter().filter(|l| l.sidecar).count(),
        items,
    };
    let total = out.total;
    let current = (out.current_hash.filter(|c| *c < total))
        .map(|c| format!("{c} of {total} pods carry the current config-hash"));
    let updated = (out.updated.filter(|(updated, wanted)| updated < wanted))
        .map(|(updated, wanted)| format!("{updated} of {wanted} replicas are updated"));
    let behind: Vec<String> = current.into_iter().chain(updated).collect();
    if !behind.is_empty() {
        let (short, name) = (kind.short(), meta_str(object, "name").unwrap_or_default());
        findings.push(Finding::new(
            Code::PodsNotCurrent,
            format!(
                "{}: a rolling update is in progress or stuck",
                behind.join("; ")
            ),
            format!("kubectl rollout status {short}/{name} -n {namespace}"),
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
    let (uid, name) = (meta_str(object, "uid"), meta_str(object, "name"));
    let here = |o: &&Value| meta_str(o, "namespace") == Some(namespace);
    // A CronJob's Pods are those of its Jobs.
    let jobs: Vec<&str> = (snapshot.jobs.ok().into_iter().flatten())
        .filter(|j| kind == Kind::CronJob && here(j) && owned_by(j, uid.unwrap_or_default()))
        .filter_map(|j| meta_str(j, "uid"))
        .collect();
    let selector = object.pointer("/spec/selector");
    let owned = |p: &&Value| match kind {
        Kind::Pod => meta_str(p, "name") == name && meta_str(p, "uid") == uid,
        Kind::CronJob => jobs.iter().any(|uid| owned_by(p, uid)),
        _ => selector.is_some_and(|s| matches(s, &p["metadata"]["labels"])),
    };
    all.iter().filter(|p| here(p) && owned(p)).collect()
}

/// The workload's `(updated, wanted)` replicas, once its controller saw the current generation.
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
    let spec = spec.as_ref();
    let reads = spec.and_then(in_place::existing_sidecar);
    if let Some(reads) = reads.and_then(in_place::sidecar_reads) {
        line.env_stamped = annotations.get(ENV_HASH).cloned();
        let data = configs.data(reads.iter().map(Consumed::id));
        line.env_live = hash::env_hash(&reads, &data);
        line.env_state = Some(state_of(&line.env_stamped, &line.env_live));
    }
    if let Some(mounted) = spec.map(consumption::mounted) {
        let ids = mounted.ids();
        // Without the webhook's key a mounted Secret's digest cannot be made: no comparison.
        if key.checks_secrets() || !ids.iter().any(|id| id.kind == ConfigKind::Secret) {
            line.mounted_live = mounted.hash(&configs.data(ids), key.key()).hash;
        }
        // A sidecar that only restarts its Pod in place mounts nothing to hash.
        if !mounted.is_empty() {
            line.mounted_state = Some(state_of(&line.mounted_stamped, &line.mounted_live));
        }
    }
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
        Some(Fetched::Read(text)) => line.reloads = reload_lines(text, 3),
        Some(Fetched::Failed(reason)) => line.log_failed = Some(reason.clone()),
        None => {}
    }
    line
}

/// Whether a stale hash is one a stopped run held back (`held`, the annotation, is the live one).
fn held_back(state: Option<HashState>, held: Option<&String>, live: &Option<String>) -> bool {
    state == Some(HashState::Stale) && live.is_some() && held == live.as_ref()
}

/// The findings about one Pod.
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
    if let Some(last) = line.reloads.last().filter(|l| !succeeded(l)) {
        let fix = if permission_denied(last) {
            "set `runAsUser` on the pod or container: the sidecar then runs as that UID (or allow CAP_KILL)".to_owned()
        } else if target_exited(last) {
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

/// Whether an object's `metadata.labels` (JSON, `Null` when absent) match the
/// `LabelSelector` JSON `selector`. An empty or absent selector matches nothing (as a
/// workload's selector must not select every Pod).
pub fn matches(selector: &Value, labels: &Value) -> bool {
    let match_labels = selector.get("matchLabels").and_then(Value::as_object);
    let expressions = selector.get("matchExpressions").and_then(Value::as_array);
    let empty =
        match_labels.is_none_or(|m| m.is_empty()) && expressions.is_none_or(|e| e.is_empty());
    if empty {
        return false;
    }
    let labels_ok = match_labels.into_iter().flatten().all(|(key, want)| {
        want.as_str()
            .is_some_and(|want| label(labels, key) == Some(want))
    });
    labels_ok
        && expressions
            .into_iter()
            .flatten()
            .all(|expression| expression_matches(expression, labels))
}

fn label<'v>(labels: &'v Value, key: &str) -> Option<&'v str> {
    labels.get(key).and_then(Value::as_str)
}

fn expression_matches(expression: &Value, labels: &Value) -> bool {
    let Some(key) = expression.get("key").and_then(Value::as_str) else {
        return false;
    };
    let values: Vec<&str> = expression
        .get("values")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let got = label(labels, key);
    match expression.get("operator").and_then(Value::as_str) {
        Some("In") => got.is_some_and(|g| values.contains(&g)),
        Some("NotIn") => got.is_none_or(|g| !values.contains(&g)),
        Some("Exists") => got.is_some(),
        Some("DoesNotExist") => got.is_none(),
        _ => false,
    }
}

/// Whether `object` has an owner reference to `uid`.
pub fn owned_by(object: &Value, uid: &str) -> bool {
    object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|owner| owner.get("uid").and_then(Value::as_str) == Some(uid))
}

/// The last `max` reload lines (one per attempt, text or JSON) of a `config-reloader` log,
/// oldest first, each trimmed.
pub fn reload_lines(log: &str, max: usize) -> Vec<String> {
    let reload = ["reloaded", "reload failed", "not retried"];
    let lines: Vec<&str> = (log.lines())
        .filter(|line| reload.iter().any(|r| line.contains(r)))
        .collect();
    let last = &lines[lines.len().saturating_sub(max)..];
    last.iter().map(|line| line.trim().to_owned()).collect()
}

/// Whether a reload line reports success.
pub fn succeeded(line: &str) -> bool {
    line.contains("reloaded") && result(line) == Some("success")
}

/// A reload line's `result` field: `result=success` or `result="success"` in text (tracing
/// quotes string values), `"result":"success"` in JSON.
fn result(line: &str) -> Option<&str> {
    let (_, rest) = line
        .split_once("\"result\":")
        .or_else(|| line.split_once(" result="))?;
    let rest = rest.trim_start();
    match rest.strip_prefix('"') {
        Some(quoted) => quoted.split('"').next(),
        None => rest.split([' ', ',', '}']).next(),
    }
}

/// Whether a reload line says the signalled process died of the signal instead of reloading.
pub fn target_exited(line: &str) -> bool {
    line.contains("target_exited")
}

/// Whether a reload line reports that the signal was refused (`EPERM`).
pub fn permission_denied(line: &str) -> bool {
    line.contains("permission denied")
        || line.contains("permission_denied")
        || line.contains("EPERM")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Value {
        Value::Object(pairs.iter().map(|(k, v)| ((*k).into(), json!(v))).collect())
    }

    #[test]
    fn selectors_match_as_the_api_server_does() {
        let selector = json!({"matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]},
                                 {"key": "canary", "operator": "DoesNotExist"}]});
        for (pod, expected) in [
            (&[("app", "web"), ("tier", "a")][..], true),
            (&[("app", "web"), ("tier", "c")], false),
            (&[("app", "web"), ("tier", "a"), ("canary", "1")], false),
        ] {
            assert_eq!(matches(&selector, &labels(pod)), expected, "{pod:?}");
        }
        assert!(!matches(&json!({}), &labels(&[("app", "web")])));
        assert!(!matches(
            &json!({"matchExpressions": [{"operator": "Exists"}]}),
            &labels(&[])
        ));
    }

    #[test]
    fn only_reload_lines_are_kept_newest_last() {
        let log = "a INFO watching dir=/x\n\
                   b INFO reloaded dir=/x result=success\n\
                   c ERROR failed to send SIGHUP to nginx[7]: permission denied; not retried until the content changes again result=permission_denied\n\
                   d INFO reloaded dir=/x result=success\n";
        let lines = reload_lines(log, 2);
        assert_eq!(lines.len(), 2);
        assert!(lines[0].starts_with('c') && permission_denied(&lines[0]));
        assert!(!succeeded(&lines[0]) && succeeded(&lines[1]));
        assert_eq!(reload_lines("", 3), Vec::<String>::new());
    }

    #[test]
    fn the_result_field_reads_the_same_quoted_bare_or_as_json() {
        // The sidecar's own text format quotes string values.
        let text = r#"2026-11-26T05:37:58.407065Z  INFO reload_injector::watch::runner: reloaded dir=/etc/reload-injector/watch/conf hash=b04aea0a96e1 targets=nginx[13] result="success" duration_ms=1.056"#;
        assert!(succeeded(text));
        assert!(succeeded(
            "INFO reloaded dir=/x result=success duration_ms=1"
        ));
        assert!(succeeded(
            r#"{"fields":{"message":"reloaded","result":"success"}}"#
        ));
        assert!(!succeeded(r#"INFO reloaded dir=/x result="target_exited""#));
        assert!(!succeeded(
            r#"INFO reloaded dir=/x result="successful_lie""#
        ));
        assert!(!succeeded("INFO reloaded dir=/x"));
    }

    #[test]
    fn a_target_that_died_of_the_signal_is_a_failed_reload() {
        let log = r#"{"level":"ERROR","fields":{"message":"reload failed: java[12] exited with status 129 within 2s after SIGHUP: it does not reload on SIGHUP; fix: ...; not retried until the content changes again","result":"target_exited"}}"#;
        let lines = reload_lines(log, 3);
        assert_eq!(lines.len(), 1);
        assert!(target_exited(&lines[0]));
        assert!(!succeeded(&lines[0]));
    }
}
