//! What the controller's sync costs the real API server (v1.37, from the test harness), side by
//! side with a reference informer doing Reloader's job: full LIST+WATCH of ConfigMaps, Secrets
//! and the workload kinds, written with kube-runtime's reflector (this binary, run as
//! `api_cost --informer`).
//!
//! The cluster: 5,000 ConfigMaps and 1,000 Secrets of 10–20 KB in 100 namespaces (20 opted in),
//! 1,000 workloads (Deployments, StatefulSets, DaemonSets, CronJobs), of which the 200 in
//! opted-in namespaces are stamped by the webhook and read 1,000 of the objects. No
//! kube-controller-manager runs while measuring: the API server's only client is the one
//! measured. For each client (the informer; `serve` from `RI_BEFORE_BIN` if set, one and two
//! replicas; this build's `serve`, one and two replicas): requests by verb and resource
//! (`apiserver_request_total`), response bytes by verb (`apiserver_response_sizes`, which
//! counts a watch's bytes, streaming lists' initial events included, when it ends), the API
//! server's CPU seconds (`/proc/PID/stat`) from start until the client's requests stop, the
//! time until every replica's `/readyz` (the informer: every store ready), and peak RSS.
//!
//! `cargo bench --bench api_cost` (about 2 minutes once built: 10 s to load, then the five
//! clients one after another); without `--bench` (as
//! `cargo test --all-targets` runs it) it does nothing, since it needs the control-plane
//! binaries (`scripts/` fetches them).

#[path = "../tests/cluster_support/mod.rs"]
mod cluster_support;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cluster_support::Cluster;
use cluster_support::install::{Install, Serve};
use futures_util::StreamExt;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

const NAMESPACES: usize = 100;
const OPTED_IN: usize = 20;
const CONFIG_MAPS: usize = 5_000;
const SECRETS: usize = 1_000;
const WORKLOADS: usize = 1_000;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--informer") {
        informer();
        return;
    }
    if !args.iter().any(|a| a == "--bench") {
        println!("api_cost: run with `cargo bench --bench api_cost` (it needs a control plane)");
        return;
    }
    let mut cluster = Cluster::start();
    cluster.stop_controller_manager();
    let cluster: &'static Cluster = Box::leak(Box::new(cluster));
    let install = Install::new(cluster);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let started = Instant::now();
    runtime.block_on(load(cluster));
    println!("load: {:.0} s", started.elapsed().as_secs_f64());
    install.serve.kill();
    std::thread::sleep(Duration::from_secs(3));

    let mut columns: Vec<(String, Measured)> = Vec::new();
    let me = std::env::current_exe().unwrap();
    columns.push((
        "informer (reflector)".into(),
        measure(cluster, || vec![Client::informer(cluster, &me)]),
    ));
    if let Some(before) = std::env::var_os("RI_BEFORE_BIN").map(PathBuf::from) {
        for replicas in [1, 2] {
            columns.push((
                format!("before, {replicas} replica(s)"),
                measure(cluster, || serves(&install, replicas, &before, "before")),
            ));
        }
    }
    let after = PathBuf::from(env!("CARGO_BIN_EXE_reload-injector"));
    for replicas in [1, 2] {
        columns.push((
            format!("this build, {replicas} replica(s)"),
            measure(cluster, || serves(&install, replicas, &after, "after")),
        ));
    }
    print_table(&columns);
}

/// `replicas` `serve` processes of `binary`.
fn serves(install: &Install, replicas: usize, binary: &Path, tag: &str) -> Vec<Client> {
    (0..replicas)
        .map(|i| Client::Serve(install.start_serve_from(&format!("{tag}-{replicas}-{i}"), binary)))
        .collect()
}

/// A measured client process.
enum Client {
    Serve(Serve),
    Informer(std::process::Child, std::sync::mpsc::Receiver<()>),
}

