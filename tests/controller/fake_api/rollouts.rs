//! The rollout controller end to end: real `serve` processes against the fake API server over
//! HTTP. Each test edits ConfigMaps/Secrets at the API and checks exactly which writes follow.

use crate::rollout_support;

use std::time::Duration;

use fake_kube_api::Matcher;
use rollout_support::{
    Cluster, NS, PATIENCE, config_events, env_deployment, managed, wait_caught_up, wait_ready,
};
use serde_json::{Value, json};

/// A cluster with ConfigMap `web-env` (`upstream`, `unused`) read by the stamped Deployment `web`.
fn env_cluster(tag: &str) -> (Cluster, Value, Value) {
    let cluster = Cluster::new(tag);
    let cm = Cluster::config_map("web-env", &[("upstream", "http://a"), ("unused", "1")]);
    cluster.put(&cm);
    let deployment = env_deployment("web", "web-env", "upstream");
    cluster.put(&cluster.inject(&deployment, &[cm]));
    (cluster, deployment, Cluster::config_map("web-env", &[]))
}

fn deployment_patches(cluster: &Cluster) -> usize {
    cluster
        .patches()
        .iter()
        .filter(|p| p.resource() == Some("deployments"))
        .count()
}

#[test]
fn an_env_key_change_rolls_the_workload_once_with_the_hash_inject_computes() {
    let (cluster, deployment, _) = env_cluster("env-change");
    let server = cluster.serve(&[]);
    wait_ready(&server, true);
    wait_caught_up(&server, 0.0);
    assert!(cluster.patches().is_empty(), "start-up writes nothing");

    let seen = config_events(&server);
    let changed = Cluster::config_map("web-env", &[("upstream", "http://b"), ("unused", "1")]);
    cluster.put(&changed);
    cluster.wait_patches(1);
    wait_caught_up(&server, seen + 1.0);
    let patches: Vec<_> = cluster.patches();
    assert_eq!(patches.len(), 1, "exactly one write");
    let patch = &patches[0];
    assert_eq!(patch.resource(), Some("deployments"));
    assert_eq!(
        patch.query_param("fieldManager").as_deref(),
        Some("reload-injector")
    );
    assert_eq!(
        patch.content_type.as_deref(),
        Some("application/json-patch+json")
    );
    let want = cluster.expected_hash(&deployment, &[changed]);
    assert_eq!(cluster.hash_of("web"), Some(want));
    let events = cluster.events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["reason"], "ConfigChanged");
    assert_eq!(events[0]["involvedObject"]["name"], "web");
    let message = events[0]["message"].as_str().unwrap();
    assert!(message.starts_with("reload-injector:"), "{message}");
    assert!(
        message.contains(r#"ConfigMap "web-env""#) && message.contains("upstream"),
        "{message}"
    );
    assert!(server.wait_metric(
        r#"reload_injector_rollouts_total{kind="Deployment"}"#,
        1.0,
        PATIENCE
    ));
}

#[test]
fn an_unread_key_a_label_edit_or_the_same_data_again_write_nothing() {
    let (cluster, _, _) = env_cluster("no-change");
    let server = cluster.serve(&[]);
    wait_ready(&server, true);
    let seen = config_events(&server);
    cluster.put(&Cluster::config_map(
        "web-env",
        &[("upstream", "http://a"), ("unused", "2")],
    ));
    cluster.api.merge(
        "configmaps",
        NS,
        "web-env",
        json!({"metadata": {"labels": {"team": "x"}}}),
    );
    cluster.put(&Cluster::config_map(
        "web-env",
        &[("upstream", "http://a"), ("unused", "2")],
    ));
    wait_caught_up(&server, seen + 3.0);
    assert!(cluster.patches().is_empty(), "{:?}", cluster.patches());
    assert!(cluster.events().is_empty());
}

