//! The real-world fixtures of `tests/fixtures/inject` through a real kube-apiserver with `serve`
//! as its webhook: each case's ConfigMaps and object are applied with `kubectl` in an opted-in
//! namespace, and what the user sees and what is stored must be what the case's golden says:
//! the same `Warning:` lines, whole (none cut, each within the 256 characters the API server
//! keeps), the same `config-hash` (a ConfigMap's hash depends on its data alone), and the same
//! sidecar where one is due. See `tests/cluster_support` for the cluster.

use crate::cluster_support;

use cluster_support::install::Install;
use cluster_support::{Cluster, PATIENCE};
use serde_json::Value;

const CONFIG_HASH: &str = "reload-injector.io/config-hash";
const SIDECAR: &str = "config-reloader";

/// A fixture: its object and config, and what its golden says the webhook answers.
struct Case {
    name: &'static str,
    object: Value,
    configs: Vec<Value>,
    /// The object as the golden's patch leaves it.
    expected: Value,
    warnings: Vec<String>,
}

fn read_yaml(path: &str) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

impl Case {
    fn read(name: &'static str) -> Case {
        let case = read_yaml(&format!("tests/fixtures/inject/{name}.yaml"));
        let golden = read_yaml(&format!("tests/fixtures/inject/{name}.golden.yaml"));
        assert_eq!(golden["allowed"], true, "{name}: these cases are admitted");
        let patch: json_patch::Patch = serde_json::from_value(golden["patch"].clone()).unwrap();
        let mut expected = case["object"].clone();
        json_patch::patch(&mut expected, &patch).unwrap();
        let warnings = golden["warnings"].as_array().cloned().unwrap_or_default();
        Case {
            name,
            object: case["object"].clone(),
            configs: case["configs"].as_array().cloned().unwrap_or_default(),
            expected,
            warnings: warnings
                .iter()
                .map(|w| w.as_str().unwrap().to_owned())
                .collect(),
        }
    }

    /// Applies the case in `ns` (its own namespace field dropped); returns kubectl's warnings.
    fn apply(&self, cluster: &Cluster, ns: &str, edit: impl FnOnce(&mut Value)) -> Vec<String> {
        for config in &self.configs {
            let out = cluster.apply(ns, config);
            assert!(out.ok, "{}: {}", self.name, out.stderr);
        }
        let mut object = self.object.clone();
        object["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("namespace");
        edit(&mut object);
        let out = cluster
            .kubectl(&["create", "-n", ns, "-f", "-"])
            .stdin(&object.to_string())
            .try_run();
        assert!(out.ok, "{}: refused: {}", self.name, out.stderr);
        out.warnings()
    }

    /// The pod (template) of an object of this case's kind.
    fn pod<'v>(&self, object: &'v Value) -> &'v Value {
        match object["kind"].as_str() {
            Some("Pod") => object,
            Some("CronJob") => &object["spec"]["jobTemplate"]["spec"]["template"],
            _ => &object["spec"]["template"],
        }
    }
}

/// The same warnings as the golden, whole and within what the API server keeps of each.
fn same_warnings(case: &Case, got: &[String]) {
    for w in got {
        assert!(w.chars().count() <= 256, "{}: {w:?} is over 256", case.name);
        assert!(!w.ends_with('…'), "{}: {w:?} was cut", case.name);
    }
    let (mut got, mut want) = (got.to_vec(), case.warnings.clone());
    got.sort();
    want.sort();
    assert_eq!(got, want, "{}: kubectl's warnings", case.name);
}

/// The stored object's `config-hash` is the golden's (or both have none).
fn same_hash(case: &Case, stored: &Value) {
    let hash = |object: &Value| case.pod(object)["metadata"]["annotations"][CONFIG_HASH].clone();
    assert_eq!(
        hash(stored),
        hash(&case.expected),
        "{}: {stored}",
        case.name
    );
}

