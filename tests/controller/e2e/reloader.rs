//! End to end through a real kube-apiserver, Reloader gone (`serve --reloader-retired`): each of
//! Reloader's annotations, on a workload in a namespace without the label, with a change that acts
//! (the workload rolls: its `config-hash` is re-stamped; or its Pods' mounted config is refreshed:
//! their `mounted-config-hash` is patched, the hot reload's trigger) and a change that must not;
//! and an application chart that ships Reloader's annotations (tests/fixtures/helm/shop, ours),
//! installed unchanged with Helm, is managed.

use crate::cluster_support;
use crate::helm;

use std::sync::OnceLock;
use std::time::Duration;

use cluster_support::install::Install;
use cluster_support::objects::{config_map, secret};
use cluster_support::{Cluster, PATIENCE};
use serde_json::{Value, json};

const CONFIG_HASH: &str = "reload-injector.io/config-hash";
const MOUNTED_HASH: &str = "reload-injector.io/mounted-config-hash";
/// Long enough for a change the controller would act on to have been acted on: it logs the
/// change, waits `--rollout-delay` (1 s) and writes.
const SETTLE: Duration = Duration::from_secs(4);

fn install() -> &'static Install {
    static INSTALL: OnceLock<Install> = OnceLock::new();
    INSTALL.get_or_init(|| Install::with_serve_args(Cluster::own(), &["--reloader-retired"]))
}

/// A Deployment of one nginx Pod with these annotations on its own metadata, reading `env`
/// through `envFrom` (ConfigMaps) and `secretEnv` (Secrets), and mounting `mounted` ConfigMaps
/// as directories.
fn workload(
    name: &str,
    annotations: Value,
    env: &[&str],
    secrets: &[&str],
    mounted: &[&str],
) -> Value {
    let mut env_from: Vec<Value> = env
        .iter()
        .map(|cm| json!({"configMapRef": {"name": cm}}))
        .collect();
    env_from.extend(secrets.iter().map(|s| json!({"secretRef": {"name": s}})));
    let mounts: Vec<Value> = mounted
        .iter()
        .map(|cm| json!({"name": cm, "mountPath": format!("/etc/nginx/{cm}")}))
        .collect();
    let volumes: Vec<Value> = mounted
        .iter()
        .map(|cm| json!({"name": cm, "configMap": {"name": cm}}))
        .collect();
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "securityContext": {"runAsUser": 101},
                    "containers": [{
                        "name": "nginx", "image": "nginx:1.27", "command": ["nginx"],
                        "envFrom": env_from, "volumeMounts": mounts,
                    }],
                    "volumes": volumes,
                },
            },
        },
    })
}

/// One case: a namespace without the label, its objects, its workload `app`.
struct Case {
    install: &'static Install,
    ns: String,
}

impl Case {
    fn new(tag: &str) -> Case {
        let install = install();
        Case {
            install,
            ns: install.cluster.namespace(tag, false),
        }
    }

    fn cluster(&self) -> &'static Cluster {
        self.install.cluster
    }

    fn apply(&self, object: &Value) {
        let out = self.cluster().apply(&self.ns, object);
        assert!(out.ok, "{}: {}", self.ns, out.stderr);
    }

    fn config(&self, name: &str, value: &str) {
        self.apply(&config_map(name, &[("value", value)]));
    }

    fn secret(&self, name: &str, value: &str) {
        self.apply(&secret(name, &[("value", value)]));
    }

    fn hash(&self) -> Option<String> {
        let app = self.cluster().get(&self.ns, "deployment", "app");
        app["spec"]["template"]["metadata"]["annotations"][CONFIG_HASH]
            .as_str()
            .map(str::to_owned)
    }

    /// The `mounted-config-hash` of the workload's one Pod (once it has one with the sidecar).
    fn mounted(&self) -> String {
        self.cluster().wait_for(
            &format!("the Pod of {}/app with the sidecar", self.ns),
            PATIENCE,
            || {
                let pods = self.cluster().list_selected(&self.ns, "pods", "app=app");
                pods.iter().find_map(|p| {
                    p["metadata"]["annotations"][MOUNTED_HASH]
                        .as_str()
                        .map(str::to_owned)
                })
            },
        )
    }

    /// Changes `name` (a ConfigMap, or a Secret with `secret`) and waits until the workload's
    /// hash differs from `before`: the change rolled it.
    fn rolls(&self, name: &str, secret: bool, before: &Option<String>) -> Option<String> {
        self.change(name, secret);
        self.cluster().wait_for(
            &format!("{}/app to roll after {name} changed", self.ns),
            PATIENCE,
            || {
                let now = self.hash();
                (now != *before).then_some(now)
            },
        )
    }

    /// Changes `name` and checks that, once the controller could have acted, the workload's
    /// hash and its Pod's mounted hash are as they were.
    fn acts_not(&self, name: &str, secret: bool) {
        let (hash, mounted) = (self.hash(), self.mounted_now());
        self.change(name, secret);
        std::thread::sleep(SETTLE);
        self.install.serve.wait_caught_up(self.cluster());
        assert_eq!(self.hash(), hash, "{}: {name} rolled the workload", self.ns);
        assert_eq!(
            self.mounted_now(),
            mounted,
            "{}: {name} refreshed the Pod",
            self.ns
        );
    }

    fn mounted_now(&self) -> Vec<Option<String>> {
        let pods = self.cluster().list_selected(&self.ns, "pods", "app=app");
        pods.iter()
            .map(|p| {
                p["metadata"]["annotations"][MOUNTED_HASH]
                    .as_str()
                    .map(str::to_owned)
            })
            .collect()
    }

    fn change(&self, name: &str, secret: bool) {
        let value = format!("changed-{}", rand_suffix());
        if secret {
            self.secret(name, &value);
        } else {
            self.config(name, &value);
        }
    }
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

