//! Restart in place through a real kube-apiserver (no node): on the current version the API
//! server validates and stores what the webhook writes (a native sidecar with a
//! `RestartAllContainers` rule, its volumes, the Pods' env hash) and Pod Security still admits
//! every Pod we touch; on the floor version (1.35, where `RestartAllContainers` is off) the same
//! workload rolls as before and the warning says why. A Job is never restarted in place.

use crate::cluster_support;

use cluster_support::install::Install;
use cluster_support::objects::{config_map, deployment, env_from_config_map};
use cluster_support::{Cluster, PATIENCE};
use serde_json::{Value, json};

const SIDECAR: &str = "config-reloader";
const CONFIG_HASH: &str = "reload-injector.io/config-hash";
const ENV_RESTART: &str = "reload-injector.io/env-restart";
const ENV_HASH: &str = "reload-injector.io/env-hash";
const ASKED: (&str, &str) = ("reload-injector.io/env-change", "restart-in-place");

/// Whether the cluster under test restarts Pods in place (RestartAllContainers: 1.36 on).
fn in_place_here(cluster: &Cluster) -> bool {
    cluster.assets.minor >= 36
}

/// A container the `restricted` level admits, reading key `a` of ConfigMap `env` through env.
fn restricted_app() -> Value {
    json!({
        "name": "app", "image": "example/app:1",
        "env": [env_from_config_map("A", "env", "a")],
        "securityContext": {
            "runAsNonRoot": true, "runAsUser": 101, "allowPrivilegeEscalation": false,
            "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"},
        },
    })
}

/// `kubectl create` of one object: (admitted, kubectl's `Warning:` lines, stderr).
fn create(cluster: &Cluster, ns: &str, object: &Value) -> (bool, Vec<String>, String) {
    let out = cluster
        .kubectl(&["create", "-n", ns, "-f", "-"])
        .stdin(&object.to_string())
        .try_run();
    (out.ok, out.warnings(), out.stderr)
}

/// The `config-reloader` init container of a stored Pod, if any.
fn sidecar(pod: &Value) -> Option<&Value> {
    pod["spec"]["initContainers"]
        .as_array()?
        .iter()
        .find(|c| c["name"] == SIDECAR)
}

/// The Pods of `app` in `ns`, once there are `count`.
fn pods(cluster: &Cluster, ns: &str, app: &str, count: usize) -> Vec<Value> {
    cluster.wait_for(&format!("{count} pods of {app}"), PATIENCE, || {
        let pods = cluster.list_selected(ns, "pods", &format!("app={app}"));
        (pods.len() == count).then_some(pods)
    })
}

