//! A real node for the control plane of [`super`]: kube-scheduler, containerd with runc and
//! Debian's CNI `bridge`/`host-local`/`loopback` plugins, and a kubelet built from the same
//! Kubernetes module as the API server. One node per test binary ([`Node::shared`]), named
//! [`NODE`], running the images of [`images`].
//!
//! The network: Pods get addresses in [`SUBNET`] on the bridge [`BRIDGE`], whose gateway
//! address [`GATEWAY`] is the host's (the kubelet serves there, and the node's InternalIP is
//! that address). There is no kube-proxy and no DNS: the API server reaches Services through
//! their endpoints (`--enable-aggregator-routing`), Pods reach the API server through one DNAT
//! rule for the `kubernetes` Service ([`host::network`]), and `ip_forward` is left off, so
//! nothing is routed off the machine.
//!
//! Clean-up: every process is started with the parent-death signal ([`super::procs`]), and a
//! watchdog ([`host::watchdog`]) runs `scripts/node-down.sh` when the test binary exits,
//! however it exits: containers, shims, mounts, cgroups, the bridge, iptables chains, kernel
//! settings and paths outside the test directory, each by what the node recorded.

pub mod config;
pub mod host;
pub mod images;
pub mod install;
pub mod pods;
pub mod registry;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command};
use std::sync::{Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant};

use nix::fcntl::{Flock, FlockArg};

use super::procs::Proc;
use super::{Cluster, Extras, START_LIMIT, free_port};
use images::Images;
use registry::Registry;

/// The node's name.
pub const NODE: &str = "ri-node";
/// The Pods' subnet: an unusual private /24, chosen so that it meets nothing on a developer's
/// network.
pub const SUBNET: &str = "10.231.40.0/24";
/// [`SUBNET`]'s prefix length.
pub const SUBNET_PREFIX: u8 = 24;
/// The bridge's (the host's) address in [`SUBNET`]: the node's InternalIP.
pub const GATEWAY: &str = "10.231.40.1";
/// The bridge.
pub const BRIDGE: &str = "ri-node0";
/// The `kubernetes` Service's ClusterIP (the first of the API server's service range).
pub const SERVICE_IP: &str = "10.0.0.1";
/// The image the shipped manifests name, as `kustomize build manifests/` sets it; the node pulls
/// it from its [`Registry`] ([`Node::product`]).
pub const SHIPPED_IMAGE: &str = concat!(
    "ghcr.io/reload-injector/reload-injector:",
    env!("CARGO_PKG_VERSION")
);

/// The lock a node holds for as long as its process lives: one node per machine (the bridge,
/// the subnet and the iptables chains are the machine's). A test binary, `scripts/dev-cluster.sh`
/// or a run in another checkout that wants a node meanwhile waits for it.
pub const MACHINE_LOCK: &str = "/tmp/reload-injector-node.lock";

/// Waits for the machine's node lock ([`MACHINE_LOCK`]), saying so when another process holds it.
fn machine_turn() -> Flock<File> {
    let file =
        File::create(MACHINE_LOCK).unwrap_or_else(|e| panic!("failed to open {MACHINE_LOCK}: {e}"));
    let file = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(held) => return held,
        Err((file, _)) => file,
    };
    eprintln!("node {NODE}: waiting for another process's node to end ({MACHINE_LOCK})");
    let start = Instant::now();
    let held = Flock::lock(file, FlockArg::LockExclusive)
        .unwrap_or_else(|(_, e)| panic!("failed to lock {MACHINE_LOCK}: {e}"));
    eprintln!(
        "node {NODE}: the machine's node is ours after {:.0} s",
        start.elapsed().as_secs_f64()
    );
    held
}

/// How long the node took to start.
#[derive(Debug, Clone, Copy)]
pub struct StartTimes {
    /// From the start of [`Node::start`] (control plane already up) to the node Ready:
    /// images, containerd, kubelet, scheduler.
    pub total: Duration,
    /// From the kubelet's start to the node Ready.
    pub kubelet_to_ready: Duration,
}

