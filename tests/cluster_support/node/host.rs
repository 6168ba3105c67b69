//! What the node changes on the host, set up and recorded so that `scripts/node-down.sh` can
//! undo it: the bridge and its gateway address, one DNAT rule that stands in for kube-proxy for
//! the `kubernetes` Service only, the kernel settings the kubelet may change, and the paths
//! outside the node's directory that the kubelet and containerd hard-code. The clean-up runs
//! from a watchdog process that outlives the test binary (see [`watchdog`]).

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, Stdio};

use super::{BRIDGE, GATEWAY, SERVICE_IP, SUBNET_PREFIX};

/// Paths outside the node's directory that the kubelet or containerd write whatever their
/// flags say: the kubelet's device-plugin directory and `/var/log/containers` symlinks, the
/// shims' sockets and runc's state under `/run/containerd`, libcni's result cache under
/// `/var/lib/cni`, and util-linux's `/run/mount` (the kubelet's mounts). `/var/log/pods` and
/// the Flexvolume directory are moved by the kubelet's config, and listed in case.
/// Those that did not exist before the node started are removed after it.
pub const OUTSIDE: &[&str] = &[
    "/var/lib/kubelet",
    "/var/log/containers",
    "/var/log/pods",
    "/run/containerd",
    "/var/lib/cni",
    "/run/mount",
    "/usr/libexec/kubernetes",
];

/// The kernel settings the kubelet sets at start (`protectKernelDefaults: false`); their
/// values before the node are restored after it.
pub const SYSCTLS: &[&str] = &[
    "vm.overcommit_memory",
    "vm.panic_on_oom",
    "kernel.panic",
    "kernel.panic_on_oops",
    "kernel.keys.root_maxkeys",
    "kernel.keys.root_maxbytes",
];

/// Names of what this node adds on the host (each carries the test binary's PID).
pub struct HostNames {
    /// Our nat chain (the `kubernetes` Service's DNAT).
    pub nat_chain: String,
    /// The cgroup the kubelet puts every Pod under (`cgroupRoot`).
    pub cgroup_root: String,
}

impl HostNames {
    /// Names for this test binary.
    pub fn new() -> HostNames {
        let pid = std::process::id();
        HostNames {
            nat_chain: format!("RI-NODE-{pid}"),
            cgroup_root: format!("ri-node-{pid}"),
        }
    }
}

/// Records what clean-up needs, in `dir`: `node.env`, the paths of [`OUTSIDE`] that do not
/// exist yet, the KUBE-* iptables chains that already exist, and the [`SYSCTLS`].
pub fn record(dir: &Path, run: &Path, state: &Path, names: &HostNames) {
    write(dir, "node.env", &node_env(run, state, names));
    // Beside the run directory's name (which carries the test binary's PID), for
    // [`reap_orphans`].
    write(run, "node-dir", &dir.display().to_string());
    let created: Vec<&str> = OUTSIDE
        .iter()
        .copied()
        .filter(|p| !Path::new(p).exists())
        .collect();
    write(dir, "created-outside", &lines(&created));
    write(dir, "iptables-before", &lines(&chains_now()));
    let sysctls: Vec<String> = SYSCTLS
        .iter()
        .filter_map(|key| {
            let path = Path::new("/proc/sys").join(key.replace('.', "/"));
            let value = std::fs::read_to_string(path).ok()?;
            Some(format!("{key}={}", value.trim()))
        })
        .collect();
    write(dir, "sysctl-before", &lines(&sysctls));
}

/// What `scripts/node-down.sh` sources: the node's run and state directories and the names it
/// added on the host.
fn node_env(run: &Path, state: &Path, names: &HostNames) -> String {
    format!(
        "RUN_DIR='{}'\nSTATE_DIR='{}'\nBRIDGE='{BRIDGE}'\nCGROUP_ROOT='{}'\nNAT_CHAIN='{}'\nFILTER_CHAIN=''\n",
        run.display(),
        state.display(),
        names.cgroup_root,
        names.nat_chain,
    )
}

