//! End to end through a real kube-apiserver: what Deployments in namespaces without the label
//! cost when 10 of them opt in, against today's zero. The suite runs 100 (10 per namespace);
//! `E2E_OPT_IN_CALLS_PER_NAMESPACE=100` gives docs/reloader.md's 1,000. The API server's own metric counts
//! the calls of each webhook (`apiserver_admission_webhook_admission_duration_seconds_count`, as
//! tests/admission/e2e/pod_reviews.rs does) and its audit log the requests `serve` makes. This file has its
//! own cluster and one test: no other test's objects are counted.
//!
//! Twice the same load, 10 namespaces of [`per_namespace`] Deployments (one Pod each; the first of each
//! namespace opted in by `reload-injector.io/inject: enabled`), each reading one of 10 ConfigMaps
//! of its namespace through `envFrom`:
//! - first with the webhook configuration as it was before (the two webhooks of labelled
//!   namespaces only): today's zero;
//! - then with the shipped one, and every ConfigMap of those namespaces changed once: the 10 roll,
//!   and nothing else of those namespaces reaches the webhook or is written.

use crate::cluster_support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use cluster_support::Cluster;
use cluster_support::install::{Install, OWN, WEBHOOK, local_webhook};
use cluster_support::objects::config_map;
use serde_json::{Value, json};

const NAMESPACES: usize = 10;
/// Deployments per namespace: `E2E_OPT_IN_CALLS_PER_NAMESPACE`, 10 unless set.
fn per_namespace() -> usize {
    match std::env::var("E2E_OPT_IN_CALLS_PER_NAMESPACE") {
        Ok(text) => text
            .parse()
            .unwrap_or_else(|_| panic!("E2E_OPT_IN_CALLS_PER_NAMESPACE={text:?} is not a count")),
        Err(_) => 10,
    }
}
const CONFIG_MAPS: usize = 10;
const CONFIG_HASH: &str = "reload-injector.io/config-hash";
/// Long enough for 2,000 Deployments, their ReplicaSets and Pods on a loaded 2-core machine.
const LOAD_LIMIT: Duration = Duration::from_secs(600);

fn deployment(name: &str, config_map: &str, opted_in: bool) -> Value {
    let annotations = if opted_in {
        json!({"reload-injector.io/inject": "enabled"})
    } else {
        json!({})
    };
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{
                    "name": "app", "image": "example/app:1",
                    "envFrom": [{"configMapRef": {"name": config_map}}],
                }]},
            },
        },
    })
}

/// One namespace's load: its ConfigMaps, then its Deployments (the first opted in).
fn load(cluster: &Cluster, ns: &str) {
    let mut items: Vec<Value> = (0..CONFIG_MAPS)
        .map(|i| config_map(&format!("env-{i}"), &[("mode", "a")]))
        .collect();
    items.extend((0..per_namespace()).map(|i| {
        let name = format!("app-{i:03}");
        deployment(&name, &format!("env-{}", i % CONFIG_MAPS), i == 0)
    }));
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
    let out = cluster
        .kubectl(&["create", "-n", ns, "-f", "-"])
        .stdin(&list.to_string())
        .try_run();
    assert!(out.ok, "{ns}: {}", out.stderr);
}

/// Calls to each webhook of the configuration so far, by name.
fn calls(cluster: &Cluster) -> BTreeMap<String, f64> {
    let series = "apiserver_admission_webhook_admission_duration_seconds_count{";
    let mut out = BTreeMap::new();
    for line in cluster.apiserver_metrics().lines() {
        let Some(rest) = line.strip_prefix(series) else {
            continue;
        };
        let name = rest
            .split("name=\"")
            .nth(1)
            .and_then(|r| r.split('"').next());
        let value = line.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok());
        if let (Some(name), Some(value)) = (name, value) {
            *out.entry(name.to_owned()).or_default() += value;
        }
    }
    out
}

/// The difference of two readings of [`calls`], every webhook named.
fn made(before: &BTreeMap<String, f64>, after: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    after
        .iter()
        .map(|(name, n)| (name.clone(), n - before.get(name).copied().unwrap_or(0.0)))
        .collect()
}

