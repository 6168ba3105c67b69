//! Faults on the real node, one at a time (each disturbs the whole node): the leader `serve`
//! Pod deleted, the app's nginx master killed, the kubelet restarted. After each, the next
//! config edit still reaches the app, once.

use crate::cluster_support;

use std::time::{Duration, Instant};

use cluster_support::install::OWN;
use cluster_support::node::Node;
use cluster_support::node::install::NodeInstall;
use cluster_support::node::pods::{Writer, http_get, site};
use serde_json::Value;

/// An opted-in namespace with the nginx Deployment `web` serving `v0`; its one Pod.
fn web(node: &Node, tag: &str) -> (String, Value) {
    let (ns, pod) = node.deploy_site(tag);
    // Ready means started: nginx may take a moment to listen.
    let ip = pod["status"]["podIP"].as_str().unwrap();
    assert!(Node::await_body(ip, "v0\n", Instant::now(), Duration::from_secs(30)).is_some());
    (ns, pod)
}

/// The audit log's writes by `serve` to the Pod `name` since `since` (RFC 3339, µs).
fn refreshes(node: &Node, ns: &str, name: &str, since: &str) -> usize {
    let uri = format!("/api/v1/namespaces/{ns}/pods/{name}");
    node.cluster
        .audit_events()
        .iter()
        .filter(|e| {
            e["verb"] == "patch"
                && e["requestURI"]
                    .as_str()
                    .is_some_and(|u| u.starts_with(&uri))
        })
        .filter(|e| e["user"]["username"] == format!("system:serviceaccount:{OWN}:{OWN}"))
        .filter(|e| e["stageTimestamp"].as_str().is_some_and(|t| t >= since))
        .count()
}

fn now_rfc3339(node: &Node) -> String {
    // The API server's clock is this machine's; the audit log writes UTC with microseconds.
    let out = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%dT%H:%M:%S.%6NZ"])
        .output()
        .unwrap();
    let _ = node;
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[test]
fn when_the_leader_serve_pod_is_deleted_the_other_takes_over_and_the_next_edit_lands_once() {
    let _turn = Node::alone();
    let install = NodeInstall::shared();
    let node = install.node;
    let cluster = node.cluster;
    let (ns, pod) = web(node, "leader");
    let holder = || {
        cluster.get(OWN, "lease", "reload-injector")["spec"]["holderIdentity"]
            .as_str()
            .unwrap_or("")
            .to_owned()
    };
    let victim = install.leader_pod();
    let leader = holder();
    cluster
        .kubectl(&["delete", "pod", "-n", OWN, &victim, "--wait=false"])
        .run();
    // The other Pod, or the Deployment's replacement for the deleted one: whichever renews
    // first once the Lease runs out.
    let taker = cluster.wait_for(
        "another serve Pod to take the Lease",
        Duration::from_secs(90),
        || {
            let now = holder();
            (!now.is_empty() && !now.starts_with(&victim)).then_some(now)
        },
    );
    eprintln!("the Lease passed from {leader} to {taker}");

    let name = pod["metadata"]["name"].as_str().unwrap();
    let ip = pod["status"]["podIP"].as_str().unwrap();
    let since = now_rfc3339(node);
    let start = Writer::new(node).set("configmap", &ns, "site", "default.conf", &site("v1"));
    let took = Node::await_body(ip, "v1\n", start, Duration::from_secs(120))
        .expect("the edit after the takeover did not reach nginx");
    eprintln!("after the leader's deletion, an edit reached nginx in {took:.2?}");
    // One refresh is two patches of the Pod: `mounted-config-hash`, then the second nudge
    // (`mounted-config-refreshed`) 2 s later. A refresh written twice would be four.
    node.cluster.wait_for(
        "the refresh's second nudge",
        Duration::from_secs(30),
        || (refreshes(node, &ns, name, &since) >= 2).then_some(()),
    );
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        refreshes(node, &ns, name, &since),
        2,
        "one refresh of the Pod (its patch and its second nudge)"
    );
    install.wait_rolled_out();
}

#[test]
fn when_nginx_master_is_killed_the_sidecar_stays_and_reloads_the_restarted_app() {
    let _turn = Node::alone();
    let install = NodeInstall::shared();
    let node = install.node;
    let (ns, pod) = web(node, "kill");
    let name = pod["metadata"]["name"].as_str().unwrap().to_owned();
    let master = node.container_pid(&pod, "app");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(master as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let restarted = node.cluster.wait_for(
        "the app container to restart",
        Duration::from_secs(120),
        || {
            let pod = node.cluster.get(&ns, "pod", &name);
            let statuses = pod["status"]["containerStatuses"].as_array()?.clone();
            let app = statuses.iter().find(|s| s["name"] == "app")?;
            (app["restartCount"].as_i64() >= Some(1) && app["ready"] == true).then_some(pod)
        },
    );
    let sidecar_restarts: i64 = ["containerStatuses", "initContainerStatuses"]
        .iter()
        .filter_map(|k| restarted["status"][k].as_array())
        .flatten()
        .filter(|s| s["name"] == "config-reloader")
        .map(|s| s["restartCount"].as_i64().unwrap_or(0))
        .sum();
    assert_eq!(sidecar_restarts, 0, "the sidecar restarted");
    let ip = restarted["status"]["podIP"].as_str().unwrap();
    let start = Writer::new(node).set("configmap", &ns, "site", "default.conf", &site("v1"));
    let took = Node::await_body(ip, "v1\n", start, Duration::from_secs(120));
    assert!(took.is_some(), "the edit did not reach the restarted nginx");
}

#[test]
fn config_edits_made_while_the_kubelet_is_down_reach_the_app_when_it_returns() {
    let _turn = Node::alone();
    let install = NodeInstall::shared();
    let node = install.node;
    let (ns, pod) = web(node, "kubelet");
    let ip = pod["status"]["podIP"].as_str().unwrap();
    node.stop_kubelet();
    Writer::new(node).set("configmap", &ns, "site", "default.conf", &site("v1"));
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(
        http_get(ip, 8080).as_deref(),
        Some("v0\n"),
        "nothing can change the files while the kubelet is down"
    );
    let back = Instant::now();
    node.start_kubelet();
    let took = Node::await_body(ip, "v1\n", back, Duration::from_secs(120));
    let took = took
        .expect("the edit made while the kubelet was down did not reach nginx after it returned");
    eprintln!("after the kubelet's restart, the edit reached nginx in {took:.2?}");
    install.wait_rolled_out();
}
