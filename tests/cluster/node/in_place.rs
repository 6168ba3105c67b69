//! Restart in place on the real node (`cluster_support::node`, the product installed as users
//! install it): a ConfigMap read through env reaches every replica of a workload without a
//! rollout, with the same Pods; the sidecar restarts its Pod only once the kubelet has the new
//! data, never for its initial state and never twice for one change.

use crate::cluster_support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use cluster_support::install::OWN;
use cluster_support::node::Node;
use cluster_support::node::install::NodeInstall;
use cluster_support::node::pods::{Writer, http_get};
use cluster_support::objects::config_map;
use reload_injector::hash::{ConfigData, ConfigId, ConfigObject, Consumed, Lookup, env_hash};
use serde_json::{Value, json};

const ENV_HASH: &str = "reload-injector.io/env-hash";
const SIDECAR: &str = "config-reloader";

/// The app: the node's nginx answering `GREETING` (read through env from ConfigMap `config`)
/// and an id of this start of the container, Ready once it answers. It exits at once when
/// `GREETING` is `crash` (an app that fails with the new value).
fn app(node: &Node, config: &str) -> Value {
    let script = "[ \"$GREETING\" = crash ] && exit 1; mkdir -p /etc/nginx/conf.d && \
        printf 'server { listen 8080; location / { return 200 \"%s %s\\n\"; } }\\n' \
        \"$GREETING\" \"$(cat /proc/sys/kernel/random/uuid)\" > /etc/nginx/conf.d/app.conf && \
        exec nginx -g 'daemon off;'";
    json!({
        "name": "app", "image": node.images.nginx, "imagePullPolicy": "Never",
        "command": ["sh", "-c", script],
        "env": [{"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": config, "key": "GREETING"}}}],
        "ports": [{"containerPort": 8080}],
        "readinessProbe": {"httpGet": {"path": "/", "port": 8080}, "periodSeconds": 1},
    })
}

/// A workload of `kind` (`Deployment` or `StatefulSet`) with `replicas` Pods of [`app`] reading
/// the ConfigMap named like it, asking to restart in place when `in_place`.
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
                "spec": {"containers": [app(node, name)], "terminationGracePeriodSeconds": 2},
            },
        },
    });
    if kind == "StatefulSet" {
        object["spec"]["serviceName"] = json!(name);
    }
    object
}

