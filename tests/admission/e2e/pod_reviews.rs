//! End to end through a real kube-apiserver: each Pod is reviewed once, the sidecar holds no
//! API token, and the Pod webhook's `matchConditions` spare the calls for Pods that read no
//! config. The API server's own metric counts the webhook's calls, so this file has its own
//! cluster and one test: no other test's Pods are counted.

use crate::cluster_support;

use cluster_support::Cluster;
use cluster_support::install::{Install, WEBHOOK as CONFIGURATION};
use cluster_support::objects::config_map;
use serde_json::{Value, json};

const PODS: usize = 40;
/// Config-free Pods created with and without the Pod webhook's `matchConditions`.
const PLAIN: usize = 10;
const TOKEN_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
const WEBHOOK: &str = "pods.reload-injector.io";

fn pod(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "reviews"}},
        "spec": {
            "containers": [{
                "name": "app", "image": "nginx:1.27", "command": ["nginx"],
                "securityContext": {"runAsUser": 101},
                "volumeMounts": [{"name": "site", "mountPath": "/etc/nginx/conf.d"}],
            }],
            "volumes": [{"name": "site", "configMap": {"name": "site"}}],
        },
    })
}

/// The sum of the samples of a histogram's `_count` or `_sum` series whose labels hold every
/// one of `labels`, in the API server's own metrics.
fn metric_sum(cluster: &Cluster, series: &str, labels: &[&str]) -> f64 {
    cluster
        .apiserver_metrics()
        .lines()
        .filter(|l| l.starts_with(&format!("{series}{{")) && labels.iter().all(|x| l.contains(x)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// (calls, seconds) the API server spent in the Pod webhook so far.
fn webhook_calls(cluster: &Cluster) -> (f64, f64) {
    let webhook = format!("name=\"{WEBHOOK}\"");
    let series = "apiserver_admission_webhook_admission_duration_seconds";
    (
        metric_sum(cluster, &format!("{series}_count"), &[&webhook]),
        metric_sum(cluster, &format!("{series}_sum"), &[&webhook]),
    )
}

/// (requests, seconds) of Pod creates as the API server timed them so far.
fn pod_creates(cluster: &Cluster) -> (f64, f64) {
    let labels = ["verb=\"POST\"", "resource=\"pods\"", "subresource=\"\""];
    let series = "apiserver_request_duration_seconds";
    (
        metric_sum(cluster, &format!("{series}_count"), &labels),
        metric_sum(cluster, &format!("{series}_sum"), &labels),
    )
}

/// Mean milliseconds per event between two (count, seconds) readings.
fn mean_ms(before: (f64, f64), after: (f64, f64)) -> f64 {
    (after.1 - before.1) * 1000.0 / (after.0 - before.0).max(1.0)
}

/// Creates `PODS` Pods in `ns`, one `kubectl create` each.
fn create_pods(cluster: &Cluster, ns: &str) {
    cluster.apply(ns, &config_map("site", &[("site.conf", "server {}")]));
    for n in 0..PODS {
        let out = cluster
            .kubectl(&["create", "-n", ns, "-f", "-"])
            .stdin(&pod(&format!("pod-{n}")).to_string())
            .try_run();
        assert!(out.ok, "pod-{n}: {}", out.stderr);
    }
}

/// A Pod that reads no ConfigMap or Secret (only its API token, as every Pod does).
fn plain_pod(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "plain"}},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.27", "env": [{"name": "A", "value": "1"}]}]},
    })
}

/// Creates `count` config-free Pods named `prefix-N` in `ns`; returns the Pod webhook's calls.
fn calls_for_plain_pods(cluster: &Cluster, ns: &str, prefix: &str, count: usize) -> f64 {
    let before = webhook_calls(cluster).0;
    for n in 0..count {
        let out = cluster
            .kubectl(&["create", "-n", ns, "-f", "-"])
            .stdin(&plain_pod(&format!("{prefix}-{n}")).to_string())
            .try_run();
        assert!(out.ok, "{prefix}-{n}: {}", out.stderr);
    }
    webhook_calls(cluster).0 - before
}

/// The registered Pod webhook's `matchConditions`, replaced by `conditions` (JSON patch).
fn set_match_conditions(cluster: &Cluster, conditions: Option<&Value>) -> Option<Value> {
    let stored = cluster
        .kubectl(&[
            "get",
            "mutatingwebhookconfiguration",
            CONFIGURATION,
            "-o",
            "json",
        ])
        .run()
        .json();
    let index = stored["webhooks"]
        .as_array()
        .and_then(|w| w.iter().position(|w| w["name"] == WEBHOOK))
        .expect("the Pod webhook is registered");
    let old = stored["webhooks"][index].get("matchConditions").cloned();
    let path = format!("/webhooks/{index}/matchConditions");
    let patch = match conditions {
        Some(c) => json!([{"op": "add", "path": path, "value": c}]),
        None => json!([{"op": "remove", "path": path}]),
    };
    cluster
        .kubectl(&[
            "patch",
            "mutatingwebhookconfiguration",
            CONFIGURATION,
            "--type=json",
            "-p",
            &patch.to_string(),
        ])
        .run();
    old
}

