//! End to end on a real node: the control plane of `cluster_support`, plus kube-scheduler, a
//! kubelet, containerd, runc and the CNI bridge (`cluster_support::node`), running the
//! product's own image, real nginx and a pause image built locally. The product is installed
//! as docs/install.md says, and the promise is checked where a real kubelet decides it: a
//! config edit reaches the running app.

use crate::cluster_support;

use std::time::{Duration, Instant};

use cluster_support::install::OWN;
use cluster_support::node::install::NodeInstall;
use cluster_support::node::pods::{Writer, nginx_deployment, p50_max, site};
use cluster_support::node::{GATEWAY, NODE, Node, SUBNET};
use cluster_support::objects::config_map;
use serde_json::{Value, json};

/// Whether `ip` is in [`SUBNET`] (a /24).
fn in_subnet(ip: &str) -> bool {
    let prefix = SUBNET.trim_end_matches("0/24");
    ip.starts_with(prefix) && ip != GATEWAY
}

#[test]
fn the_node_runs_real_pods_on_the_bridge() {
    let _turn = Node::beside_others();
    let node = Node::shared();
    let cluster = node.cluster;
    let ns = cluster.namespace("plain", false);
    cluster
        .apply(
            &ns,
            &config_map("site", &[("default.conf", &site("hello from nginx"))]),
        )
        .ok
        .then_some(())
        .expect("ConfigMap refused");
    let out = cluster.apply(
        &ns,
        &nginx_deployment(node, "web", "site", json!({}), json!({})),
    );
    assert!(out.ok, "{}", out.stderr);
    let pods = node.running_pods(&ns, "web", 1);
    let pod = &pods[0];
    assert_eq!(pod["spec"]["nodeName"], NODE);
    let ip = pod["status"]["podIP"].as_str().unwrap();
    assert!(in_subnet(ip), "Pod address {ip} is not in {SUBNET}");
    // Ready means started: nginx may take a moment to listen.
    assert!(
        Node::await_body(
            ip,
            "hello from nginx\n",
            Instant::now(),
            Duration::from_secs(30)
        )
        .is_some()
    );
    // Not opted in: no sidecar.
    let names: Vec<&str> = pod["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(names, ["app"]);
    eprintln!(
        "node start: {:.1} s (kubelet to Ready {:.1} s)",
        node.started.total.as_secs_f64(),
        node.started.kubelet_to_ready.as_secs_f64()
    );
}

#[test]
fn the_install_runs_serve_as_two_pods_behind_its_service() {
    let _turn = Node::beside_others();
    let install = NodeInstall::shared();
    let cluster = install.node.cluster;
    let pods = install.serve_pods();
    assert_eq!(pods.len(), 2, "{}", install.applied);
    for pod in &pods {
        assert_eq!(pod["spec"]["nodeName"], NODE);
        assert_eq!(pod["spec"]["serviceAccountName"], OWN);
        let statuses = pod["status"]["containerStatuses"].as_array().unwrap();
        assert!(statuses.iter().all(|s| s["ready"] == true), "{statuses:?}");
        assert!(in_subnet(pod["status"]["podIP"].as_str().unwrap()));
    }
    let pdb = cluster.get(OWN, "pdb", "reload-injector");
    assert_eq!(pdb["status"]["currentHealthy"], 2, "{pdb}");
    // The Service has both Pods as endpoints, and the API server calls them through it: a Pod
    // created in an opted-in namespace gets the sidecar (the Pod webhook is `Ignore`, so its
    // sidecar is the proof that the call went through).
    let ns = cluster.namespace("install", true);
    assert!(
        cluster
            .apply(&ns, &config_map("site", &[("default.conf", &site("v0"))]))
            .ok
    );
    let out = cluster.apply(
        &ns,
        &nginx_deployment(install.node, "web", "site", json!({}), json!({})),
    );
    assert!(out.ok, "{}", out.stderr);
    let pods = install.node.running_pods(&ns, "web", 1);
    assert!(has_sidecar(&pods[0]), "{}", pods[0]);
}

fn has_sidecar(pod: &Value) -> bool {
    let in_list = |list: &Value| {
        list.as_array()
            .is_some_and(|l| l.iter().any(|c| c["name"] == "config-reloader"))
    };
    in_list(&pod["spec"]["initContainers"]) || in_list(&pod["spec"]["containers"])
}

/// Edits the ConfigMap `edits` times and measures, for each, the time from the API write to
/// nginx answering with the new content.
fn measure(node: &Node, ns: &str, ip: &str, edits: usize, limit: Duration) -> Vec<Duration> {
    let writer = Writer::new(node);
    (1..=edits)
        .map(|i| {
            let body = format!("edit {i} at {:?}", Instant::now());
            let since = writer.set("configmap", ns, "site", "default.conf", &site(&body));
            let took = Node::await_body(ip, &format!("{body}\n"), since, limit)
                .unwrap_or_else(|| panic!("edit {i} did not reach nginx within {limit:?}"));
            // Edits of one workload closer than the refresh waves' settle time (2 s) wait for
            // the previous wave to settle; a person's edits are further apart.
            std::thread::sleep(Duration::from_millis(2500));
            took
        })
        .collect()
}

#[test]
fn a_mounted_config_edit_reaches_nginx_in_about_a_second_without_a_rollout() {
    let install = NodeInstall::shared();
    let _turn = Node::beside_others();
    let node = install.node;
    let cluster = node.cluster;
    let (ns, pod) = node.deploy_site("fresh");
    let name = pod["metadata"]["name"].as_str().unwrap().to_owned();
    let ip = pod["status"]["podIP"].as_str().unwrap().to_owned();
    assert!(Node::await_body(&ip, "v0\n", Instant::now(), Duration::from_secs(30)).is_some());

    let samples = measure(node, &ns, &ip, 10, Duration::from_secs(120));
    let (p50, max) = p50_max(&samples);
    eprintln!(
        "freshness (a) with the mounted-config-hash refresh, {} edits: p50 {:.2} s, max {:.2} s; all {samples:.2?}",
        samples.len(),
        p50.as_secs_f64(),
        max.as_secs_f64()
    );
    std::fs::write(
        node.dir.join("freshness-a"),
        format!("p50 {p50:?} max {max:?} samples {samples:?}\n"),
    )
    .unwrap();

    // The goal is p50 <= 1 s end to end; the bound here is loose (a loaded CI machine), and
    // still far from the periodic sync's minute.
    assert!(p50 < Duration::from_secs(5), "p50 {p50:?}: {samples:?}");
    // The sidecar reloaded nginx with a signal each time, and nothing rolled.
    // (The sidecar logs a reload once it has seen the target survive the signal.)
    let reloads = |log: &String| log.lines().filter(|l| l.contains("reloaded")).count();
    cluster.wait_for(
        "the sidecar to log ten reloads",
        Duration::from_secs(30),
        || {
            let log = node.logs(&ns, &name, "config-reloader");
            (reloads(&log) >= 10).then_some(())
        },
    );
    let after = node.running_pods(&ns, "web", 1).remove(0);
    assert_eq!(
        after["metadata"]["name"],
        name.as_str(),
        "the Pod was replaced"
    );
    let restarts: Vec<&Value> = after["status"]["containerStatuses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| &s["restartCount"])
        .collect();
    assert!(restarts.iter().all(|r| *r == 0), "{restarts:?}");
    assert_eq!(cluster.list(&ns, "replicasets").len(), 1);
}

/// The race of issue 31: the kubelet remounts from its own watch of the ConfigMap, so a Pod
/// update that reaches it before that watch has the new data remounts the old data. Here each
/// edit is written together with a Pod update of our own (two requests at once), so the kubelet
/// syncs the Pod as early as anything can make it; the controller's refresh and its second
/// nudge 2 s later (`mounted-config-refreshed`) must still bring the new content within
/// seconds, never at the periodic sync a minute later. An edit that took 2 s or more is one
/// where the early syncs remounted old data and the second nudge brought the new.
#[test]
fn a_refresh_that_races_the_kubelets_config_watch_still_lands_within_seconds() {
    let install = NodeInstall::shared();
    let _turn = Node::beside_others();
    let node = install.node;
    let cluster = node.cluster;
    let (ns, pod) = node.deploy_site("race");
    let name = pod["metadata"]["name"].as_str().unwrap().to_owned();
    let ip = pod["status"]["podIP"].as_str().unwrap().to_owned();
    assert!(Node::await_body(&ip, "v0\n", Instant::now(), Duration::from_secs(30)).is_some());

    let writer = Writer::new(node);
    let limit = Duration::from_secs(30);
    let samples: Vec<Duration> = (1..=10)
        .map(|i| {
            let body = format!("race {i} at {:?}", Instant::now());
            let since = writer.set_racing_pod(&ns, "site", "default.conf", &site(&body), &name);
            let took = Node::await_body(&ip, &format!("{body}\n"), since, limit)
                .unwrap_or_else(|| panic!("edit {i} did not reach nginx within {limit:?}"));
            std::thread::sleep(Duration::from_millis(2500));
            took
        })
        .collect();
    let (p50, max) = p50_max(&samples);
    let rescued = samples
        .iter()
        .filter(|s| **s >= Duration::from_secs(2))
        .count();
    eprintln!(
        "race: {} edits each with a Pod update at once: p50 {:.2} s, max {:.2} s; {rescued} needed the second nudge; all {samples:.2?}",
        samples.len(),
        p50.as_secs_f64(),
        max.as_secs_f64()
    );
    std::fs::write(
        node.dir.join("race"),
        format!("p50 {p50:?} max {max:?} rescued {rescued} samples {samples:?}\n"),
    )
    .unwrap();
    // Within seconds every time: the periodic sync would take a minute or more.
    assert!(max < Duration::from_secs(10), "max {max:?}: {samples:?}");
    let pod = cluster.get(&ns, "pods", &name);
    let annotations = &pod["metadata"]["annotations"];
    assert_eq!(
        annotations["reload-injector.io/mounted-config-refreshed"],
        annotations["reload-injector.io/mounted-config-hash"],
        "{annotations:#}"
    );
}

/// Sets (`Some`) or removes (`None`) an environment variable of `serve`'s Deployment and waits
/// for the rollout of its Pods.
fn set_serve_env(install: &NodeInstall, name: &str, value: Option<&str>) {
    let assignment = match value {
        Some(value) => format!("{name}={value}"),
        None => format!("{name}-"),
    };
    install
        .node
        .cluster
        .kubectl(&[
            "set",
            "env",
            "deployment/reload-injector",
            "-n",
            OWN,
            &assignment,
        ])
        .run();
    install.wait_rolled_out();
}

#[test]
fn without_the_refresh_a_mounted_config_edit_waits_for_the_kubelets_periodic_sync() {
    let install = NodeInstall::shared();
    let _turn = Node::alone();
    let node = install.node;
    let cluster = node.cluster;
    set_serve_env(install, "RELOAD_INJECTOR_ROLLOUTS", Some("false"));
    // Ten Pods, each with its own ConfigMap, edited together: each Pod's periodic sync runs on
    // its own timer, so the ten samples are independent and take one sync period in all.
    let ns = cluster.namespace("slow", true);
    let apps: Vec<String> = (0..10).map(|i| format!("web-{i}")).collect();
    for app in &apps {
        assert!(
            cluster
                .apply(&ns, &config_map(app, &[("default.conf", &site("v0"))]))
                .ok
        );
        let out = cluster.apply(&ns, &nginx_deployment(node, app, app, json!({}), json!({})));
        assert!(out.ok, "{}", out.stderr);
    }
    let ips: Vec<String> = apps
        .iter()
        .map(|app| {
            node.running_pods(&ns, app, 1)[0]["status"]["podIP"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    let writer = Writer::new(node);
    let handles: Vec<_> = apps
        .iter()
        .zip(&ips)
        .map(|(app, ip)| {
            let since = writer.set("configmap", &ns, app, "default.conf", &site("v1"));
            let ip = ip.clone();
            std::thread::spawn(move || {
                Node::await_body(&ip, "v1\n", since, Duration::from_secs(240))
            })
        })
        .collect();
    let samples: Vec<Duration> = handles
        .into_iter()
        .map(|h| {
            h.join()
                .unwrap()
                .expect("an edit did not reach nginx within 240 s")
        })
        .collect();
    set_serve_env(install, "RELOAD_INJECTOR_ROLLOUTS", None);
    let (p50, max) = p50_max(&samples);
    eprintln!(
        "freshness (b) without the refresh (the kubelet's periodic sync), {} edits: p50 {:.2} s, max {:.2} s; all {samples:.2?}",
        samples.len(),
        p50.as_secs_f64(),
        max.as_secs_f64()
    );
    std::fs::write(
        node.dir.join("freshness-b"),
        format!("p50 {p50:?} max {max:?} samples {samples:?}\n"),
    )
    .unwrap();
    // What the refresh is for: the periodic sync is at least tens of seconds.
    assert!(p50 > Duration::from_secs(10), "{samples:?}");
}
