//! The product installed as a user installs it: `kubectl kustomize manifests/` applied to the
//! real API server one object at a time; the shipped MutatingWebhookConfiguration registered
//! with only its `clientConfig` changed (to a local `serve` and its CA); and `serve` run as a
//! local process with the shipped ServiceAccount's identity (a token from the TokenRequest
//! API), so the shipped RBAC is what the API server enforces.

use std::path::PathBuf;
use std::process::Command;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};

use super::kubectl::Output;
use super::procs::Proc;
use super::{Cluster, PATIENCE, free_port, write_kubeconfig};
use reload_injector::certs::{CertRequest, generate};

/// The webhook's namespace and ServiceAccount, as shipped.
pub const OWN: &str = "reload-injector";
/// The shipped MutatingWebhookConfiguration's name.
pub const WEBHOOK: &str = "reload-injector";

/// What applying the shipped manifests did, object by object.
pub struct Applied {
    /// What `kubectl kustomize manifests/` printed, as JSON documents.
    pub shipped: Vec<Value>,
    /// Each object (`Kind/name`) with kubectl's answer.
    pub objects: Vec<(String, Output)>,
}

/// The product installed on the cluster, with one `serve` running.
pub struct Install {
    /// The cluster.
    pub cluster: &'static Cluster,
    /// What applying the manifests did.
    pub applied: Applied,
    /// The first `serve`.
    pub serve: Serve,
    tls: (PathBuf, PathBuf),
    ca_pem: String,
    hash_key: PathBuf,
    kubeconfig: PathBuf,
    /// Flags every `serve` started here gets besides the harness's own.
    serve_args: Mutex<Vec<String>>,
}

impl Applied {
    /// The first shipped object of `kind`, as built.
    pub fn shipped(&self, kind: &str) -> Option<&Value> {
        self.shipped.iter().find(|d| d["kind"] == kind)
    }

    /// The shipped MutatingWebhookConfiguration, as built.
    pub fn shipped_webhook(&self) -> &Value {
        self.shipped("MutatingWebhookConfiguration")
            .expect("the manifests ship no MutatingWebhookConfiguration")
    }
}

