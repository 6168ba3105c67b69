//! End to end through a real kube-apiserver: in a namespace without the opt-in label, a Pod, a
//! Deployment, a StatefulSet and a CronJob opt in on their own (`reload-injector.io/inject:
//! enabled`) and are handled exactly as in a labelled namespace (hashes, sidecars, the
//! controller's rollouts and Pod refreshes), while an object beside them that does not opt in is
//! left exactly as it was written, and never written to.

use crate::cluster_support;

use cluster_support::Cluster;
use cluster_support::install::Install;
use cluster_support::objects::{config_map, container, deployment, env_from_config_map};
use serde_json::{Value, json};

const CONFIG_HASH: &str = "reload-injector.io/config-hash";
const WORKLOAD_OPT_IN: &str = "reload-injector.io/workload-opt-in";
const MANAGED: &str = "reload-injector.io/managed";
const SIDECAR: &str = "config-reloader";
const MOUNTED: &str = "reload-injector.io/mounted-config-hash";

/// An nginx Deployment reading `app-env` through env and mounting `web-conf`.
fn web(name: &str, replicas: u32) -> Value {
    deployment(
        name,
        replicas,
        container(
            json!([env_from_config_map("MODE", "app-env", "mode")]),
            json!([{"name": "conf", "mountPath": "/etc/nginx/conf.d"}]),
        ),
        json!([{"name": "conf", "configMap": {"name": "web-conf"}}]),
    )
}

/// The pod spec every kind below runs: env from `app-env`.
fn env_spec(restart: &str) -> Value {
    json!({
        "restartPolicy": restart,
        "containers": [{
            "name": "app", "image": "example/app:1",
            "env": [env_from_config_map("MODE", "app-env", "mode")],
        }],
    })
}

fn stateful_set(name: &str, template_labels: Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": 0, "serviceName": name,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": template_labels}, "spec": env_spec("Always")},
        },
    })
}

fn cron_job(name: &str, labels: Value) -> Value {
    json!({
        "apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "schedule": "0 3 * * *",
            "jobTemplate": {"spec": {"template": {"spec": env_spec("OnFailure")}}},
        },
    })
}

fn bare_pod(name: &str, annotations: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {
            "containers": [container(
                json!([]),
                json!([{"name": "conf", "mountPath": "/etc/nginx/conf.d"}]),
            )],
            "volumes": [{"name": "conf", "configMap": {"name": "web-conf"}}],
        },
    })
}

fn applied(cluster: &Cluster, ns: &str, object: &Value) {
    let out = cluster.apply(ns, object);
    assert!(out.ok, "{}: {}", object["metadata"]["name"], out.stderr);
}

fn has_sidecar(pod: &Value) -> bool {
    let spec = &pod["spec"];
    let containers = spec["initContainers"].as_array().into_iter().flatten();
    containers
        .chain(spec["containers"].as_array().into_iter().flatten())
        .any(|c| c["name"] == SIDECAR)
}

/// The Pods of the Deployment `name` (labelled `app: NAME`), once there are `count`.
fn pods_of(cluster: &Cluster, ns: &str, name: &str, count: usize) -> Vec<Value> {
    cluster.wait_for(
        &format!("{count} pod(s) of {ns}/{name}"),
        cluster_support::PATIENCE,
        || {
            let pods = cluster.list_selected(ns, "pods", &format!("app={name}"));
            (pods.len() >= count).then_some(pods)
        },
    )
}