#[test]
fn three_changes_close_together_become_one_patch_per_workload() {
    let cluster = Cluster::new("coalesce");
    let configs: Vec<Value> = ["one", "two", "three"]
        .iter()
        .map(|n| Cluster::config_map(n, &[("k", "v1")]))
        .collect();
    for cm in &configs {
        cluster.put(cm);
    }
    let mut deployment = env_deployment("multi", "one", "k");
    let env = json!([
        {"name": "A", "valueFrom": {"configMapKeyRef": {"name": "one", "key": "k"}}},
        {"name": "B", "valueFrom": {"configMapKeyRef": {"name": "two", "key": "k"}}},
        {"name": "C", "valueFrom": {"configMapKeyRef": {"name": "three", "key": "k"}}}
    ]);
    deployment["spec"]["template"]["spec"]["containers"][0]["env"] = env;
    cluster.put(&cluster.inject(&deployment, &configs));
    let server = cluster.serve(&[]);
    wait_ready(&server, true);
    let seen = config_events(&server);
    let changed: Vec<Value> = ["one", "two", "three"]
        .iter()
        .map(|n| Cluster::config_map(n, &[("k", "v2")]))
        .collect();
    for cm in &changed {
        cluster.put(cm);
        std::thread::sleep(Duration::from_millis(30));
    }
    cluster.wait_patches(1);
    wait_caught_up(&server, seen + 3.0);
    assert_eq!(deployment_patches(&cluster), 1, "{:?}", cluster.patches());
    assert_eq!(
        cluster.hash_of("multi"),
        Some(cluster.expected_hash(&deployment, &changed))
    );
}

#[test]
fn a_secret_change_is_hashed_and_its_value_is_never_sent_logged_or_exported() {
    const VALUE: &str = "s3cr3t-Zebra-7781";
    const NEW_VALUE: &str = "s3cr3t-Okapi-9912";
    let cluster = Cluster::new("secret");
    let secret = Cluster::secret("db", &[("password", VALUE)]);
    cluster.put(&secret);
    let mut deployment = env_deployment("api", "unused", "k");
    deployment["spec"]["template"]["spec"]["containers"][0]["env"] =
        json!([{"name": "PW", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}]);
    cluster.put(&cluster.inject(&deployment, std::slice::from_ref(&secret)));
    let server = cluster.serve(&[]);
    wait_ready(&server, true);
    let seen = config_events(&server);
    let changed = Cluster::secret("db", &[("password", NEW_VALUE)]);
    cluster.put(&changed);
    cluster.wait_patches(1);
    wait_caught_up(&server, seen + 1.0);
    assert_eq!(
        cluster.hash_of("api"),
        Some(cluster.expected_hash(&deployment, &[changed]))
    );
    let (_, metrics) = server.side_get("/metrics").unwrap();
    let mut everything = server.log().join("\n");
    everything.push_str(&metrics);
    for request in cluster.api.requests().iter().filter(|r| r.method != "GET") {
        everything.push_str(&request.body_text());
    }
    for event in cluster.events() {
        everything.push_str(&event.to_string());
    }
    for value in [VALUE, NEW_VALUE] {
        assert!(!everything.contains(value), "{value} leaked");
        let bare = sha256_hex(value);
        assert!(
            !everything.contains(&bare),
            "a bare SHA-256 of {value} leaked"
        );
    }
}

#[test]
fn a_mounted_config_change_refreshes_the_pod_and_rolls_nothing() {
    let cluster = Cluster::new("mounted");
    let cm = Cluster::config_map("site", &[("nginx.conf", "one")]);
    cluster.put(&cm);
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-1", "namespace": NS,
            "labels": {"reload-injector.io/sidecar": "true"},
            "annotations": {"reload-injector.io/mounted-config-hash": "sha256:stale-before-start"}},
        "spec": {
            "containers": [{"name": "nginx", "image": "nginx", "volumeMounts": [{"name": "conf", "mountPath": "/etc/nginx/conf.d"}]}],
            "initContainers": [{"name": "config-reloader", "image": "ri", "restartPolicy": "Always", "args": ["watch", "--dir", "/etc/reload-injector/watch/conf"],
                "volumeMounts": [{"name": "conf", "mountPath": "/etc/reload-injector/watch/conf", "readOnly": true}]}],
            "volumes": [{"name": "conf", "configMap": {"name": "site"}}]
        }
    });
    cluster.put(&pod);
    let server = cluster.serve(&[]);
    wait_ready(&server, true);
    // The stale hash (a change made while no controller ran) is found at start; 2 s after it
    // landed, the second nudge sets `mounted-config-refreshed` to the same hash.
    let patches = cluster.wait_patches(2);
    assert_eq!(patches[0].resource(), Some("pods"));
    assert!(!is_second_nudge(&patches[0]) && is_second_nudge(&patches[1]));
    assert!(
        patches[1].received - patches[0].received >= Duration::from_secs(2),
        "{patches:?}"
    );
    let first = mounted_hash(&cluster);
    assert_eq!(refreshed(&cluster), first);
    let seen = config_events(&server);
    cluster.put(&Cluster::config_map("site", &[("nginx.conf", "two")]));
    let patches = cluster.wait_patches(4);
    wait_caught_up(&server, seen + 1.0);
    assert!(
        patches.iter().all(|p| p.resource() == Some("pods")),
        "{patches:?}"
    );
    assert_eq!(cluster.patches().len(), 4);
    assert!(!is_second_nudge(&patches[2]) && is_second_nudge(&patches[3]));
    assert_ne!(mounted_hash(&cluster), first);
    assert_eq!(refreshed(&cluster), mounted_hash(&cluster));
    assert!(cluster.events().is_empty(), "a refresh records no Event");
    assert!(server.wait_metric("reload_injector_pod_refreshes_total", 2.0, PATIENCE));
}

