//! `reload-injector status` at scale against the fake API server: one namespace with 500
//! workloads (400 Deployments, 50 StatefulSets, 50 DaemonSets), 2,000 sidecar Pods, 500
//! ConfigMaps, 500 Secrets and 500 Events. Times the real binary, start to exit, for the
//! summary of the namespace (every workload's full report) and for one Deployment (with its
//! sidecar logs). The bound: ≤ 2 s.
//!
//! `cargo bench --bench status_scale` runs the full size; without `--bench` (as
//! `cargo test --all-targets` runs it) it does a 1/20 pass so the suite stays fast.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use fake_kube_api::FakeApi;

const NS: &str = "scale";
const BIN: &str = env!("CARGO_BIN_EXE_reload-injector");
const BOUND: Duration = Duration::from_secs(2);

fn main() {
    let full = std::env::args().any(|arg| arg == "--bench");
    let divisor = if full { 1 } else { 20 };
    let workloads = 500 / divisor;
    let api = FakeApi::start();
    let started = Instant::now();
    load(&api, workloads);
    println!(
        "load: {workloads} workloads, {} Pods, {workloads} ConfigMaps, {workloads} Secrets, {workloads} Events in {:.1} s",
        workloads * 4,
        started.elapsed().as_secs_f64()
    );
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("status-scale-{}", api.addr().port()));
    let kubeconfig = api.write_kubeconfig(&dir);
    let mut worst = Duration::ZERO;
    for (what, args) in [
        ("summary of the namespace", vec!["-n", NS]),
        ("summary, -o json", vec!["-n", NS, "-o", "json"]),
        (
            "deploy/web-0 (3 sidecar logs)",
            vec!["deploy/web-0", "-n", NS],
        ),
    ] {
        let mut times = Vec::new();
        for _ in 0..5 {
            api.clear_requests();
            let started = Instant::now();
            let out = Command::new(BIN)
                .arg("status")
                .args(&args)
                .arg("--kubeconfig")
                .arg(&kubeconfig)
                .output()
                .expect("run status");
            times.push(started.elapsed());
            let code = out.status.code();
            assert!(
                matches!(code, Some(0 | 1)),
                "{what}: exit {code:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let requests = api.requests().len();
        times.sort();
        let median = times[times.len() / 2];
        worst = worst.max(median);
        println!(
            "{what}: median {:.0} ms (min {:.0}, max {:.0}) over {} runs, {requests} API requests per run",
            median.as_secs_f64() * 1000.0,
            times[0].as_secs_f64() * 1000.0,
            times[times.len() - 1].as_secs_f64() * 1000.0,
            times.len()
        );
    }
    if full && worst > BOUND {
        eprintln!("status took {worst:?}, more than the {BOUND:?} bound");
        std::process::exit(1);
    }
}

fn load(api: &FakeApi, workloads: usize) {
    api.apply(json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": NS, "labels": {"reload-injector.io/inject": "enabled"}}}));
    api.apply(json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "reload-injector"},
        "webhooks": [{"name": "pods.reload-injector.io", "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "clientConfig": {"caBundle": "Y2E=", "service": {"name": "reload-injector", "namespace": "reload-injector"}}}]}));
    api.apply(
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "reload-injector", "namespace": "reload-injector"},
        "spec": {"holderIdentity": "bench", "leaseDurationSeconds": 3600,
                 "renewTime": k8s_openapi::jiff::Timestamp::now().to_string()}}),
    );
    api.apply(json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "reload-injector-hash-key", "namespace": "reload-injector"},
        "stringData": {"secret-hash.key": "bench-key"}}));
    for i in 0..workloads {
        let data: serde_json::Map<String, Value> = (0..4)
            .map(|k| (format!("key-{k}"), json!(filler(i * 4 + k, 256))))
            .collect();
        api.apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("cm-{i}"), "namespace": NS}, "data": data}));
        api.apply(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": format!("secret-{i}"), "namespace": NS},
            "stringData": {"password": filler(i, 32)}}));
        let (api_version, kind, name) = match i % 10 {
            8 => ("apps/v1", "StatefulSet", format!("db-{i}")),
            9 => ("apps/v1", "DaemonSet", format!("agent-{i}")),
            _ => ("apps/v1", "Deployment", format!("web-{i}")),
        };
        let spec = json!({
            "containers": [{"name": "app", "image": "nginx", "command": ["nginx"],
                "env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": format!("cm-{i}"), "key": "key-0"}}},
                        {"name": "P", "valueFrom": {"secretKeyRef": {"name": format!("secret-{i}"), "key": "password"}}}],
                "volumeMounts": [{"name": "conf", "mountPath": "/etc/app"}]}],
            "volumes": [{"name": "conf", "configMap": {"name": format!("cm-{i}")}}]});
        api.apply(json!({"apiVersion": api_version, "kind": kind,
            "metadata": {"name": name, "namespace": NS, "uid": format!("uid-{i}")},
            "spec": {"replicas": 4, "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name},
                    "annotations": {"reload-injector.io/config-hash": "sha256:0"}}, "spec": spec}}}));
        for p in 0..4 {
            let mut pod_spec = spec.clone();
            pod_spec["initContainers"] = json!([{"name": "config-reloader", "restartPolicy": "Always",
                "args": ["watch", "--dir", "/reload-injector/watch/conf"],
                "volumeMounts": [{"name": "conf", "mountPath": "/reload-injector/watch/conf"}]}]);
            let pod = format!("{name}-{p}");
            api.apply(json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": pod, "namespace": NS,
                    "labels": {"app": name, "reload-injector.io/sidecar": "true"},
                    "annotations": {"reload-injector.io/config-hash": "sha256:0",
                                    "reload-injector.io/mounted-config-hash": "sha256:0"}},
                "spec": pod_spec,
                "status": {"phase": "Running", "initContainerStatuses": [{"name": "config-reloader", "restartCount": 0}]}}));
            api.set_log(NS, &pod, "config-reloader",
                "2026-11-24T11:40:03Z INFO reload_injector::watch::runner: reloaded dir=/reload-injector/watch/conf result=success\n");
        }
        api.apply(json!({"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": format!("{name}.1"), "namespace": NS},
            "involvedObject": {"kind": kind, "name": name, "namespace": NS},
            "reason": "ConfigChanged", "message": "reload-injector: ConfigMap changed"}));
    }
}

/// A deterministic printable value of `len` bytes.
fn filler(seed: usize, len: usize) -> String {
    (0..len)
        .map(|i| (b'a' + ((seed * 31 + i * 7) % 26) as u8) as char)
        .collect()
}