/// Waits until `namespaces` hold one Pod per Deployment (asking every 2 s: a listing of 1,000
/// Pods is not free on a loaded machine).
fn wait_for_pods(cluster: &Cluster, namespaces: &[String]) {
    let want = namespaces.len() * per_namespace();
    let started = Instant::now();
    cluster.wait_for(&format!("{want} Pods"), LOAD_LIMIT, || {
        std::thread::sleep(Duration::from_secs(2));
        let listed = cluster
            .kubectl(&["get", "pods", "-A", "--no-headers"])
            .run();
        let pods = listed
            .stdout
            .lines()
            .filter(|l| namespaces.iter().any(|ns| l.starts_with(&format!("{ns} "))))
            .count();
        (pods >= want).then_some(())
    });
    eprintln!("{want} Pods in {:.0} s", started.elapsed().as_secs_f64());
}

/// The requests `serve` made since audit event `from`, about objects in `namespaces`:
/// `verb group/resource name` each, and the index to read from next.
fn serve_requests(cluster: &Cluster, from: usize, namespaces: &[String]) -> (Vec<String>, usize) {
    let user = format!("system:serviceaccount:{OWN}:{OWN}");
    let events = cluster.audit_events();
    let next = events.len();
    let requests = events
        .into_iter()
        .skip(from)
        .filter(|e| e["user"]["username"] == user.as_str())
        .filter(|e| e["stage"] == "ResponseComplete" || e["stage"] == "ResponseStarted")
        .filter(|e| {
            let ns = e["objectRef"]["namespace"].as_str().unwrap_or_default();
            namespaces.iter().any(|n| n == ns)
        })
        .map(|e| {
            let r = &e["objectRef"];
            format!(
                "{} {}/{} {}",
                e["verb"].as_str().unwrap_or("?"),
                r["apiGroup"].as_str().unwrap_or(""),
                r["resource"].as_str().unwrap_or("?"),
                r["name"].as_str().unwrap_or("")
            )
        })
        .collect();
    (requests, next)
}

fn is_write(request: &str) -> bool {
    ["create ", "update ", "patch ", "delete "]
        .iter()
        .any(|verb| request.starts_with(verb))
}

fn stamped(cluster: &Cluster, ns: &str) -> Vec<String> {
    cluster
        .list(ns, "deployments")
        .into_iter()
        .filter(|d| d["spec"]["template"]["metadata"]["annotations"][CONFIG_HASH].is_string())
        .filter_map(|d| d["metadata"]["name"].as_str().map(str::to_owned))
        .collect()
}

fn hashes(cluster: &Cluster, namespaces: &[String]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for ns in namespaces {
        for d in cluster.list(ns, "deployments") {
            if let Some(hash) =
                d["spec"]["template"]["metadata"]["annotations"][CONFIG_HASH].as_str()
            {
                let name = d["metadata"]["name"].as_str().unwrap_or_default();
                out.insert(format!("{ns}/{name}"), hash.to_owned());
            }
        }
    }
    out
}