#[test]
fn opted_out_not_opted_in_ignored_and_unstamped_are_never_written() {
    let cluster = Cluster::new("never");
    cluster.namespace("elsewhere", false);
    let cm = Cluster::config_map("web-env", &[("upstream", "http://a")]);
    cluster.put(&cm);
    let stamped = cluster.inject(
        &env_deployment("web", "web-env", "upstream"),
        std::slice::from_ref(&cm),
    );
    // Opted out after it was stamped.
    let mut opted_out = stamped.clone();
    opted_out["metadata"]["name"] = json!("opted-out");
    opted_out["spec"]["template"]["metadata"]["annotations"]["reload-injector.io/inject"] =
        json!("false");
    cluster.put(&opted_out);
    // Never stamped.
    cluster.put(&env_deployment("unstamped", "web-env", "upstream"));
    // In a namespace that is not opted in.
    let mut elsewhere = stamped.clone();
    elsewhere["metadata"]["namespace"] = json!("elsewhere");
    let mut elsewhere_cm = cm.clone();
    elsewhere_cm["metadata"]["namespace"] = json!("elsewhere");
    cluster.put(&elsewhere_cm);
    cluster.put(&elsewhere);
    // Reading an object annotated ignore.
    let mut ignored_cm = Cluster::config_map("ignored", &[("k", "1")]);
    ignored_cm["metadata"]["annotations"] = json!({"reload-injector.io/ignore": "true"});
    cluster.put(&ignored_cm);
    cluster.put(&cluster.inject(
        &env_deployment("reads-ignored", "ignored", "k"),
        std::slice::from_ref(&ignored_cm),
    ));

    let server = cluster.serve(&[]);
    wait_ready(&server, true);
    let seen = config_events(&server);
    cluster.put(&Cluster::config_map("web-env", &[("upstream", "http://b")]));
    elsewhere_cm["data"]["upstream"] = json!("http://b");
    cluster.put(&elsewhere_cm);
    ignored_cm["data"]["k"] = json!("2");
    cluster.put(&ignored_cm);
    // The one that may be written: `web` itself is not stored, so no write at all is expected.
    // Two events: `elsewhere` is not opted in, so its config is not watched at all.
    wait_caught_up(&server, seen + 2.0);
    assert!(cluster.patches().is_empty(), "{:?}", cluster.patches());
}

#[test]
fn a_conflict_a_server_error_and_an_outage_still_land_the_change_exactly_once() {
    let (cluster, deployment, _) = env_cluster("faults");
    let server = cluster.serve(&[]);
    wait_ready(&server, true);
    cluster
        .api
        .fail_next(Matcher::new("PATCH", "deployments"), 409, 1);
    cluster
        .api
        .fail_next(Matcher::new("PATCH", "deployments"), 500, 1);
    let changed = Cluster::config_map("web-env", &[("upstream", "http://c"), ("unused", "1")]);
    cluster.put(&changed);
    let want = cluster.expected_hash(&deployment, std::slice::from_ref(&changed));
    cluster.wait_hash("web", &want, PATIENCE);
    let successful = cluster.patches().iter().filter(|p| p.status == 200).count();
    assert_eq!(successful, 1, "{:?}", cluster.patches());

    // The API goes away for a while; a change made meanwhile lands once it is back, even
    // though the history the watches would resume from is gone by then (410 Gone: relist).
    let seen = config_events(&server);
    cluster.api.set_unreachable(Duration::from_secs(10));
    let again = Cluster::config_map("web-env", &[("upstream", "http://d"), ("unused", "1")]);
    cluster.put(&again);
    cluster.api.compact();
    let want = cluster.expected_hash(&deployment, std::slice::from_ref(&again));
    cluster.wait_hash("web", &want, Duration::from_secs(60));
    // At least the relist's event of web-env (the edit's own was compacted away).
    wait_caught_up(&server, seen + 1.0);
    let successful = cluster.patches().iter().filter(|p| p.status == 200).count();
    assert_eq!(successful, 2, "{:?}", cluster.patches());
    assert!(
        cluster.api.expired_watches() > 0,
        "the watches resumed through 410 Gone"
    );
}