impl Client {
    fn informer(cluster: &Cluster, me: &Path) -> Client {
        let mut child = Command::new(me)
            .arg("--informer")
            .env("KUBECONFIG", &cluster.kubeconfig)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("failed to start the informer");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line == "synced" {
                    let _ = tx.send(());
                }
            }
        });
        Client::Informer(child, rx)
    }

    fn pid(&self) -> u32 {
        match self {
            Client::Serve(serve) => serve.pid().unwrap(),
            Client::Informer(child, _) => child.id(),
        }
    }

    fn ready(&self) -> bool {
        match self {
            Client::Serve(serve) => serve.get("/readyz").0 == 200,
            Client::Informer(_, rx) => rx.try_recv().is_ok(),
        }
    }

    fn stop(self) {
        match self {
            Client::Serve(serve) => serve.kill(),
            Client::Informer(mut child, _) => {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// One column of the table.
struct Measured {
    requests: BTreeMap<String, f64>,
    /// Verb → bytes.
    response_bytes: BTreeMap<String, f64>,
    cpu_seconds: f64,
    ready: Duration,
    settled: Duration,
    peak_rss_mib: Vec<f64>,
}

fn measure(cluster: &Cluster, start: impl FnOnce() -> Vec<Client>) -> Measured {
    let before = Scrape::take(cluster);
    let cpu_before = cpu_seconds(cluster.apiserver_pid());
    let started = Instant::now();
    let clients = start();
    let mut ready = vec![None; clients.len()];
    while ready.iter().any(Option::is_none) {
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "not ready in 10 min"
        );
        for (i, client) in clients.iter().enumerate() {
            if ready[i].is_none() && client.ready() {
                ready[i] = Some(started.elapsed());
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let ready = ready.into_iter().flatten().max().unwrap();
    // The sync is over once the client's reads have stopped for 4 s (watches are counted when
    // they end, so this counts LISTs and GETs).
    let mut last = Scrape::take(cluster).reads();
    let mut quiet = 0;
    let mut settled = started.elapsed();
    while quiet < 2 {
        std::thread::sleep(Duration::from_secs(2));
        let now = Scrape::take(cluster).reads();
        if now == last {
            quiet += 1;
        } else {
            quiet = 0;
            settled = started.elapsed();
        }
        last = now;
    }
    let cpu_seconds = cpu_seconds(cluster.apiserver_pid()) - cpu_before;
    let peak_rss_mib = clients.iter().map(|c| peak_rss_mib(c.pid())).collect();
    for client in clients {
        client.stop();
    }
    // The watches just ended: now they are counted.
    std::thread::sleep(Duration::from_secs(2));
    let after = Scrape::take(cluster);
    Measured {
        requests: after.requests_since(&before),
        response_bytes: after
            .response_bytes
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    v - before.response_bytes.get(k).copied().unwrap_or(0.0),
                )
            })
            .collect(),
        cpu_seconds,
        ready,
        settled,
        peak_rss_mib,
    }
}

/// The API server's counters at one moment.
struct Scrape {
    /// `VERB resource` → requests (resource requests only).
    requests: BTreeMap<String, f64>,
    /// Verb → bytes (resource requests only).
    response_bytes: BTreeMap<String, f64>,
}

impl Scrape {
    fn take(cluster: &Cluster) -> Scrape {
        let text = cluster.apiserver_metrics();
        let mut scrape = Scrape {
            requests: BTreeMap::new(),
            response_bytes: BTreeMap::new(),
        };
        for line in text.lines() {
            let Some((series, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let Ok(value) = value.parse::<f64>() else {
                continue;
            };
            let (name, labels) = series.split_once('{').unwrap_or((series, ""));
            let label = |key: &str| {
                labels
                    .split(',')
                    .find_map(|l| l.strip_prefix(&format!("{key}=\"")))
                    .map(|v| v.trim_end_matches(['"', '}']).to_owned())
                    .unwrap_or_default()
            };
            match name {
                "apiserver_request_total" if !label("resource").is_empty() => {
                    let mut resource = label("resource");
                    let sub = label("subresource");
                    if !sub.is_empty() {
                        resource = format!("{resource}/{sub}");
                    }
                    *scrape
                        .requests
                        .entry(format!("{} {resource}", label("verb")))
                        .or_default() += value;
                }
                "apiserver_response_sizes_sum" if !label("resource").is_empty() => {
                    *scrape.response_bytes.entry(label("verb")).or_default() += value;
                }
                _ => {}
            }
        }
        scrape
    }

    /// LISTs and GETs of the resources the clients read.
    fn reads(&self) -> f64 {
        self.requests
            .iter()
            .filter(|(k, _)| k.starts_with("LIST ") || k.starts_with("GET "))
            .filter(|(k, _)| !k.ends_with("leases"))
            .map(|(_, v)| v)
            .sum()
    }

    fn requests_since(&self, before: &Scrape) -> BTreeMap<String, f64> {
        self.requests
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    v - before.requests.get(k).copied().unwrap_or(0.0),
                )
            })
            .filter(|(_, v)| *v > 0.0)
            .collect()
    }
}

fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = stat.rsplit_once(')').unwrap().1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    // utime and stime: fields 14 and 15 of stat, 12 and 13 after the command name.
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / 100.0
}

