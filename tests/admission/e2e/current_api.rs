//! End to end through a real kube-apiserver, on what a current Kubernetes adds and an old one
//! never showed us: native sidecars chosen by `--native-sidecars auto`, Pod Security admission
//! (which runs after our mutation, so a sidecar it refuses refuses the user's whole Pod),
//! batch/v1 CronJobs re-stamped, and our Events read through events.k8s.io/v1.

use crate::cluster_support;

use cluster_support::install::Install;
use cluster_support::objects::{config_map, env_from_config_map, secret};
use cluster_support::{Cluster, PATIENCE};
use serde_json::{Value, json};

const SIDECAR: &str = "config-reloader";
const CONFIG_HASH: &str = "reload-injector.io/config-hash";
const APP_UID: i64 = 101;

/// Where the app's UID and `runAsNonRoot` come from, in one cell of the matrix.
#[derive(Clone, Copy)]
struct Identity {
    name: &'static str,
    /// `securityContext` fields on the Pod.
    pod: &'static [(&'static str, i64)],
    /// `securityContext` fields on the app container.
    container: &'static [(&'static str, i64)],
    /// Whether the Pod says which UID the app runs as (else the image decides).
    uid_known: bool,
}

/// `1` in the field lists below stands for `runAsNonRoot: true`; `runAsUser` takes the UID.
const IDENTITIES: [Identity; 6] = [
    Identity {
        name: "nonroot+uid on pod",
        pod: &[("runAsNonRoot", 1), ("runAsUser", APP_UID)],
        container: &[],
        uid_known: true,
    },
    Identity {
        name: "nonroot+uid on container",
        pod: &[],
        container: &[("runAsNonRoot", 1), ("runAsUser", APP_UID)],
        uid_known: true,
    },
    Identity {
        name: "uid on pod, nonroot on container",
        pod: &[("runAsUser", APP_UID)],
        container: &[("runAsNonRoot", 1)],
        uid_known: true,
    },
    Identity {
        name: "nonroot on pod, uid from image",
        pod: &[("runAsNonRoot", 1)],
        container: &[],
        uid_known: false,
    },
    Identity {
        name: "nonroot on container, uid from image",
        pod: &[],
        container: &[("runAsNonRoot", 1)],
        uid_known: false,
    },
    // Root may be allowed: only `baseline` admits this one.
    Identity {
        name: "nothing set (may be root)",
        pod: &[],
        container: &[],
        uid_known: false,
    },
];

fn security_fields(fields: &[(&str, i64)]) -> serde_json::Map<String, Value> {
    fields
        .iter()
        .map(|(k, v)| {
            let value = if *k == "runAsNonRoot" {
                json!(*v == 1)
            } else {
                json!(v)
            };
            ((*k).to_owned(), value)
        })
        .collect()
}

/// An app that the `restricted` level admits by itself (apart from the identity fields, which
/// the cell sets), reading its config from a ConfigMap or Secret directory.
fn app_pod(name: &str, identity: Identity, secret_volume: bool, http: bool) -> Value {
    let mut pod_sc = security_fields(identity.pod);
    pod_sc.insert("seccompProfile".into(), json!({"type": "RuntimeDefault"}));
    let mut app_sc = security_fields(identity.container);
    app_sc.insert("allowPrivilegeEscalation".into(), json!(false));
    app_sc.insert("capabilities".into(), json!({"drop": ["ALL"]}));
    let volume = if secret_volume {
        json!({"name": "conf", "secret": {"secretName": "conf"}})
    } else {
        json!({"name": "conf", "configMap": {"name": "conf"}})
    };
    // Every cell also reads a ConfigMap through env and asks to restart in place: the same
    // sidecar then carries the restart rule and its volumes, which the level must admit too.
    let mut annotations = serde_json::Map::new();
    annotations.insert(
        "reload-injector.io/env-change".into(),
        json!("restart-in-place"),
    );
    if http {
        annotations.insert(
            "reload-injector.io/reload-url".into(),
            json!("http://127.0.0.1:8080/-/reload"),
        );
    }
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {
            "securityContext": pod_sc,
            "containers": [{
                "name": "app", "image": "nginx:1.27", "command": ["nginx", "-g", "daemon off;"],
                "securityContext": app_sc,
                "env": [env_from_config_map("MODE", "env", "mode")],
                "volumeMounts": [{"name": "conf", "mountPath": "/etc/nginx/conf.d"}],
            }],
            "volumes": [volume],
        },
    })
}

/// `kubectl create` of one object: (admitted, kubectl's `Warning:` lines, stderr).
fn create(
    cluster: &Cluster,
    ns: &str,
    object: &Value,
    dry_run: bool,
) -> (bool, Vec<String>, String) {
    let mut args = vec!["create", "-n", ns, "-f", "-"];
    if dry_run {
        args.push("--dry-run=server");
    }
    let out = cluster.kubectl(&args).stdin(&object.to_string()).try_run();
    (out.ok, out.warnings(), out.stderr)
}

