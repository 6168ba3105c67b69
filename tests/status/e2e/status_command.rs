//! `reload-injector status` against a real kube-apiserver, run as a user runs it: the binary
//! installed as the kubectl plugin `kubectl-reload_injector`, through the real `kubectl`, with an
//! admin kubeconfig. Its own cluster, because the last step stops the only `serve` (no leader).
//! Set `STATUS_TRANSCRIPTS=DIR` to keep each report's text.

use crate::cluster_support;

use std::path::PathBuf;

use cluster_support::install::Install;
use cluster_support::objects::{config_map, container, deployment, env_from_config_map};
use cluster_support::{Cluster, PATIENCE};
use serde_json::{Value, json};

/// `kubectl reload-injector status ARGS…` with the plugin on `PATH`: (exit code, stdout, stderr).
fn status(cluster: &Cluster, args: &[&str]) -> (i32, String, String) {
    let plugins = cluster.dir.join("plugins");
    let plugin = plugins.join("kubectl-reload_injector");
    if !plugin.exists() {
        std::fs::create_dir_all(&plugins).unwrap();
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_reload-injector"), &plugin).unwrap();
    }
    let path = format!(
        "{}:{}",
        plugins.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = std::process::Command::new(&cluster.assets.kubectl)
        .env("PATH", path)
        .env("KUBECONFIG", &cluster.kubeconfig)
        .arg("reload-injector")
        .arg("status")
        .args(args)
        .output()
        .expect("failed to run kubectl reload-injector");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (
        out.status.code().unwrap_or(-1),
        text(&out.stdout),
        text(&out.stderr),
    )
}

fn keep(name: &str, text: &str) {
    if let Some(dir) = std::env::var_os("STATUS_TRANSCRIPTS") {
        let dir = PathBuf::from(dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.txt")), text).unwrap();
    }
}

fn codes(json: &str) -> Vec<String> {
    let report: Value = serde_json::from_str(json).expect("status -o json prints JSON");
    report["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f["code"].as_str().map(str::to_owned))
        .collect()
}

fn web(allow_subpath: bool) -> Value {
    let mut mounts = json!([{"name": "site", "mountPath": "/etc/nginx/conf.d"}]);
    if allow_subpath {
        mounts = json!([{"name": "site", "mountPath": "/etc/nginx/nginx.conf", "subPath": "nginx.conf"}]);
    }
    let mut web = deployment(
        "web",
        1,
        container(
            json!([env_from_config_map("UPSTREAM", "web-env", "UPSTREAM")]),
            mounts,
        ),
        json!([{"name": "site", "configMap": {"name": "site"}}]),
    );
    if allow_subpath {
        web["spec"]["template"]["metadata"]["annotations"] =
            json!({"reload-injector.io/allow-subpath": "true"});
    }
    web
}

fn setup(cluster: &Cluster, tag: &str, opted_in: bool, allow_subpath: bool) -> String {
    let ns = cluster.namespace(tag, opted_in);
    cluster.apply(&ns, &config_map("web-env", &[("UPSTREAM", "a:80")]));
    cluster.apply(
        &ns,
        &config_map(
            "site",
            &[("nginx.conf", "events {}"), ("site.conf", "server {}")],
        ),
    );
    let applied = cluster.apply(&ns, &web(allow_subpath));
    assert!(applied.ok, "{}", applied.stderr);
    ns
}

/// A namespace with a Prometheus beside configmap-reload and a Deployment whose init container
/// templates its config, once each has a Pod.
fn strategies(cluster: &Cluster) -> String {
    let ns = cluster.namespace("strategies", true);
    cluster.apply(
        &ns,
        &config_map("prom-server", &[("prometheus.yml", "global: {}")]),
    );
    cluster.apply(&ns, &config_map("prom-env", &[("retention", "15d")]));
    cluster.apply(
        &ns,
        &config_map("templates", &[("app.conf.tmpl", "listen ${PORT}")]),
    );
    let config = json!({"name": "config", "configMap": {"name": "prom-server"}});
    let mut prometheus = deployment(
        "prometheus",
        1,
        json!({"name": "prometheus", "image": "quay.io/prometheus/prometheus:v3.1.0",
            "args": ["--config.file=/etc/config/prometheus.yml"],
            "env": [env_from_config_map("RETENTION", "prom-env", "retention")],
            "volumeMounts": [{"name": "config", "mountPath": "/etc/config"}]}),
        json!([config]),
    );
    prometheus["spec"]["template"]["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "configmap-reload", "image": "ghcr.io/jimmidyson/configmap-reload:v0.14.0",
            "args": ["--volume-dir=/etc/config", "--webhook-url=http://127.0.0.1:9090/-/reload"],
            "volumeMounts": [{"name": "config", "mountPath": "/etc/config", "readOnly": true}]}));
    let mut api = deployment(
        "api",
        1,
        json!({"name": "api", "image": "example/api:2.3",
            "volumeMounts": [{"name": "rendered", "mountPath": "/etc/api"}]}),
        json!([{"name": "templates", "configMap": {"name": "templates"}},
               {"name": "rendered", "emptyDir": {}}]),
    );
    api["spec"]["template"]["spec"]["initContainers"] = json!([{"name": "render",
        "image": "example/envsubst:1.0",
        "volumeMounts": [{"name": "templates", "mountPath": "/templates"},
                         {"name": "rendered", "mountPath": "/config"}]}]);
    for workload in [&prometheus, &api] {
        let applied = cluster.apply(&ns, workload);
        assert!(applied.ok, "{}", applied.stderr);
    }
    cluster.wait_for("a Pod of each", PATIENCE, || {
        (cluster.list(&ns, "pods").len() == 2).then_some(())
    });
    ns
}

#[test]
fn status_reports_through_kubectl_on_a_real_api_server() {
    let install = Install::shared();
    let cluster = install.cluster;

    // Current: stamped, hash of the live data, a leader running.
    let ns = setup(cluster, "current", true, false);
    cluster.wait_for("the Pod of web with its sidecar", PATIENCE, || {
        (!cluster.list(&ns, "pods").is_empty()).then_some(())
    });
    let (code, text, err) = status(cluster, &["deploy/web", "-n", &ns]);
    keep("current", &text);
    eprintln!("$ kubectl reload-injector status deploy/web -n {ns}\n{text}{err}(exit {code})\n");
    assert_eq!(code, 0, "all current and healthy: {text}{err}");
    assert!(text.contains("config-hash: current"), "{text}{err}");
    assert!(text.contains("mounted-config-hash current"), "{text}{err}");
    assert!(
        text.contains("held by \"serve-0-"),
        "the Lease holder is named: {text}"
    );
    let (_, json, _) = status(cluster, &["deploy/web", "-n", &ns, "-o", "json"]);
    let findings = codes(&json);
    assert!(
        !findings
            .iter()
            .any(|c| c == "stale" || c == "no-controller" || c == "namespace-not-opted-in"),
        "{findings:?}\n{text}"
    );

    // Not opted in: the exact fix.
    let plain = setup(cluster, "plain", false, false);
    let (code, text, _) = status(cluster, &["deploy/web", "-n", &plain]);
    keep("not-opted-in", &text);
    eprintln!("$ kubectl reload-injector status deploy/web -n {plain}\n{text}(exit {code})\n");
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains(&format!(
            "kubectl label namespace {plain} reload-injector.io/inject=enabled"
        )),
        "{text}"
    );

    // An allowed subPath mount: a rollout, never a hot reload, and said so.
    let sub = setup(cluster, "subpath", true, true);
    let (code, text, _) = status(cluster, &["deploy/web", "-n", &sub]);
    keep("subpath", &text);
    eprintln!("$ kubectl reload-injector status deploy/web -n {sub}\n{text}(exit {code})\n");
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("via subPath") && text.contains("[subpath]"),
        "{text}"
    );

    // What the webhook decided per mount, said as it decided: a Prometheus beside configmap-reload
    // (already reloaded), an init container templating config (a rollout, in the hash serve
    // stamped, which status finds current).
    let strategies = strategies(cluster);
    for (workload, read, on_change) in [
        ("prometheus", "config", "alreadyReloaded"),
        ("api", "templates", "rollout"),
    ] {
        let (code, text, err) =
            status(cluster, &[&format!("deploy/{workload}"), "-n", &strategies]);
        keep(workload, &text);
        eprintln!(
            "$ kubectl reload-injector status deploy/{workload} -n {strategies}\n{text}{err}(exit {code})\n"
        );
        assert_eq!(code, 0, "{text}{err}");
        let (_, json, _) = status(
            cluster,
            &[
                &format!("deploy/{workload}"),
                "-n",
                &strategies,
                "-o",
                "json",
            ],
        );
        let report: Value = serde_json::from_str(&json).expect("JSON");
        assert_eq!(
            report["hash"]["state"], "current",
            "serve's stamp is status's hash: {text}"
        );
        let line = (report["reads"].as_array().unwrap().iter())
            .find(|r| r["volume"] == read)
            .unwrap_or_else(|| panic!("no read of volume {read}: {text}"));
        assert_eq!(line["onChange"], on_change, "{text}");
    }

    // Bad input: exit 2, one line.
    let (code, _, err) = status(cluster, &["deploy/missing", "-n", &ns]);
    assert_eq!(code, 2);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let (code, _, err) = status(cluster, &["frobnicate/x", "-n", &ns]);
    assert_eq!(code, 2);
    assert_eq!(err.trim().lines().count(), 1, "{err}");

    // No leader, and a stale hash: the only serve is gone and the config changed after.
    install.serve.kill();
    // status itself says when the Lease (6 s) has run out.
    cluster.wait_for("status to find no controller", PATIENCE, || {
        let (_, json, _) = status(cluster, &["deploy/web", "-n", &ns, "-o", "json"]);
        codes(&json)
            .iter()
            .any(|c| c == "no-controller")
            .then_some(())
    });
    cluster.apply(&ns, &config_map("web-env", &[("UPSTREAM", "b:80")]));
    let (code, text, _) = status(cluster, &["deploy/web", "-n", &ns]);
    keep("stale-no-leader", &text);
    eprintln!("$ kubectl reload-injector status deploy/web -n {ns}\n{text}(exit {code})\n");
    assert_eq!(code, 1, "{text}");
    let (_, json, _) = status(cluster, &["deploy/web", "-n", &ns, "-o", "json"]);
    let findings = codes(&json);
    assert!(
        findings.iter().any(|c| c == "stale") && findings.iter().any(|c| c == "no-controller"),
        "{findings:?}\n{text}"
    );

    // The summary of the namespace, problems first.
    let (code, text, _) = status(cluster, &["-n", &ns]);
    keep("summary", &text);
    eprintln!("$ kubectl reload-injector status -n {ns}\n{text}(exit {code})\n");
    assert_eq!(code, 1, "{text}");
}
