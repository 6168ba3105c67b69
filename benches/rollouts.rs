//! The rollout controller's numbers, against the fake API server on loopback:
//!
//! 1. **Scale**: 20,000 ConfigMaps + 20,000 Secrets (800 MB of data), 5,000 stamped Deployments
//!    and 20,000 sidecar Pods; the time until `serve` has listed everything (the digests of the
//!    consumed objects come with the list of their namespace: no GET), and its RSS after that.
//! 2. **Reaction**: watch event sent by the API → PATCH received, for a pod refresh and for a
//!    rollout (which waits `--rollout-delay` on purpose).
//! 3. **Fan-out**: one ConfigMap read by 1,000 Pods → every Pod patched, at the write rate.
//! 4. **Waves**: a ConfigMap change → every Pod of an 8-replica Deployment refreshed (in waves
//!    of its `maxUnavailable`, 25% when unset: 2 Pods, each wave settling Ready for 2 s), against
//!    8 Pods that belong to no workload (refreshed at once).
//!
//! `cargo bench --bench rollouts` measures (`ROLLOUTS_BENCH_PHASES=scale` stops after the first
//! phase, `ROLLOUTS_BENCH_PHASES=waves` runs only the last); without `--bench` (as `cargo test --all-targets` runs it) every phase runs at a tiny
//! size as a smoke test. The end-to-end freshness through nginx is `tests/sidecar/fake_api/nginx_reload.rs`, which
//! prints its times.

#[path = "../tests/rollout_support/mod.rs"]
mod rollout_support;
#[path = "../tests/webhook_support/mod.rs"]
mod webhook_support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use reload_injector::hash::{
    ConfigData, ConfigId, ConfigObject, Consumed, Lookup, SecretKey, config_hash,
};
use rollout_support::{Cluster, NS, wait_for, wait_ready};
use serde_json::{Value, json};

/// Sizes of one run.
struct Sizes {
    config_maps: usize,
    secrets: usize,
    value_bytes: usize,
    workloads: usize,
    pods_per_config: usize,
    mounted_configs: usize,
    fan_out: usize,
    rounds: usize,
}

const FULL: Sizes = Sizes {
    config_maps: 20_000,
    secrets: 20_000,
    value_bytes: 20_000,
    workloads: 5_000,
    pods_per_config: 4,
    mounted_configs: 5_000,
    fan_out: 1_000,
    rounds: 30,
};

const SMOKE: Sizes = Sizes {
    config_maps: 40,
    secrets: 40,
    value_bytes: 100,
    workloads: 10,
    pods_per_config: 2,
    mounted_configs: 10,
    fan_out: 10,
    rounds: 3,
};