#[test]
fn auto_rolls_on_what_is_read_at_start_and_hot_reloads_what_nginx_mounts() {
    let case = Case::new("auto");
    case.config("env", "a");
    case.config("conf", "server {}");
    case.config("unread", "x");
    let annotations = json!({"reloader.stakater.com/auto": "true"});
    case.apply(&workload("app", annotations, &["env"], &[], &["conf"]));
    let stamped = case.hash();
    assert!(stamped.is_some(), "auto opts it in: stamped");
    // A mounted change is refreshed in the Pod (hot reload), never rolled.
    let mounted = case.mounted();
    case.change("conf", false);
    case.cluster().wait_for("the Pod's refresh", PATIENCE, || {
        (case.mounted_now() != vec![Some(mounted.clone())]).then_some(())
    });
    assert_eq!(
        case.hash(),
        stamped,
        "the nginx config change did not roll it"
    );
    case.acts_not("unread", false);
    // What is read at start rolls it.
    case.rolls("env", false, &stamped);
}

#[test]
fn typed_auto_follows_one_kind() {
    let case = Case::new("typed");
    case.config("env", "a");
    case.secret("creds", "s");
    let annotations = json!({"configmap.reloader.stakater.com/auto": "true"});
    case.apply(&workload("app", annotations, &["env"], &["creds"], &[]));
    let stamped = case.hash();
    case.rolls("env", false, &stamped);
    case.acts_not("creds", true);

    let case = Case::new("typed");
    case.config("env", "a");
    case.secret("creds", "s");
    let annotations = json!({"secret.reloader.stakater.com/auto": "true"});
    case.apply(&workload("app", annotations, &["env"], &["creds"], &[]));
    let stamped = case.hash();
    case.rolls("creds", true, &stamped);
    case.acts_not("env", false);
}

#[test]
fn reload_lists_count_only_what_they_name_read_or_not() {
    let case = Case::new("named");
    for name in ["env", "other", "extra"] {
        case.config(name, "a");
    }
    case.secret("creds", "s");
    case.secret("tls", "t");
    let annotations = json!({
        "configmap.reloader.stakater.com/reload": "env, extra",
        "secret.reloader.stakater.com/reload": "creds",
    });
    case.apply(&workload(
        "app",
        annotations,
        &["env", "other"],
        &["creds", "tls"],
        &[],
    ));
    let stamped = case.hash();
    let after_env = case.rolls("env", false, &stamped);
    // Named but not read by the pod: it still counts, whole.
    let after_extra = case.rolls("extra", false, &after_env);
    case.rolls("creds", true, &after_extra);
    case.acts_not("other", false);
    case.acts_not("tls", true);
}

#[test]
fn search_counts_the_objects_annotated_match() {
    let case = Case::new("search");
    let matched = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "tagged", "annotations": {"reloader.stakater.com/match": "true"}},
        "data": {"value": "a"},
    });
    case.apply(&matched);
    case.config("untagged", "a");
    let annotations = json!({"reloader.stakater.com/search": "true"});
    case.apply(&workload(
        "app",
        annotations,
        &["tagged", "untagged"],
        &[],
        &[],
    ));
    let stamped = case.hash();
    let mut changed = matched.clone();
    changed["data"]["value"] = json!("b");
    case.apply(&changed);
    case.cluster()
        .wait_for("the roll on the tagged change", PATIENCE, || {
            (case.hash() != stamped).then_some(())
        });
    case.acts_not("untagged", false);
}