/// The injected sidecar of a stored Pod: it must be a native one (an init container with
/// `restartPolicy: Always`), since every version we run serves them and `serve` runs with
/// `--native-sidecars auto`.
fn native_sidecar(pod: &Value) -> &Value {
    let name = pod["metadata"]["name"].as_str().unwrap_or_default();
    assert!(
        pod["spec"]["containers"]
            .as_array()
            .is_some_and(|cs| cs.iter().all(|c| c["name"] != SIDECAR)),
        "{name}: the sidecar is not a regular container: {pod}"
    );
    let sidecar = pod["spec"]["initContainers"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == SIDECAR))
        .unwrap_or_else(|| panic!("{name}: no {SIDECAR} in initContainers: {pod}"));
    assert_eq!(sidecar["restartPolicy"], "Always", "{name}: {sidecar}");
    sidecar
}

#[test]
fn native_sidecars_are_chosen_automatically() {
    let install = Install::shared();
    let cluster = install.cluster;
    let ns = cluster.namespace("native", true);
    cluster.apply(&ns, &config_map("conf", &[("site.conf", "server {}")]));
    let pod = app_pod("web", IDENTITIES[0], false, false);
    let (ok, _, stderr) = create(cluster, &ns, &pod, false);
    assert!(ok, "{stderr}");
    let stored = cluster.get(&ns, "pod", "web");
    native_sidecar(&stored);
    assert_eq!(
        stored["spec"]["shareProcessNamespace"], true,
        "signal mode shares the PID namespace: {stored}"
    );
}

/// One row of the Pod Security matrix, for the report.
struct Row {
    level: &'static str,
    identity: &'static str,
    volume: &'static str,
    mode: &'static str,
    sidecar_user: String,
    capabilities: String,
    reload_path: String,
}

#[test]
fn every_pod_a_pod_security_level_admits_is_admitted_with_the_sidecar() {
    let install = Install::shared();
    let cluster = install.cluster;
    let mut rows = Vec::new();
    for level in ["restricted", "baseline"] {
        let opted = cluster.pod_security_namespace(&format!("pss-{level}"), level, true);
        let plain = cluster.pod_security_namespace(&format!("pss-plain-{level}"), level, false);
        for ns in [&opted, &plain] {
            cluster.apply(ns, &config_map("env", &[("mode", "production")]));
            cluster.apply(ns, &config_map("conf", &[("site.conf", "server {}")]));
            cluster.apply(ns, &secret("conf", &[("site.conf", "server {}")]));
        }
        for (i, identity) in IDENTITIES.iter().enumerate() {
            for (secret_volume, volume) in [(false, "ConfigMap"), (true, "Secret")] {
                for (http, mode) in [(false, "signal"), (true, "HTTP")] {
                    let name = format!("c{i}-{}-{}", volume.to_lowercase(), mode.to_lowercase());
                    let pod = app_pod(&name, *identity, secret_volume, http);
                    // The level itself must admit the app, or the cell is not one to test.
                    let (alone, _, _) = create(cluster, &plain, &pod, true);
                    if !alone {
                        assert_eq!(
                            identity.name, "nothing set (may be root)",
                            "{level} refuses {name} without us: the matrix is wrong"
                        );
                        continue;
                    }
                    let (ok, warnings, stderr) = create(cluster, &opted, &pod, false);
                    assert!(
                        ok,
                        "{level} admits {name} ({}) without us, but not with us: {stderr}",
                        identity.name
                    );
                    let stored = cluster.get(&opted, "pod", &name);
                    let sidecar = native_sidecar(&stored);
                    let in_place = cluster.assets.minor >= 36;
                    assert_eq!(
                        sidecar["restartPolicyRules"].is_array(),
                        in_place,
                        "{name}: restarts in place from 1.36: {sidecar}"
                    );
                    let sc = &sidecar["securityContext"];
                    let user = sc["runAsUser"].as_i64();
                    let added = sc["capabilities"]["add"].clone();
                    if level == "restricted" {
                        assert!(
                            user.is_some_and(|u| u != 0) && sc["runAsNonRoot"] == true,
                            "{name}: under restricted the sidecar never runs as root: {sc}"
                        );
                        assert!(added.is_null(), "{name}: no added capability: {sc}");
                    }
                    let args = sidecar["args"].to_string();
                    let reload_path = if http {
                        assert!(args.contains("--url"), "{name}: {args}");
                        "HTTP POST".to_owned()
                    } else if identity.uid_known {
                        assert_eq!(user, Some(APP_UID), "{name}: same UID as the app: {sc}");
                        "signal, same UID".to_owned()
                    } else if added.to_string().contains("KILL") {
                        assert_eq!(level, "baseline", "{name}");
                        "signal, CAP_KILL".to_owned()
                    } else {
                        let fix = warnings
                            .iter()
                            .find(|w| w.contains("EPERM") && w.contains("set runAsUser"))
                            .unwrap_or_else(|| {
                                panic!("{name}: a weaker reload path needs a warning naming the fix: {warnings:?}")
                            });
                        format!("warning: {fix}")
                    };
                    rows.push(Row {
                        level,
                        identity: identity.name,
                        volume,
                        mode,
                        sidecar_user: user.map_or("-".into(), |u| u.to_string()),
                        capabilities: if added.is_null() {
                            "none".into()
                        } else {
                            added.to_string()
                        },
                        reload_path,
                    });
                }
            }
        }
    }
    eprintln!("| level | app identity | volume | mode | sidecar UID | caps added | reload path |");
    eprintln!("|---|---|---|---|---|---|---|");
    for r in &rows {
        eprintln!(
            "| {} | {} | {} | {} | {} | {} | {} |",
            r.level, r.identity, r.volume, r.mode, r.sidecar_user, r.capabilities, r.reload_path
        );
    }
    // 5 identities that restricted admits, 6 that baseline admits, each with 2 volumes x 2 modes.
    assert_eq!(rows.len(), (5 + 6) * 4, "every cell ran");
}