#[test]
fn only_opted_in_objects_reach_the_webhook_and_are_written() {
    let install = Install::own();
    let cluster = install.cluster;
    let shipped = install.applied.shipped_webhook().clone();
    let register = |config: &Value| {
        cluster
            .kubectl(&["apply", "-f", "-"])
            .stdin(&config.to_string())
            .run();
    };
    let port = install.serve.port;

    // Today: only the webhooks of labelled namespaces.
    let mut today = local_webhook(&shipped, port, &install_ca(install));
    today["webhooks"].as_array_mut().unwrap().truncate(2);
    register(&today);
    let a: Vec<String> = (0..NAMESPACES)
        .map(|_| cluster.namespace("today", false))
        .collect();
    let (before, audit) = (calls(cluster), cluster.audit_events().len());
    for ns in &a {
        load(cluster, ns);
    }
    wait_for_pods(cluster, &a);
    let today_calls = made(&before, &calls(cluster));
    let (today_requests, _) = serve_requests(cluster, audit, &a);
    eprintln!(
        "today: {} Deployments, {} opted in: webhook calls {today_calls:?}; serve's requests about them: {}",
        NAMESPACES * per_namespace(),
        NAMESPACES,
        today_requests.len()
    );
    assert!(today_calls.values().all(|n| *n == 0.0), "{today_calls:?}");
    assert!(today_requests.is_empty(), "{today_requests:#?}");
    assert!(a.iter().all(|ns| stamped(cluster, ns).is_empty()));

    // Shipped: the webhooks of single opted-in objects as well.
    install.point_webhook_at(&install.serve);
    let b: Vec<String> = (0..NAMESPACES)
        .map(|_| cluster.namespace("opt", false))
        .collect();
    let (before, audit) = (calls(cluster), cluster.audit_events().len());
    for ns in &b {
        load(cluster, ns);
    }
    wait_for_pods(cluster, &b);
    let shipped_calls = made(&before, &calls(cluster));
    for ns in &b {
        assert_eq!(stamped(cluster, ns), ["app-000"], "{ns}");
    }
    // What the controller does for them once it has synced: it watches their namespaces' config.
    std::thread::sleep(Duration::from_secs(5));
    let (synced, audit) = serve_requests(cluster, audit, &b);
    let stamps = hashes(cluster, &b);

    // Every ConfigMap of those namespaces changes: only the 10 opted in are rolled (re-stamped).
    for ns in &b {
        for i in 0..CONFIG_MAPS {
            let cm = config_map(&format!("env-{i}"), &[("mode", "b")]);
            assert!(cluster.apply(ns, &cm).ok);
        }
    }
    cluster.wait_for("the 10 re-stamps", Duration::from_secs(120), || {
        let now = hashes(cluster, &b);
        (now.len() == NAMESPACES && now.iter().all(|(k, v)| stamps.get(k) != Some(v))).then_some(())
    });
    std::thread::sleep(Duration::from_secs(3));
    let (changed, _) = serve_requests(cluster, audit, &b);
    let mut by_verb: BTreeMap<String, usize> = BTreeMap::new();
    for r in synced.iter().chain(&changed) {
        let verb_resource = r.rsplit_once(' ').map_or(r.as_str(), |x| x.0).to_owned();
        *by_verb.entry(verb_resource).or_default() += 1;
    }
    eprintln!(
        "shipped: {} Deployments, {} opted in: webhook calls {shipped_calls:?}; serve's requests \
         about their namespaces: {} at sync, {} for one change of each of their {} ConfigMaps; \
         by verb and resource: {by_verb:?}",
        NAMESPACES * per_namespace(),
        NAMESPACES,
        synced.len(),
        changed.len(),
        NAMESPACES * CONFIG_MAPS
    );

    // The calls: only the opted-in Deployments and their Pods, never the other 990.
    let opted_in_pods = shipped_calls["opted-in-pods.reload-injector.io"];
    let opted_in_workloads = shipped_calls["opted-in-workloads.reload-injector.io"];
    assert_eq!(
        opted_in_pods, NAMESPACES as f64,
        "one call per opted-in Pod"
    );
    assert!(
        (NAMESPACES as f64..=3.0 * NAMESPACES as f64).contains(&opted_in_workloads),
        "a CREATE per opted-in Deployment, and the deployment controller's UPDATEs of them: \
         {shipped_calls:?}"
    );
    for name in ["pods.reload-injector.io", "workloads.reload-injector.io"] {
        assert_eq!(
            shipped_calls.get(name).copied().unwrap_or(0.0),
            0.0,
            "{name}"
        );
    }
    // The writes: only the opted-in Deployments (and Events about them).
    let writes: Vec<&String> = changed.iter().filter(|r| is_write(r)).collect();
    assert!(
        writes
            .iter()
            .all(|w| w.contains("app-000") || w.contains("/events ")),
        "{writes:#?}"
    );
    let patched = writes
        .iter()
        .filter(|w| w.starts_with("patch apps/deployments "))
        .count();
    assert!(patched >= NAMESPACES, "{writes:#?}");
    assert!(
        synced
            .iter()
            .chain(&changed)
            .all(|r| !r.contains("/pods ") || r.contains("app-000")),
        "no request about the Pods of a Deployment that did not opt in"
    );
}

/// The CA the test harness's `serve` certificate chains to (as registered).
fn install_ca(install: &Install) -> String {
    let stored = install
        .cluster
        .kubectl(&["get", "mutatingwebhookconfiguration", WEBHOOK, "-o", "json"])
        .run()
        .json();
    let bundle = stored["webhooks"][0]["clientConfig"]["caBundle"]
        .as_str()
        .expect("a caBundle");
    use base64::Engine;
    let pem = base64::engine::general_purpose::STANDARD
        .decode(bundle)
        .expect("base64");
    String::from_utf8(pem).expect("PEM")
}
