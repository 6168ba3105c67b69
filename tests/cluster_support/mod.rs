//! A real Kubernetes control plane for the end-to-end tests (v1.37, or the floor version
//! `RELOAD_INJECTOR_KUBE_VERSION` names; see [`assets`]): etcd, kube-apiserver and
//! kube-controller-manager on loopback ports, with generated certificates, token
//! authentication, RBAC, a service-account signing key and an audit log.
//!
//! One cluster per test binary ([`Cluster::shared`]), or per test file for a file that
//! disturbs it or counts what happens in it ([`Cluster::own`]); each test takes its own namespace
//! ([`Cluster::namespace`]). Every process dies with the test binary ([`procs`]). Logs go to a
//! directory that every failure message names ([`Cluster::dir`]). No scheduler and no kubelet
//! run: Pods stay Pending, which is all these tests need.
//!
//! - [`assets`]: where the binaries come from (`KUBEBUILDER_ASSETS`, or the project's cache);
//! - [`procs`]: child processes that cannot outlive the tests;
//! - [`kubectl`]: the user's view, through the real `kubectl`;
//! - [`objects`]: the objects tests apply, as a user writes them;
//! - [`install`]: the shipped manifests applied, and `serve` run as the shipped ServiceAccount.
#![allow(dead_code)]

pub mod assets;
pub mod install;
pub mod kubectl;
pub mod node;
pub mod objects;
pub mod procs;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use assets::Assets;
use procs::Proc;
use reload_injector::certs::{CertRequest, generate};

/// The admin's bearer token (group `system:masters`).
pub const ADMIN_TOKEN: &str = "e2e-admin-token";
/// Bound for "the control plane answers" on a loaded 2-core machine.
pub const START_LIMIT: Duration = Duration::from_secs(90);
/// Bound for "it happens" in a test.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// A running control plane.
pub struct Cluster {
    /// The binaries.
    pub assets: Assets,
    /// Certificates, kubeconfigs and every process's log.
    pub dir: PathBuf,
    /// `https://127.0.0.1:PORT`.
    pub url: String,
    /// The API server's CA (PEM).
    pub ca_pem: String,
    /// An admin kubeconfig.
    pub kubeconfig: PathBuf,
    etcd: Proc,
    apiserver: Mutex<Proc>,
    apiserver_args: Vec<String>,
    controller_manager: Option<Proc>,
    extras: Extras,
}

/// What a cluster runs beyond the control plane the API tests need: a node ([`node`]) needs
/// more API-server flags, more controllers and more addresses in the server's certificate.
#[derive(Debug, Clone, Default)]
pub struct Extras {
    /// Appended to kube-apiserver's flags.
    pub apiserver_args: Vec<String>,
    /// Appended to kube-controller-manager's `--controllers`.
    pub controllers: Vec<String>,
    /// More IP addresses the API server's certificate names.
    pub ips: Vec<std::net::IpAddr>,
}

