//! Golden tests of the pure core: every `tests/fixtures/inject/*.yaml` case is reviewed and
//! its outcome (patch, warnings or denial) compared with `*.golden.yaml` beside it.
//!
//! Refresh the goldens on purpose with `UPDATE_GOLDEN=1 cargo test --test admission offline::golden`, then read
//! the diff. A golden without a case, or a case without a golden, fails.
//!
//! Every admitted case is also checked: the patch applies, the result parses as its
//! k8s-openapi type (an Argo Rollout, which has none, must have a template that parses as a
//! `PodTemplateSpec`, unless its case admits it unchanged), a second review of the result yields
//! an empty patch, and the patch leaves the containers and volumes it did not add as they were
//! (see [`sidecar_kept_apart`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, PodTemplateSpec, Secret};
use reload_injector::hash::{ConfigData, ConfigId, ConfigObject, Lookup, SecretKey};
use reload_injector::workload::in_place::{
    ENV_ROOT, InPlaceSettings, POD_INFO_DIR, STATE_DIR, Support,
};
use reload_injector::workload::values::{self, EnvChange};
use reload_injector::workload::{
    API_SERVER_WARNING_CHARS, MAX_WARNING_CHARS, NO_TOKEN_VOLUME, Object, Operation, Outcome, Plan,
    Request, SIDECAR_NAME, Settings, TOKEN_MOUNT_PATH, WARNING_PREFIX,
};
use serde::Deserialize;
use serde_json::value::to_raw_value;
use serde_json::{Value, json};

const DIR: &str = "tests/fixtures/inject";

/// One case file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Case {
    /// What the case shows (for people).
    #[allow(dead_code)]
    description: String,
    #[serde(default = "create")]
    operation: String,
    namespace: Option<String>,
    #[serde(default)]
    settings: CaseSettings,
    /// ConfigMaps/Secrets that exist; anything else is not found.
    #[serde(default)]
    configs: Vec<Value>,
    /// `Kind/name` lookups that fail (API down).
    #[serde(default)]
    failing: Vec<String>,
    old_object: Option<Value>,
    object: Value,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct CaseSettings {
    #[serde(default)]
    no_native_sidecars: bool,
    #[serde(default)]
    secret_key: bool,
    #[serde(default)]
    inject_into_templates: bool,
    /// Reviewed as from a namespace without the opt-in label (`/mutate/opted-in`).
    #[serde(default)]
    unlabelled_namespace: bool,
    /// Reloader may still run beside us (`serve` without `--reloader-retired`).
    #[serde(default)]
    reloader_beside: bool,
    /// `serve --env-change` (default `roll`).
    #[serde(default)]
    env_change: Option<String>,
    /// Why the cluster cannot restart Pods in place (default: it can).
    #[serde(default)]
    no_in_place: Option<String>,
}

fn create() -> String {
    "CREATE".to_owned()
}

fn settings(case: &CaseSettings) -> Settings {
    Settings {
        sidecar_image: "reload-injector:test".to_owned(),
        native_sidecars: !case.no_native_sidecars,
        own_namespace: "reload-injector".to_owned(),
        version: "0.0.0-test".to_owned(),
        inject_into_templates: case.inject_into_templates,
        secret_key: case
            .secret_key
            .then(|| SecretKey::new(b"golden-test-key").expect("non-empty key")),
        in_place: InPlaceSettings {
            default: case.env_change.as_deref().map_or(EnvChange::Roll, |v| {
                values::parse_env_change(v).expect("a valid envChange setting")
            }),
            support: case.no_in_place.clone().map_or(Support::Yes, Support::No),
        },
        // As the webhook answers: each warning within what the API server passes on whole.
        warning_chars: Some(API_SERVER_WARNING_CHARS),
        reloader_retired: !case.reloader_beside,
    }
}

fn group_of(api_version: &str) -> &str {
    api_version.split_once('/').map_or("", |(group, _)| group)
}