/// A running node.
pub struct Node {
    /// Its control plane.
    pub cluster: &'static Cluster,
    /// Its files and logs (`<cluster dir>/node`).
    pub dir: PathBuf,
    /// containerd's socket.
    pub socket: PathBuf,
    /// The images it runs.
    pub images: Images,
    /// Its registry: containerd's mirror of ghcr.io and docker.io.
    pub registry: Registry,
    product: OnceLock<String>,
    /// How long it took to start.
    pub started: StartTimes,
    kubelet: Mutex<Proc>,
    kubelet_args: Vec<String>,
    cgroup_root: String,
    _machine: Flock<File>,
    _containerd: Proc,
    _scheduler: Proc,
    _watchdog: ChildStdin,
}

/// The control plane's additions for a node: the API server reaches Services through their
/// endpoints (the kubelet at its InternalIP is the base cluster's setting already); its
/// certificate names the `kubernetes` Service's address (Pods connect there); the controller
/// manager also runs the endpoint, EndpointSlice, `kube-root-ca.crt` publisher (every
/// service-account token volume mounts it), PodDisruptionBudget, Pod GC, node lifecycle (it
/// lifts the `not-ready` taint the kubelet registers the node with) and StatefulSet controllers.
pub fn extras() -> Extras {
    Extras {
        // (`--kubelet-preferred-address-types=InternalIP` and `--endpoint-reconciler-type=none`
        // are the base cluster's.)
        apiserver_args: vec!["--enable-aggregator-routing=true".into()],
        controllers: [
            "endpoint",
            "endpointslice",
            "root-ca-cert-publisher",
            "disruption",
            "podgc",
            "nodelifecycle",
            "statefulset",
        ]
        .map(String::from)
        .to_vec(),
        ips: vec![SERVICE_IP.parse().unwrap()],
    }
}

/// Whose turn it is on the binary's node ([`Node::alone`], [`Node::beside_others`]).
static TURNS: RwLock<()> = RwLock::new(());

/// A test's turn on the node. When a test that passed ends, the namespaces it made are deleted
/// (their Pods would otherwise crowd the one node every test of the binary shares); a failed
/// test's are kept for its logs.
pub struct Turn<G> {
    _held: G,
}

impl<G> Drop for Turn<G> {
    fn drop(&mut self) {
        let made = super::take_made_namespaces();
        if std::thread::panicking() || made.is_empty() {
            return;
        }
        let cluster = Node::shared().cluster;
        for namespace in made {
            cluster
                .kubectl(&["delete", "namespace", &namespace, "--wait=false"])
                .try_run();
        }
    }
}

impl Node {
    /// Held for the whole of a test that disturbs the node or what runs on it (restarts the
    /// kubelet, kills or reconfigures `serve`, turns the controller's refresh off) or times
    /// something on it: no other node test runs meanwhile.
    pub fn alone() -> Turn<impl Sized> {
        Turn {
            _held: TURNS.write().unwrap_or_else(|e| e.into_inner()),
        }
    }

    /// Held for the whole of every other node test: those run side by side, never beside one
    /// that holds [`Node::alone`].
    pub fn beside_others() -> Turn<impl Sized> {
        Turn {
            _held: TURNS.read().unwrap_or_else(|e| e.into_inner()),
        }
    }