const KEY: &str = "rollout-test-key";

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let sizes = if bench { &FULL } else { &SMOKE };
    let cluster = Cluster::new(if bench { "bench" } else { "bench-smoke" });
    if std::env::var("ROLLOUTS_BENCH_PHASES").is_ok_and(|p| p == "waves") {
        let server = cluster.serve(&[]);
        wait_ready(&server, true);
        report_waves(&cluster);
        return;
    }
    let populated = Instant::now();
    populate(&cluster, sizes);
    println!(
        "populated the fake API: {} ConfigMaps, {} Secrets ({} MB of values), {} Deployments, {} Pods in {:.1?}",
        sizes.config_maps,
        sizes.secrets,
        (sizes.config_maps + sizes.secrets) * sizes.value_bytes / 1_000_000,
        sizes.workloads,
        sizes.mounted_configs * sizes.pods_per_config,
        populated.elapsed()
    );

    // 1. Scale: initial sync and memory.
    let consumed = sizes.workloads * 2 + sizes.mounted_configs;
    let started = Instant::now();
    let server = cluster.serve(&[]);
    wait_ready(&server, true);
    let listed = started.elapsed();
    std::thread::sleep(Duration::from_secs(2));
    let (rss, peak) = (
        status_mib(server.pid(), "VmRSS:"),
        status_mib(server.pid(), "VmHWM:"),
    );
    println!(
        "scale: listed {} objects (digests kept for the {consumed} consumed) in {listed:.1?}; RSS after sync {rss:.1} MiB (peak {peak:.1} MiB)",
        sizes.config_maps + sizes.secrets
    );
    assert!(
        cluster.patches().is_empty(),
        "start-up wrote something: {:?}",
        cluster.patches().len()
    );
    assert_eq!(config_gets(&cluster), 0, "no GET of a listed object");

    if std::env::var("ROLLOUTS_BENCH_PHASES").is_ok_and(|p| p == "scale") {
        return;
    }

    // 2. Reaction: event sent -> PATCH received.
    let mut refresh = Vec::new();
    let mut rollout = Vec::new();
    for round in 0..sizes.rounds {
        let mounted = format!("cm-{}", sizes.workloads + round % sizes.mounted_configs);
        refresh.push(reaction(&cluster, &mounted, round, "pods"));
        let env = format!("cm-{}", round % sizes.workloads);
        rollout.push(reaction(&cluster, &env, round, "deployments"));
    }
    println!(
        "reaction, watch event -> PATCH: pod refresh p50 {:.1} ms (max {:.1}); rollout p50 {:.1} ms (max {:.1}) with --rollout-delay 200ms",
        ms(percentile(&mut refresh, 50)),
        ms(percentile(&mut refresh, 100)),
        ms(percentile(&mut rollout, 50)),
        ms(percentile(&mut rollout, 100))
    );

    // 3. Fan-out at the default write rate.
    drop(server);
    let server = cluster.serve(&["--max-writes-per-second", "20"]);
    wait_ready(&server, true);
    fan_out(&cluster, sizes.fan_out);
    let before = pod_patches(&cluster);
    let started = Instant::now();
    cluster.put(&config_map("fan-out", "v2", 10));
    let all = wait_for(
        "every fan-out Pod patched",
        Duration::from_secs(600),
        || {
            let done = pod_patches(&cluster) - before;
            (done >= sizes.fan_out).then_some(done)
        },
    );
    let took = started.elapsed();
    println!(
        "fan-out: {all} of {} Pods refreshed in {took:.1?} ({:.1} writes/s, limit 20)",
        sizes.fan_out,
        all as f64 / took.as_secs_f64()
    );

    // 4. Waves: what they add to the time until every replica has the new config.
    report_waves(&cluster);
    if !bench {
        println!("(smoke run only; run `cargo bench --bench rollouts` to measure)");
    }
}

/// Phase 4 (`ROLLOUTS_BENCH_PHASES=waves` runs it alone).
fn report_waves(cluster: &Cluster) {
    let waved = waves(cluster);
    println!(
        "waves: 8 Pods of a Deployment (maxUnavailable unset: 25%, 4 waves of 2) refreshed in {:.1?}; \
         8 Pods of no workload (at once) in {:.1?}; waves add {:.1?}",
        waved.0,
        waved.1,
        waved.0.saturating_sub(waved.1)
    );
}

