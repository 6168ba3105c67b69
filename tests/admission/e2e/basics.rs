//! End to end through a real kube-apiserver (v1.37, or the floor version, from the project's
//! own build; or the binaries `KUBEBUILDER_ASSETS` names): the shipped manifests, `serve` as the shipped
//! ServiceAccount, and what a user sees through `kubectl`. One cluster and one `serve` for the
//! binary's end-to-end files; each test works in its own namespace. See `tests/cluster_support`.

use crate::cluster_support;

use cluster_support::install::{Install, OWN, WEBHOOK, local_webhook};
use cluster_support::objects::{
    b64, config_map, container, deployment, env_from_config_map, env_from_secret, secret,
    template_annotations,
};
use cluster_support::{Cluster, PATIENCE};
use serde_json::{Value, json};

const CONFIG_HASH: &str = "reload-injector.io/config-hash";
const MOUNTED_HASH: &str = "reload-injector.io/mounted-config-hash";
const MANAGED: &str = "reload-injector.io/managed";
/// How long a test watches for a write that must not come (several `--rollout-delay`s).

#[test]
fn the_shipped_manifests_are_accepted_by_the_real_api_server() {
    let install = Install::shared();
    let refused: Vec<(&str, &str)> = install
        .applied
        .objects
        .iter()
        .filter(|(_, out)| !out.ok)
        .map(|(name, out)| (name.as_str(), out.stderr.trim()))
        .collect();
    // Everything, the policy/v1 PodDisruptionBudget included, is accepted unchanged.
    assert!(
        refused.is_empty(),
        "objects the API server refused: {refused:#?}"
    );
    assert_eq!(install.applied.objects.len(), install.applied.shipped.len());
    for (name, _) in install.applied.objects.iter().filter(|(_, out)| out.ok) {
        let (kind, object) = name.split_once('/').unwrap();
        install
            .cluster
            .kubectl(&["get", kind, object, "-n", OWN, "-o", "name"])
            .run();
    }

    // The registered configuration is the shipped one with only clientConfig changed: every
    // field we ship is stored as shipped (the server may only add its defaults).
    let stored = install
        .cluster
        .kubectl(&["get", "mutatingwebhookconfiguration", WEBHOOK, "-o", "json"])
        .run()
        .json();
    let local = local_webhook(install.applied.shipped_webhook(), install.serve.port, "x");
    for (shipped, stored) in local["webhooks"]
        .as_array()
        .unwrap()
        .iter()
        .zip(stored["webhooks"].as_array().unwrap())
    {
        let mut shipped = shipped.clone();
        let url = shipped["clientConfig"]["url"].clone();
        shipped.as_object_mut().unwrap().remove("clientConfig");
        assert_subset(&shipped, stored, "webhooks[]");
        assert_eq!(stored["clientConfig"]["url"], url, "{stored}");
        assert!(
            url.as_str()
                .is_some_and(|u| u.ends_with("/mutate") || u.ends_with("/mutate/opted-in")),
            "{stored}"
        );
    }
}

/// Every field of `part` is in `whole` with the same value.
fn assert_subset(part: &Value, whole: &Value, at: &str) {
    match (part, whole) {
        (Value::Object(p), Value::Object(w)) => {
            for (k, v) in p {
                assert_subset(v, w.get(k).unwrap_or(&Value::Null), &format!("{at}.{k}"));
            }
        }
        (Value::Array(p), Value::Array(w)) if p.len() == w.len() => {
            for (i, (a, b)) in p.iter().zip(w).enumerate() {
                assert_subset(a, b, &format!("{at}[{i}]"));
            }
        }
        _ => assert_eq!(part, whole, "{at} differs from what we ship"),
    }
}

/// A Deployment `web` reading `web-env`'s `UPSTREAM` through env and mounting `site`.
fn web(replicas: u32) -> Value {
    deployment(
        "web",
        replicas,
        container(
            json!([env_from_config_map("UPSTREAM", "web-env", "UPSTREAM")]),
            json!([{"name": "site", "mountPath": "/etc/nginx/conf.d"}]),
        ),
        json!([{"name": "site", "configMap": {"name": "site"}}]),
    )
}

fn hash_of(workload: &Value) -> Option<String> {
    template_annotations(workload)[CONFIG_HASH]
        .as_str()
        .map(str::to_owned)
}