    /// The test binary's node (and its own control plane), started by the first test that
    /// asks.
    pub fn shared() -> &'static Node {
        static NODE: OnceLock<Node> = OnceLock::new();
        NODE.get_or_init(|| {
            let cluster: &'static Cluster = Box::leak(Box::new(Cluster::start_with(extras())));
            Node::start(cluster)
        })
    }

    /// Starts the node on `cluster` and returns once it is Ready.
    pub fn start(cluster: &'static Cluster) -> Node {
        let machine = machine_turn();
        let begin = Instant::now();
        host::reap_orphans();
        // The previous test binary's watchdog may still be removing its node (over 30 s on
        // a loaded machine, seen in a full run).
        let gone = Instant::now() + Duration::from_secs(120);
        while host::bridge_exists() && Instant::now() < gone {
            std::thread::sleep(Duration::from_millis(200));
        }
        assert!(
            !host::bridge_exists(),
            "the bridge {BRIDGE} exists already: another node runs (scripts/dev-cluster.sh?) \
             or one was not removed (scripts/node-down.sh DIR; a node of a killed test binary is \
             removed here when its /run/ri-node-PID/node-dir names its directory)"
        );
        let dir = cluster.dir.join("node");
        let run = PathBuf::from(format!("/run/ri-node-{}", std::process::id()));
        let state = run.join("containerd-state");
        for d in [
            &dir,
            &dir.join("pids"),
            &run,
            &dir.join("net.d"),
            &dir.join("pod-logs"),
        ] {
            std::fs::create_dir_all(d)
                .unwrap_or_else(|e| panic!("failed to create {}: {e}", d.display()));
        }
        let names = host::HostNames::new();
        host::record(&dir, &run, &state, &names);
        let watchdog = host::watchdog(&dir);
        let api_port = cluster.url.rsplit(':').next().unwrap().parse().unwrap();
        host::network(&names, api_port);
        host::cgroups(&names);

        let images = Images::build(&dir);
        let registry = Registry::start(&dir.join("registry"));
        record_pid(&dir, "registry", registry.pid());
        let socket = run.join("containerd.sock");
        std::fs::write(
            dir.join("net.d/10-ri-node.conflist"),
            config::cni(&dir.join("ipam")),
        )
        .unwrap();
        let containerd_config = dir.join("containerd.toml");
        std::fs::write(
            &containerd_config,
            config::containerd(
                &dir.join("containerd-root"),
                &state,
                &socket,
                &dir.join("net.d"),
                &images.pause,
                &registry.hosts,
            ),
        )
        .unwrap();
        let mut cmd = Command::new("containerd");
        cmd.arg("--config").arg(&containerd_config);
        let mut containerd = Proc::start("containerd", cmd, &dir.join("containerd.log"));
        record_pid(&dir, "containerd", containerd.pid());
        cluster.wait_for("containerd's socket", START_LIMIT, || {
            if let Some(how) = containerd.exited() {
                panic!("containerd exited ({how}):\n{}", containerd.tail(30));
            }
            socket.exists().then_some(())
        });
        images.import(&socket);

        let kubelet_config = write_kubelet_config(&dir, &socket, &names.cgroup_root);
        // Under the short run directory: the kubelet makes Unix sockets below its root (its
        // pod-resources socket has a random name), and a socket's path has at most 107 bytes;
        // under `target/tmp/e2e/<test binary>-<hash>-<pid>/node` of a deep checkout it was
        // longer, and the kubelet never came up.
        let root = run.join("kubelet");
        let kubelet_args = vec![
            format!("--config={}", kubelet_config.display()),
            format!("--kubeconfig={}", cluster.kubeconfig.display()),
            format!("--root-dir={}", root.display()),
            format!("--cert-dir={}", root.join("pki").display()),
            format!("--hostname-override={NODE}"),
            format!("--node-ip={GATEWAY}"),
            "--v=2".into(),
        ];
        let kubelet_start = Instant::now();
        let kubelet = start_kubelet(cluster, &dir, &kubelet_args);
        let mut sched = Command::new(kube_binary(cluster, "kube-scheduler"));
        sched
            .arg(format!("--kubeconfig={}", cluster.kubeconfig.display()))
            .arg("--leader-elect=false")
            .arg("--bind-address=127.0.0.1")
            .arg("--secure-port=0")
            .arg("--v=2");
        let scheduler = Proc::start("kube-scheduler", sched, &dir.join("kube-scheduler.log"));
        record_pid(&dir, "kube-scheduler", scheduler.pid());
        let node = Node {
            cluster,
            dir,
            socket,
            images,
            registry,
            product: OnceLock::new(),
            started: StartTimes {
                total: Duration::ZERO,
                kubelet_to_ready: Duration::ZERO,
            },
            kubelet: Mutex::new(kubelet),
            kubelet_args,
            cgroup_root: names.cgroup_root,
            _machine: machine,
            _containerd: containerd,
            _scheduler: scheduler,
            _watchdog: watchdog,
        };
        node.wait_ready();
        let started = StartTimes {
            total: begin.elapsed(),
            kubelet_to_ready: kubelet_start.elapsed(),
        };
        eprintln!(
            "node {NODE}: Ready {:.1} s after the kubelet started, {:.1} s after the node's start (files in {})",
            started.kubelet_to_ready.as_secs_f64(),
            started.total.as_secs_f64(),
            node.dir.display()
        );
        std::fs::write(node.dir.join("start-times"), format!("{started:?}\n")).unwrap();
        Node { started, ..node }
    }

    /// Waits until the node reports Ready and the node lifecycle controller has lifted the
    /// `not-ready` taint that the API server registers every node with (Pods schedule then).
    pub fn wait_ready(&self) {
        let what = format!("node {NODE} to be Ready and untainted");
        self.cluster.wait_for(&what, START_LIMIT, || {
            // One guard: a second `lock()` inside an `if let` on the first would wait on
            // itself for ever (the scrutinee's guard lives through the block).
            let mut kubelet = self.kubelet.lock().unwrap();
            if let Some(how) = kubelet.exited() {
                panic!(
                    "the kubelet exited ({how}); log {}:\n{}",
                    kubelet.log.display(),
                    kubelet.tail(40)
                );
            }
            drop(kubelet);
            let out = self
                .cluster
                .kubectl(&["get", "node", NODE, "-o", "json"])
                .try_run();
            if !out.ok {
                return None;
            }
            let node = out.json();
            let ready = node["status"]["conditions"].as_array().is_some_and(|c| {
                c.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            });
            let tainted = node["spec"]["taints"]
                .as_array()
                .is_some_and(|t| t.iter().any(|t| t["key"] == "node.kubernetes.io/not-ready"));
            (ready && !tainted).then_some(())
        });
    }

    /// Pushes the locally built product image to the registry as [`SHIPPED_IMAGE`] (once), so
    /// the kubelet pulls it as a user's node does; returns its digest.
    pub fn product(&self) -> &str {
        self.product.get_or_init(|| {
            let reference = SHIPPED_IMAGE.strip_prefix("ghcr.io/").unwrap();
            let digest = self
                .registry
                .push_tarball(self.images.product_tarball(), reference);
            eprintln!(
                "node {NODE}: pushed {SHIPPED_IMAGE}@{digest} to the registry {}",
                self.registry.host
            );
            digest
        })
    }

    /// Kills the kubelet (SIGKILL). Its Pods keep running under containerd.
    pub fn stop_kubelet(&self) {
        self.kubelet.lock().unwrap().kill();
    }

    /// Starts the kubelet again with the same flags and waits for the node to be Ready. Its
    /// ports are chosen again: the old ones were free while it was down, and any outgoing
    /// connection of the machine may have taken one since.
    pub fn start_kubelet(&self) {
        write_kubelet_config(&self.dir, &self.socket, &self.cgroup_root);
        *self.kubelet.lock().unwrap() = start_kubelet(self.cluster, &self.dir, &self.kubelet_args);
        self.wait_ready();
    }

    /// The kubelet's log so far.
    pub fn kubelet_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("kubelet.log")).unwrap_or_default()
    }
}

