//! End to end through a real kube-apiserver: the double-restart guard. While Reloader may still
//! run beside it (`serve` without `--reloader-retired`), reload-injector never rolls, refreshes
//! or injects into a workload Reloader's annotations select, in a labelled namespace or not, so
//! a change is rolled once, by Reloader; once told Reloader is gone, one rollout restart hands
//! the workload over. Its own cluster: the test restarts `serve` with other flags.

use crate::cluster_support;

use cluster_support::install::Install;
use cluster_support::objects::{config_map, container, deployment, env_from_config_map};
use cluster_support::{Cluster, PATIENCE};
use serde_json::{Value, json};

const CONFIG_HASH: &str = "reload-injector.io/config-hash";
const MANAGED: &str = "reload-injector.io/managed";
const WORKLOAD_OPT_IN: &str = "reload-injector.io/workload-opt-in";
const LEFT: &str = "left to Reloader";

/// An nginx Deployment reading `env` through env and mounting `conf`.
fn web(name: &str) -> Value {
    deployment(
        name,
        1,
        container(
            json!([env_from_config_map("MODE", "env", "mode")]),
            json!([{"name": "conf", "mountPath": "/etc/nginx/conf.d"}]),
        ),
        json!([{"name": "conf", "configMap": {"name": "conf"}}]),
    )
}

fn template_annotation(cluster: &Cluster, ns: &str, name: &str, key: &str) -> Option<String> {
    let stored = cluster.get(ns, "deployment", name);
    stored["spec"]["template"]["metadata"]["annotations"][key]
        .as_str()
        .map(str::to_owned)
}

fn change(cluster: &Cluster, ns: &str, name: &str, key: &str, value: &str) {
    assert!(cluster.apply(ns, &config_map(name, &[(key, value)])).ok);
}

#[test]
fn while_reloader_may_run_nothing_of_its_is_touched() {
    let install = Install::own();
    let cluster = install.cluster;

    // A labelled namespace: a workload reload-injector stamped gains Reloader's annotation.
    let shop = cluster.namespace("shop", true);
    change(cluster, &shop, "env", "mode", "a");
    change(cluster, &shop, "conf", "default.conf", "server {}");
    assert!(cluster.apply(&shop, &web("web")).ok);
    assert!(template_annotation(cluster, &shop, "web", CONFIG_HASH).is_some());
    // Its Pod made before then carries the sidecar: it keeps hot-reloading (never a restart)
    // until the rollout the annotation's edit itself starts replaces it.
    let injected: Vec<String> = cluster
        .wait_for("the Pod of web", PATIENCE, || {
            let pods = cluster.list_selected(&shop, "pods", "app=web");
            (!pods.is_empty()).then_some(pods)
        })
        .iter()
        .filter_map(|p| p["metadata"]["name"].as_str().map(str::to_owned))
        .collect();
    let out = cluster
        .kubectl(&[
            "annotate",
            "deployment",
            "web",
            "-n",
            &shop,
            "reloader.stakater.com/auto=true",
        ])
        .run();
    assert!(out.stderr.contains(LEFT), "the warning: {}", out.stderr);
    let stored = cluster.get(&shop, "deployment", "web");
    assert!(
        template_annotation(cluster, &shop, "web", CONFIG_HASH).is_none()
            && stored["metadata"]["labels"][MANAGED].is_null(),
        "the hash and label are taken off, so the controller lets go: {stored}"
    );

    // A namespace without the label: a workload Reloader's annotation selects is left to it.
    let plain = cluster.namespace("plain", false);
    change(cluster, &plain, "env", "mode", "a");
    change(cluster, &plain, "conf", "default.conf", "server {}");
    let mut api = web("api");
    api["metadata"]["annotations"] = json!({"reloader.stakater.com/auto": "true"});
    let out = cluster
        .kubectl(&["apply", "-n", &plain, "-f", "-"])
        .stdin(&api.to_string())
        .run();
    assert!(out.stderr.contains(LEFT), "the warning: {}", out.stderr);
    assert!(template_annotation(cluster, &plain, "api", CONFIG_HASH).is_none());
    assert_eq!(
        template_annotation(cluster, &plain, "api", WORKLOAD_OPT_IN).as_deref(),
        Some(r#"{"reloader.stakater.com/auto":"true"}"#),
        "its opt-ins are carried, so its Pods are left alone too"
    );
    let pods = cluster.wait_for("the Pod of api", PATIENCE, || {
        let pods = cluster.list_selected(&plain, "pods", "app=api");
        (!pods.is_empty()).then_some(pods)
    });
    assert!(
        !pods[0].to_string().contains("config-reloader"),
        "no sidecar: {}",
        pods[0]
    );

    // Their config changes: reload-injector writes nothing to either namespace (Reloader alone
    // would roll them, once).
    let from = cluster.audit_events().len();
    for ns in [&shop, &plain] {
        change(cluster, ns, "env", "mode", "b");
        change(cluster, ns, "conf", "default.conf", "server { listen 81; }");
    }
    std::thread::sleep(std::time::Duration::from_secs(4));
    install.serve.wait_caught_up(cluster);
    let writes = cluster.serve_writes_since(from, &plain);
    assert!(writes.is_empty(), "{plain}: {writes:#?}");
    let writes = cluster.serve_writes_since(from, &shop);
    assert!(
        writes
            .iter()
            .all(|w| w.starts_with("patch pods/")
                && injected.iter().any(|pod| w.contains(pod.as_str()))),
        "{shop}: only the Pod injected before may be refreshed, nothing rolled: {writes:#?}"
    );
    assert!(template_annotation(cluster, &shop, "web", CONFIG_HASH).is_none());
    assert!(template_annotation(cluster, &plain, "api", CONFIG_HASH).is_none());

    // Reloader is gone: serve is told so, one rollout restart hands the workload over, and its
    // next change rolls it (once: by reload-injector).
    install.restart_serve_with(&["--reloader-retired"]);
    cluster
        .kubectl(&["rollout", "restart", "deployment/api", "-n", &plain])
        .run();
    let stamped = template_annotation(cluster, &plain, "api", CONFIG_HASH);
    assert!(stamped.is_some(), "handed over: stamped");
    change(cluster, &plain, "env", "mode", "c");
    cluster.wait_for("the handed-over workload to roll", PATIENCE, || {
        (template_annotation(cluster, &plain, "api", CONFIG_HASH) != stamped).then_some(())
    });
}
