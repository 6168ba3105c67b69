//! What the node tests do with Pods: the nginx app as a user deploys it, plain HTTP to a Pod's
//! address on the bridge, a container's log, and timed ConfigMap writes through the API.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::Node;

/// nginx's config for a site answering `body` on port 8080 (one `default.conf` key).
pub fn site(body: &str) -> String {
    format!("server {{ listen 8080; location / {{ return 200 \"{body}\\n\"; }} }}\n")
}

impl Node {
    /// A fresh opted-in namespace (`<tag>-<n>`) holding the ConfigMap `site` (answering `v0`)
    /// and the default [`nginx_deployment`] `web` reading it; returns the namespace and the
    /// Deployment's one running Pod.
    pub fn deploy_site(&self, tag: &str) -> (String, Value) {
        let cluster = self.cluster;
        let ns = cluster.namespace(tag, true);
        let site = super::super::objects::config_map("site", &[("default.conf", &site("v0"))]);
        let out = cluster.apply(&ns, &site);
        assert!(out.ok, "{}", out.stderr);
        let web = nginx_deployment(self, "web", "site", json!({}), json!({}));
        let out = cluster.apply(&ns, &web);
        assert!(out.ok, "{}", out.stderr);
        let pod = self.running_pods(&ns, "web", 1).remove(0);
        (ns, pod)
    }
}

/// A Deployment of the node's nginx image reading its site from the ConfigMap `config` mounted
/// as a directory at `/etc/nginx/conf.d` (what the product hot-reloads). `pod` is merged
/// into the pod template's spec, `container` into the app container.
pub fn nginx_deployment(
    node: &Node,
    name: &str,
    config: &str,
    pod: Value,
    container: Value,
) -> Value {
    let mut app = json!({
        "name": "app",
        "image": node.images.nginx,
        "imagePullPolicy": "Never",
        "command": ["nginx", "-g", "daemon off;"],
        "ports": [{"containerPort": 8080}],
        "volumeMounts": [{"name": "site", "mountPath": "/etc/nginx/conf.d"}],
    });
    merge(&mut app, container);
    let mut spec = json!({
        "containers": [app],
        "volumes": [{"name": "site", "configMap": {"name": config}}],
        "terminationGracePeriodSeconds": 2,
    });
    merge(&mut spec, pod);
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": spec},
        },
    })
}

/// Merges the object `extra` into `base`, key by key (objects recursively).
pub fn merge(base: &mut Value, extra: Value) {
    match (base, extra) {
        (Value::Object(base), Value::Object(extra)) => {
            for (key, value) in extra {
                merge(base.entry(key).or_insert(Value::Null), value);
            }
        }
        (base, extra) => *base = extra,
    }
}