fn config_data(
    case: &Case,
    refs: &std::collections::BTreeSet<ConfigId>,
    key: Option<&SecretKey>,
) -> ConfigData {
    let mut existing = BTreeMap::new();
    for object in &case.configs {
        let name = object["metadata"]["name"]
            .as_str()
            .expect("config has a name")
            .to_owned();
        match object["kind"].as_str() {
            Some("ConfigMap") => {
                let cm = ConfigMap::deserialize(object).expect("valid ConfigMap");
                existing.insert(
                    ConfigId::config_map(name),
                    ConfigObject::from_config_map(&cm),
                );
            }
            Some("Secret") => {
                let secret = Secret::deserialize(object).expect("valid Secret");
                if let Some(key) = key {
                    existing.insert(
                        ConfigId::secret(name),
                        ConfigObject::from_secret(&secret, key),
                    );
                }
            }
            other => panic!("configs holds ConfigMaps and Secrets, not {other:?}"),
        }
    }
    let mut data = ConfigData::new();
    for id in refs {
        let label = format!("{}/{}", id.kind, id.name);
        let lookup = if case.failing.contains(&label) {
            Lookup::Failed("timed out after 1s".to_owned())
        } else {
            existing
                .get(id)
                .cloned()
                .map_or(Lookup::NotFound, Lookup::Found)
        };
        data.insert(id.clone(), lookup);
    }
    data
}

/// Reviews `object` as the case says; returns the outcome.
fn review(case: &Case, object: &Value, settings: &Settings) -> Outcome {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let kind = object["kind"].as_str().unwrap_or_default();
    let namespace = case
        .namespace
        .clone()
        .or_else(|| object["metadata"]["namespace"].as_str().map(str::to_owned))
        .unwrap_or_else(|| "default".to_owned());
    // The server hands the core the objects as raw JSON, as sent.
    let raw = to_raw_value(object).expect("fixture objects serialize");
    let old_raw = case.old_object.as_ref().map(to_raw_value).transpose();
    let old_raw = old_raw.expect("fixture objects serialize");
    let req = Request {
        group: group_of(api_version),
        kind,
        operation: Operation::parse(&case.operation),
        namespace: &namespace,
        object: Object::Raw(&raw),
        old_object: old_raw.as_deref(),
        namespace_labelled: !case.settings.unlabelled_namespace,
        dry_run: false,
    };
    let plan = Plan::new(&req, settings).expect("fixture objects are readable");
    let data = config_data(case, &plan.config_refs(), settings.secret_key.as_ref());
    let outcome = plan.outcome(&data);
    // Dry run must give the identical answer.
    let dry = Request {
        dry_run: true,
        ..req
    };
    assert_eq!(
        Plan::new(&dry, settings).expect("readable").outcome(&data),
        outcome,
        "dry run differs"
    );
    outcome
}

fn golden_of(outcome: &Outcome) -> Value {
    match outcome {
        Outcome::Allowed { patch, warnings } => json!({
            "allowed": true,
            "warnings": warnings,
            "patch": serde_json::to_value(patch).expect("patch serialises"),
        }),
        Outcome::Denied { message, warnings } => json!({
            "allowed": false,
            "message": message,
            "warnings": warnings,
        }),
    }
}

/// Checks that hold for every admitted case.
fn check_invariants(
    name: &str,
    case: &Case,
    outcome: &Outcome,
    settings: &Settings,
) -> Result<(), String> {
    let warnings = match outcome {
        Outcome::Allowed { warnings, .. } | Outcome::Denied { warnings, .. } => warnings,
    };
    for w in warnings {
        if !w.starts_with(WARNING_PREFIX)
            || w.chars().count() > MAX_WARNING_CHARS
            || w.chars().any(char::is_control)
        {
            return Err(format!("{name}: malformed warning {w:?}"));
        }
        if w.contains("golden-secret-value") {
            return Err(format!(
                "{name}: a secret value leaked into a warning: {w:?}"
            ));
        }
    }
    let Outcome::Allowed { patch, .. } = outcome else {
        return Ok(());
    };
    let mut mutated = case.object.clone();
    json_patch::patch(&mut mutated, patch)
        .map_err(|e| format!("{name}: patch does not apply: {e}"))?;
    if mutated.to_string().contains("golden-secret-value") {
        return Err(format!("{name}: a secret value leaked into the object"));
    }
    // A Rollout admitted unchanged may be one the core could not read: only what was mutated
    // must parse.
    if !patch.0.is_empty() || mutated["kind"] != "Rollout" {
        parses_as_its_type(&mutated)
            .map_err(|e| format!("{name}: mutated object does not parse: {e}"))?;
    }
    sidecar_kept_apart(&case.object, &mutated).map_err(|e| format!("{name}: {e}"))?;
    match review(case, &mutated, settings) {
        Outcome::Allowed { patch, .. } if patch.0.is_empty() => Ok(()),
        other => Err(format!("{name}: second pass is not a no-op: {other:?}")),
    }
}