impl Install {
    /// The installation on the binary's shared cluster ([`Cluster::shared`]), made by the
    /// first test that asks.
    pub fn shared() -> &'static Install {
        static INSTALL: OnceLock<Install> = OnceLock::new();
        INSTALL.get_or_init(|| Install::new(Cluster::shared()))
    }

    /// The installation on the calling test file's own cluster ([`Cluster::own`]).
    #[track_caller]
    pub fn own() -> &'static Install {
        let file = std::panic::Location::caller().file();
        super::per_file(file, || Install::new(Cluster::own_by(file)))
    }

    /// Applies the manifests, registers the webhook and starts one `serve`, ready.
    pub fn new(cluster: &'static Cluster) -> Install {
        Install::with_serve_args(cluster, &[])
    }

    /// [`Install::new`], with `args` added to the flags of every `serve` it starts.
    pub fn with_serve_args(cluster: &'static Cluster, args: &[&str]) -> Install {
        let applied = apply_manifests(cluster);
        let dir = &cluster.dir;
        let bundle = generate(&CertRequest {
            service: OWN.into(),
            namespace: OWN.into(),
            dns: vec![],
            ips: vec!["127.0.0.1".parse().unwrap()],
            validity: Duration::from_secs(24 * 3600),
        })
        .expect("failed to generate the webhook's certificate");
        let tls = (dir.join("webhook.crt"), dir.join("webhook.key"));
        std::fs::write(&tls.0, &bundle.cert_pem).unwrap();
        std::fs::write(&tls.1, &bundle.key_pem).unwrap();
        let hash_key = dir.join("secret-hash.key");
        std::fs::write(&hash_key, "e2e-secret-hash-key-0123456789abcdef\n").unwrap();
        let token = service_account_token(cluster);
        let kubeconfig = write_kubeconfig(
            &dir.join("serve.kubeconfig"),
            &cluster.url,
            &dir.join("ca.crt"),
            &token,
        );
        let port = free_port();
        register_webhook(
            cluster,
            applied.shipped_webhook(),
            port,
            &bundle.ca_cert_pem,
        );
        let mut install = Install {
            cluster,
            applied,
            serve: Serve::placeholder(),
            tls,
            ca_pem: bundle.ca_cert_pem.clone(),
            hash_key,
            kubeconfig,
            serve_args: Mutex::new(args.iter().map(|a| (*a).to_owned()).collect()),
        };
        install.serve = install.start_serve_on("serve-0", port);
        install.serve.wait_ready(cluster);
        install
    }

    /// Points the webhook configuration at `serve` (as a Service does once a replica is gone).
    pub fn point_webhook_at(&self, serve: &Serve) {
        register_webhook(
            self.cluster,
            self.applied.shipped_webhook(),
            serve.port,
            &self.ca_pem,
        );
    }

    /// Starts the first `serve` again on its port if a test killed it, waits until it is ready,
    /// and points the webhook back at it: what the next test of the binary expects.
    pub fn revive_serve(&self) {
        if self.serve.pid().is_none() {
            let binary = super::product_binary();
            let (name, ports) = (&self.serve.name, (self.serve.port, self.serve.metrics));
            let fresh = self.start_binary(name, ports, &binary);
            let proc = fresh.proc.lock().unwrap().take();
            *self.serve.proc.lock().unwrap() = proc;
            self.serve.wait_ready(self.cluster);
        }
        self.point_webhook_at(&self.serve);
    }

    /// Stops the first `serve` and starts it again on its ports with `args` as its extra flags
    /// (instead of those it had), ready; later starts get them too.
    pub fn restart_serve_with(&self, args: &[&str]) {
        *self.serve_args.lock().unwrap() = args.iter().map(|a| (*a).to_owned()).collect();
        self.serve.kill();
        self.revive_serve();
    }

    /// Starts another `serve` replica (its own ports; the webhook keeps calling the first).
    pub fn start_serve(&self, name: &str) -> Serve {
        self.start_serve_on(name, free_port())
    }

    /// Starts a `serve` replica from another build of the binary (a bench compares two).
    pub fn start_serve_from(&self, name: &str, binary: &std::path::Path) -> Serve {
        self.start_binary(name, (free_port(), free_port()), binary)
    }

    fn start_serve_on(&self, name: &str, port: u16) -> Serve {
        self.start_binary(name, (port, free_port()), &super::product_binary())
    }

    /// Starts `binary` as `serve` on `(https, metrics)` ports.
    fn start_binary(
        &self,
        name: &str,
        (port, metrics): (u16, u16),
        binary: &std::path::Path,
    ) -> Serve {
        let mut cmd = Command::new(binary);
        cmd.env("KUBECONFIG", &self.kubeconfig)
            .env("POD_NAME", name)
            .env("RELOAD_INJECTOR_NAMESPACE", OWN)
            .env_remove("RUST_LOG")
            .args([
                "--log-format=json",
                "--log-level=info,reload_injector=debug",
                "serve",
            ])
            .arg(format!("--listen=127.0.0.1:{port}"))
            .arg(format!("--metrics-listen=127.0.0.1:{metrics}"))
            .arg("--tls-cert")
            .arg(&self.tls.0)
            .arg("--tls-key")
            .arg(&self.tls.1)
            .arg("--secret-hash-key-file")
            .arg(&self.hash_key)
            .arg("--lease-duration=6s")
            .args(self.serve_args.lock().unwrap().iter());
        let log = self.cluster.dir.join(format!("{name}.log"));
        Serve {
            name: name.to_owned(),
            proc: Mutex::new(Some(Proc::start(name, cmd, &log))),
            port,
            metrics,
            log,
        }
    }
}

/// A `serve` process.
pub struct Serve {
    /// Its `POD_NAME` (the start of its Lease identity).
    pub name: String,
    proc: Mutex<Option<Proc>>,
    /// Its HTTPS port.
    pub port: u16,
    /// Its plain side port (`/readyz`, `/metrics`).
    pub metrics: u16,
    /// Its log (JSON lines).
    pub log: PathBuf,
}

impl Serve {
    fn placeholder() -> Serve {
        Serve {
            name: String::new(),
            proc: Mutex::new(None),
            port: 0,
            metrics: 0,
            log: PathBuf::new(),
        }
    }

    /// Waits until `/readyz` answers 200 (the controller's view has synced).
    pub fn wait_ready(&self, cluster: &Cluster) {
        cluster.wait_for(
            &format!("{} to be ready (/readyz)", self.log.display()),
            PATIENCE,
            || (self.get("/readyz").0 == 200).then_some(()),
        );
    }

    /// `GET path` on the side port: (status, body); status 0 when it does not answer.
    pub fn get(&self, path: &str) -> (u16, String) {
        use std::io::{Read, Write};
        let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", self.metrics)) else {
            return (0, String::new());
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
        if write!(s, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").is_err() {
            return (0, String::new());
        }
        let mut text = String::new();
        let _ = s.read_to_string(&mut text);
        let status = text
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        (status, body.to_owned())
    }

    /// The value of a metric sample (`name{labels}` exactly as exposed), 0 when absent.
    pub fn metric(&self, series: &str) -> f64 {
        self.get("/metrics")
            .1
            .lines()
            .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
            .unwrap_or(0.0)
    }

    /// Its controller's `reload_injector_pending_writes` now; `None` when it does not answer.
    pub fn pending_writes(&self) -> Option<f64> {
        self.get("/metrics").1.lines().find_map(|l| {
            l.strip_prefix("reload_injector_pending_writes ")?
                .trim()
                .parse()
                .ok()
        })
    }