/// `GET http://ip:port/`: the body, or `None` when it does not answer 200 within 2 s.
pub fn http_get(ip: &str, port: u16) -> Option<String> {
    let addr = format!("{ip}:{port}").parse().ok()?;
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(s, "GET / HTTP/1.0\r\nHost: test\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_owned())
}

impl Node {
    /// The Running, Ready Pods labelled `app=NAME` in `ns`, waited for (`count` of them, each
    /// with an address).
    pub fn running_pods(&self, ns: &str, app: &str, count: usize) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            let pods: Vec<Value> = self
                .cluster
                .list_selected(ns, "pods", &format!("app={app}"))
                .into_iter()
                .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
                .collect();
            let ready = pods.len() == count
                && pods.iter().all(|p| {
                    p["status"]["podIP"].is_string()
                        && p["status"]["conditions"].as_array().is_some_and(|c| {
                            c.iter()
                                .any(|c| c["type"] == "Ready" && c["status"] == "True")
                        })
                });
            if ready {
                return pods;
            }
            if Instant::now() >= deadline {
                let events = self.cluster.kubectl(&["get", "events", "-n", ns]).try_run();
                panic!(
                    "timed out waiting for {count} Ready Pods app={app} in {ns}; the Pods:\n{}\nthe Events:\n{}\n(logs in {})",
                    serde_json::to_string_pretty(&pods).unwrap_or_default(),
                    events.stdout,
                    self.dir.display()
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// `kubectl logs POD -c CONTAINER`.
    pub fn logs(&self, ns: &str, pod: &str, container: &str) -> String {
        self.cluster
            .kubectl(&["logs", "-n", ns, pod, "-c", container])
            .run()
            .stdout
    }

    /// Polls `GET http://ip:8080/` every 10 ms until it answers `want`; how long that took
    /// from `since`, or `None` after `limit`.
    pub fn await_body(ip: &str, want: &str, since: Instant, limit: Duration) -> Option<Duration> {
        while since.elapsed() < limit {
            if http_get(ip, 8080).as_deref() == Some(want) {
                return Some(since.elapsed());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }
}

/// Timed API writes: a kube client of the admin, so a write's time is the API call's and not a
/// `kubectl` process start.
pub struct Writer {
    runtime: tokio::runtime::Runtime,
    client: kube::Client,
}

impl Writer {
    /// A client for the node's cluster.
    pub fn new(node: &Node) -> Writer {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let client = runtime.block_on(async {
            let kubeconfig = kube::config::Kubeconfig::read_from(&node.cluster.kubeconfig).unwrap();
            let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
                .await
                .unwrap();
            kube::Client::try_from(config).unwrap()
        });
        Writer { runtime, client }
    }

    /// Merge-patches the ConfigMap's (or Secret's `stringData`) `key` to `value`; returns the
    /// instant just before the request was sent.
    pub fn set(&self, kind: &str, ns: &str, name: &str, key: &str, value: &str) -> Instant {
        use k8s_openapi::api::core::v1::{ConfigMap, Secret};
        use kube::api::{Api, Patch, PatchParams};
        let params = PatchParams::default();
        self.runtime.block_on(async {
            let start = Instant::now();
            match kind {
                "configmap" => {
                    let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), ns);
                    let patch = json!({"data": {key: value}});
                    api.patch(name, &params, &Patch::Merge(&patch))
                        .await
                        .unwrap();
                }
                _ => {
                    let api: Api<Secret> = Api::namespaced(self.client.clone(), ns);
                    let patch = json!({"stringData": {key: value}});
                    api.patch(name, &params, &Patch::Merge(&patch))
                        .await
                        .unwrap();
                }
            }
            start
        })
    }
}

impl Writer {
    /// Merge-patches the ConfigMap's `key` to `value` and, at the same moment on a second
    /// request, an annotation of `pod` (a Pod update that races the kubelet's own watch of the
    /// ConfigMap, as the controller's refresh does); returns the instant just before both were
    /// sent.
    pub fn set_racing_pod(
        &self,
        ns: &str,
        name: &str,
        key: &str,
        value: &str,
        pod: &str,
    ) -> Instant {
        let race = ("e2e.reload-injector.io/race", value);
        self.set_with_annotation((ns, name, key, value), pod, race)
    }
}

impl Writer {
    /// Merge-patches the ConfigMap's `key` to `value` and, on a second request at the same
    /// moment, the Pod's annotation `annotation` to `annotation_value`; returns the instant just
    /// before both were sent.
    pub fn set_with_annotation(
        &self,
        (ns, name, key, value): (&str, &str, &str, &str),
        pod: &str,
        (annotation, annotation_value): (&str, &str),
    ) -> Instant {
        use k8s_openapi::api::core::v1::{ConfigMap, Pod};
        use kube::api::{Api, Patch, PatchParams};
        let params = PatchParams::default();
        self.runtime.block_on(async {
            let config_maps: Api<ConfigMap> = Api::namespaced(self.client.clone(), ns);
            let pods: Api<Pod> = Api::namespaced(self.client.clone(), ns);
            let data = json!({"data": {key: value}});
            let note = json!({"metadata": {"annotations": {annotation: annotation_value}}});
            let (data, note) = (Patch::Merge(&data), Patch::Merge(&note));
            let start = Instant::now();
            let (config_map, pod) = tokio::join!(
                config_maps.patch(name, &params, &data),
                pods.patch(pod, &params, &note),
            );
            config_map.unwrap();
            pod.unwrap();
            start
        })
    }

    /// Merge-patches one annotation of a Pod.
    pub fn annotate(&self, ns: &str, pod: &str, annotation: &str, value: &str) {
        use k8s_openapi::api::core::v1::Pod;
        use kube::api::{Api, Patch, PatchParams};
        self.runtime.block_on(async {
            let pods: Api<Pod> = Api::namespaced(self.client.clone(), ns);
            let note = json!({"metadata": {"annotations": {annotation: value}}});
            pods.patch(pod, &PatchParams::default(), &Patch::Merge(&note))
                .await
                .unwrap();
        });
    }
}

/// p50 and max of `samples`.
pub fn p50_max(samples: &[Duration]) -> (Duration, Duration) {
    let mut sorted = samples.to_vec();
    sorted.sort();
    (sorted[sorted.len() / 2], *sorted.last().unwrap())
}

impl Node {
    /// The host PID of a running container of `pod` (from its `containerID` and containerd's
    /// task list): `/proc/PID/root` is the container's own view of its files.
    pub fn container_pid(&self, pod: &Value, container: &str) -> u32 {
        let statuses = [
            &pod["status"]["containerStatuses"],
            &pod["status"]["initContainerStatuses"],
        ];
        let id = statuses
            .iter()
            .filter_map(|s| s.as_array())
            .flatten()
            .find(|s| s["name"] == container)
            .and_then(|s| s["containerID"].as_str())
            .and_then(|id| id.strip_prefix("containerd://"))
            .unwrap_or_else(|| panic!("no running container {container} in {pod}"))
            .to_owned();
        let tasks = super::images::ctr(&self.socket, &["tasks", "ls"]);
        tasks
            .lines()
            .find_map(|l| {
                let mut words = l.split_whitespace();
                (words.next() == Some(id.as_str())).then(|| words.next()?.parse().ok())?
            })
            .unwrap_or_else(|| panic!("containerd runs no task {id}:\n{tasks}"))
    }

    /// `kubectl exec POD -c CONTAINER -- ARGS…`'s stdout.
    pub fn exec(&self, ns: &str, pod: &str, container: &str, args: &[&str]) -> String {
        let mut all = vec!["exec", "-n", ns, pod, "-c", container, "--"];
        all.extend_from_slice(args);
        self.cluster.kubectl(&all).run().stdout
    }
}