impl Cluster {
    /// The test binary's cluster, started by the first test that asks; the files of a binary
    /// that only add objects in their own namespaces share it.
    pub fn shared() -> &'static Cluster {
        static CLUSTER: OnceLock<Cluster> = OnceLock::new();
        CLUSTER.get_or_init(Cluster::start)
    }

    /// The calling test file's own cluster, started by its first test that asks: for a file
    /// that stops or restarts what it runs, reconfigures `serve`, or counts the API calls made,
    /// which the binary's other files must neither see nor disturb.
    #[track_caller]
    pub fn own() -> &'static Cluster {
        Cluster::own_by(std::panic::Location::caller().file())
    }

    /// The cluster of test file `file` ([`Cluster::own`]).
    pub fn own_by(file: &'static str) -> &'static Cluster {
        per_file(file, Cluster::start)
    }

    /// Starts etcd, kube-apiserver and kube-controller-manager; returns once `/readyz` is ok.
    pub fn start() -> Cluster {
        Cluster::start_with(Extras::default())
    }

    /// [`Cluster::start`] with `extras`.
    pub fn start_with(extras: Extras) -> Cluster {
        reload_injector::install_crypto_provider();
        let assets = Assets::find();
        let dir = logs_dir();
        eprintln!("e2e cluster: logs and files in {}", dir.display());

        let (etcd_port, etcd_peer, api_port) = (free_port(), free_port(), free_port());
        let data = etcd_data_dir();
        let mut etcd_cmd = Command::new(&assets.etcd);
        let client_url = format!("http://127.0.0.1:{etcd_port}");
        let peer_url = format!("http://127.0.0.1:{etcd_peer}");
        etcd_cmd
            .arg("--name=e2e")
            .arg(format!("--data-dir={}", data.display()))
            .arg(format!("--listen-client-urls={client_url}"))
            .arg(format!("--advertise-client-urls={client_url}"))
            .arg(format!("--listen-peer-urls={peer_url}"))
            .arg(format!("--initial-advertise-peer-urls={peer_url}"))
            .arg(format!("--initial-cluster=e2e={peer_url}"))
            .arg("--log-level=warn");
        let mut etcd = Proc::start("etcd", etcd_cmd, &dir.join("etcd.log"));
        wait_until("etcd to answer /health", START_LIMIT, &dir, || {
            if let Some(how) = etcd.exited() {
                panic!(
                    "etcd exited ({how}); is port {etcd_port} or {etcd_peer} in use? log {}:\n{}",
                    etcd.log.display(),
                    etcd.tail(20)
                );
            }
            http_ok(etcd_port, "/health").then_some(())
        });

        let pki = write_pki(&dir, &extras.ips);
        let url = format!("https://127.0.0.1:{api_port}");
        let kubeconfig =
            write_kubeconfig(&dir.join("admin.kubeconfig"), &url, &pki.ca, ADMIN_TOKEN);
        let mut args = vec![
            format!("--etcd-servers={client_url}"),
            "--bind-address=127.0.0.1".into(),
            "--advertise-address=127.0.0.1".into(),
            // From 1.36 the endpoint reconciler refuses a loopback address for the
            // `kubernetes` Service; nothing here reaches the API server through that Service.
            "--endpoint-reconciler-type=none".into(),
            format!("--secure-port={api_port}"),
            format!("--tls-cert-file={}", pki.cert.display()),
            format!("--tls-private-key-file={}", pki.key.display()),
            format!("--client-ca-file={}", pki.ca.display()),
            format!("--token-auth-file={}", pki.tokens.display()),
            "--authorization-mode=RBAC".into(),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
            format!("--service-account-key-file={}", pki.sa_public.display()),
            format!(
                "--service-account-signing-key-file={}",
                pki.sa_key.display()
            ),
            "--service-cluster-ip-range=10.0.0.0/24".into(),
            "--allow-privileged=true".into(),
            format!("--audit-policy-file={}", pki.audit_policy.display()),
            format!("--audit-log-path={}", dir.join("audit.log").display()),
            "--audit-log-format=json".into(),
            "--audit-log-maxsize=0".into(),
            // The test node's kubelet registers with its InternalIP (the bridge address, see
            // `node`): the API server reaches it there, never through a DNS name.
            "--kubelet-preferred-address-types=InternalIP".into(),
            "--v=1".into(),
        ];
        args.extend(extras.apiserver_args.iter().cloned());
        let apiserver = start_apiserver(&assets, &args, &dir);
        let cluster = Cluster {
            assets,
            dir,
            url,
            ca_pem: pki.ca_pem.clone(),
            kubeconfig,
            etcd,
            apiserver: Mutex::new(apiserver),
            apiserver_args: args,
            controller_manager: None,
            extras,
        };
        cluster.wait_ready();
        let controller_manager = cluster
            .assets
            .controller_manager
            .as_ref()
            .map(|_| cluster.start_controller_manager(&pki));
        Cluster {
            controller_manager,
            ..cluster
        }
    }

    fn start_controller_manager(&self, pki: &Pki) -> Proc {
        let mut cmd = Command::new(self.assets.controller_manager());
        cmd.arg(format!("--kubeconfig={}", self.kubeconfig.display()))
            .arg("--leader-elect=false")
            .arg("--bind-address=127.0.0.1")
            .arg("--secure-port=0")
            .arg(format!("--service-account-private-key-file={}", pki.sa_key.display()))
            .arg(format!("--root-ca-file={}", pki.ca.display()))
            .arg("--use-service-account-credentials=false")
            // Deployments, ReplicaSets, Jobs, CronJobs, ServiceAccounts and their tokens, and
            // namespace cleanup: what the tests need, no node or volume loops.
            .arg(format!(
                "--controllers=deployment,replicaset,job,cronjob,serviceaccount,serviceaccount-token,namespace,garbagecollector{}",
                self.extras.controllers.iter().map(|c| format!(",{c}")).collect::<String>()
            ))
            .arg("--concurrent-deployment-syncs=2")
            .arg("--v=1");
        Proc::start(
            "kube-controller-manager",
            cmd,
            &self.dir.join("kube-controller-manager.log"),
        )
    }

    /// Waits for `/readyz`.
    pub fn wait_ready(&self) {
        self.wait_for("kube-apiserver to answer /readyz", START_LIMIT, || {
            let mut api = self.apiserver.lock().unwrap();
            if let Some(how) = api.exited() {
                panic!(
                    "kube-apiserver exited ({how}); log {}:\n{}",
                    api.log.display(),
                    api.tail(30)
                );
            }
            drop(api);
            let out = self.kubectl(&["get", "--raw=/readyz"]).try_run();
            (out.ok && out.stdout.trim() == "ok").then_some(())
        });
    }

    /// kube-apiserver's process id.
    pub fn apiserver_pid(&self) -> u32 {
        self.apiserver.lock().unwrap().pid()
    }

    /// Stops kube-controller-manager (a bench wants the API server's only clients to be the
    /// ones it measures).
    pub fn stop_controller_manager(&mut self) {
        if let Some(mut proc) = self.controller_manager.take() {
            proc.kill();
        }
    }

    /// Kills kube-apiserver (SIGKILL), as a crash would.
    pub fn kill_apiserver(&self) {
        self.apiserver.lock().unwrap().kill();
    }

    /// Starts kube-apiserver again with the same flags (same port, same etcd) and waits for it.
    pub fn start_apiserver(&self) {
        *self.apiserver.lock().unwrap() =
            start_apiserver(&self.assets, &self.apiserver_args, &self.dir);
        self.wait_ready();
    }

    /// A `kubectl` command as the admin.
    pub fn kubectl(&self, args: &[&str]) -> kubectl::Kubectl {
        kubectl::Kubectl::new(self, &self.kubeconfig, args)
    }

    /// A fresh namespace for one test (`<tag>-<n>`), labelled to opt in or not; returns once
    /// its `default` ServiceAccount exists (Pods are refused before that).
    pub fn namespace(&self, tag: &str, opted_in: bool) -> String {
        static COUNT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("{tag}-{n}");
        self.kubectl(&["create", "namespace", &name]).run();
        MADE.with(|made| made.borrow_mut().push(name.clone()));
        if opted_in {
            self.kubectl(&[
                "label",
                "namespace",
                &name,
                "reload-injector.io/inject=enabled",
            ])
            .run();
        }
        if self.controller_manager.is_some() {
            self.wait_for(
                &format!("the default ServiceAccount of {name}"),
                PATIENCE,
                || {
                    let sa = self
                        .kubectl(&[
                            "get",
                            "serviceaccount",
                            "default",
                            "-n",
                            &name,
                            "-o",
                            "json",
                        ])
                        .try_run();
                    sa.ok.then_some(())
                },
            );
        }
        name
    }

    /// Polls `check` until it returns `Some`, at most `limit`; on timeout, panics naming what
    /// it waited for and where the logs are.
    pub fn wait_for<T>(&self, what: &str, limit: Duration, check: impl FnMut() -> Option<T>) -> T {
        wait_until(what, limit, &self.dir, check)
    }

    /// The audit log's events (JSON lines), as the API server recorded them.
    pub fn audit_events(&self) -> Vec<serde_json::Value> {
        let text = std::fs::read_to_string(self.dir.join("audit.log")).unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The writes (`verb resource/name`) `serve` made to objects of `ns` since audit event
    /// `from` (an index into [`Cluster::audit_events`]).
    pub fn serve_writes_since(&self, from: usize, ns: &str) -> Vec<String> {
        let user = format!("system:serviceaccount:{}:{}", install::OWN, install::OWN);
        self.audit_events()
            .into_iter()
            .skip(from)
            .filter(|e| e["user"]["username"] == user.as_str() && e["stage"] == "ResponseComplete")
            .filter(|e| e["objectRef"]["namespace"] == ns)
            .filter(|e| {
                let verb = e["verb"].as_str().unwrap_or_default();
                ["create", "update", "patch", "delete"].contains(&verb)
            })
            .map(|e| {
                let r = &e["objectRef"];
                let name = r["name"].as_str().unwrap_or_default();
                format!(
                    "{} {}/{name}",
                    e["verb"].as_str().unwrap_or_default(),
                    r["resource"].as_str().unwrap_or_default()
                )
            })
            .collect()
    }

    /// A fresh namespace ([`Cluster::namespace`]) whose Pod Security admission enforces, warns
    /// and audits `level`.
    pub fn pod_security_namespace(&self, tag: &str, level: &str, opted_in: bool) -> String {
        let ns = self.namespace(tag, opted_in);
        let labels: Vec<String> = ["enforce", "warn", "audit"]
            .iter()
            .map(|mode| format!("pod-security.kubernetes.io/{mode}={level}"))
            .collect();
        let mut args = vec!["label", "namespace", ns.as_str()];
        args.extend(labels.iter().map(String::as_str));
        self.kubectl(&args).run();
        ns
    }

    /// The API server's own metrics (Prometheus text).
    pub fn apiserver_metrics(&self) -> String {
        self.kubectl(&["get", "--raw=/metrics"]).run().stdout
    }
}

fn start_apiserver(assets: &Assets, args: &[String], dir: &Path) -> Proc {
    let mut cmd = Command::new(&assets.apiserver);
    cmd.args(args);
    Proc::start("kube-apiserver", cmd, &dir.join("kube-apiserver.log"))
}

/// Polls `check` every 100 ms until `Some` or `limit`.
pub fn wait_until<T>(
    what: &str,
    limit: Duration,
    logs: &Path,
    mut check: impl FnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = check() {
            return value;
        }
        if Instant::now() >= deadline {
            panic!(
                "timed out after {limit:?} waiting for {what}; the logs of etcd, kube-apiserver, \
                 kube-controller-manager and serve are in {}",
                logs.display()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A free loopback port (bound and released: another process could take it first, and then
/// the process that needed it fails saying so).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("failed to find a free port on 127.0.0.1")
        .port()
}

thread_local! {
    /// The namespaces the test on this thread has made ([`Cluster::namespace`]).
    static MADE: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Takes the namespaces the test on this thread has made so far.
pub fn take_made_namespaces() -> Vec<String> {
    MADE.with(|made| std::mem::take(&mut *made.borrow_mut()))
}

/// One `T` per test file, made by the first caller and kept for the process's life.
pub fn per_file<T: Send + Sync + 'static>(
    file: &'static str,
    make: impl FnOnce() -> T,
) -> &'static T {
    use std::any::{Any, TypeId};
    use std::collections::BTreeMap;
    type Cells = BTreeMap<(&'static str, TypeId), &'static (dyn Any + Send + Sync)>;
    static CELLS: Mutex<Cells> = Mutex::new(BTreeMap::new());
    let cell: &'static (dyn Any + Send + Sync) = {
        let mut cells = CELLS.lock().unwrap_or_else(|e| e.into_inner());
        *cells
            .entry((file, TypeId::of::<T>()))
            .or_insert_with(|| Box::leak(Box::new(OnceLock::<T>::new())))
    };
    let cell = cell
        .downcast_ref::<OnceLock<T>>()
        .expect("a per-file cell holds its own type");
    cell.get_or_init(make)
}

/// `target/tmp/e2e/<test binary>-<pid>` for a binary's first cluster, `…-<pid>-<n>` for its
/// n-th (a binary runs one per test file that needs its own), created.
fn logs_dir() -> PathBuf {
    static CLUSTERS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let binary = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "e2e".into());
    let pid = std::process::id();
    let dir = match CLUSTERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) {
        0 => format!("{binary}-{pid}"),
        n => format!("{binary}-{pid}-{n}"),
    };
    let dir = target_tmp().join("e2e").join(dir);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("failed to create the cluster's log directory");
    dir
}

/// Cargo's scratch directory for tests (`target/tmp`); examples, which cargo gives none, use
/// the same.
fn target_tmp() -> PathBuf {
    option_env!("CARGO_TARGET_TMPDIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("target/tmp"),
        PathBuf::from,
    )
}

/// The product's binary: cargo's own for tests; for examples (`examples/dev_cluster.rs`), the
/// one `RELOAD_INJECTOR_BIN` names, which `scripts/dev-cluster.sh` builds and sets.
pub fn product_binary() -> PathBuf {
    option_env!("CARGO_BIN_EXE_reload-injector")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("RELOAD_INJECTOR_BIN").map(PathBuf::from))
        .expect("set RELOAD_INJECTOR_BIN to the reload-injector binary (cargo build)")
}