/// Times (Deployment's Pods in waves, Pods of no workload) from the ConfigMap change until every
/// Pod of each group has been patched.
fn waves(cluster: &Cluster) -> (Duration, Duration) {
    const PODS: usize = 8;
    cluster.put(&json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "waved", "namespace": NS, "uid": "waved-uid",
            "labels": {"reload-injector.io/managed": "true"}},
        "spec": {"replicas": PODS, "selector": {"matchLabels": {"app": "waved"}}, "template": {
            "metadata": {"labels": {"app": "waved"}},
            "spec": {"containers": [{"name": "app", "image": "x"}]}
        }}
    }));
    for cm in ["waved", "at-once"] {
        cluster.put(&config_map(cm, "v1", 10));
        let hash = mounted_hash(cm, "v1", 10);
        for p in 0..PODS {
            let mut pod = pod(&format!("{cm}-5d8f9c-{p}"), cm, Some(&hash));
            if cm == "waved" {
                pod["metadata"]["labels"]["pod-template-hash"] = json!("5d8f9c");
                pod["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1",
                    "kind": "ReplicaSet", "name": "waved-5d8f9c", "uid": "rs-uid", "controller": true}]);
            }
            pod["status"] = json!({"conditions": [{"type": "Ready", "status": "True"}]});
            cluster.put(&pod);
        }
    }
    std::thread::sleep(Duration::from_secs(2));
    let before = cluster.api.requests().len();
    let started = Instant::now();
    cluster.put(&config_map("waved", "v2", 10));
    cluster.put(&config_map("at-once", "v2", 10));
    let done = |prefix: &str| {
        let requests = cluster.api.requests();
        let patched: Vec<Instant> = requests[before..]
            .iter()
            .filter(|r| {
                r.method == "PATCH"
                    && r.path.contains(&format!("/pods/{prefix}-"))
                    && !second_nudge(r)
            })
            .map(|r| r.received)
            .collect();
        (patched.len() >= PODS).then(|| patched.into_iter().max().unwrap())
    };
    let at_once = wait_for(
        "every Pod of no workload patched",
        Duration::from_secs(60),
        || done("at-once"),
    );
    let waved = wait_for(
        "every Pod of the Deployment patched",
        Duration::from_secs(60),
        || done("waved"),
    );
    (
        waved.saturating_duration_since(started),
        at_once.saturating_duration_since(started),
    )
}

/// Creates everything; the workloads and Pods carry the hashes the webhook would have stamped.
fn populate(cluster: &Cluster, sizes: &Sizes) {
    let key = SecretKey::new(KEY.as_bytes()).expect("key");
    for i in 0..sizes.config_maps {
        cluster.put(&config_map(&format!("cm-{i}"), "v1", sizes.value_bytes));
    }
    for i in 0..sizes.secrets {
        let value = filler("s1", sizes.value_bytes);
        cluster.put(&json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": format!("secret-{i}"), "namespace": NS},
            "stringData": {"k0": value},
        }));
    }
    for i in 0..sizes.workloads {
        let (cm, secret) = (format!("cm-{i}"), format!("secret-{i}"));
        let consumed = BTreeSet::from([
            Consumed::Key(ConfigId::config_map(&cm), "k0".into()),
            Consumed::Key(ConfigId::secret(&secret), "k0".into()),
        ]);
        let mut data = ConfigData::new();
        data.insert(
            ConfigId::config_map(&cm),
            found(&ConfigId::config_map(&cm), "v1", sizes.value_bytes, None),
        );
        data.insert(
            ConfigId::secret(&secret),
            found(
                &ConfigId::secret(&secret),
                "s1",
                sizes.value_bytes,
                Some(&key),
            ),
        );
        let hash = config_hash(&consumed, &BTreeSet::new(), &data, Some(&key))
            .hash
            .unwrap();
        cluster.put(&deployment(&format!("web-{i}"), &cm, &secret, &hash));
    }
    for c in 0..sizes.mounted_configs {
        let cm = format!("cm-{}", sizes.workloads + c);
        let hash = mounted_hash(&cm, "v1", sizes.value_bytes);
        for p in 0..sizes.pods_per_config {
            cluster.put(&pod(&format!("pod-{c}-{p}"), &cm, Some(&hash)));
        }
    }
}

/// One round: changes `name` and returns the time from the API's watch event to the PATCH.
fn reaction(cluster: &Cluster, name: &str, round: usize, resource: &str) -> Duration {
    let before = cluster.api.requests().len();
    let stored = cluster.put(&config_map(name, &format!("r{round}"), 10));
    let rv: u64 = stored["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let patch = wait_for("the PATCH", Duration::from_secs(30), || {
        cluster.api.requests()[before..]
            .iter()
            .find(|r| r.method == "PATCH" && r.resource() == Some(resource) && !second_nudge(r))
            .cloned()
    });
    let sent = wait_for("the event's send time", Duration::from_secs(5), || {
        cluster.api.first_sent(rv)
    });
    std::thread::sleep(Duration::from_millis(300));
    patch.received.saturating_duration_since(sent)
}