/// Writes `DIR/kubelet.yaml` with two free ports; returns its path.
fn write_kubelet_config(dir: &Path, socket: &Path, cgroup_root: &str) -> PathBuf {
    let ports = config::KubeletPorts {
        server: free_port(),
        healthz: free_port(),
    };
    let path = dir.join("kubelet.yaml");
    std::fs::write(&path, config::kubelet(socket, cgroup_root, dir, &ports)).unwrap();
    path
}

fn start_kubelet(cluster: &Cluster, dir: &Path, args: &[String]) -> Proc {
    let mut cmd = Command::new(kube_binary(cluster, "kubelet"));
    cmd.args(args);
    let proc = Proc::start("kubelet", cmd, &dir.join("kubelet.log"));
    record_pid(dir, "kubelet", proc.pid());
    proc
}

/// A binary beside kube-apiserver (`kubelet`, `kube-scheduler`), or a panic saying how to get it.
pub fn kube_binary(cluster: &Cluster, name: &str) -> PathBuf {
    let path = cluster.assets.apiserver.with_file_name(name);
    assert!(
        path.is_file(),
        "the node needs {} and it is missing: run scripts/install-kube-test-binaries.sh",
        path.display()
    );
    path
}

fn record_pid(dir: &Path, name: &str, pid: u32) {
    std::fs::write(dir.join("pids").join(name), pid.to_string()).unwrap();
}