/// The env hash the controller writes for `GREETING: value` of ConfigMap `config`.
fn hash_of(config: &str, value: &str) -> String {
    let id = ConfigId::config_map(config);
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
    let _turn = Node::alone();
    let install = NodeInstall::shared();
    let node = install.node;
    let cluster = node.cluster;
    let ns = cluster.namespace("in-place-race", true);
    assert!(
        cluster
            .apply(&ns, &config_map("web", &[("GREETING", "v0")]))
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
        let desired = hash_of("web", &value);
        let edit = ("web", "GREETING", value.as_str());
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

/// A workload of `kind` named `name` with `replicas` Pods reading ConfigMap `name` (`v0`), in
/// `ns`, Ready and answering `v0`; its Pods.
fn deploy(
    node: &Node,
    ns: &str,
    kind: &str,
    name: &str,
    replicas: usize,
    in_place: bool,
) -> Vec<Value> {
    let cluster = node.cluster;
    assert!(
        cluster
            .apply(ns, &config_map(name, &[("GREETING", "v0")]))
            .ok
    );
    let out = cluster.apply(ns, &workload(node, kind, name, replicas as u32, in_place));
    assert!(out.ok, "{}", out.stderr);
    let pods = node.running_pods(ns, name, replicas);
    for pod in &pods {
        let ip = pod["status"]["podIP"].as_str().unwrap();
        let answered = wait_answer(ip, Duration::from_secs(60), |(value, _)| value == "v0");
        assert!(answered.is_some(), "{name}: the app does not answer v0");
    }
    pods
}

/// Polls the app at `ip` until its answer passes `done`, at most `limit`.
fn wait_answer(
    ip: &str,
    limit: Duration,
    done: impl Fn(&(String, String)) -> bool,
) -> Option<(String, String)> {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        if let Some(answer) = answer(ip).filter(|a| done(a)) {
            return Some(answer);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// The Pods of `app` that are not being deleted.
fn live_pods(node: &Node, ns: &str, app: &str) -> Vec<Value> {
    node.cluster
        .list_selected(ns, "pods", &format!("app={app}"))
        .into_iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .collect()
}

fn is_ready(pod: &Value) -> bool {
    pod["status"]["conditions"].as_array().is_some_and(|c| {
        c.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

/// Waits until `count` Pods of `app` are Ready and each answers `value`, and (for a rollout)
/// no other Pod is left; how long that took from `since`.
fn all_answer(
    node: &Node,
    ns: &str,
    app: &str,
    count: usize,
    value: &str,
    since: Instant,
) -> Duration {
    let limit = Duration::from_secs(300);
    loop {
        assert!(
            since.elapsed() < limit,
            "{app}: not every replica answers {value} after {limit:?}"
        );
        let pods = node
            .cluster
            .list_selected(ns, "pods", &format!("app={app}"));
        let done = pods.len() == count
            && pods.iter().all(|p| {
                p["metadata"]["deletionTimestamp"].is_null()
                    && is_ready(p)
                    && p["status"]["podIP"]
                        .as_str()
                        .and_then(answer)
                        .is_some_and(|(v, _)| v == value)
            });
        if done {
            return since.elapsed();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// UID and IP of each Pod, sorted.
fn identities(pods: &[Value]) -> Vec<(String, String)> {
    let mut ids: Vec<(String, String)> = pods
        .iter()
        .map(|p| {
            let uid = p["metadata"]["uid"].as_str().unwrap_or_default().to_owned();
            (
                uid,
                p["status"]["podIP"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    ids.sort();
    ids
}

/// One edit of a workload of `kind` that restarts in place, then the same edit of the same
/// workload that rolls, one after the other on the same node: the time from the write to the
/// last replica Ready with the new value, and what stayed the same.
fn measure(kind: &str, tag: &str) {
    let _turn = Node::alone();
    let install = NodeInstall::shared();
    let node = install.node;
    let cluster = node.cluster;
    let ns = cluster.namespace(tag, true);
    let before = deploy(node, &ns, kind, "inplace", 3, true);
    for pod in &before {
        assert_restarts_in_place(pod);
    }
    let writer = Writer::new(node);
    let since = writer.set("configmap", &ns, "inplace", "GREETING", "v1");
    let in_place = all_answer(node, &ns, "inplace", 3, "v1", since);
    let after = live_pods(node, &ns, "inplace");
    assert_eq!(
        identities(&after),
        identities(&before),
        "{kind}: the same Pods, the same IPs"
    );
    for pod in &after {
        let counts = restarts(pod);
        assert!(
            counts.iter().all(|(_, n)| *n == 1),
            "{kind}: each container restarted once: {counts:?}"
        );
        assert_eq!(
            pod["metadata"]["annotations"][ENV_HASH],
            hash_of("inplace", "v1")
        );
    }
    if kind == "Deployment" {
        assert_eq!(
            cluster.list(&ns, "replicasets").len(),
            1,
            "no new ReplicaSet"
        );
    }
    let stored = cluster.get(&ns, kind, "inplace");
    assert_eq!(
        stored["metadata"]["generation"], 1,
        "{kind}: the template was never written"
    );

    deploy(node, &ns, kind, "rolling", 3, false);
    let since = writer.set("configmap", &ns, "rolling", "GREETING", "v1");
    let rolling = all_answer(node, &ns, "rolling", 3, "v1", since);
    let ratio = rolling.as_secs_f64() / in_place.as_secs_f64();
    let line = format!(
        "{kind} of 3: restart in place {:.2} s, rolling update {:.2} s (ratio {ratio:.2})",
        in_place.as_secs_f64(),
        rolling.as_secs_f64()
    );
    eprintln!("{line}");
    std::fs::write(
        node.dir.join(format!("in-place-{}", kind.to_lowercase())),
        format!("{line}\n"),
    )
    .unwrap();
}

// How long each takes is measured, printed and kept in the node's directory (docs/in-place.md
// records it); it is not asserted: speed belongs to measurements, not to a pass or a fail.
#[test]
fn a_deployment_restarts_in_place_with_the_same_pods_and_one_replicaset() {
    measure("Deployment", "in-place-deploy");
}

#[test]
fn a_statefulset_restarts_in_place_with_the_same_pods() {
    measure("StatefulSet", "in-place-sts");
}

/// The app exits on the new value: the first wave's Pod crashes, the waves stop (an Event says
/// so), and the other replicas keep the old value and keep serving. Putting the old value back
/// restarts the crashed Pod with it.
#[test]
fn an_app_that_crashes_on_the_new_value_stops_the_waves_and_the_rest_keep_serving() {
    let _turn = Node::alone();
    let install = NodeInstall::shared();
    let node = install.node;
    let cluster = node.cluster;
    let ns = cluster.namespace("in-place-crash", true);
    let pods = deploy(node, &ns, "Deployment", "web", 3, true);
    let old = hash_of("web", "v0");
    Writer::new(node).set("configmap", &ns, "web", "GREETING", "crash");
    let stopped = cluster.wait_for(
        "the Event that the restarts stopped",
        Duration::from_secs(240),
        || {
            let events = cluster
                .kubectl(&["get", "events", "-n", &ns, "-o", "json"])
                .run()
                .json();
            events["items"].as_array()?.iter().find_map(|e| {
                let message = e["message"].as_str()?;
                message
                    .contains("restart in place stopped")
                    .then(|| message.to_owned())
            })
        },
    );
    eprintln!("{stopped}");
    let now: Vec<Value> = pods
        .iter()
        .map(|p| cluster.get(&ns, "pod", p["metadata"]["name"].as_str().unwrap()))
        .collect();
    let crashed: Vec<&Value> = now
        .iter()
        .filter(|p| p["metadata"]["annotations"][ENV_HASH] != old.as_str())
        .collect();
    assert_eq!(
        crashed.len(),
        1,
        "one wave (of one Pod) was written: {stopped}"
    );
    for pod in now
        .iter()
        .filter(|p| p["metadata"]["annotations"][ENV_HASH] == old.as_str())
    {
        let ip = pod["status"]["podIP"].as_str().unwrap();
        assert_eq!(
            answer(ip).map(|a| a.0).as_deref(),
            Some("v0"),
            "the others keep serving the old value"
        );
        assert!(restarts(pod).iter().all(|(_, n)| *n == 0), "{pod}");
    }
    // Nothing more is written while the value stays.
    std::thread::sleep(Duration::from_secs(10));
    let later = live_pods(node, &ns, "web");
    let still_old = later
        .iter()
        .filter(|p| p["metadata"]["annotations"][ENV_HASH] == old.as_str())
        .count();
    assert_eq!(still_old, 2);
    // The fix: the old value again. The crashed Pod restarts with it; every replica serves.
    let since = Writer::new(node).set("configmap", &ns, "web", "GREETING", "v0");
    let took = all_answer(node, &ns, "web", 3, "v0", since);
    eprintln!("after the old value was put back, every replica served it in {took:.2?}");
    assert_eq!(
        identities(&live_pods(node, &ns, "web")),
        identities(&pods),
        "the same Pods"
    );
}

/// Waits until one Pod of `app` has restarted in place (its restart counts rose).
fn first_restart(node: &Node, ns: &str, app: &str) {
    node.cluster
        .wait_for("the first wave's restart", Duration::from_secs(120), || {
            live_pods(node, ns, app)
                .iter()
                .any(|p| restarts(p).iter().any(|(_, n)| *n > 0))
                .then_some(())
        });
}

/// A fault in the middle of the waves (`disturb`); then every replica answers the new value,
/// each Pod restarted at least once and at most `most` times.
fn fault_mid_wave(tag: &str, most: i64, disturb: impl FnOnce(&NodeInstall)) {
    let _turn = Node::alone();
    let install = NodeInstall::shared();
    let node = install.node;
    let cluster = node.cluster;
    let ns = cluster.namespace(tag, true);
    let pods = deploy(node, &ns, "Deployment", "web", 3, true);
    let since = Writer::new(node).set("configmap", &ns, "web", "GREETING", "v1");
    first_restart(node, &ns, "web");
    disturb(install);
    let took = all_answer(node, &ns, "web", 3, "v1", since);
    eprintln!("{tag}: every replica answered the new value {took:.2?} after the write");
    let after = live_pods(node, &ns, "web");
    assert_eq!(identities(&after), identities(&pods), "the same Pods");
    // Settle, then count.
    std::thread::sleep(Duration::from_secs(10));
    for pod in live_pods(node, &ns, "web") {
        let counts = restarts(&pod);
        eprintln!("{tag}: {} restarted {counts:?}", pod["metadata"]["name"]);
        assert!(
            counts.iter().all(|(_, n)| (1..=most).contains(n)),
            "{tag}: restarted at least once, at most {most} times: {counts:?}"
        );
    }
    install.wait_rolled_out();
}

#[test]
fn when_the_leader_serve_is_killed_mid_wave_the_next_leader_finishes_and_no_pod_restarts_twice() {
    fault_mid_wave("in-place-leader", 1, |install| {
        let victim = install.leader_pod();
        install
            .node
            .cluster
            .kubectl(&[
                "delete",
                "pod",
                "-n",
                OWN,
                &victim,
                "--grace-period=0",
                "--force",
                "--wait=false",
            ])
            .run();
        eprintln!("deleted the leader {victim} mid-wave");
    });
}

/// The kubelet restarted while a Pod restarts in place starts that Pod's containers once more
/// (what the kubelet does, not ours): that Pod is not taken for a crash, and the waves finish.
#[test]
fn when_the_kubelet_restarts_mid_wave_the_waves_finish() {
    fault_mid_wave("in-place-kubelet", 2, |install| {
        install.node.stop_kubelet();
        std::thread::sleep(Duration::from_secs(3));
        install.node.start_kubelet();
        eprintln!("restarted the kubelet mid-wave");
    });
}
