//! Restart in place on the real node (`cluster_support::node`, the product installed as users
//! install it): a ConfigMap read through env reaches every replica of a workload without a
//! rollout, with the same Pods; the sidecar restarts its Pod only once the kubelet has the new
//! data, never for its initial state and never twice for one change.

mod cluster_support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use cluster_support::node::Node;
use cluster_support::node::install::NodeInstall;
use cluster_support::node::pods::{Writer, http_get};
use cluster_support::objects::config_map;
use reload_injector::hash::{ConfigData, ConfigId, ConfigObject, Consumed, Lookup, env_hash};
use serde_json::{Value, json};

const ENV_HASH: &str = "reload-injector.io/env-hash";
const SIDECAR: &str = "config-reloader";

/// The app: the node's nginx answering `GREETING` (read through env from ConfigMap `env`) and
/// an id of this start of the container, Ready once it answers.
fn app(node: &Node) -> Value {
    let script = "mkdir -p /etc/nginx/conf.d && \
        printf 'server { listen 8080; location / { return 200 \"%s %s\\n\"; } }\\n' \
        \"$GREETING\" \"$(cat /proc/sys/kernel/random/uuid)\" > /etc/nginx/conf.d/app.conf && \
        exec nginx -g 'daemon off;'";
    json!({
        "name": "app", "image": node.images.nginx, "imagePullPolicy": "Never",
        "command": ["sh", "-c", script],
        "env": [{"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": "env", "key": "GREETING"}}}],
        "ports": [{"containerPort": 8080}],
        "readinessProbe": {"httpGet": {"path": "/", "port": 8080}, "periodSeconds": 1},
    })
}

/// A workload of `kind` (`Deployment` or `StatefulSet`) with `replicas` Pods of [`app`], asking
/// to restart in place when `in_place`.
fn workload(node: &Node, kind: &str, name: &str, replicas: u32, in_place: bool) -> Value {
    let annotations = if in_place {
        json!({"reload-injector.io/env-change": "restart-in-place"})
    } else {
        json!({})
    };
    let mut object = json!({
        "apiVersion": "apps/v1", "kind": kind,
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}, "annotations": annotations},
                "spec": {"containers": [app(node)], "terminationGracePeriodSeconds": 2},
            },
        },
    });
    if kind == "StatefulSet" {
        object["spec"]["serviceName"] = json!(name);
    }
    object
}

/// The env hash the controller writes for `GREETING: value`.
fn hash_of(value: &str) -> String {
    let id = ConfigId::config_map("env");
    let object = ConfigObject::from_values(&id, [("GREETING", value.as_bytes())], None).unwrap();
    let data = ConfigData::from([(id.clone(), Lookup::Found(object))]);
    let consumed = BTreeSet::from([Consumed::Key(id, "GREETING".into())]);
    env_hash(&consumed, &data).unwrap()
}

/// What the app answers: its value and the id of its start.
fn answer(ip: &str) -> Option<(String, String)> {
    let body = http_get(ip, 8080)?;
    let (value, start) = body.trim().rsplit_once(' ')?;
    Some((value.to_owned(), start.to_owned()))
}

/// `restartCount` of each container of a Pod, by name.
fn restarts(pod: &Value) -> Vec<(String, i64)> {
    let mut counts: Vec<(String, i64)> = ["initContainerStatuses", "containerStatuses"]
        .iter()
        .filter_map(|f| pod["status"][f].as_array())
        .flatten()
        .map(|s| {
            let name = s["name"].as_str().unwrap_or_default().to_owned();
            (name, s["restartCount"].as_i64().unwrap_or(0))
        })
        .collect();
    counts.sort();
    counts
}

/// The sidecar of a running Pod restarts it in place (its rule is there, its hash stamped).
fn assert_restarts_in_place(pod: &Value) {
    let sidecar = pod["spec"]["initContainers"]
        .as_array()
        .and_then(|l| l.iter().find(|c| c["name"] == SIDECAR))
        .unwrap_or_else(|| panic!("no sidecar: {pod}"));
    assert!(sidecar["restartPolicyRules"].is_array(), "{sidecar}");
    assert!(
        pod["metadata"]["annotations"][ENV_HASH].is_string(),
        "{pod}"
    );
}

/// The race: a ConfigMap write and the Pod's new desired env hash arrive at once, ahead of the
/// kubelet's own watch of the ConfigMap. Ten times: the app restarts once, and the one start
/// after the sidecar exited answers the new value, never the old one. The controller's second
/// nudge is played by the test when the first sync remounted old data.
#[test]
fn the_app_never_starts_with_the_old_value_after_the_sidecar_exited_for_the_new_one() {
    let install = NodeInstall::shared();
    let node = install.node;
    let cluster = node.cluster;
    let ns = cluster.namespace("in-place-race", true);
    assert!(
        cluster
            .apply(&ns, &config_map("env", &[("GREETING", "v0")]))
            .ok
    );
    let out = cluster.apply(&ns, &workload(node, "Deployment", "web", 1, true));
    assert!(out.ok, "{}", out.stderr);
    let pod = node.running_pods(&ns, "web", 1).remove(0);
    assert_restarts_in_place(&pod);
    let name = pod["metadata"]["name"].as_str().unwrap().to_owned();
    let (uid, ip) = (
        pod["metadata"]["uid"].clone(),
        pod["status"]["podIP"].clone(),
    );
    let ip = ip.as_str().unwrap().to_owned();
    // The initial state restarts nothing.
    std::thread::sleep(Duration::from_secs(5));
    let counts = restarts(&cluster.get(&ns, "pod", &name));
    assert!(counts.iter().all(|(_, n)| *n == 0), "{counts:?}");

    let writer = Writer::new(node);
    let mut took = Vec::new();
    let mut nudged = 0;
    for i in 1..=10 {
        let (old, start) = answer(&ip).expect("the app answers");
        let value = format!("v{i}");
        let desired = hash_of(&value);
        let edit = ("env", "GREETING", value.as_str());
        let since =
            writer.set_with_annotation((&ns, edit.0, edit.1, edit.2), &name, (ENV_HASH, &desired));
        let mut nudge = Some(since + Duration::from_secs(2));
        let limit = Duration::from_secs(120);
        let restarted = loop {
            assert!(
                since.elapsed() < limit,
                "try {i}: no restart within {limit:?}"
            );
            if let Some((now, id)) = answer(&ip)
                && id != start
            {
                break now;
            }
            if nudge.is_some_and(|at| Instant::now() >= at) {
                writer.annotate(&ns, &name, "e2e.reload-injector.io/nudge", &value);
                nudge = None;
                nudged += 1;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        took.push(since.elapsed());
        assert_eq!(
            restarted, value,
            "try {i}: the app started again with {restarted:?}, not the new value (was {old:?})"
        );
        let counts = restarts(&cluster.get(&ns, "pod", &name));
        assert!(
            counts.iter().all(|(_, n)| *n == i),
            "try {i}: each container restarted once per change: {counts:?}"
        );
    }
    let pod = cluster.get(&ns, "pod", &name);
    assert_eq!(pod["metadata"]["uid"], uid, "the same Pod");
    assert_eq!(pod["status"]["podIP"], ip.as_str(), "the same address");
    eprintln!(
        "race: 10 changes, 10 restarts with the new value, none with the old; {nudged} needed the second nudge; write to new answer {took:.2?}"
    );
}