/// Admits the case `name` in a namespace of its own as its golden says; returns the namespace.
fn admitted_as_the_golden_says(name: &'static str) -> (Case, String) {
    let cluster = Install::shared().cluster;
    let case = Case::read(name);
    let ns = cluster.namespace("world", true);
    let warnings = case.apply(cluster, &ns, |_| {});
    same_warnings(&case, &warnings);
    let kind = case.object["kind"].as_str().unwrap().to_lowercase();
    let object_name = case.object["metadata"]["name"].as_str().unwrap();
    same_hash(&case, &cluster.get(&ns, &kind, object_name));
    (case, ns)
}

#[test]
fn a_prometheus_beside_its_reloader_helper_is_neither_hashed_nor_given_a_second_sidecar() {
    let (case, ns) = admitted_as_the_golden_says("deployment-prometheus-configmap-reload");
    assert!(case.pod(&case.expected)["metadata"]["annotations"][CONFIG_HASH].is_null());
    // Its Pods, made by the Deployment's ReplicaSet, get no sidecar of ours either.
    let cluster = Install::shared().cluster;
    let pod = cluster.wait_for("a Pod of the Deployment", PATIENCE, || {
        cluster.list(&ns, "pod").into_iter().next()
    });
    let names: Vec<&str> = ["containers", "initContainers"]
        .iter()
        .flat_map(|list| pod["spec"][list].as_array().into_iter().flatten())
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert!(!names.contains(&SIDECAR), "{pod}");
    assert!(
        pod["metadata"]["labels"]["reload-injector.io/sidecar"].is_null(),
        "{pod}"
    );
}

#[test]
fn haproxy_whose_command_drops_master_worker_mode_rolls_instead_of_a_useless_signal() {
    let (case, _) = admitted_as_the_golden_says("deployment-haproxy-command-without-w");
    assert!(case.pod(&case.expected)["metadata"]["annotations"][CONFIG_HASH].is_string());
}

#[test]
fn haproxy_from_its_image_entrypoint_gets_sigusr2_from_the_sidecar() {
    let install = Install::shared();
    let cluster = install.cluster;
    let case = Case::read("pod-haproxy-image-entrypoint");
    let ns = cluster.namespace("world-haproxy", true);
    let warnings = case.apply(cluster, &ns, |_| {});
    same_warnings(&case, &warnings);
    let stored = cluster.get(&ns, "pod", "lb");
    let args = |pod: &Value| {
        let sidecar = pod["spec"]["initContainers"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["name"] == SIDECAR).cloned());
        sidecar.map(|s| s["args"].clone())
    };
    let want = args(&case.expected).expect("the golden injects the sidecar");
    assert_eq!(args(&stored), Some(want), "{stored}");
}

#[test]
fn an_operators_daemonset_with_a_subpath_mount_is_hashed_and_warned_never_denied() {
    let install = Install::shared();
    let cluster = install.cluster;
    let case = Case::read("daemonset-operator-owned-subpath");
    let ns = cluster.namespace("world-operator", true);
    // The operator's custom resource stands in as an object that exists, so that the garbage
    // collector keeps what it owns: the webhook reads only that a controller owns it.
    let owner = cluster_support::objects::config_map("node-agent-owner", &[("kind", "NodeAgent")]);
    cluster.apply(&ns, &owner);
    let owner = cluster.get(&ns, "configmap", "node-agent-owner");
    let warnings = case.apply(cluster, &ns, |object| {
        object["metadata"]["ownerReferences"] = serde_json::json!([{
            "apiVersion": "v1", "kind": "ConfigMap", "name": "node-agent-owner",
            "uid": owner["metadata"]["uid"], "controller": true,
        }]);
    });
    same_warnings(&case, &warnings);
    let stored = cluster.get(&ns, "daemonset", "node-agent");
    assert!(
        case.pod(&stored)["metadata"]["annotations"][CONFIG_HASH].is_string(),
        "{stored}"
    );
    same_hash(&case, &stored);
}

#[test]
fn a_job_is_told_that_the_next_job_reads_the_new_config() {
    for name in ["job-envfrom-next-job", "cronjob-env-next-job"] {
        let (case, _) = admitted_as_the_golden_says(name);
        assert!(
            case.warnings
                .iter()
                .all(|w| w.contains("the next Job reads the new one"))
        );
    }
}
