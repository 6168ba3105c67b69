//! The lean types read exactly what k8s-openapi reads, for every fixture and for odd specs.

use std::path::Path;

use serde::Deserialize;
use serde_json::{Value, json};

use super::PodSpec;
use crate::workload::Workload;

/// The lean read of what k8s-openapi read from `spec`: its typed PodSpec written back out.
fn through_k8s_openapi(spec: &Value) -> PodSpec {
    let full =
        k8s_openapi::api::core::v1::PodSpec::deserialize(spec).expect("k8s-openapi reads it");
    PodSpec::deserialize(serde_json::to_value(full).unwrap()).unwrap()
}

/// The pod specs of every fixture object the core handles, with the fixture's name.
pub(crate) fn fixture_specs() -> Vec<(String, Value)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/inject");
    let mut specs = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.ends_with(".yaml") || name.ends_with(".golden.yaml") {
            continue;
        }
        let case: Value = serde_saphyr::from_str(&std::fs::read_to_string(&path).unwrap())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        for object in [&case["object"], &case["oldObject"]] {
            let (Some(api_version), Some(kind)) =
                (object["apiVersion"].as_str(), object["kind"].as_str())
            else {
                continue;
            };
            let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
            let Some(workload) = Workload::classify(group, kind) else {
                continue;
            };
            let pointer = format!("{}/spec", workload.pointer());
            if let Some(spec) = object.pointer(&pointer) {
                specs.push((name.clone(), spec.clone()));
            }
        }
    }
    assert!(
        specs.len() >= 40,
        "only {} fixture specs found",
        specs.len()
    );
    specs
}

/// `spec` read lean, without what k8s-openapi's types for 1.33 do not have yet:
/// `restartPolicyRules` (Kubernetes 1.34), read only for how many there are.
fn lean_as_of_1_33(spec: &Value) -> Result<PodSpec, serde_json::Error> {
    let mut lean = PodSpec::deserialize(spec)?;
    let inits = lean.init_containers.iter_mut().flatten();
    for container in inits.chain(&mut lean.containers) {
        container.restart_policy_rules = None;
    }
    Ok(lean)
}

#[test]
fn every_fixture_spec_reads_as_k8s_openapi_reads_it() {
    for (name, spec) in fixture_specs() {
        let lean = lean_as_of_1_33(&spec).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(lean, through_k8s_openapi(&spec), "{name}");
    }
}

#[test]
fn restart_rules_are_counted() {
    let rule = json!({"action": "Restart", "exitCodes": {"operator": "In", "values": [3]}});
    let spec = json!({"containers": [
        {"name": "a", "restartPolicy": "Always", "restartPolicyRules": [rule, rule]},
        {"name": "b", "restartPolicyRules": null}
    ]});
    let lean = PodSpec::deserialize(&spec).unwrap();
    let counts: Vec<Option<usize>> = lean
        .containers
        .iter()
        .map(|c| c.restart_policy_rules.as_ref().map(Vec::len))
        .collect();
    assert_eq!(counts, [Some(2), None]);
}

#[test]
fn null_and_missing_required_fields_read_as_k8s_openapi_reads_them() {
    let spec = json!({
        "containers": [
            {"name": null, "env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": null, "key": null}}}]},
            {"volumeMounts": [{"name": "v", "mountPath": null, "subPath": null}]},
            {"envFrom": [{"secretRef": {"name": null}}, {"configMapRef": {}}], "restartPolicy": null}
        ],
        "initContainers": null,
        "volumes": [
            {"name": null, "configMap": {"name": null, "items": [{"key": null, "path": null}]}},
            {"name": "s", "secret": {"secretName": null, "items": null}},
            {"name": "p", "projected": {"sources": [
                {"configMap": {}}, {"secret": {"name": null}},
                {"serviceAccountToken": {"path": "token"}}, {"downwardAPI": {}}
            ]}}
        ],
        "securityContext": {"runAsUser": null, "runAsNonRoot": true},
        "hostPID": null
    });
    let lean = PodSpec::deserialize(&spec).unwrap();
    assert_eq!(lean, through_k8s_openapi(&spec));
    assert_eq!(lean.containers[0].name, "");
    let projected = lean.volumes.as_ref().unwrap()[2]
        .projected
        .as_ref()
        .unwrap();
    let token = &projected.sources.as_ref().unwrap()[2];
    assert!(token.service_account_token.is_some());
}