/// etcd's data in memory (`/dev/shm`) when there is one: a disk's fsyncs slow every write.
/// Directories of test binaries that are gone are removed first.
fn etcd_data_dir() -> PathBuf {
    let shm = Path::new("/dev/shm");
    let base = if shm.is_dir() {
        shm.to_owned()
    } else {
        std::env::temp_dir()
    };
    if let Ok(entries) = std::fs::read_dir(&base) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(pid) = name
                .strip_prefix("ri-e2e-etcd-")
                .and_then(|rest| rest.split('-').next())
                && !Path::new("/proc").join(pid).exists()
            {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
    // One directory per start: a start that failed half-way (a panic in a shared cluster's
    // first use) leaves its etcd holding the data; the next start must not wait on its lock.
    static STARTS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = STARTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    base.join(format!("ri-e2e-etcd-{}-{n}", std::process::id()))
}

/// `GET http://127.0.0.1:port/path` answers 200.
fn http_ok(port: u16, path: &str) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if write!(s, "GET {path} HTTP/1.0\r\n\r\n").is_err() {
        return false;
    }
    let mut text = String::new();
    let _ = s.read_to_string(&mut text);
    text.starts_with("HTTP/1.0 200") || text.starts_with("HTTP/1.1 200")
}

/// The files of the cluster's identity.
struct Pki {
    ca: PathBuf,
    ca_pem: String,
    cert: PathBuf,
    key: PathBuf,
    sa_key: PathBuf,
    sa_public: PathBuf,
    tokens: PathBuf,
    audit_policy: PathBuf,
}