#[test]
fn admission_through_kubectl_stamps_warns_denies_and_injects() {
    let install = Install::shared();
    let cluster = install.cluster;
    let ns = cluster.namespace("admission", true);
    cluster.apply(
        &ns,
        &config_map("web-env", &[("UPSTREAM", "a:80"), ("OTHER", "x")]),
    );
    cluster.apply(&ns, &config_map("site", &[("site.conf", "server {}")]));

    let applied = cluster.apply(&ns, &web(2));
    assert!(applied.ok, "{}", applied.stderr);
    let warnings = applied.warnings();
    assert!(
        warnings.iter().any(|w| w.contains(
            "reload-injector: container \"app\" reads ConfigMap \"web-env\" via env; pods roll when it changes"
        )),
        "kubectl's stderr: {}",
        applied.stderr
    );
    let stamped = cluster.get(&ns, "deployment", "web");
    assert!(
        hash_of(&stamped).is_some_and(|h| h.starts_with("sha256:")),
        "{stamped}"
    );

    // A subPath mount is denied, and the message reaches the terminal.
    let mut subpath = web(1);
    subpath["metadata"]["name"] = json!("subpath");
    subpath["spec"]["template"]["spec"]["containers"][0]["volumeMounts"][0]["subPath"] =
        json!("site.conf");
    let denied = cluster.apply(&ns, &subpath);
    assert!(!denied.ok, "a subPath mount must be denied");
    assert!(
        denied.stderr.contains("denied the request")
            && denied.stderr.contains("subPath")
            && denied.stderr.contains("ConfigMap \"site\""),
        "kubectl's stderr: {}",
        denied.stderr
    );

    // Opted out by label: untouched.
    let mut opted_out = web(0);
    opted_out["metadata"]["name"] = json!("opted-out");
    opted_out["metadata"]["labels"] = json!({"reload-injector.io/inject": "false"});
    let out = cluster.apply(&ns, &opted_out);
    assert!(
        out.ok && !out.stderr.contains("reload-injector:"),
        "{}",
        out.stderr
    );
    assert_eq!(hash_of(&cluster.get(&ns, "deployment", "opted-out")), None);

    // A namespace that did not opt in: untouched, and no warning.
    let plain = cluster.namespace("admission-plain", false);
    cluster.apply(&plain, &config_map("web-env", &[("UPSTREAM", "a:80")]));
    let out = cluster.apply(&plain, &web(0));
    assert!(
        out.ok && !out.stderr.contains("reload-injector:"),
        "{}",
        out.stderr
    );
    assert_eq!(hash_of(&cluster.get(&plain, "deployment", "web")), None);

    // The Pods the real deployment controller makes get the sidecar.
    let pods = cluster.wait_for("the 2 Pods of deployment web", PATIENCE, || {
        let pods = cluster
            .kubectl(&["get", "pods", "-n", &ns, "-l", "app=web", "-o", "json"])
            .run()
            .json();
        let items = pods["items"].as_array().cloned().unwrap_or_default();
        (items.len() == 2).then_some(items)
    });
    for pod in &pods {
        let spec = &pod["spec"];
        let sidecars: Vec<&Value> = spec["containers"]
            .as_array()
            .into_iter()
            .chain(spec["initContainers"].as_array())
            .flatten()
            .filter(|c| c["name"] == "config-reloader")
            .collect();
        assert_eq!(sidecars.len(), 1, "one sidecar: {pod}");
        assert_eq!(spec["shareProcessNamespace"], json!(true), "{pod}");
        assert_eq!(
            pod["metadata"]["labels"]["reload-injector.io/sidecar"],
            json!("true"),
            "{pod}"
        );
        assert!(
            pod["metadata"]["annotations"][MOUNTED_HASH]
                .as_str()
                .is_some_and(|h| h.starts_with("sha256:")),
            "{pod}"
        );
    }
}

fn replica_sets(cluster: &Cluster, ns: &str, app: &str) -> usize {
    cluster
        .list_selected(ns, "replicasets", &format!("app={app}"))
        .len()
}