#[test]
fn each_kind_opts_in_alone_in_a_namespace_without_the_label() {
    let install = Install::shared();
    let cluster = install.cluster;
    let ns = cluster.namespace("plain", false);
    applied(cluster, &ns, &config_map("app-env", &[("mode", "fast")]));
    applied(
        cluster,
        &ns,
        &config_map("web-conf", &[("default.conf", "server {}")]),
    );

    // A Deployment opted in on its own metadata; its Pods carry the opt-in copied onto the
    // template, reach the Pod webhook and get the sidecar.
    let mut opted = web("opted", 1);
    opted["metadata"]["annotations"] = json!({"reload-injector.io/inject": "enabled"});
    applied(cluster, &ns, &opted);
    let stored = cluster.get(&ns, "deployment", "opted");
    let template = &stored["spec"]["template"]["metadata"]["annotations"];
    assert!(template[CONFIG_HASH].is_string(), "{stored}");
    assert_eq!(
        template[WORKLOAD_OPT_IN], r#"{"reload-injector.io/inject":"enabled"}"#,
        "{stored}"
    );
    assert_eq!(stored["metadata"]["labels"][MANAGED], "true", "{stored}");
    let pods = pods_of(cluster, &ns, "opted", 1);
    assert!(pods.iter().all(has_sidecar), "{pods:?}");

    // The same Deployment without the annotation, beside it: left exactly as written.
    applied(cluster, &ns, &web("plain", 1));
    let stored = cluster.get(&ns, "deployment", "plain");
    assert!(
        stored["spec"]["template"]["metadata"]["annotations"].is_null()
            && stored["metadata"]["labels"].is_null(),
        "{stored}"
    );
    let pods = pods_of(cluster, &ns, "plain", 1);
    assert!(!pods.iter().any(has_sidecar), "{pods:?}");

    // A StatefulSet opted in by the label on its pod template.
    let labels = json!({"app": "db", "reload-injector.io/inject": "enabled"});
    applied(cluster, &ns, &stateful_set("db", labels));
    let stored = cluster.get(&ns, "statefulset", "db");
    assert!(
        stored["spec"]["template"]["metadata"]["annotations"][CONFIG_HASH].is_string(),
        "{stored}"
    );

    // A CronJob opted in by the label on its own metadata: the hash goes under jobTemplate.
    applied(
        cluster,
        &ns,
        &cron_job("report", json!({"reload-injector.io/inject": "enabled"})),
    );
    let stored = cluster.get(&ns, "cronjob", "report");
    let template = &stored["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["annotations"];
    assert!(template[CONFIG_HASH].is_string(), "{stored}");
    assert!(template[WORKLOAD_OPT_IN].is_string(), "{stored}");
    applied(cluster, &ns, &cron_job("report-plain", json!({})));
    let stored = cluster.get(&ns, "cronjob", "report-plain");
    assert!(
        stored["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["annotations"].is_null(),
        "{stored}"
    );

    // A bare Pod opted in by its annotation gets the sidecar; one without does not.
    applied(
        cluster,
        &ns,
        &bare_pod("bare", json!({"reload-injector.io/inject": "enabled"})),
    );
    applied(cluster, &ns, &bare_pod("bare-plain", json!({})));
    assert!(has_sidecar(&cluster.get(&ns, "pod", "bare")));
    assert!(!has_sidecar(&cluster.get(&ns, "pod", "bare-plain")));

    // The controller's part: a change of what it reads at start rolls the opted-in Deployment;
    // a change of its mounted nginx config refreshes its Pods (and the bare Pod's), never rolls.
    // Nothing is written to the objects beside them that did not opt in.
    let audit = cluster.audit_events().len();
    let hash_of = |name: &str| {
        cluster.get(&ns, "deployment", name)["spec"]["template"]["metadata"]["annotations"]
            [CONFIG_HASH]
            .clone()
    };
    let before = hash_of("opted");
    applied(cluster, &ns, &config_map("app-env", &[("mode", "slow")]));
    cluster.wait_for(
        "the opted-in Deployment to roll",
        cluster_support::PATIENCE,
        || (hash_of("opted") != before).then_some(()),
    );
    let mounted =
        |pod: &str| cluster.get(&ns, "pod", pod)["metadata"]["annotations"][MOUNTED].clone();
    let bare = mounted("bare");
    let rolled = hash_of("opted");
    applied(
        cluster,
        &ns,
        &config_map("web-conf", &[("default.conf", "server { listen 81; }")]),
    );
    cluster.wait_for("the bare Pod's refresh", cluster_support::PATIENCE, || {
        (mounted("bare") != bare).then_some(())
    });
    install.serve.wait_caught_up(cluster);
    assert_eq!(hash_of("opted"), rolled, "a mounted change never rolls");
    let writes = cluster.serve_writes_since(audit, &ns);
    assert!(
        writes.iter().all(|w| !w.contains("plain")),
        "nothing written to what did not opt in: {writes:#?}"
    );
    assert!(
        writes.iter().any(|w| w.contains("deployments/opted")),
        "{writes:#?}"
    );

    // Taking the opt-in off takes off what the product wrote (the template then carries only
    // what the user wrote, and the next Pods no sidecar).
    cluster
        .kubectl(&[
            "annotate",
            "deployment",
            "opted",
            "-n",
            &ns,
            "reload-injector.io/inject-",
        ])
        .run();
    let stored = cluster.get(&ns, "deployment", "opted");
    let template = &stored["spec"]["template"]["metadata"]["annotations"];
    assert!(
        template[CONFIG_HASH].is_null() && template[WORKLOAD_OPT_IN].is_null(),
        "{stored}"
    );
    assert!(stored["metadata"]["labels"][MANAGED].is_null(), "{stored}");
}
