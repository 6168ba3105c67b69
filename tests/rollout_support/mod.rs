//! A small cluster for the rollout controller's tests: the fake API server, the webhook's TLS
//! files and Secret-hash key, workloads stamped by the real `inject` binary, and real `serve`
//! processes talking to the fake API through a kubeconfig.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::webhook_support::process::Server;
use crate::webhook_support::{Scratch, bundle, scratch};
use fake_kube_api::{FakeApi, Recorded};

/// The opted-in namespace the tests use.
pub const NS: &str = "shop";
/// The webhook's own namespace (its Lease lives there).
pub const OWN: &str = "reload-injector";
/// Generous bound for "it happens" on a noisy 2-core machine.
pub const PATIENCE: Duration = Duration::from_secs(20);
/// How long the tests watch for a write that must not come.
pub const QUIET: Duration = Duration::from_millis(1500);

/// The fake API plus everything a `serve` process needs.
pub struct Cluster {
    /// The fake API server.
    pub api: FakeApi,
    dir: Scratch,
    kubeconfig: PathBuf,
}

impl Cluster {
    /// A fresh cluster with the namespace [`NS`] opted in and the webhook's namespace.
    pub fn new(tag: &str) -> Cluster {
        let dir = scratch(&format!("rollouts-{tag}"));
        let api = FakeApi::start();
        let kubeconfig = api.write_kubeconfig(&dir);
        let certs = bundle();
        std::fs::write(dir.join("tls.crt"), &certs.cert_pem).unwrap();
        std::fs::write(dir.join("tls.key"), &certs.key_pem).unwrap();
        std::fs::write(dir.join("ca.crt"), &certs.ca_cert_pem).unwrap();
        std::fs::write(dir.join("secret-hash.key"), "rollout-test-key\n").unwrap();
        let cluster = Cluster {
            api,
            dir,
            kubeconfig,
        };
        cluster.namespace(NS, true);
        cluster.namespace(OWN, false);
        cluster
    }

    /// The scratch directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Creates (or relabels) a namespace, opted in or not.
    pub fn namespace(&self, name: &str, opted_in: bool) {
        let labels = if opted_in {
            json!({"reload-injector.io/inject": "enabled"})
        } else {
            json!({})
        };
        self.api.apply(json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": labels}
        }));
    }

    /// A ConfigMap object (not stored).
    pub fn config_map(name: &str, data: &[(&str, &str)]) -> Value {
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": NS},
            "data": pairs(data),
        })
    }

    /// A Secret object (not stored), with `stringData` as a user writes it.
    pub fn secret(name: &str, data: &[(&str, &str)]) -> Value {
        json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": NS},
            "stringData": pairs(data),
        })
    }

    /// Stores `object` in the API (create or replace).
    pub fn put(&self, object: &Value) -> Value {
        self.api.apply(object.clone())
    }

    /// `workload` as the real `inject --configs` stamps it against `configs` (with the
    /// Secret-hash key), as JSON.
    pub fn inject(&self, workload: &Value, configs: &[Value]) -> Value {
        let input = self.dir.join("workload.json");
        std::fs::write(&input, serde_json::to_vec(workload).unwrap()).unwrap();
        let configs_file = self.dir.join("configs.json");
        let list = json!({"apiVersion": "v1", "kind": "List", "items": configs});
        std::fs::write(&configs_file, serde_json::to_vec(&list).unwrap()).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_reload-injector"))
            .args(["inject", "-o", "json", "-n", NS, "-f"])
            .arg(&input)
            .arg("--configs")
            .arg(&configs_file)
            .arg("--secret-hash-key-file")
            .arg(self.dir.join("secret-hash.key"))
            .output()
            .expect("run inject");
        assert!(out.status.success(), "inject: {out:?}");
        serde_json::from_slice(&out.stdout).expect("inject prints one JSON object")
    }

    /// The `config-hash` `inject` stamps on `workload` for `configs`.
    pub fn expected_hash(&self, workload: &Value, configs: &[Value]) -> String {
        template_hash(&self.inject(workload, configs)).expect("inject stamps a hash")
    }

    /// Starts `serve` against the fake API with a short rollout delay and Lease, plus `extra`.
    pub fn serve(&self, extra: &[&str]) -> Server {
        let key = self.dir.join("secret-hash.key");
        let mut args = vec![
            "--namespace",
            OWN,
            "--rollout-delay",
            "200ms",
            "--lease-duration",
            "3s",
            "--secret-hash-key-file",
            key.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        Server::start_with_env(
            "info,reload_injector=debug",
            &self.dir.join("tls.crt"),
            &self.dir.join("tls.key"),
            &args,
            &[(
                "KUBECONFIG",
                self.kubeconfig.to_str().expect("a UTF-8 path"),
            )],
        )
    }

    /// The pod-template `config-hash` of Deployment `name` now.
    pub fn hash_of(&self, name: &str) -> Option<String> {
        template_hash(&self.api.get("deployments", NS, name)?)
    }

    /// Waits up to `timeout` until Deployment `name` carries `want`.
    pub fn wait_hash(&self, name: &str, want: &str, timeout: Duration) {
        wait_for(&format!("{name} to carry {want}"), timeout, || {
            (self.hash_of(name).as_deref() == Some(want)).then_some(())
        });
    }

    /// Every PATCH the API received so far.
    pub fn patches(&self) -> Vec<Recorded> {
        self.api
            .requests()
            .into_iter()
            .filter(|r| r.method == "PATCH")
            .collect()
    }

    /// Every Event created so far (core/v1).
    pub fn events(&self) -> Vec<Value> {
        self.api
            .requests()
            .into_iter()
            .filter(|r| r.method == "POST" && r.resource() == Some("events"))
            .filter_map(|r| r.body_json())
            .collect()
    }

    /// Waits until `n` PATCHes were received.
    pub fn wait_patches(&self, n: usize) -> Vec<Recorded> {
        wait_for(&format!("{n} PATCH(es)"), PATIENCE, || {
            let patches = self.patches();
            (patches.len() >= n).then_some(patches)
        })
    }
}