fn mounts_at_token_path(container: &Value) -> Vec<String> {
    container["volumeMounts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["mountPath"] == TOKEN_PATH)
        .filter_map(|m| m["name"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn each_pod_is_reviewed_once_and_its_sidecar_holds_no_token() {
    let install = Install::own();
    let cluster = install.cluster;
    let plain = cluster.namespace("plain", false);
    let opted = cluster.namespace("opted", true);

    let start = (pod_creates(cluster), webhook_calls(cluster));
    create_pods(cluster, &plain);
    let middle = (pod_creates(cluster), webhook_calls(cluster));
    create_pods(cluster, &opted);
    let end = (pod_creates(cluster), webhook_calls(cluster));
    let calls = end.1.0 - middle.1.0;
    eprintln!(
        "{PODS} Pods opted in: {calls} calls to {WEBHOOK}, {:.2} ms each; a Pod create took \
         {:.2} ms in the API server opted in, {:.2} ms in a plain namespace (same run)",
        mean_ms(middle.1, end.1),
        mean_ms(middle.0, end.0),
        mean_ms(start.0, middle.0),
    );
    assert_eq!(
        middle.1.0 - start.1.0,
        0.0,
        "no call for a namespace that did not opt in"
    );
    assert_eq!(calls, PODS as f64, "one review per Pod, not two");
    check_the_stored_pods(cluster, &opted);

    // matchConditions: a Pod that reads no config is created without a call to us; the same
    // Pods with the conditions removed each cost one. Measured, not assumed: the conditions
    // ship only because this saves calls.
    let with = calls_for_plain_pods(cluster, &opted, "plain-with", PLAIN);
    let shipped =
        set_match_conditions(cluster, None).expect("the shipped Pod webhook has matchConditions");
    let without = calls_for_plain_pods(cluster, &opted, "plain-without", PLAIN);
    set_match_conditions(cluster, Some(&shipped));
    eprintln!(
        "{PLAIN} config-free Pods in an opted-in namespace: {with} calls with matchConditions, \
         {without} without"
    );
    assert_eq!(
        without, PLAIN as f64,
        "without conditions, each Pod is a call"
    );
    assert_eq!(
        with, 0.0,
        "with them, a Pod that reads no config is never sent to us"
    );
    for stored in cluster.list(&opted, "pods") {
        if stored["metadata"]["labels"]["app"] == "plain" {
            let name = stored["metadata"]["name"].as_str().unwrap_or_default();
            assert!(
                stored["spec"]["initContainers"].is_null()
                    && stored["spec"]["containers"].as_array().map(Vec::len) == Some(1),
                "{name} reads no config and got nothing: {stored}"
            );
        }
    }
}

/// Every sidecar of `ns`'s Pods holds no token, and every app keeps its own.
fn check_the_stored_pods(cluster: &Cluster, opted: &str) {
    for stored in cluster.list(opted, "pods") {
        let spec = &stored["spec"];
        let containers: Vec<&Value> = spec["containers"]
            .as_array()
            .into_iter()
            .chain(spec["initContainers"].as_array())
            .flatten()
            .collect();
        let volumes: Vec<&Value> = spec["volumes"].as_array().into_iter().flatten().collect();
        let volume = |name: &str| volumes.iter().find(|v| v["name"] == name).copied();
        // The token volume the plugin gave the apps (a Secret's before 1.21): never the sidecar's,
        // at any path (it is not config to watch either).
        let tokens: Vec<String> = containers
            .iter()
            .filter(|c| c["name"] != "config-reloader")
            .flat_map(|c| mounts_at_token_path(c))
            .collect();
        for container in containers.iter().filter(|c| c["name"] == "config-reloader") {
            let mounted: Vec<&str> = container["volumeMounts"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|m| m["name"].as_str())
                .collect();
            assert!(
                tokens.iter().all(|t| !mounted.contains(&t.as_str())),
                "the sidecar mounts the app's token volume {tokens:?}: {container}"
            );
        }
        for container in containers {
            let mounts = mounts_at_token_path(container);
            if container["name"] == "config-reloader" {
                assert_eq!(
                    mounts.len(),
                    1,
                    "the sidecar's own mount there: {container}"
                );
                let own = volume(&mounts[0]).expect("its volume");
                assert!(
                    own.get("emptyDir").is_some(),
                    "the sidecar's mount at the token path is an empty directory, not a token: {own}"
                );
            } else {
                assert_eq!(mounts.len(), 1, "the app keeps its token: {container}");
                let token = volume(&mounts[0]).expect("its volume");
                assert!(
                    token.get("secret").is_some() || token.get("projected").is_some(),
                    "the app's token volume: {token}"
                );
            }
        }
    }
}