#[test]
fn an_env_key_edit_rolls_the_deployment_and_an_unread_key_does_not() {
    let install = Install::shared();
    let cluster = install.cluster;
    let ns = cluster.namespace("rollout", true);
    cluster.apply(
        &ns,
        &config_map("web-env", &[("UPSTREAM", "a:80"), ("OTHER", "x")]),
    );
    cluster.apply(&ns, &config_map("site", &[("site.conf", "server {}")]));
    assert!(cluster.apply(&ns, &web(1)).ok);
    let applied = cluster.get(&ns, "deployment", "web");
    let first = hash_of(&applied).expect("stamped");
    // The webhook labels what it stamps: the controller's workload watch selects on it.
    assert_eq!(applied["metadata"]["labels"][MANAGED], "true", "{applied}");
    cluster.wait_for("the first ReplicaSet", PATIENCE, || {
        (replica_sets(cluster, &ns, "web") == 1).then_some(())
    });

    let edit = cluster.apply(
        &ns,
        &config_map("web-env", &[("UPSTREAM", "b:80"), ("OTHER", "x")]),
    );
    assert!(edit.ok, "{}", edit.stderr);
    let second = cluster.wait_for("the controller to re-stamp web", PATIENCE, || {
        hash_of(&cluster.get(&ns, "deployment", "web")).filter(|h| *h != first)
    });
    cluster.wait_for(
        "the deployment controller to make a second ReplicaSet",
        PATIENCE,
        || (replica_sets(cluster, &ns, "web") == 2).then_some(()),
    );
    let events = cluster.wait_for("a ConfigChanged Event", PATIENCE, || {
        Some(cluster.config_changed_events(&ns)).filter(|e| !e.is_empty())
    });
    assert_eq!(events.len(), 1, "{events:#?}");
    let event = &events[0];
    assert_eq!(event["involvedObject"]["kind"], "Deployment");
    assert_eq!(event["involvedObject"]["name"], "web");
    let message = event["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("reload-injector:") && message.contains("web-env"),
        "{message}"
    );
    let listed = cluster.kubectl(&["get", "events", "-n", &ns]).run().stdout;
    assert!(listed.contains("ConfigChanged"), "{listed}");

    // A key nobody reads: nothing is written.
    let since = install.serve.log_lines().len();
    cluster.apply(
        &ns,
        &config_map("web-env", &[("UPSTREAM", "b:80"), ("OTHER", "y")]),
    );
    install
        .serve
        .wait_change_handled(cluster, since, &ns, "web-env");
    assert_eq!(
        hash_of(&cluster.get(&ns, "deployment", "web")),
        Some(second.clone())
    );
    assert_eq!(replica_sets(cluster, &ns, "web"), 2);
    assert_eq!(cluster.config_changed_events(&ns).len(), 1);

    // Applied again as written (without the label): the live object keeps it and its hash.
    assert!(cluster.apply(&ns, &web(1)).ok);
    let again = cluster.get(&ns, "deployment", "web");
    assert_eq!(again["metadata"]["labels"][MANAGED], "true", "{again}");
    assert_eq!(hash_of(&again), Some(second));
}

#[test]
fn a_mounted_config_map_edit_refreshes_the_pods_and_rolls_nothing() {
    let install = Install::shared();
    let cluster = install.cluster;
    let ns = cluster.namespace("refresh", true);
    cluster.apply(&ns, &config_map("web-env", &[("UPSTREAM", "a:80")]));
    cluster.apply(
        &ns,
        &config_map("site", &[("site.conf", "server { listen 80; }")]),
    );
    assert!(cluster.apply(&ns, &web(2)).ok);
    let hash = hash_of(&cluster.get(&ns, "deployment", "web"));
    let mounted = |pod: &Value| {
        pod["metadata"]["annotations"][MOUNTED_HASH]
            .as_str()
            .map(str::to_owned)
    };
    let before = cluster.wait_for("2 stamped sidecar Pods", PATIENCE, || {
        let pods = cluster.list(&ns, "pods");
        let hashes: Vec<String> = pods.iter().filter_map(mounted).collect();
        (hashes.len() == 2).then_some(hashes)
    });

    cluster.apply(
        &ns,
        &config_map("site", &[("site.conf", "server { listen 81; }")]),
    );
    cluster.wait_for("mounted-config-hash patched on both Pods", PATIENCE, || {
        let pods = cluster.list(&ns, "pods");
        let hashes: Vec<String> = pods.iter().filter_map(mounted).collect();
        (hashes.len() == 2 && hashes.iter().all(|h| !before.contains(h))).then_some(())
    });
    install.serve.wait_caught_up(cluster);
    assert_eq!(
        hash_of(&cluster.get(&ns, "deployment", "web")),
        hash,
        "nothing rolls"
    );
    assert_eq!(replica_sets(cluster, &ns, "web"), 1);
    assert_eq!(cluster.list(&ns, "pods").len(), 2);
    assert!(cluster.config_changed_events(&ns).is_empty());
}