/// Waits until `server` is ready (its view synced) and, with `leader`, holds the Lease.
pub fn wait_ready(server: &Server, leader: bool) {
    wait_for("/readyz", PATIENCE, || {
        server
            .side_get("/readyz")
            .ok()
            .filter(|(status, _)| *status == 200)
    });
    if leader {
        assert!(
            server.wait_metric("reload_injector_leader", 1.0, PATIENCE),
            "the server never became leader; log:\n{}",
            server.log().join("\n")
        );
    }
}

/// The ConfigMap/Secret watch events `server`'s controller has handled so far
/// (`reload_injector_config_events_total`).
pub fn config_events(server: &Server) -> f64 {
    let (_, text) = server.side_get("/metrics").expect("/metrics answers");
    series(&text, "reload_injector_config_events_total").unwrap_or(0.0)
}

/// Waits until `server`'s controller has handled at least `events` ConfigMap/Secret watch events
/// and has no write pending (`reload_injector_pending_writes` 0, read in the same scrape): every
/// write those events cause has been done by then, Events and second nudges included. A test
/// that expects no (further) write notes [`config_events`] before its edits, makes them, and
/// waits for that count plus the number of edits; with `0.0` it waits for the start-up checks
/// of a replica that leads.
pub fn wait_caught_up(server: &Server, events: f64) {
    wait_for(
        &format!("the controller to handle {events} config events and finish its writes"),
        PATIENCE,
        || {
            let (_, text) = server.side_get("/metrics").ok()?;
            let handled = series(&text, "reload_injector_config_events_total").unwrap_or(0.0);
            let pending = series(&text, "reload_injector_pending_writes")?;
            (handled >= events && pending == 0.0).then_some(())
        },
    );
}

/// The value of the sample `name` (without labels) on a `/metrics` page.
fn series(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

/// The pod template's `config-hash` of a workload object.
pub fn template_hash(object: &Value) -> Option<String> {
    let template = object
        .pointer("/spec/template")
        .or_else(|| object.pointer("/spec/jobTemplate/spec/template"))?;
    template["metadata"]["annotations"]["reload-injector.io/config-hash"]
        .as_str()
        .map(str::to_owned)
}

/// A Deployment `name` in [`NS`] whose container reads `key` of ConfigMap `config` through env.
pub fn env_deployment(name: &str, config: &str, key: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{
                    "name": "app", "image": "example.test/app:1",
                    "env": [{"name": "SETTING", "valueFrom": {"configMapKeyRef": {"name": config, "key": key}}}]
                }]}
            }
        }
    })
}

/// `workload` labelled `reload-injector.io/managed=true`, as the webhook labels the workloads it
/// admits that read config (the controller watches only those): for workloads a test stores
/// directly, standing for ones the webhook admitted.
pub fn managed(mut workload: Value) -> Value {
    workload["metadata"]["labels"]["reload-injector.io/managed"] = json!("true");
    workload
}

/// Polls `check` every 20 ms until it returns `Some`, or panics with `what` after `timeout`.
pub fn wait_for<T>(what: &str, timeout: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn pairs(data: &[(&str, &str)]) -> Value {
    Value::Object(
        data.iter()
            .map(|(k, v)| ((*k).to_owned(), Value::String((*v).to_owned())))
            .collect(),
    )
}