    /// Waits until its controller has no write pending: whatever it has handled so far has
    /// been written by then, Events and second nudges included.
    pub fn wait_caught_up(&self, cluster: &Cluster) {
        cluster.wait_for(
            &format!("{} to have no write pending", self.name),
            PATIENCE,
            || (self.pending_writes() == Some(0.0)).then_some(()),
        );
    }

    /// Waits until its controller has logged, after its first `since` log lines, that the data
    /// of ConfigMap `namespace/name` changed, and then has no write pending: whatever that
    /// change causes has been done. (Tests running at once share one `serve`, so its count of
    /// config events is not one test's alone; the log line names the object.)
    pub fn wait_change_handled(
        &self,
        cluster: &Cluster,
        since: usize,
        namespace: &str,
        name: &str,
    ) {
        let object = format!("ConfigMap {namespace}/{name}");
        cluster.wait_for(
            &format!("{} to log the change of {object}", self.name),
            PATIENCE,
            || {
                self.log_lines()
                    .iter()
                    .skip(since)
                    .any(|l| l["message"] == "config data changed" && l["object"] == object)
                    .then_some(())
            },
        );
        self.wait_caught_up(cluster);
    }

    /// Its log lines so far, parsed.
    pub fn log_lines(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Its whole log, as written.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Its process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.proc.lock().unwrap().as_ref().map(Proc::pid)
    }

    /// SIGKILL, as a crash would.
    pub fn kill(&self) {
        if let Some(mut proc) = self.proc.lock().unwrap().take() {
            proc.kill();
        }
    }
}

/// `kubectl kustomize manifests/` with the cluster's own kubectl (what `kubectl apply -k` runs),
/// as JSON documents: the installation needs nothing the Kubernetes binaries do not bring.
pub fn shipped_manifests(cluster: &Cluster) -> Vec<Value> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/manifests");
    let out = cluster.kubectl(&["kustomize", dir]).try_run();
    assert!(
        out.ok,
        "kubectl kustomize manifests/ failed: {}",
        out.stderr
    );
    serde_saphyr::from_multiple(&out.stdout).expect("kustomize printed YAML that does not parse")
}

/// `Kind/name` of a document.
pub fn object_name(doc: &Value) -> String {
    format!(
        "{}/{}",
        doc["kind"].as_str().unwrap_or("?"),
        doc["metadata"]["name"].as_str().unwrap_or("?")
    )
}

fn apply_manifests(cluster: &Cluster) -> Applied {
    let docs = shipped_manifests(cluster);
    // The Namespace first (as kubectl apply -k orders it), then the rest in order.
    let mut ordered: Vec<&Value> = docs.iter().filter(|d| d["kind"] == "Namespace").collect();
    ordered.extend(docs.iter().filter(|d| d["kind"] != "Namespace"));
    let objects = ordered
        .into_iter()
        .map(|doc| {
            let out = cluster
                .kubectl(&["apply", "-f", "-"])
                .stdin(&doc.to_string())
                .try_run();
            (object_name(doc), out)
        })
        .collect();
    Applied {
        objects,
        shipped: docs,
    }
}

/// The shipped webhook configuration with only `clientConfig` changed to `https://127.0.0.1:port`
/// (each webhook keeping its path).
pub fn local_webhook(shipped: &Value, port: u16, ca_pem: &str) -> Value {
    let mut config = shipped.clone();
    let bundle = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    for webhook in config["webhooks"].as_array_mut().expect("webhooks") {
        let path = webhook["clientConfig"]["service"]["path"]
            .as_str()
            .expect("each shipped webhook names its Service path")
            .to_owned();
        webhook["clientConfig"] = json!({
            "url": format!("https://127.0.0.1:{port}{path}"),
            "caBundle": bundle,
        });
    }
    config
}

fn register_webhook(cluster: &Cluster, shipped: &Value, port: u16, ca_pem: &str) {
    cluster
        .kubectl(&["apply", "-f", "-"])
        .stdin(&local_webhook(shipped, port, ca_pem).to_string())
        .run();
}

/// A token for the shipped ServiceAccount, from the TokenRequest API.
fn service_account_token(cluster: &Cluster) -> String {
    let request = json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": 86400},
    });
    let path = cluster.dir.join("token-request.json");
    std::fs::write(&path, request.to_string()).unwrap();
    let answer = cluster
        .kubectl(&[
            "create",
            &format!("--raw=/api/v1/namespaces/{OWN}/serviceaccounts/{OWN}/token"),
            "-f",
            path.to_str().unwrap(),
        ])
        .run()
        .json();
    answer["status"]["token"]
        .as_str()
        .expect("TokenRequest answered without a token")
        .to_owned()
}
