//! End to end through a real kube-apiserver: each Pod is reviewed once, and the sidecar holds
//! no API token. The API server's own metric counts the webhook's calls, so this file has its
//! own cluster: no other test's Pods are counted.

mod cluster_support;

use cluster_support::Cluster;
use cluster_support::install::Install;
use cluster_support::objects::config_map;
use serde_json::{Value, json};

const PODS: usize = 40;
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
    let install = Install::shared();
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

    for stored in cluster.list(&opted, "pods") {
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