fn fan_out(cluster: &Cluster, pods: usize) {
    cluster.put(&config_map("fan-out", "v1", 10));
    let hash = mounted_hash("fan-out", "v1", 10);
    for p in 0..pods {
        cluster.put(&pod(&format!("fan-{p}"), "fan-out", Some(&hash)));
    }
    std::thread::sleep(Duration::from_secs(2));
}

fn config_map(name: &str, version: &str, bytes: usize) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": NS},
        "data": {"k0": filler(version, bytes)},
    })
}

fn deployment(name: &str, cm: &str, secret: &str, hash: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS, "labels": {"reload-injector.io/managed": "true"}},
        "spec": {"selector": {"matchLabels": {"app": name}}, "template": {
            "metadata": {"labels": {"app": name}, "annotations": {"reload-injector.io/config-hash": hash}},
            "spec": {"containers": [{"name": "app", "image": "x", "env": [
                {"name": "A", "valueFrom": {"configMapKeyRef": {"name": cm, "key": "k0"}}},
                {"name": "B", "valueFrom": {"secretKeyRef": {"name": secret, "key": "k0"}}}
            ]}]}
        }}
    })
}

fn pod(name: &str, cm: &str, hash: Option<&str>) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NS,
            "labels": {"reload-injector.io/sidecar": "true"},
            "annotations": {"reload-injector.io/mounted-config-hash": hash}},
        "spec": {
            "containers": [{"name": "app", "image": "x", "volumeMounts": [{"name": "conf", "mountPath": "/etc/app"}]}],
            "initContainers": [{"name": "config-reloader", "image": "ri", "restartPolicy": "Always",
                "args": ["watch", "--dir", "/reload-injector/watch/conf"],
                "volumeMounts": [{"name": "conf", "mountPath": "/reload-injector/watch/conf"}]}],
            "volumes": [{"name": "conf", "configMap": {"name": cm}}]
        }
    })
}

fn mounted_hash(cm: &str, version: &str, bytes: usize) -> String {
    let id = ConfigId::config_map(cm);
    let mut data = ConfigData::new();
    data.insert(id.clone(), found(&id, version, bytes, None));
    config_hash(
        &BTreeSet::from([Consumed::Whole(id)]),
        &BTreeSet::new(),
        &data,
        None,
    )
    .hash
    .unwrap()
}

fn found(id: &ConfigId, version: &str, bytes: usize, key: Option<&SecretKey>) -> Lookup {
    let value = filler(version, bytes);
    Lookup::Found(ConfigObject::from_values(id, [("k0", value.as_bytes())], key).unwrap())
}

/// A value of about `bytes` bytes that differs per `version`.
fn filler(version: &str, bytes: usize) -> String {
    let mut value = format!("{version}:");
    while value.len() < bytes {
        value.push_str("0123456789abcdef");
    }
    value.truncate(bytes.max(version.len() + 1));
    value
}

fn config_gets(cluster: &Cluster) -> usize {
    cluster
        .api
        .requests()
        .iter()
        .filter(|r| {
            r.method == "GET"
                && !r.is_watch()
                && r.route().is_some_and(|route| route.name().is_some())
        })
        .filter(|r| matches!(r.resource(), Some("configmaps" | "secrets")))
        .count()
}

fn pod_patches(cluster: &Cluster) -> usize {
    cluster
        .patches()
        .iter()
        .filter(|p| p.resource() == Some("pods") && p.status == 200 && !second_nudge(p))
        .count()
}

/// A Pod's second nudge (`mounted-config-refreshed`, 2 s after its refresh), not a refresh.
fn second_nudge(request: &fake_kube_api::record::Recorded) -> bool {
    String::from_utf8_lossy(&request.body).contains("reload-injector.io/mounted-config-refreshed")
}

fn percentile(samples: &mut [Duration], p: usize) -> Duration {
    samples.sort();
    let index = (samples.len() * p / 100).min(samples.len() - 1);
    samples[index]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// A `/proc/<pid>/status` figure in kB (`VmRSS:` now, `VmHWM:` the peak), in MiB.
fn status_mib(pid: i32, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}