#[test]
fn malformed_objects_are_one_log_line_each_and_the_rest_goes_on() {
    let (cluster, deployment, _) = env_cluster("malformed");
    // A stamped workload whose template cannot be read, and a sidecar Pod with garbage.
    let mut broken = cluster.inject(&env_deployment("broken", "web-env", "upstream"), &[]);
    broken["spec"]["template"]["spec"]["containers"] = json!("not a list");
    cluster.put(&broken);
    cluster.put(&json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "garbage", "namespace": NS,
            "labels": {"reload-injector.io/sidecar": "true"},
            "annotations": {"reload-injector.io/mounted-config-hash": "\\u0000 not a hash"}},
        "spec": {"volumes": 42}
    }));
    let server = cluster.serve(&[]);
    wait_ready(&server, true);
    let changed = Cluster::config_map("web-env", &[("upstream", "http://b"), ("unused", "1")]);
    cluster.put(&changed);
    let want = cluster.expected_hash(&deployment, std::slice::from_ref(&changed));
    cluster.wait_hash("web", &want, PATIENCE);
    let unreadable: Vec<String> = server
        .log()
        .into_iter()
        .filter(|l| l.contains("cannot read"))
        .collect();
    assert_eq!(
        unreadable.len(),
        2,
        "one line per bad object: {unreadable:#?}"
    );
    assert!(
        unreadable
            .iter()
            .any(|l| l.contains("Deployment shop/broken"))
    );
    assert!(unreadable.iter().any(|l| l.contains("Pod shop/garbage")));
    assert_eq!(deployment_patches(&cluster), 1, "{:?}", cluster.patches());
}

#[test]
fn a_restart_with_nothing_changed_writes_nothing() {
    let (cluster, _, _) = env_cluster("restart");
    let server = cluster.serve(&[]);
    wait_ready(&server, true);
    cluster.put(&Cluster::config_map(
        "web-env",
        &[("upstream", "http://b"), ("unused", "1")],
    ));
    cluster.wait_patches(1);
    server.terminate();
    drop(server);
    std::thread::sleep(Duration::from_millis(300));
    cluster.api.clear_requests();
    let restarted = cluster.serve(&[]);
    wait_ready(&restarted, true);
    wait_caught_up(&restarted, 0.0);
    assert!(cluster.patches().is_empty(), "{:?}", cluster.patches());
}

#[test]
fn only_the_lease_holder_writes_and_the_other_takes_over_when_it_dies() {
    let (cluster, deployment, _) = env_cluster("leader");
    let first = cluster.serve(&[]);
    wait_ready(&first, true);
    let second = cluster.serve(&[]);
    wait_ready(&second, false);
    assert!(!second.wait_metric("reload_injector_leader", 1.0, Duration::from_millis(500)));
    let (seen_first, seen_second) = (config_events(&first), config_events(&second));
    let changed = Cluster::config_map("web-env", &[("upstream", "http://b"), ("unused", "1")]);
    cluster.put(&changed);
    cluster.wait_patches(1);
    wait_caught_up(&first, seen_first + 1.0);
    wait_caught_up(&second, seen_second + 1.0);
    assert_eq!(deployment_patches(&cluster), 1, "only the holder writes");

    drop(first); // killed, not terminated: no hand-over
    assert!(
        second.wait_metric("reload_injector_leader", 1.0, PATIENCE),
        "the other replica never took over:\n{}",
        second.log().join("\n")
    );
    let seen = config_events(&second);
    let again = Cluster::config_map("web-env", &[("upstream", "http://c"), ("unused", "1")]);
    cluster.put(&again);
    let want = cluster.expected_hash(&deployment, std::slice::from_ref(&again));
    cluster.wait_hash("web", &want, PATIENCE);
    wait_caught_up(&second, seen + 1.0);
    assert_eq!(deployment_patches(&cluster), 2);
}