fn peak_rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn print_table(columns: &[(String, Measured)]) {
    let mut keys: Vec<String> = columns
        .iter()
        .flat_map(|(_, m)| m.requests.keys().cloned())
        .collect();
    keys.sort();
    keys.dedup();
    let header: Vec<&str> = columns.iter().map(|(n, _)| n.as_str()).collect();
    println!("\n| | {} |", header.join(" | "));
    println!("|---|{}", "---:|".repeat(columns.len()));
    let row = |name: &str, cell: &dyn Fn(&Measured) -> String| {
        let cells: Vec<String> = columns.iter().map(|(_, m)| cell(m)).collect();
        println!("| {name} | {} |", cells.join(" | "));
    };
    let total = |m: &Measured, verb: Option<&str>| -> f64 {
        // `+ 0.0`: an empty sum of f64 is -0.
        m.requests
            .iter()
            .filter(|(k, _)| verb.is_none_or(|v| k.starts_with(&format!("{v} "))))
            .map(|(_, v)| v)
            .sum::<f64>()
            + 0.0
    };
    row("**requests, all**", &|m| format!("**{}**", total(m, None)));
    for verb in ["LIST", "WATCH", "GET"] {
        row(&format!("requests, {verb}"), &|m| {
            total(m, Some(verb)).to_string()
        });
    }
    for key in &keys {
        row(&format!("&nbsp;&nbsp;{key}"), &|m| {
            m.requests.get(key).map_or("".into(), |v| v.to_string())
        });
    }
    row("**response bytes (MB)**", &|m| {
        format!("**{:.1}**", m.response_bytes.values().sum::<f64>() / 1e6)
    });
    for verb in ["LIST", "WATCH", "GET"] {
        row(&format!("&nbsp;&nbsp;of {verb}s"), &|m| {
            let bytes = m.response_bytes.get(verb).copied().unwrap_or(0.0);
            format!("{:.1}", bytes / 1e6 + 0.0)
        });
    }
    row("**kube-apiserver CPU (s)**", &|m| {
        format!("**{:.1}**", m.cpu_seconds)
    });
    row("**time to ready (s)**", &|m| {
        format!("**{:.1}**", m.ready.as_secs_f64())
    });
    row("time until its reads stop (s)", &|m| {
        format!("{:.1}", m.settled.as_secs_f64())
    });
    row("**peak RSS per process (MiB)**", &|m| {
        let v: Vec<String> = m.peak_rss_mib.iter().map(|r| format!("{r:.1}")).collect();
        format!("**{}**", v.join(" / "))
    });
}

/// Fills the cluster (with the webhook up, so the opted-in workloads are stamped).
async fn load(cluster: &Cluster) {
    let client = admin_client(cluster).await;
    let ns_api: Api<DynamicObject> =
        Api::all_with(client.clone(), &resource("", "v1", "Namespace"));
    for n in 0..NAMESPACES {
        let mut ns = json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": format!("cost-{n}")}});
        if n < OPTED_IN {
            ns["metadata"]["labels"] = json!({"reload-injector.io/inject": "enabled"});
        }
        create(&ns_api, ns).await;
    }
    let mut objects = Vec::new();
    for i in 0..CONFIG_MAPS {
        let len = 10_000 + (i * 7_919) % 10_000;
        objects.push(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("cm-{i}"), "namespace": format!("cost-{}", i % NAMESPACES)},
            "data": {"app.conf": filler(i, len)}}));
    }
    for i in 0..SECRETS {
        // Stored base64: 10–20 KB.
        let len = 7_500 + (i * 7_919) % 7_500;
        objects.push(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": format!("secret-{i}"), "namespace": format!("cost-{}", i % NAMESPACES)},
            "stringData": {"password": filler(i, len)}}));
    }
    for i in 0..WORKLOADS {
        objects.push(workload(i));
    }
    let client = &client;
    futures_util::stream::iter(objects)
        .for_each_concurrent(8, |object| async move {
            let (group, version) = match object["apiVersion"].as_str().unwrap().split_once('/') {
                Some((g, v)) => (g.to_owned(), v.to_owned()),
                None => (String::new(), "v1".to_owned()),
            };
            let kind = object["kind"].as_str().unwrap();
            let ns = object["metadata"]["namespace"].as_str().unwrap();
            let api: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), ns, &resource(&group, &version, kind));
            create(&api, object).await;
        })
        .await;
}

