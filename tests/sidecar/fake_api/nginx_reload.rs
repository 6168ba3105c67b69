//! End to end on one machine: a ConfigMap update at the (fake) API reaches a real nginx through
//! the real `serve` (its controller patches the Pod), a fake kubelet that rewrites the volume only
//! because the Pod was updated (the kubelet's AtomicWriter order), and the real `watch` sidecar
//! that SIGHUPs nginx. Needs root (PID namespace) and nginx, as the watcher tests do.

// The fake kubelet reuses the watcher tests' AtomicWriter (crates/fake-kube-api/src/atomic_dir.rs) by
// path, and this test needs both support modules.

use crate::rollout_support;
use crate::watch_support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use fake_kube_api::kubelet::{ConfigKind, FakeKubelet, Trigger};
use rollout_support::{Cluster, NS, wait_ready};
use serde_json::json;
use watch_support::nginx::{self, served, server_block};
use watch_support::pidns::Pod;
use watch_support::watcher::Watcher;
use watch_support::{PATIENCE, free_port, wait_for};

#[test]
fn a_configmap_update_at_the_api_reaches_nginx_through_a_pod_refresh() {
    let cluster = Cluster::new("e2e-nginx");
    let Pod { scratch, pid1, ns } = Pod::new("rollouts-e2e");
    let port = free_port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let site =
        |value: &str| Cluster::config_map("site", &[("site.conf", &server_block(port, value))]);
    cluster.put(&site("value-0"));
    cluster.put(&json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-1", "namespace": NS,
            "labels": {"reload-injector.io/sidecar": "true"},
            "annotations": {"reload-injector.io/injected": reload_injector::VERSION}},
        "spec": {
            "shareProcessNamespace": true,
            "containers": [{"name": "nginx", "image": "nginx", "volumeMounts": [{"name": "conf", "mountPath": "/etc/nginx/conf.d"}]}],
            "initContainers": [{"name": "config-reloader", "image": "ri", "restartPolicy": "Always", "args": ["watch", "--dir", "/etc/reload-injector/watch/conf"],
                "volumeMounts": [{"name": "conf", "mountPath": "/etc/reload-injector/watch/conf", "readOnly": true}]}],
            "volumes": [{"name": "conf", "configMap": {"name": "site"}}]
        }
    }));
    let conf_dir = scratch.join("conf.d");
    let kubelet = FakeKubelet::start(
        &cluster.api,
        NS,
        "web-1",
        vec![("site".to_owned(), ConfigKind::ConfigMap, conf_dir.clone())],
    );
    let _nginx = nginx::start(&ns, &scratch, &conf_dir, addr, "value-0");
    let watcher = Watcher::of_dir_in(&ns, None, &scratch, &conf_dir, &["--process", "nginx"]);
    let server = cluster.serve(&[]);
    wait_ready(&server, true);

    let mut took = Vec::new();
    for round in 1..=3 {
        let value = format!("value-{round}");
        let started = Instant::now();
        cluster.put(&site(&value));
        wait_for(
            &format!(
                "nginx to serve {value}; nginx log: {}",
                nginx::log(&scratch)
            ),
            PATIENCE,
            || (served(addr)? == value).then_some(()),
        );
        took.push(started.elapsed());
    }
    watcher.wait_reloads(3);
    let rewrites = kubelet.rewrites();
    assert!(
        rewrites[1..]
            .iter()
            .all(|r| r.trigger == Trigger::PodUpdate),
        "every refresh came from the Pod update, not a periodic sync: {rewrites:?}"
    );
    assert_eq!(pid1.count("pid1"), 0, "PID 1 is never signalled");
    // Not a speed test (see docs/controller.md for the measured figures): a refresh that waited
    // for a kubelet resync would take a minute.
    assert!(
        took.iter().all(|t| *t < Duration::from_secs(10)),
        "API update -> nginx serving took {took:?}"
    );
    eprintln!("API update -> nginx serving the new content: {took:?}");
    ns.close();
}