fn mounted_hash(cluster: &Cluster) -> String {
    let pod = cluster.api.get("pods", NS, "web-1").unwrap();
    pod["metadata"]["annotations"]["reload-injector.io/mounted-config-hash"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn refreshed(cluster: &Cluster) -> String {
    let pod = cluster.api.get("pods", NS, "web-1").unwrap();
    pod["metadata"]["annotations"]["reload-injector.io/mounted-config-refreshed"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn sha256_hex(value: &str) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(value.as_bytes()))
}

/// `env_deployment` reshaped as another workload kind reading the same key.
fn as_kind(deployment: &Value, kind: &str) -> Value {
    let mut object = deployment.clone();
    object["kind"] = json!(kind);
    object["metadata"]["name"] = json!(kind.to_lowercase());
    if kind == "Rollout" {
        object["apiVersion"] = json!("argoproj.io/v1alpha1");
        object["spec"]["strategy"] =
            json!({"canary": {"steps": [{"setWeight": 20}, {"pause": {}}]}});
    }
    if kind == "CronJob" {
        object["apiVersion"] = json!("batch/v1");
        let mut template = object["spec"]["template"].clone();
        template["spec"]["restartPolicy"] = json!("OnFailure");
        object["spec"] =
            json!({"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": template}}});
    }
    object
}

#[test]
fn the_rbac_rules_are_exactly_the_calls_serve_makes() {
    let (cluster, deployment, _) = env_cluster("rbac");
    let cm = Cluster::config_map("web-env", &[("upstream", "http://a"), ("unused", "1")]);
    for kind in ["StatefulSet", "DaemonSet", "CronJob", "Rollout"] {
        cluster.put(&cluster.inject(&as_kind(&deployment, kind), std::slice::from_ref(&cm)));
    }
    let secret = Cluster::secret("db", &[("password", "x")]);
    cluster.put(&secret);
    let mut reads_secret = env_deployment("api", "unused", "k");
    reads_secret["spec"]["template"]["spec"]["containers"][0]["env"] =
        json!([{"name": "PW", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}]);
    cluster.put(&cluster.inject(&reads_secret, std::slice::from_ref(&secret)));
    // Optional references to objects that do not exist: only those are ever fetched by GET.
    let mut reads_missing = env_deployment("later", "unused", "k");
    reads_missing["spec"]["template"]["spec"]["containers"][0]["env"] = json!([
        {"name": "A", "valueFrom": {"configMapKeyRef": {"name": "absent", "key": "k", "optional": true}}},
        {"name": "B", "valueFrom": {"secretKeyRef": {"name": "absent", "key": "k", "optional": true}}}
    ]);
    cluster.put(&cluster.inject(&reads_missing, &[]));
    // An API server without streaming lists: config is listed in pages.
    for resource in ["configmaps", "secrets"] {
        cluster
            .api
            .fail_next(Matcher::new("GET", resource).watch(true), 422, 1);
    }
    cluster.put(&Cluster::config_map("site", &[("a", "1")]));
    cluster.put(&json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-1", "namespace": NS, "labels": {"reload-injector.io/sidecar": "true"}},
        "spec": {
            "containers": [
                {"name": "app", "image": "x", "volumeMounts": [{"name": "conf", "mountPath": "/etc/app"}]},
                {"name": "config-reloader", "image": "ri", "args": ["watch", "--dir", "/etc/reload-injector/watch/conf"], "volumeMounts": [{"name": "conf", "mountPath": "/etc/reload-injector/watch/conf"}]}
            ],
            "volumes": [{"name": "conf", "configMap": {"name": "site"}}]
        }
    }));
    let server = cluster.serve(&[]);
    wait_ready(&server, true);
    cluster.put(&Cluster::config_map(
        "web-env",
        &[("upstream", "http://b"), ("unused", "1")],
    ));
    cluster.put(&Cluster::secret("db", &[("password", "y")]));
    cluster.put(&Cluster::config_map("site", &[("a", "2")]));
    cluster.wait_patches(7);
    // Every Event recorded, and the Lease renewed once (every third of 3 s).
    wait_caught_up(&server, 0.0);
    rollout_support::wait_for("a renewal of the Lease", PATIENCE, || {
        cluster
            .api
            .requests()
            .iter()
            .any(|r| r.method == "PUT" && r.resource() == Some("leases"))
            .then_some(())
    });
    server.terminate();

    let needs: Vec<_> = cluster
        .api
        .requests()
        .iter()
        .filter_map(|r| r.rbac())
        .collect();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/base/rbac.yaml");
    let rbac = fake_kube_api::rbac::Rbac::from_yaml_file(&path, rollout_support::OWN);
    assert_eq!(
        rbac.missing(&needs),
        vec![],
        "serve made calls rbac.yaml does not grant"
    );
    let unused = rbac.unused(&needs);
    assert!(
        unused.is_empty(),
        "rbac.yaml grants what serve never used: {unused:?}"
    );
}