fn write_pki(dir: &Path, extra_ips: &[std::net::IpAddr]) -> Pki {
    let mut ips = vec!["127.0.0.1".parse().unwrap()];
    ips.extend_from_slice(extra_ips);
    let bundle = generate(&CertRequest {
        service: "kubernetes".into(),
        namespace: "default".into(),
        dns: vec!["localhost".into()],
        ips,
        validity: Duration::from_secs(24 * 3600),
    })
    .expect("failed to generate the API server's certificate");
    let sa = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
        .expect("failed to generate the service-account signing key");
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("failed to write {name}: {e}"));
        path
    };
    Pki {
        ca: write("ca.crt", &bundle.ca_cert_pem),
        ca_pem: bundle.ca_cert_pem.clone(),
        cert: write("apiserver.crt", &bundle.cert_pem),
        key: write("apiserver.key", &bundle.key_pem),
        sa_key: write("sa.key", &sa.serialize_pem()),
        sa_public: write("sa.pub", &sa.public_key_pem()),
        tokens: write(
            "tokens.csv",
            &format!("{ADMIN_TOKEN},e2e-admin,e2e-admin,\"system:masters\"\n"),
        ),
        // Metadata of every request (who, verb, resource, answer code), never bodies: the
        // tests read which calls `serve` made and whether any was refused.
        audit_policy: write(
            "audit-policy.yaml",
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n  - level: Metadata\n",
        ),
    }
}