#[test]
fn secret_values_appear_in_no_log_event_or_annotation() {
    let install = Install::shared();
    let cluster = install.cluster;
    let ns = cluster.namespace("secrets", true);
    let (old, new) = ("e2e-old-s3cr3t-Qx7", "e2e-new-s3cr3t-Zr4");
    cluster.apply(&ns, &secret("creds", &[("PASSWORD", old)]));
    cluster.apply(&ns, &secret("tls-files", &[("key.pem", old)]));
    let app = container(
        json!([env_from_secret("PASSWORD", "creds", "PASSWORD")]),
        json!([{"name": "tls", "mountPath": "/etc/tls"}]),
    );
    let workload = deployment(
        "web",
        1,
        app,
        json!([{"name": "tls", "secret": {"secretName": "tls-files"}}]),
    );
    let applied = cluster.apply(&ns, &workload);
    assert!(applied.ok, "{}", applied.stderr);
    let first = hash_of(&cluster.get(&ns, "deployment", "web")).expect("stamped");
    cluster.wait_for("the sidecar Pod", PATIENCE, || {
        cluster
            .list(&ns, "pods")
            .iter()
            .any(|p| p["metadata"]["annotations"][MOUNTED_HASH].is_string())
            .then_some(())
    });
    cluster.apply(&ns, &secret("creds", &[("PASSWORD", new)]));
    cluster.apply(&ns, &secret("tls-files", &[("key.pem", new)]));
    cluster.wait_for("the re-stamp after the Secret changed", PATIENCE, || {
        hash_of(&cluster.get(&ns, "deployment", "web")).filter(|h| *h != first)
    });
    cluster.wait_for("a ConfigChanged Event", PATIENCE, || {
        (!cluster.config_changed_events(&ns).is_empty()).then_some(())
    });

    let mut seen = vec![
        ("serve's log".to_owned(), install.serve.log_text()),
        (
            "events".to_owned(),
            cluster
                .kubectl(&["get", "events", "-n", &ns, "-o", "json"])
                .run()
                .stdout,
        ),
        (
            "the Deployment".to_owned(),
            cluster.get(&ns, "deployment", "web").to_string(),
        ),
    ];
    for pod in cluster.list(&ns, "pods") {
        seen.push(("a Pod's metadata".to_owned(), pod["metadata"].to_string()));
    }
    for (place, text) in &seen {
        for value in [old, new] {
            for form in [value.to_owned(), b64(value)] {
                assert!(
                    !text.contains(&form),
                    "{place} contains a Secret value ({form})"
                );
            }
        }
    }
}

#[test]
fn serve_runs_as_the_shipped_service_account_and_is_never_refused() {
    let install = Install::shared();
    let cluster = install.cluster;
    // Some work of its own first: a stamped workload whose config changes.
    let ns = cluster.namespace("identity", true);
    cluster.apply(&ns, &config_map("web-env", &[("UPSTREAM", "a:80")]));
    cluster.apply(&ns, &config_map("site", &[("site.conf", "a")]));
    assert!(cluster.apply(&ns, &web(1)).ok);
    let first = hash_of(&cluster.get(&ns, "deployment", "web"));
    cluster.apply(&ns, &config_map("web-env", &[("UPSTREAM", "b:80")]));
    cluster.wait_for("the re-stamp", PATIENCE, || {
        (hash_of(&cluster.get(&ns, "deployment", "web")) != first).then_some(())
    });

    let user = format!("system:serviceaccount:{OWN}:{OWN}");
    let events: Vec<Value> = cluster
        .audit_events()
        .into_iter()
        .filter(|e| e["user"]["username"] == user.as_str())
        // A watch's answer completes only when it ends: its ResponseStarted stage counts.
        .filter(|e| e["stage"] == "ResponseComplete" || e["stage"] == "ResponseStarted")
        .collect();
    assert!(
        !events.is_empty(),
        "the audit log shows no request made as {user}"
    );
    let refused: Vec<String> = events
        .iter()
        .filter(|e| matches!(e["responseStatus"]["code"].as_u64(), Some(401 | 403)))
        .map(|e| {
            format!(
                "{} {} -> {}",
                e["verb"], e["requestURI"], e["responseStatus"]["code"]
            )
        })
        .collect();
    assert!(
        refused.is_empty(),
        "requests refused to {user}: {refused:#?}"
    );
    let mut used: Vec<String> = events
        .iter()
        .filter_map(|e| {
            let r = &e["objectRef"];
            let resource = r["resource"].as_str()?;
            let sub = r["subresource"]
                .as_str()
                .map(|s| format!("/{s}"))
                .unwrap_or_default();
            let group = r["apiGroup"].as_str().unwrap_or("");
            Some(format!("{} {group}/{resource}{sub}", e["verb"].as_str()?))
        })
        .collect();
    used.sort();
    used.dedup();
    eprintln!("verbs x resources used by {user}:\n  {}", used.join("\n  "));
    assert!(
        used.iter().any(|u| u.starts_with("patch apps/deployments")),
        "the re-stamp went through as {user}: {used:?}"
    );
}
