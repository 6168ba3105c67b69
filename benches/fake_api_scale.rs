//! Scale of the fake API server the controller tests run against: load 20,000 ConfigMaps
//! and 20,000 Secrets (~800 MB of data), 5,000 Deployments and 20,000 Pods, then time what
//! a controller does at start (paginated lists, metadata-only lists, GETs of the data) and
//! the watch delivery delay.
//!
//! `cargo bench --bench fake_api_scale` runs the full size; without `--bench` (as
//! `cargo test --all-targets` runs it) it does a 1/100 pass so the suite stays fast.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, ListParams};
use kube::core::PartialObjectMeta;
use kube::runtime::watcher;
use serde_json::json;

use fake_kube_api::FakeApi;

fn main() {
    let full = std::env::args().any(|arg| arg == "--bench");
    let divisor = if full { 1 } else { 100 };
    let (configs, deployments, pods) = (20_000 / divisor, 5_000 / divisor, 20_000 / divisor);
    let value_len = 20_000;
    let api = FakeApi::start();
    let rss_before = rss_mib();

    let started = Instant::now();
    let mut raw_bytes = 0usize;
    for i in 0..configs {
        let ns = format!("ns-{}", i % 50);
        let value = filler(i, value_len);
        raw_bytes += 2 * value.len();
        api.apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("cm-{i}"), "namespace": ns},
            "data": {"app.conf": value}}));
        api.apply(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": format!("secret-{i}"), "namespace": ns},
            "stringData": {"password": value}}));
    }
    for i in 0..deployments {
        api.apply(json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": format!("web-{i}"), "namespace": format!("ns-{}", i % 50),
                "labels": {"reload-injector.io/managed": "true"}},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {
                "metadata": {"labels": {"app": "web"}, "annotations": {"reload-injector.io/config-hash": "sha256:0"}},
                "spec": {"containers": [{"name": "c", "image": "nginx",
                    "envFrom": [{"configMapRef": {"name": format!("cm-{i}")}}]}]}}}}));
    }
    for i in 0..pods {
        api.apply(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("pod-{i}"), "namespace": format!("ns-{}", i % 50),
                "labels": {"reload-injector.io/sidecar": "true"}},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}));
    }
    println!(
        "load: {} ConfigMaps + {} Secrets ({} MB raw data), {deployments} Deployments, {pods} Pods in {:.1} s; fake API RSS +{} MiB",
        configs,
        configs,
        raw_bytes / 1_000_000,
        started.elapsed().as_secs_f64(),
        rss_mib() - rss_before
    );

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let client = api.client().await;
        let cms: Api<ConfigMap> = Api::all(client.clone());
        let started = Instant::now();
        let (mut pages, mut items, mut token) = (0, 0, None::<String>);
        loop {
            let mut lp = ListParams::default().limit(500);
            if let Some(t) = &token {
                lp = lp.continue_token(t);
            }
            let page = cms.list(&lp).await.expect("list page");
            pages += 1;
            items += page.items.len();
            token = page.metadata.continue_.filter(|t| !t.is_empty());
            if token.is_none() {
                break;
            }
        }
        println!(
            "full list of ConfigMaps: {items} items in {pages} pages of 500, {:.2} s",
            started.elapsed().as_secs_f64()
        );

        let secrets: Api<PartialObjectMeta<Secret>> = Api::all(client.clone());
        let started = Instant::now();
        let mut stream = watcher::watcher(secrets, watcher::Config::default()).boxed();
        let mut seen = 0;
        while let Some(event) = stream.next().await {
            match event.expect("watch event") {
                watcher::Event::InitApply(_) => seen += 1,
                watcher::Event::InitDone => break,
                _ => {}
            }
        }
        println!(
            "metadata-only watcher initial sync of Secrets: {seen} objects in {:.2} s",
            started.elapsed().as_secs_f64()
        );

        let gets = 5_000 / divisor.min(10);
        let started = Instant::now();
        let mut latencies = Vec::with_capacity(gets);
        for i in 0..gets {
            let n = (i * 7919) % configs;
            let one: Api<ConfigMap> = Api::namespaced(client.clone(), &format!("ns-{}", n % 50));
            let t = Instant::now();
            one.get(&format!("cm-{n}")).await.expect("GET");
            latencies.push(t.elapsed());
        }
        latencies.sort();
        println!(
            "{gets} sequential GETs of {value_len}-byte ConfigMaps: {:.2} s, p50 {:?}, p99 {:?}",
            started.elapsed().as_secs_f64(),
            latencies[gets / 2],
            latencies[gets * 99 / 100]
        );

        // Watch delivery: commit → the kube watcher yields the object.
        let metas: Api<PartialObjectMeta<ConfigMap>> = Api::all(client.clone());
        let mut stream = watcher::watcher(metas, watcher::Config::default()).boxed();
        while let Some(event) = stream.next().await {
            if matches!(event.expect("event"), watcher::Event::InitDone) {
                break;
            }
        }
        let mut delays = Vec::new();
        for i in 0..50 {
            let changes = api.subscribe();
            api.apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "cm-0", "namespace": "ns-0"}, "data": {"app.conf": format!("v{i}")}}));
            let change = changes.recv_timeout(Duration::from_secs(5)).expect("change");
            loop {
                let event = tokio::time::timeout(Duration::from_secs(10), stream.next())
                    .await
                    .expect("event in time")
                    .expect("stream open")
                    .expect("event");
                if let watcher::Event::Apply(meta) = event
                    && meta.metadata.resource_version == Some(change.rv.to_string())
                {
                    delays.push(change.at.elapsed());
                    break;
                }
            }
        }
        delays.sort();
        println!(
            "watch delivery, commit → kube watcher event: p50 {:?}, max {:?} (50 changes)",
            delays[delays.len() / 2],
            delays[delays.len() - 1]
        );
    });
    println!("fake API RSS at the end: +{} MiB", rss_mib() - rss_before);
}

/// `len` bytes of printable text, different per `seed`.
fn filler(seed: usize, len: usize) -> String {
    let pattern = format!("{seed:08}-abcdefghijklmnopqrstuvwxyz0123456789\n");
    pattern.repeat(len / pattern.len() + 1)[..len].to_owned()
}

fn rss_mib() -> i64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<i64>().ok())
        .map_or(0, |kb| kb / 1024)
}