/// Workload `i`: in namespace `cost-(i % 100)`, reading ConfigMaps and one Secret of that
/// namespace through `envFrom` (in an opted-in namespace: 4 + 1 distinct objects).
fn workload(i: usize) -> Value {
    let n = i % NAMESPACES;
    let round = i / NAMESPACES;
    let cms: Vec<Value> = (0..4)
        .map(|k| json!({"configMapRef": {"name": format!("cm-{}", n + NAMESPACES * (round * 4 + k) % CONFIG_MAPS)}}))
        .chain([json!({"secretRef": {"name": format!("secret-{}", n + NAMESPACES * round % SECRETS)}})])
        .collect();
    let name = format!("app-{i}");
    let template = json!({
        "metadata": {"labels": {"app": name}},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.27", "envFrom": cms}],
                 "restartPolicy": if i % 10 == 9 { "OnFailure" } else { "Always" }},
    });
    let selector = json!({"matchLabels": {"app": name}});
    let metadata = json!({"name": name, "namespace": format!("cost-{n}")});
    match i % 10 {
        7 => json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": metadata,
            "spec": {"replicas": 0, "serviceName": name, "selector": selector, "template": template}}),
        8 => json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": metadata,
            "spec": {"selector": selector, "template": template}}),
        9 => json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": metadata,
            "spec": {"schedule": "0 0 1 1 *", "jobTemplate": {"spec": {"template": template}}}}),
        _ => json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata,
            "spec": {"replicas": 0, "selector": selector, "template": template}}),
    }
}

fn resource(group: &str, version: &str, kind: &str) -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind))
}

async fn create(api: &Api<DynamicObject>, object: Value) {
    let object: DynamicObject = serde_json::from_value(object).unwrap();
    for attempt in 0.. {
        match api.create(&PostParams::default(), &object).await {
            Ok(_) => return,
            Err(kube::Error::Api(s)) if s.code == 409 => return,
            Err(err) if attempt < 5 => {
                eprintln!("create failed ({err}); retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Err(err) => panic!("failed to create {:?}: {err}", object.metadata.name),
        }
    }
}

async fn admin_client(cluster: &Cluster) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(&cluster.kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

fn filler(seed: usize, len: usize) -> String {
    let mut x = seed as u64 * 2_654_435_761 + 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (b'a' + (x % 26) as u8) as char
        })
        .collect()
}

/// The reference informer: a reflector (full objects, every namespace) per kind Reloader
/// watches; prints `synced` once every store is ready, then keeps watching until killed.
fn informer() {
    use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
    use k8s_openapi::api::batch::v1::CronJob;
    use k8s_openapi::api::core::v1::{ConfigMap, Secret};

    reload_injector::install_crypto_provider();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = kube::Client::try_default().await.expect("kubeconfig");
        let stores = tokio::join!(
            reflect::<ConfigMap>(&client),
            reflect::<Secret>(&client),
            reflect::<Deployment>(&client),
            reflect::<StatefulSet>(&client),
            reflect::<DaemonSet>(&client),
            reflect::<CronJob>(&client),
        );
        println!("synced");
        let _stores = stores;
        std::future::pending::<()>().await;
    });
}

/// Starts a reflector of `K` and waits until its store is ready.
async fn reflect<K>(client: &kube::Client) -> kube::runtime::reflector::Store<K>
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    K: Send + Sync + 'static,
{
    use kube::runtime::{WatchStreamExt, reflector, watcher};
    let (reader, writer) = reflector::store();
    let stream = reflector(
        writer,
        watcher(Api::<K>::all(client.clone()), watcher::Config::default()),
    )
    .default_backoff()
    .applied_objects();
    tokio::spawn(stream.for_each(|_| std::future::ready(())));
    reader.wait_until_ready().await.expect("store dropped");
    reader
}