#[test]
fn ignore_on_a_config_map_keeps_its_changes_from_rolling_anything() {
    let case = Case::new("ignore");
    let ignored = |value: &str| {
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "quiet", "annotations": {"reloader.stakater.com/ignore": "true"}},
            "data": {"value": value},
        })
    };
    case.apply(&ignored("a"));
    case.config("env", "a");
    let annotations = json!({"reloader.stakater.com/auto": "true"});
    case.apply(&workload("app", annotations, &["env", "quiet"], &[], &[]));
    let stamped = case.hash();
    let (hash, mounted) = (case.hash(), case.mounted_now());
    case.apply(&ignored("b"));
    std::thread::sleep(SETTLE);
    case.install.serve.wait_caught_up(case.cluster());
    assert_eq!((case.hash(), case.mounted_now()), (hash, mounted));
    case.rolls("env", false, &stamped);
}

#[test]
fn an_application_chart_with_reloaders_annotations_installs_unchanged_and_is_managed() {
    let install = install();
    let cluster = install.cluster;
    let ns = cluster.namespace("shop", false);
    let chart = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/helm/shop");
    let args: Vec<String> = [
        "install",
        "demo",
        &chart.to_string_lossy(),
        "-n",
        &ns,
        "--wait=false",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut cmd = helm::command(&args);
    cmd.env("KUBECONFIG", &cluster.kubeconfig);
    let out = helm::output(cmd);
    assert!(out.ok, "helm install: {}{}", out.stdout, out.stderr);

    let get = |kind: &str, name: &str| cluster.get(&ns, kind, name);
    let api = get("deployment", "demo-shop-api");
    let annotations = &api["spec"]["template"]["metadata"]["annotations"];
    assert!(annotations[CONFIG_HASH].is_string(), "{api}");
    assert_eq!(
        api["metadata"]["labels"]["reload-injector.io/managed"],
        "true"
    );
    let frontend = get("deployment", "demo-shop-frontend");
    assert_eq!(
        frontend["metadata"]["labels"]["reload-injector.io/managed"], "true",
        "its nginx config is hot-reloaded: {frontend}"
    );
    let report = get("cronjob", "demo-shop-report");
    let template = &report["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["annotations"];
    assert!(template[CONFIG_HASH].is_string(), "{report}");
    // Its nginx Pod carries the sidecar.
    let pods = cluster.wait_for("the frontend's Pod", PATIENCE, || {
        let pods = cluster.list_selected(&ns, "pods", "app.kubernetes.io/component=frontend");
        (!pods.is_empty()).then_some(pods)
    });
    let sidecar = pods[0]["spec"]["initContainers"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["name"] == "config-reloader");
    assert!(sidecar, "{}", pods[0]);

    // A change of the API's ConfigMap rolls it; a helm upgrade that changes nothing else rolls
    // nothing (the hash stays).
    let before = api["spec"]["template"]["metadata"]["annotations"][CONFIG_HASH].clone();
    let patch = r#"{"data":{"LOG_LEVEL":"debug"}}"#;
    cluster
        .kubectl(&[
            "patch",
            "configmap",
            "demo-shop-api",
            "-n",
            &ns,
            "-p",
            patch,
        ])
        .run();
    cluster.wait_for("the API to roll", PATIENCE, || {
        let now = get("deployment", "demo-shop-api");
        (now["spec"]["template"]["metadata"]["annotations"][CONFIG_HASH] != before).then_some(())
    });
}

/// The offline goldens read the chart as `helm template` renders it: the committed render is that.
#[test]
fn the_chart_fixture_render_is_the_one_offline_inject_reads() {
    let chart = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/helm/shop");
    let args = ["template", "demo", &chart.to_string_lossy(), "-n", "shop"];
    let out = helm::run(&args);
    assert!(out.ok, "helm template: {}", out.stderr);
    for case in ["reloader-chart", "reloader-chart-beside"] {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("tests/fixtures/inject-cli/{case}.yaml"));
        let committed = std::fs::read_to_string(&path).unwrap();
        let body: String = committed
            .lines()
            .skip_while(|l| l.starts_with("# "))
            .map(|l| format!("{l}\n"))
            .collect();
        assert_eq!(
            body,
            out.stdout,
            "{} is not the chart's render",
            path.display()
        );
    }
}