/// The iptables chains that exist now, one `TOOL TABLE CHAIN` each.
fn chains_now() -> Vec<String> {
    let mut chains = Vec::new();
    for tool in ["iptables", "ip6tables"] {
        for table in ["filter", "nat", "mangle"] {
            let out = Command::new(tool).args(["-t", table, "-S"]).output();
            let text = out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
            for line in text.unwrap_or_default().lines() {
                if let Some(chain) = line.strip_prefix("-N ") {
                    chains.push(format!("{tool} {table} {chain}"));
                }
            }
        }
    }
    chains
}

/// Starts `scripts/node-down.sh --when-stdin-closes DIR` in its own process group (a Ctrl-C
/// on the terminal does not reach it) and returns the pipe to its stdin: kept open for the
/// test binary's life, it closes when the binary exits, however it exits, and the watchdog
/// then removes the node.
// Never waited for, on purpose: it must outlive the test binary to clean up after it.
#[allow(clippy::zombie_processes)]
pub fn watchdog(dir: &Path) -> ChildStdin {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/node-down.sh");
    let log =
        std::fs::File::create(dir.join("node-down.log")).expect("failed to create node-down.log");
    let mut child = Command::new("bash")
        .arg(script)
        .arg("--when-stdin-closes")
        .arg(dir)
        .stdin(Stdio::piped())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .process_group(0)
        .spawn()
        .expect("failed to start scripts/node-down.sh as the node's watchdog");
    std::fs::write(dir.join("pids/node-down"), child.id().to_string()).unwrap();
    child.stdin.take().unwrap()
}

/// The bridge with the gateway address (before any Pod, so the kubelet can serve on it), and
/// the one rule that lets Pods reach the API server through the `kubernetes` Service's
/// address: DNAT of `SERVICE_IP:443` arriving from the bridge to the API server on
/// `127.0.0.1:api_port` (`route_localnet` on the bridge allows that, as kube-proxy does for
/// node ports on loopback). `ip_forward` is left as it is (off here): nothing from a Pod is
/// routed anywhere.
pub fn network(names: &HostNames, api_port: u16) {
    run(&["ip", "link", "add", BRIDGE, "type", "bridge"]);
    run(&[
        "ip",
        "addr",
        "add",
        &format!("{GATEWAY}/{SUBNET_PREFIX}"),
        "dev",
        BRIDGE,
    ]);
    run(&["ip", "link", "set", BRIDGE, "up"]);
    run(&[
        "sysctl",
        "-q",
        "-w",
        &format!("net.ipv4.conf.{BRIDGE}.route_localnet=1"),
    ]);
    let chain = names.nat_chain.as_str();
    run(&["iptables", "-t", "nat", "-N", chain]);
    let to = format!("127.0.0.1:{api_port}");
    run(&[
        "iptables",
        "-t",
        "nat",
        "-A",
        chain,
        "-i",
        BRIDGE,
        "-d",
        SERVICE_IP,
        "-p",
        "tcp",
        "--dport",
        "443",
        "-j",
        "DNAT",
        "--to-destination",
        &to,
    ]);
    run(&["iptables", "-t", "nat", "-I", "PREROUTING", "-j", chain]);
}

/// The kubelet's `cgroupRoot`, which must exist in every cgroup v1 hierarchy before it
/// starts (cpuset's with the parent's CPUs and memory nodes, which a new cpuset lacks).
pub fn cgroups(names: &HostNames) {
    let Ok(entries) = std::fs::read_dir("/sys/fs/cgroup") else {
        return;
    };
    for entry in entries.flatten() {
        let hierarchy = entry.path();
        if !hierarchy.join("cgroup.procs").exists() || hierarchy.ends_with("unified") {
            continue;
        }
        let dir = hierarchy.join(&names.cgroup_root);
        std::fs::create_dir_all(&dir)
            .unwrap_or_else(|e| panic!("failed to create the cgroup {}: {e}", dir.display()));
        for file in ["cpuset.cpus", "cpuset.mems"] {
            if let Ok(value) = std::fs::read_to_string(hierarchy.join(file)) {
                std::fs::write(dir.join(file), value.trim())
                    .unwrap_or_else(|e| panic!("failed to set {}/{file}: {e}", dir.display()));
            }
        }
    }
}