#[test]
fn a_workload_that_asks_restarts_in_place_where_the_api_server_can_and_rolls_elsewhere() {
    let install = Install::shared();
    let cluster = install.cluster;
    let ns = cluster.namespace("in-place", true);
    assert!(cluster.apply(&ns, &config_map("env", &[("a", "1")])).ok);
    let mut web = deployment("web", 2, restricted_app(), json!([]));
    web["spec"]["template"]["metadata"]["annotations"] = json!({ASKED.0: ASKED.1});
    let (ok, warnings, stderr) = create(cluster, &ns, &web);
    assert!(ok, "{stderr}");
    let stored = cluster.get(&ns, "deployment", "web");
    let annotations = &stored["spec"]["template"]["metadata"]["annotations"];
    let pods = pods(cluster, &ns, "web", 2);
    if !in_place_here(cluster) {
        let why = format!("API server v1.{}, needs >= 1.36", cluster.assets.minor);
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("no restart in place") && w.contains(&why)),
            "the warning says why it rolls: {warnings:?}"
        );
        assert!(
            annotations[CONFIG_HASH].is_string(),
            "it rolls: {annotations}"
        );
        assert!(annotations[ENV_RESTART].is_null(), "{annotations}");
        for pod in &pods {
            assert!(sidecar(pod).is_none(), "nothing to inject: {pod}");
            assert!(pod["metadata"]["annotations"][ENV_HASH].is_null(), "{pod}");
        }
        // Why it must roll here: this API server refuses the rule the sidecar would carry.
        let plain = cluster.namespace("in-place-plain", false);
        let rule = json!([{"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [42]}}]);
        let by_hand = json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "by-hand"},
            "spec": {
                "initContainers": [{"name": "watcher", "image": "example/watch:1",
                    "restartPolicy": "Always", "restartPolicyRules": rule}],
                "containers": [{"name": "app", "image": "example/app:1"}],
            },
        });
        let (ok, _, stderr) = create(cluster, &plain, &by_hand);
        assert!(!ok && stderr.contains("restartPolicyRules"), "{stderr}");
        return;
    }
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("its pods restart in place on change")),
        "{warnings:?}"
    );
    assert_eq!(annotations[ENV_RESTART], "in-place", "{annotations}");
    assert!(
        annotations[CONFIG_HASH].is_null(),
        "nothing else rolls it: {annotations}"
    );
    assert_eq!(
        stored["metadata"]["labels"]["reload-injector.io/managed"],
        "true"
    );
    let hashes: Vec<&Value> = pods
        .iter()
        .map(|p| &p["metadata"]["annotations"][ENV_HASH])
        .collect();
    assert!(
        hashes[0].as_str().is_some_and(|h| h.starts_with("sha256:")),
        "{hashes:?}"
    );
    assert_eq!(hashes[0], hashes[1], "both stamped over the same data");
    for pod in &pods {
        let sidecar = sidecar(pod).unwrap_or_else(|| panic!("no sidecar: {pod}"));
        assert_eq!(sidecar["restartPolicy"], "Always");
        assert_eq!(
            sidecar["restartPolicyRules"],
            json!([{"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [42]}}]),
            "the API server kept the rule: {sidecar}"
        );
        let volumes = pod["spec"]["volumes"].to_string();
        assert!(
            volumes.contains("downwardAPI") && volumes.contains(ENV_HASH),
            "{volumes}"
        );
        assert_eq!(
            pod["metadata"]["labels"]["reload-injector.io/sidecar"],
            "true"
        );
    }
}

#[test]
fn every_level_of_pod_security_admits_a_pod_that_restarts_in_place() {
    let install = Install::shared();
    let cluster = install.cluster;
    for level in ["restricted", "baseline"] {
        let ns = cluster.pod_security_namespace(&format!("in-place-{level}"), level, true);
        assert!(cluster.apply(&ns, &config_map("env", &[("a", "1")])).ok);
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "app", "annotations": {ASKED.0: ASKED.1}},
            "spec": {
                "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
                "containers": [restricted_app()],
            },
        });
        let (ok, warnings, stderr) = create(cluster, &ns, &pod);
        assert!(ok, "{level} refuses a pod that restarts in place: {stderr}");
        let stored = cluster.get(&ns, "pod", "app");
        let injected = sidecar(&stored).is_some();
        assert_eq!(
            injected,
            in_place_here(cluster),
            "{level}: {warnings:?} {stored}"
        );
        if let Some(sidecar) = sidecar(&stored) {
            let sc = &sidecar["securityContext"];
            assert_eq!(sc["runAsNonRoot"], true, "{level}: {sc}");
            assert!(sc["capabilities"]["add"].is_null(), "{level}: {sc}");
        }
    }
}

#[test]
fn a_jobs_pods_are_never_restarted_in_place() {
    let install = Install::shared();
    let cluster = install.cluster;
    let ns = cluster.namespace("in-place-job", true);
    assert!(cluster.apply(&ns, &config_map("env", &[("a", "1")])).ok);
    let job = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "once"},
        "spec": {"template": {
            "metadata": {"labels": {"app": "once"}, "annotations": {ASKED.0: ASKED.1}},
            "spec": {"restartPolicy": "Never", "containers": [restricted_app()]},
        }},
    });
    let (ok, warnings, stderr) = create(cluster, &ns, &job);
    assert!(ok, "{stderr}");
    assert!(
        warnings.iter().any(|w| w.contains("no restart in place")),
        "{warnings:?}"
    );
    let stored = cluster.get(&ns, "job", "once");
    let annotations = &stored["spec"]["template"]["metadata"]["annotations"];
    assert!(annotations[ENV_RESTART].is_null(), "{annotations}");
    assert!(annotations[CONFIG_HASH].is_string(), "{annotations}");
    for pod in pods(cluster, &ns, "once", 1) {
        assert!(sidecar(&pod).is_none(), "{pod}");
        assert!(pod["metadata"]["annotations"][ENV_HASH].is_null(), "{pod}");
    }
}