/// Writes a kubeconfig for `url` with a bearer token.
pub fn write_kubeconfig(path: &Path, url: &str, ca: &Path, token: &str) -> PathBuf {
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: e2e\n  cluster:\n    server: {url}\n    certificate-authority: {ca}\nusers:\n- name: user\n  user:\n    token: {token}\ncontexts:\n- name: e2e\n  context:\n    cluster: e2e\n    user: user\ncurrent-context: e2e\n",
        ca = ca.display()
    );
    std::fs::write(path, text).expect("failed to write a kubeconfig");
    path.to_owned()
}

impl Cluster {
    /// `kubectl apply -f -` of one object in `namespace`, whatever the outcome.
    pub fn apply(&self, namespace: &str, object: &serde_json::Value) -> kubectl::Output {
        self.kubectl(&["apply", "-n", namespace, "-f", "-"])
            .stdin(&object.to_string())
            .try_run()
    }

    /// `kubectl get KIND NAME -n NAMESPACE -o json`.
    pub fn get(&self, namespace: &str, kind: &str, name: &str) -> serde_json::Value {
        self.kubectl(&["get", kind, name, "-n", namespace, "-o", "json"])
            .run()
            .json()
    }

    /// The `ConfigChanged` Events of `namespace`, as `kubectl get events` lists them.
    pub fn config_changed_events(&self, namespace: &str) -> Vec<serde_json::Value> {
        let selector = ["--field-selector", "reason=ConfigChanged"];
        let args = [
            &["get", "events", "-n", namespace],
            &selector[..],
            &["-o", "json"],
        ]
        .concat();
        self.kubectl(&args).run().json()["items"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// `kubectl get KIND -n NAMESPACE -o json`'s items.
    pub fn list(&self, namespace: &str, kind: &str) -> Vec<serde_json::Value> {
        self.list_selected(namespace, kind, "")
    }

    /// The items of `kind` in `namespace` whose labels match `selector` (all when empty).
    pub fn list_selected(
        &self,
        namespace: &str,
        kind: &str,
        selector: &str,
    ) -> Vec<serde_json::Value> {
        let mut args = vec!["get", kind, "-n", namespace, "-o", "json"];
        if !selector.is_empty() {
            args.extend(["-l", selector]);
        }
        let list = self.kubectl(&args).run().json();
        list["items"].as_array().cloned().unwrap_or_default()
    }
}