#[test]
fn a_canary_rollouts_template_is_restamped_with_an_event_on_the_rollout() {
    let cluster = Cluster::new("argo-rollout");
    let cm = Cluster::config_map("web-env", &[("upstream", "http://a")]);
    cluster.put(&cm);
    let rollout = as_kind(&env_deployment("web", "web-env", "upstream"), "Rollout");
    cluster.put(&cluster.inject(&rollout, std::slice::from_ref(&cm)));
    let server = cluster.serve(&[]);
    wait_ready(&server, true);
    wait_caught_up(&server, 0.0);
    assert!(cluster.patches().is_empty(), "start-up writes nothing");
    let seen = config_events(&server);
    let changed = Cluster::config_map("web-env", &[("upstream", "http://b")]);
    cluster.put(&changed);
    let patches = cluster.wait_patches(1);
    // Its Event is recorded after the PATCH.
    wait_caught_up(&server, seen + 1.0);
    assert_eq!(patches[0].resource(), Some("rollouts"));
    let want = cluster.expected_hash(&rollout, &[changed]);
    let stored = cluster
        .api
        .get("rollouts", NS, "rollout")
        .expect("the Rollout");
    assert_eq!(rollout_support::template_hash(&stored), Some(want));
    assert_eq!(
        stored["spec"]["strategy"]["canary"]["steps"][0]["setWeight"],
        20
    );
    let events = cluster.events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["reason"], "ConfigChanged");
    assert_eq!(events[0]["involvedObject"]["kind"], "Rollout");
    assert_eq!(
        events[0]["involvedObject"]["apiVersion"],
        "argoproj.io/v1alpha1"
    );
    assert!(server.wait_metric(
        r#"reload_injector_rollouts_total{kind="Rollout"}"#,
        1.0,
        PATIENCE
    ));
}

/// Pod `name` of the Deployment `web` (through its ReplicaSet `web-5d8f9c`), mounting ConfigMap
/// `site`, with its mounted hash `hash` and its Ready condition `ready`.
fn web_pod(name: &str, hash: &str, ready: bool) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NS,
            "labels": {"reload-injector.io/sidecar": "true", "pod-template-hash": "5d8f9c"},
            "annotations": {"reload-injector.io/mounted-config-hash": hash},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "name": "web-5d8f9c", "uid": "rs-uid", "controller": true}]},
        "spec": {
            "containers": [{"name": "nginx", "image": "nginx", "volumeMounts": [{"name": "conf", "mountPath": "/etc/nginx/conf.d"}]}],
            "initContainers": [{"name": "config-reloader", "image": "ri", "restartPolicy": "Always", "args": ["watch", "--dir", "/etc/reload-injector/watch/conf"],
                "volumeMounts": [{"name": "conf", "mountPath": "/etc/reload-injector/watch/conf", "readOnly": true}]}],
            "volumes": [{"name": "conf", "configMap": {"name": "site"}}]
        },
        "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}
    })
}

/// The Pods whose `mounted-config-hash` was patched, in order (not the second nudges that
/// follow each 2 s later: `mounted-config-refreshed`).
/// The Pods whose `mounted-config-hash` was written, in order.
fn pod_patches(cluster: &Cluster) -> Vec<String> {
    pods_patched_with(cluster, "mounted-config-hash")
}

/// The Pods patched with an annotation whose name holds `annotation`, in order.
fn pods_patched_with(cluster: &Cluster, annotation: &str) -> Vec<String> {
    cluster
        .patches()
        .iter()
        .filter(|p| {
            p.resource() == Some("pods") && String::from_utf8_lossy(&p.body).contains(annotation)
        })
        .map(|p| p.path.rsplit('/').next().unwrap_or_default().to_owned())
        .collect()
}

fn is_second_nudge(patch: &fake_kube_api::record::Recorded) -> bool {
    String::from_utf8_lossy(&patch.body).contains("reload-injector.io/mounted-config-refreshed")
}