/// The pod spec of an object of any handled kind.
fn pod_spec(object: &Value) -> Option<&Value> {
    let pointer = match object["kind"].as_str() {
        Some("Pod") => "/spec",
        Some("CronJob") => "/spec/jobTemplate/spec/template/spec",
        _ => "/spec/template/spec",
    };
    object.pointer(pointer)
}

/// The entries of the list `spec[key]` (none when absent or not a list).
fn entries<'v>(spec: &'v Value, key: &str) -> &'v [Value] {
    spec.get(key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// What a patch may do to the containers and volumes of a pod: add the sidecar and, where no
/// volume has that name yet, the one volume it mounts at the token path. Every other container
/// and volume stays as it was.
fn sidecar_kept_apart(before: &Value, after: &Value) -> Result<(), String> {
    let (Some(before), Some(after)) = (pod_spec(before), pod_spec(after)) else {
        return Ok(());
    };
    let containers = |spec: &Value| -> Vec<Value> {
        ["initContainers", "containers"]
            .iter()
            .flat_map(|list| entries(spec, list))
            .cloned()
            .collect()
    };
    let (old, mut new) = (containers(before), containers(after));
    let had_sidecar = old.iter().any(|c| c["name"] == SIDECAR_NAME);
    let added = match new.iter().position(|c| c["name"] == SIDECAR_NAME) {
        Some(at) if !had_sidecar => Some(new.remove(at)),
        _ => None,
    };
    if old != new {
        return Err(format!(
            "containers besides an added sidecar changed: {new:?}"
        ));
    }
    let Some(sidecar) = added else {
        return same_volumes(entries(before, "volumes"), entries(after, "volumes"));
    };
    let token_mounts: Vec<&Value> = entries(&sidecar, "volumeMounts")
        .iter()
        .filter(|m| m["mountPath"] == TOKEN_MOUNT_PATH)
        .collect();
    let name_taken = entries(before, "volumes")
        .iter()
        .any(|v| v["name"] == NO_TOKEN_VOLUME);
    if name_taken {
        if !token_mounts.is_empty() {
            return Err(format!(
                "the sidecar mounts the pod's own volume at {TOKEN_MOUNT_PATH}"
            ));
        }
        return same_volumes(entries(before, "volumes"), entries(after, "volumes"));
    }
    if !matches!(token_mounts.as_slice(), [m] if m["name"] == NO_TOKEN_VOLUME) {
        return Err(format!(
            "the sidecar's mounts at {TOKEN_MOUNT_PATH}: {token_mounts:?}"
        ));
    }
    let mut volumes = entries(after, "volumes").to_vec();
    let ours = volumes
        .iter()
        .filter(|v| v["name"] == NO_TOKEN_VOLUME)
        .count();
    if ours != 1 {
        return Err(format!(
            "{ours} volumes named {NO_TOKEN_VOLUME} after the patch"
        ));
    }
    volumes.retain(|v| v["name"] != NO_TOKEN_VOLUME);
    // Restart in place: the volumes the sidecar mounts for it are its own, new ones.
    let in_place: Vec<&Value> = entries(&sidecar, "volumeMounts")
        .iter()
        .filter(|m| {
            let path = m["mountPath"].as_str().unwrap_or_default();
            [ENV_ROOT, POD_INFO_DIR, STATE_DIR]
                .iter()
                .any(|root| path.starts_with(root))
        })
        .map(|m| &m["name"])
        .collect();
    let old_names: Vec<&Value> = entries(before, "volumes")
        .iter()
        .map(|v| &v["name"])
        .collect();
    if let Some(taken) = in_place.iter().find(|name| old_names.contains(name)) {
        return Err(format!("the sidecar mounts the pod's own volume {taken}"));
    }
    volumes.retain(|v| !in_place.contains(&&v["name"]));
    same_volumes(entries(before, "volumes"), &volumes)
}

fn same_volumes(before: &[Value], after: &[Value]) -> Result<(), String> {
    if before == after {
        Ok(())
    } else {
        Err(format!(
            "volumes besides the sidecar's own changed: {after:?}"
        ))
    }
}

fn parses_as_its_type(object: &Value) -> Result<(), serde_json::Error> {
    fn parse<T: serde::de::DeserializeOwned>(v: &Value) -> Result<(), serde_json::Error> {
        serde_json::from_value::<T>(v.clone()).map(drop)
    }
    match object["kind"].as_str().unwrap_or_default() {
        "Pod" => parse::<Pod>(object),
        "Deployment" => parse::<Deployment>(object),
        "StatefulSet" => parse::<StatefulSet>(object),
        "DaemonSet" => parse::<DaemonSet>(object),
        "ReplicaSet" => parse::<ReplicaSet>(object),
        "Job" => parse::<Job>(object),
        "CronJob" => parse::<CronJob>(object),
        // Argo's Rollout has no k8s-openapi type; its template is a pod template.
        "Rollout" => parse::<PodTemplateSpec>(&object["spec"]["template"]),
        _ => Ok(()),
    }
}

fn read_yaml(path: &Path) -> Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("parse {}: {e}", path.display()))
}