/// Removes the nodes of test binaries that no longer run and whose watchdog died with them (a
/// run killed as a whole, watchdog included, never cleans up): each left its run directory
/// `/run/ri-node-PID`, whose `node-dir` names the directory `scripts/node-down.sh` reads. A node
/// whose binary runs, or whose watchdog is still at work, is left alone. Returns the
/// directories it removed.
pub fn reap_orphans() -> Vec<PathBuf> {
    let alive = |pid: &str| Path::new("/proc").join(pid.trim()).exists();
    let mut reaped = Vec::new();
    let Ok(entries) = std::fs::read_dir("/run") else {
        return reaped;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.strip_prefix("ri-node-") else {
            continue;
        };
        if pid.parse::<u32>().is_err() || alive(pid) {
            continue;
        }
        let recorded = std::fs::read_to_string(entry.path().join("node-dir")).ok();
        let recorded = recorded.map(|dir| PathBuf::from(dir.trim()));
        let (dir, temporary) = match recorded.filter(|dir| dir.join("node.env").exists()) {
            Some(dir) => (dir, false),
            // Left by a harness from before `node-dir`, or its directory is gone: what
            // node-down.sh needs follows from the PID alone.
            None => (orphan_record(&entry.path(), pid), true),
        };
        let watchdog = std::fs::read_to_string(dir.join("pids/node-down")).unwrap_or_default();
        if !watchdog.trim().is_empty() && alive(&watchdog) {
            continue;
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/node-down.sh");
        let out = Command::new("bash")
            .arg(&script)
            .arg(&dir)
            .output()
            .unwrap_or_else(|e| panic!("failed to run {}: {e}", script.display()));
        eprintln!(
            "removed the node a killed test binary left in {}:\n{}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        if temporary {
            let _ = std::fs::remove_dir_all(&dir);
        }
        reaped.push(dir);
    }
    reaped
}

/// A node directory for the orphan whose run directory is `run` (test binary `pid`), with the
/// `node.env` its harness wrote (the names all carry the PID) and every KUBE-* chain of now
/// recorded as there before, so that only the orphan's own chain is dropped.
fn orphan_record(run: &Path, pid: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ri-node-orphan-{pid}"));
    std::fs::create_dir_all(&dir)
        .unwrap_or_else(|e| panic!("failed to create {}: {e}", dir.display()));
    let names = HostNames {
        nat_chain: format!("RI-NODE-{pid}"),
        cgroup_root: format!("ri-node-{pid}"),
    };
    let env = node_env(run, &run.join("containerd-state"), &names);
    write(&dir, "node.env", &env);
    write(&dir, "iptables-before", &lines(&chains_now()));
    dir
}

/// Whether the bridge exists already (another node runs, or one was not cleaned up).
pub fn bridge_exists() -> bool {
    Path::new("/sys/class/net").join(BRIDGE).exists()
}

fn run(args: &[&str]) {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("failed to run {}: {e}", args.join(" ")));
    assert!(
        out.status.success(),
        "{} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    let mut file = std::fs::File::create(&path)
        .unwrap_or_else(|e| panic!("failed to write {}: {e}", path.display()));
    file.write_all(text.as_bytes()).unwrap();
    path
}

fn lines<S: AsRef<str>>(items: &[S]) -> String {
    items.iter().map(|s| format!("{}\n", s.as_ref())).collect()
}