#[test]
fn a_mounted_change_refreshes_a_deployments_pods_in_waves_and_stops_when_one_goes_unready() {
    let cluster = Cluster::new("waves");
    let one = Cluster::config_map("site", &[("nginx.conf", "one")]);
    cluster.put(&one);
    // 4 replicas, maxUnavailable unset: 25%, one Pod per wave.
    cluster.put(&managed(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": NS, "uid": "web-uid"},
        "spec": {"replicas": 4, "selector": {"matchLabels": {"app": "web"}}, "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "nginx", "image": "nginx"}]}}}
    })));
    let server = cluster.serve(&[]);
    wait_ready(&server, true);
    // The start-up check refreshes the stale Pods (a change made while no controller ran) in
    // waves too: give them the hash first, from the controller's own writes.
    for name in ["web-a", "web-b", "web-c", "web-d"] {
        cluster.put(&web_pod(name, "sha256:stale", true));
    }
    wait_for_pods(&cluster, 4, Duration::from_secs(30));
    let start = pod_patches(&cluster).len();
    let stamped = cluster.api.get("pods", NS, "web-a").unwrap()["metadata"]["annotations"]
        ["reload-injector.io/mounted-config-hash"]
        .clone();
    assert!(stamped.as_str().is_some_and(|h| h.starts_with("sha256:")));

    // The change: the first wave is one Pod; it goes unready after its refresh.
    cluster.put(&Cluster::config_map("site", &[("nginx.conf", "two")]));
    wait_for_pods(&cluster, start + 1, PATIENCE);
    let first = pod_patches(&cluster)[start].clone();
    let mut unready = cluster.api.get("pods", NS, &first).unwrap();
    unready["status"]["conditions"][0]["status"] = json!("False");
    cluster.put(&unready);
    // The stop says so in an Event; the Pods left are then dropped (nothing pending): without
    // the stop, the next wave would be pending, then written once the first settled.
    rollout_support::wait_for("the Event saying the refresh stopped", PATIENCE, || {
        cluster
            .events()
            .iter()
            .any(|e| {
                e["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("refresh of mounted config stopped"))
            })
            .then_some(())
    });
    wait_caught_up(&server, 0.0);
    assert_eq!(
        pod_patches(&cluster).len(),
        start + 1,
        "the refresh stopped after the wave that went unready: {:?}",
        pod_patches(&cluster)
    );
    let events = cluster.events();
    let stopped: Vec<&Value> = events
        .iter()
        .filter(|e| {
            e["message"]
                .as_str()
                .is_some_and(|m| m.contains("refresh of mounted config stopped"))
        })
        .collect();
    assert_eq!(stopped.len(), 1, "{events:?}");
    // The Pods left record the hash held back, so that no later leader writes it either.
    let mut held = pods_patched_with(&cluster, "mounted-config-held-back");
    held.sort();
    let mut left: Vec<String> = ["web-a", "web-b", "web-c", "web-d"]
        .into_iter()
        .filter(|name| *name != first)
        .map(str::to_owned)
        .collect();
    left.sort();
    assert_eq!(held, left);
    for name in &left {
        let pod = cluster.api.get("pods", NS, name).unwrap();
        let annotations = &pod["metadata"]["annotations"];
        assert_eq!(
            annotations["reload-injector.io/mounted-config-hash"],
            stamped
        );
        let kept = annotations["reload-injector.io/mounted-config-held-back"].as_str();
        assert!(
            kept.is_some_and(|h| h.starts_with("sha256:") && h != stamped),
            "{annotations}"
        );
    }
    assert_eq!(stopped[0]["involvedObject"]["kind"], "Deployment");
    assert_eq!(stopped[0]["involvedObject"]["name"], "web");
    assert_eq!(stopped[0]["reason"], "ConfigChanged");
    assert!(
        stopped[0]["message"]
            .as_str()
            .unwrap()
            .contains(&format!("pod \"{first}\"")),
        "{stopped:?}"
    );
}

fn wait_for_pods(cluster: &Cluster, n: usize, limit: Duration) {
    rollout_support::wait_for(&format!("{n} pod PATCH(es)"), limit, || {
        (pod_patches(cluster).len() >= n).then_some(())
    });
}

#[test]
fn waves_wait_for_each_wave_to_settle_ready() {
    let cluster = Cluster::new("waves-settle");
    cluster.put(&Cluster::config_map("site", &[("nginx.conf", "one")]));
    let server = cluster.serve(&[]);
    wait_ready(&server, true);
    for name in ["web-a", "web-b", "web-c"] {
        cluster.put(&web_pod(name, "sha256:stale", true));
    }
    // No Deployment in the view: 25% of 3 Pods, at least one per wave; each wave settles 2 s.
    let started = std::time::Instant::now();
    wait_for_pods(&cluster, 3, PATIENCE);
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(4),
        "three waves of one Pod need two settle times: {took:?}"
    );
}