fn cases() -> Vec<PathBuf> {
    let mut cases: Vec<PathBuf> = std::fs::read_dir(DIR)
        .expect("fixture dir exists")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml") && !is_golden(p))
        .collect();
    cases.sort();
    cases
}

fn is_golden(path: &Path) -> bool {
    path.to_string_lossy().ends_with(".golden.yaml")
}

fn golden_path(case: &Path) -> PathBuf {
    case.with_extension("golden.yaml")
}

#[test]
fn every_fixture_matches_its_golden() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let cases = cases();
    assert!(
        cases.len() >= 30,
        "expected at least 30 fixtures, found {}",
        cases.len()
    );
    let mut failures = Vec::new();
    for path in &cases {
        let name = path
            .file_stem()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let case: Case = serde_json::from_value(read_yaml(path))
            .unwrap_or_else(|e| panic!("{name}: bad case: {e}"));
        let settings = settings(&case.settings);
        let outcome = review(&case, &case.object, &settings);
        if let Err(problem) = check_invariants(&name, &case, &outcome, &settings) {
            failures.push(problem);
        }
        let actual = golden_of(&outcome);
        let golden = golden_path(path);
        if update {
            let text = serde_saphyr::to_string(&actual).expect("golden serialises");
            std::fs::write(
                &golden,
                format!("# Generated by UPDATE_GOLDEN=1 cargo test --test admission offline::golden\n{text}"),
            )
            .expect("write golden");
            continue;
        }
        if !golden.exists() {
            failures.push(format!(
                "{name}: no golden; run UPDATE_GOLDEN=1 cargo test --test admission offline::golden"
            ));
            continue;
        }
        let expected = read_yaml(&golden);
        if expected != actual {
            failures.push(format!(
                "{name}: outcome differs from {}\n  expected: {expected}\n  actual:   {actual}",
                golden.display()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} fixtures failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn no_golden_is_stale() {
    let stale: Vec<PathBuf> = std::fs::read_dir(DIR)
        .expect("fixture dir exists")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| is_golden(p))
        .filter(|golden| {
            let case = golden.to_string_lossy().replace(".golden.yaml", ".yaml");
            !Path::new(&case).exists()
        })
        .collect();
    assert!(
        stale.is_empty(),
        "goldens without a case (delete them): {stale:?}"
    );
}
