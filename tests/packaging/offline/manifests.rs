//! The install manifests (`manifests/`, `manifests/cert-manager/`, and the overlay written by
//! `certs/generate.sh`), rendered with a real kustomize, validated against the Kubernetes
//! OpenAPI schemas (strict) and cert-manager's CRD schemas, and checked for the safety
//! properties DESIGN.md promises.

use crate::tools;

use std::path::{Path, PathBuf};

use base64::Engine;
use serde_json::{Value, json};
use tools::{find, render, repo, validate};

const NAMESPACE: &str = "reload-injector";

fn base() -> Vec<Value> {
    render(&repo().join("manifests"))
}

fn cert_manager() -> Vec<Value> {
    render(&repo().join("manifests/cert-manager"))
}

/// Runs certs/generate.sh with the freshly built binary into a scratch dir; returns the dir.
fn generated(name: &str) -> PathBuf {
    tools::generated_overlay(name)
}

#[test]
fn kustomize_is_recent_enough_for_the_manifests() {
    let version = tools::kustomize_version();
    assert!(
        version >= tools::MIN_KUSTOMIZE,
        "kustomize {version:?} is older than {:?}",
        tools::MIN_KUSTOMIZE
    );
}

#[test]
fn every_manifest_file_passes_strict_schema_validation() {
    let mut files = Vec::new();
    for dir in ["manifests/base", "manifests/cert-manager"] {
        for entry in std::fs::read_dir(repo().join(dir)).unwrap() {
            let path = entry.unwrap().path();
            let is_yaml = path.extension().is_some_and(|e| e == "yaml");
            if is_yaml && !path.ends_with("kustomization.yaml") {
                files.push(path);
            }
        }
    }
    assert!(files.len() >= 9, "{files:?}");
    for file in files {
        let objects = tools::parse_yaml(&std::fs::read_to_string(&file).unwrap());
        assert!(!objects.is_empty(), "{}", file.display());
        let label = file.file_stem().unwrap().to_string_lossy().into_owned();
        let problems = validate(&objects, &format!("file-{label}"));
        assert!(problems.is_empty(), "{}: {problems:#?}", file.display());
    }
}

#[test]
fn rendered_base_and_overlays_pass_strict_schema_validation() {
    let overlay = generated("validate-generated");
    for (label, objects) in [
        ("base", base()),
        ("cert-manager", cert_manager()),
        ("generated", render(&overlay)),
    ] {
        assert!(objects.len() >= 8, "{label}: {} objects", objects.len());
        let problems = validate(&objects, &format!("rendered-{label}"));
        assert!(problems.is_empty(), "{label}: {problems:#?}");
    }
}

#[test]
fn the_validators_reject_what_they_should() {
    // A misspelt field, a wrong type, a bad enum: each must fail, or the checks above
    // prove nothing.
    let mut deployment = find(&base(), "Deployment", "reload-injector").clone();
    deployment["spec"]["template"]["spec"]["containers"][0]["readOnlyRootFileSystem"] = json!(true);
    assert!(!validate(&[deployment], "reject-typo").is_empty());

    let mut service = find(&base(), "Service", "reload-injector").clone();
    service["spec"]["ports"][0]["port"] = json!("https");
    assert!(!validate(&[service], "reject-type").is_empty());

    let mut cert = find(&cert_manager(), "Certificate", "reload-injector-serving").clone();
    cert["spec"]["privateKey"]["algorithm"] = json!("DSA");
    assert!(!validate(&[cert], "reject-enum").is_empty());

    let unknown =
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}});
    assert!(!validate(&[unknown], "reject-unknown-kind").is_empty());
}

use webhook_safety::{strings, webhooks};

#[test]
fn webhook_configuration_is_safe() {
    webhook_safety::assert_safe(&base(), NAMESPACE, &[]);
}

#[test]
fn nothing_a_controller_creates_waits_on_the_fail_webhook() {
    // assert_safe checks the Fail webhook's matchCondition; the overlay keeps it too.
    webhook_safety::assert_safe(&cert_manager(), NAMESPACE, &[]);
}

#[test]
fn the_cluster_role_grants_on_rollouts_what_it_grants_on_deployments() {
    let role = base()
        .into_iter()
        .find(|o| o["kind"] == "ClusterRole")
        .expect("a ClusterRole");
    let verbs_on = |group: &str, resource: &str| -> Vec<String> {
        let mut verbs: Vec<String> = role["rules"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|rule| {
                strings(&rule["apiGroups"]).contains(&group)
                    && strings(&rule["resources"]).contains(&resource)
            })
            .flat_map(|rule| strings(&rule["verbs"]))
            .map(str::to_owned)
            .collect();
        verbs.sort();
        verbs
    };
    assert_eq!(
        verbs_on("argoproj.io", "rollouts"),
        ["list", "patch", "watch"]
    );
    assert_eq!(
        verbs_on("argoproj.io", "rollouts"),
        verbs_on("apps", "deployments")
    );
    // Nothing else of Argo's: not its other resources, not a wildcard.
    for rule in role["rules"].as_array().unwrap() {
        if strings(&rule["apiGroups"]).contains(&"argoproj.io") {
            assert_eq!(strings(&rule["resources"]), ["rollouts"], "{rule}");
        }
    }
}

#[path = "../../manifests/deployment.rs"]
mod deployment;
#[path = "../../manifests/overlays.rs"]
mod overlays;
use crate::webhook_safety;

/// The path of a file mounted from a Secret volume must be a file inside a mount of that
/// volume, mounted as a directory (no subPath).
fn assert_mounted_from(pod_spec: &Value, file: &Path, secret: &str) {
    let container = &pod_spec["containers"][0];
    let volume = pod_spec["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["secret"]["secretName"] == secret)
        .unwrap_or_else(|| panic!("no volume for Secret {secret}"));
    let mount = container["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == volume["name"])
        .unwrap_or_else(|| panic!("Secret {secret} is not mounted"));
    assert!(
        mount.get("subPath").is_none(),
        "{secret} mounted with subPath"
    );
    assert_eq!(mount["readOnly"], true);
    let dir = Path::new(mount["mountPath"].as_str().unwrap());
    assert_eq!(
        file.parent(),
        Some(dir),
        "{} not in {}",
        file.display(),
        dir.display()
    );
}

/// Decodes a base64 field.
fn b64(value: &Value) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(value.as_str().expect("base64 string"))
        .expect("valid base64")
}