#[test]
fn a_hash_stamped_before_restart_mounts_counted_starts_no_rollout_at_upgrade_but_a_change_does() {
    let cluster = Cluster::new("upgrade");
    let env = Cluster::config_map("web-env", &[("upstream", "http://a")]);
    let site = Cluster::config_map("site", &[("app.yaml", "one")]);
    cluster.put(&env);
    cluster.put(&site);
    // The JVM of the issue, reading env and mounting `site`. An earlier version stamped the hash
    // over env alone (and gave the Pods a SIGHUP sidecar).
    let env_only = env_deployment("web", "web-env", "upstream");
    let before = cluster.expected_hash(&env_only, std::slice::from_ref(&env));
    let mut web = env_only.clone();
    let container = &mut web["spec"]["template"]["spec"]["containers"][0];
    container["command"] = json!(["java", "-jar", "/app.jar"]);
    container["volumeMounts"] = json!([{"name": "site", "mountPath": "/config"}]);
    web["spec"]["template"]["spec"]["volumes"] =
        json!([{"name": "site", "configMap": {"name": "site"}}]);
    web["spec"]["template"]["metadata"]["annotations"] =
        json!({"reload-injector.io/config-hash": before});
    // Labelled, as the webhook labels what it admits (an unlabelled one is not watched at all).
    let web = managed(web);
    cluster.put(&web);
    let server = cluster.serve(&[]);
    wait_ready(&server, true);
    wait_caught_up(&server, 0.0);
    assert!(
        cluster.patches().is_empty(),
        "upgrading rolled: {:?}",
        cluster.patches()
    );

    // A change of the mounted ConfigMap now rolls the JVM (it gets no signal).
    let seen = config_events(&server);
    let site2 = Cluster::config_map("site", &[("app.yaml", "two")]);
    cluster.put(&site2);
    let mut stamped = web.clone();
    stamped["spec"]["template"]["metadata"]["annotations"] = json!({});
    let want = cluster.expected_hash(&stamped, &[env, site2]);
    cluster.wait_hash("web", &want, PATIENCE);
    wait_caught_up(&server, seen + 1.0);
    assert_eq!(deployment_patches(&cluster), 1);
}

#[test]
fn only_workloads_labelled_managed_are_watched_and_re_stamped() {
    let (cluster, deployment, _) = env_cluster("managed-label");
    // `inject` (the webhook's function) labels what it stamps.
    let web = cluster.api.get("deployments", NS, "web").unwrap();
    assert_eq!(
        web["metadata"]["labels"]["reload-injector.io/managed"],
        "true"
    );
    // Stamped by an earlier version, which did not label: not watched until it is next applied.
    let mut old = env_deployment("old", "web-env", "upstream");
    old = cluster.inject(
        &old,
        &[cluster.api.get("configmaps", NS, "web-env").unwrap()],
    );
    old["metadata"]["labels"]
        .as_object_mut()
        .unwrap()
        .remove("reload-injector.io/managed");
    cluster.put(&old);
    let old_hash = cluster.hash_of("old").expect("stamped");

    let server = cluster.serve(&[]);
    wait_ready(&server, true);
    let seen = config_events(&server);
    let changed = Cluster::config_map("web-env", &[("upstream", "http://b"), ("unused", "1")]);
    cluster.put(&changed);
    let want = cluster.expected_hash(&deployment, std::slice::from_ref(&changed));
    cluster.wait_hash("web", &want, PATIENCE);
    wait_caught_up(&server, seen + 1.0);
    assert_eq!(
        cluster.hash_of("old"),
        Some(old_hash),
        "the unlabelled one was written"
    );
    let written: Vec<String> = cluster.patches().iter().map(|p| p.path.clone()).collect();
    assert!(
        written
            .iter()
            .all(|path| !path.ends_with("/deployments/old")),
        "{written:?}"
    );
    // Every workload list and watch selected on the label.
    let workload_reads: Vec<_> = cluster
        .api
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET" && r.resource() == Some("deployments"))
        .collect();
    assert!(!workload_reads.is_empty());
    for read in workload_reads {
        assert_eq!(
            read.query_param("labelSelector").as_deref(),
            Some("reload-injector.io/managed=true"),
            "{}?{}",
            read.path,
            read.query
        );
    }
}
