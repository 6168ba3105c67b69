//! The node's configuration files, as text: containerd's, the CNI network's and the
//! kubelet's. Every path in them is under the node's directories, except what the programs
//! hard-code (see [`super::host::OUTSIDE`]).

use std::path::Path;

use super::{BRIDGE, GATEWAY, SUBNET};

/// containerd 1.6's config (version 2): its own root, state and sockets; the CRI plugin with
/// runc under the cgroupfs driver (no systemd here), the local pause image, registry hosts from
/// `hosts` (`config_path`: the tests' registry mirrors ghcr.io and docker.io), and the two
/// settings this machine needs: `restrict_oom_score_adj` (no CAP_SYS_RESOURCE, so
/// `oom_score_adj` can only be raised) and `netns_mounts_under_state_dir` (network namespaces
/// under our state directory, not `/var/run/netns`).
pub fn containerd(
    root: &Path,
    state: &Path,
    socket: &Path,
    cni_conf: &Path,
    pause: &str,
    hosts: &Path,
) -> String {
    format!(
        r#"version = 2
root = "{root}"
state = "{state}"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "{socket}"

[ttrpc]
  address = "{socket}.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "{root}/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{pause}"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{cni}"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "{hosts}"
"#,
        root = root.display(),
        state = state.display(),
        socket = socket.display(),
        cni = cni_conf.display(),
        hosts = hosts.display(),
    )
}

/// The Pods' network: Debian's `bridge` plugin on our bridge, addresses from `host-local`
/// (its lease files under `ipam`). `isGateway` stays false: the harness gives the bridge the
/// gateway address itself, so the plugin never turns on `ip_forward` and nothing a Pod sends
/// is routed off the machine. No masquerade. (containerd adds `loopback` for each sandbox.)
pub fn cni(ipam: &Path) -> String {
    serde_json::json!({
        "cniVersion": "0.4.0",
        "name": "ri-node",
        "plugins": [{
            "type": "bridge",
            "bridge": BRIDGE,
            "isGateway": false,
            "ipMasq": false,
            "hairpinMode": true,
            "ipam": {
                "type": "host-local",
                "ranges": [[{"subnet": SUBNET, "gateway": GATEWAY}]],
                "routes": [{"dst": "0.0.0.0/0", "gw": GATEWAY}],
                "dataDir": ipam.display().to_string(),
            },
        }],
    })
    .to_string()
}

/// The kubelet's ports.
pub struct KubeletPorts {
    /// Its API (logs, exec), on the gateway address.
    pub server: u16,
    /// `/healthz` on loopback.
    pub healthz: u16,
}

/// The KubeletConfiguration. Defaults stay where a user's node has them (`syncFrequency`
/// 1 min, `Watch` ConfigMap and Secret change detection); what differs is what this machine
/// needs: cgroup v1 (`failCgroupV1: false`), the cgroupfs driver under our own cgroup root,
/// no swap check, and eviction and image GC that never remove the images we imported nor
/// evict Pods because other builds filled the shared disk (with the default thresholds the
/// kubelet evicted every Pod for `ephemeral-storage` when the disk reached 100%). The
/// API server calls it without credentials (anonymous, `AlwaysAllow`), on the gateway address
/// only.
pub fn kubelet(socket: &Path, cgroup_root: &str, dir: &Path, ports: &KubeletPorts) -> String {
    format!(
        r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://{socket}
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupsPerQOS: true
cgroupRoot: /{cgroup_root}
failSwapOn: false
address: {GATEWAY}
port: {server}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: {healthz}
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
podLogsDir: {pod_logs}
volumePluginDir: {plugins}
resolvConf: ""
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: "1Mi"
  nodefs.available: "1Mi"
  imagefs.available: "1Mi"
  nodefs.inodesFree: "1"
  imagefs.inodesFree: "1"
serializeImagePulls: false
# The kubelet's default: every node test of a binary runs on this one node.
maxPods: 110
"#,
        socket = socket.display(),
        pod_logs = dir.join("pod-logs").display(),
        plugins = dir.join("volume-plugins").display(),
        server = ports.server,
        healthz = ports.healthz,
    )
}