#[test]
fn a_batch_v1_cron_job_is_re_stamped_and_its_event_is_an_events_k8s_io_v1_event() {
    let install = Install::shared();
    let cluster = install.cluster;
    let ns = cluster.namespace("cron", true);
    cluster.apply(&ns, &config_map("cron-env", &[("MODE", "a")]));
    let cron = json!({
        "apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": "report"},
        "spec": {
            "schedule": "0 3 * * *",
            "jobTemplate": {"spec": {"template": {"spec": {
                "restartPolicy": "OnFailure",
                "containers": [{
                    "name": "report", "image": "busybox:1.36", "command": ["sh", "-c", "echo $MODE"],
                    "env": [env_from_config_map("MODE", "cron-env", "MODE")],
                }],
            }}}},
        },
    });
    let applied = cluster.apply(&ns, &cron);
    assert!(applied.ok, "{}", applied.stderr);
    let hash = |cluster: &Cluster| {
        cluster.get(&ns, "cronjob", "report")["spec"]["jobTemplate"]["spec"]["template"]["metadata"]
            ["annotations"][CONFIG_HASH]
            .as_str()
            .map(str::to_owned)
    };
    let first = hash(cluster).expect("the CronJob's template is stamped at admission");
    cluster.apply(&ns, &config_map("cron-env", &[("MODE", "b")]));
    cluster.wait_for("the controller to re-stamp the CronJob", PATIENCE, || {
        hash(cluster).filter(|h| *h != first)
    });
    let event = cluster.wait_for(
        "a ConfigChanged event in events.k8s.io/v1",
        PATIENCE,
        || {
            let listed = cluster
                .kubectl(&["get", "events.v1.events.k8s.io", "-n", &ns, "-o", "json"])
                .run()
                .json();
            listed["items"]
                .as_array()?
                .iter()
                .find(|e| e["reason"] == "ConfigChanged")
                .cloned()
        },
    );
    assert_eq!(event["apiVersion"], "events.k8s.io/v1", "{event}");
    assert_eq!(event["regarding"]["kind"], "CronJob", "{event}");
    assert_eq!(event["regarding"]["name"], "report", "{event}");
    let note = event["note"].as_str().unwrap_or_default();
    assert!(
        note.starts_with("reload-injector:") && note.contains("cron-env"),
        "{note}"
    );
}

/// The one check of a name before it becomes part of an API path (`names::is_object_name`)
/// says what the API server says: each name is a ConfigMap the real server accepts or refuses.
#[test]
fn the_name_check_agrees_with_the_api_server() {
    let cluster = Cluster::shared();
    let ns = cluster.namespace("names", false);
    let (longest, too_long) = ("n".repeat(253), "n".repeat(254));
    let names = [
        "cm-a",
        "web.settings",
        "a",
        "0",
        "a-b.c-d.e",
        "1.2.3",
        "a..b",
        "a.-b",
        "a-.b",
        "UPPER",
        "-a",
        "a-",
        ".a",
        "a_b",
        "a b",
        "é",
        &longest,
        &too_long,
    ];
    for name in names {
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}});
        let out = cluster.apply(&ns, &object);
        assert_eq!(
            out.ok,
            reload_injector::object_names::is_object_name(name),
            "{name:?}: the API server said {:?}",
            out.stderr
        );
        if !out.ok {
            assert!(out.stderr.contains("Invalid"), "{name:?}: {}", out.stderr);
        }
    }
}
