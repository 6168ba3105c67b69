#!/usr/bin/env bash
# Removes everything a test node (tests/cluster_support/node/) made, by what it recorded in its
# directory: its processes by PID (the kubelet, kube-scheduler, containerd, then each
# container's init and each shim that containerd's state names), every mount under the node's
# directories, its cgroups, its bridge, its iptables chains (ours, and the KUBE-* chains the
# kubelet added that were not there before), the kernel settings it changed, and the paths outside the node's directory that
# the kubelet or containerd created. Never kills or removes anything by name.
#
#   scripts/node-down.sh NODE_DIR                   # now
#   scripts/node-down.sh --when-stdin-closes NODE_DIR
#
# The harness starts the second form beside the node with a pipe on stdin that only it holds:
# when the test binary exits, however it exits, the pipe closes and this cleans up.
set -uo pipefail

if [ "${1:-}" = --when-stdin-closes ]; then
    shift
    cat >/dev/null
fi
dir=${1:?usage: node-down.sh [--when-stdin-closes] NODE_DIR}
[ -f "$dir/node.env" ] || { echo "node-down: $dir is not a node's directory (no node.env)" >&2; exit 1; }
# RUN_DIR, STATE_DIR, BRIDGE, CGROUP_ROOT, NAT_CHAIN, FILTER_CHAIN (written by the harness)
# shellcheck disable=SC1091
. "$dir/node.env"

say() { echo "node-down: $*" >&2; }

# SIGKILL to PID if it still runs a command line that names MARK, then wait for it.
kill_pid() {
    local pid=$1 mark=$2 i
    [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 0
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$mark" || return 0
    kill -KILL "$pid" 2>/dev/null
    for i in $(seq 50); do [ -d "/proc/$pid" ] || return 0; sleep 0.1; done
    say "pid $pid did not exit after SIGKILL"
}

# 1. The node's own processes.
for name in kubelet kube-scheduler containerd registry; do
    # Each names the cluster's directory (the node's parent) on its command line.
    [ -f "$dir/pids/$name" ] && kill_pid "$(cat "$dir/pids/$name")" "$(dirname "$dir")"
done

# 2. Containers: every process in the node's cgroups (the kubelet puts each Pod, pause
#    included, under its cgroup root), until none is left; then each shim that containerd's
#    state names and whose command line names the node's containerd socket.
if [ -n "${CGROUP_ROOT:-}" ]; then
    for i in $(seq 50); do
        pids=$(find /sys/fs/cgroup/*/"$CGROUP_ROOT" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u)
        [ -z "$pids" ] && break
        # shellcheck disable=SC2086
        kill -KILL $pids 2>/dev/null
        sleep 0.1
    done
fi
for task in "$STATE_DIR"/io.containerd.runtime.v2.task/*/*/; do
    [ -f "$task/shim.pid" ] && kill_pid "$(cat "$task/shim.pid")" "-address $RUN_DIR/"
done
# A shim whose state is gone still names the node's socket on its command line.
for cmdline in /proc/[0-9]*/cmdline; do
    pid=${cmdline#/proc/}; pid=${pid%/cmdline}
    { tr '\0' ' ' <"$cmdline"; } 2>/dev/null | grep -qF -- "-address $RUN_DIR/" && kill_pid "$pid" "-address $RUN_DIR/"
done

# 3. Mounts under the node's directories (netns, rootfs overlays, volumes), deepest first.
for root in "$dir" "$RUN_DIR" "$STATE_DIR"; do
    awk -v root="$root" '$5 == root || index($5, root "/") == 1 { print $5 }' /proc/self/mountinfo \
        | sort -r | while read -r mnt; do
            umount "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || say "cannot unmount $mnt"
        done
done

# 4. Cgroups: everything under the node's cgroup root, in every hierarchy, deepest first.
if [ -n "${CGROUP_ROOT:-}" ]; then
    for hierarchy in /sys/fs/cgroup/*/; do
        [ -d "$hierarchy$CGROUP_ROOT" ] || continue
        find "$hierarchy$CGROUP_ROOT" -depth -type d -exec rmdir {} + 2>/dev/null \
            || say "cannot remove every cgroup under $hierarchy$CGROUP_ROOT"
    done
fi

# 5. iptables: our chains, and the KUBE-* chains that were not there before the node.
drop_chain() {
    local tool=$1 table=$2 chain=$3
    "$tool" -t "$table" -S 2>/dev/null | grep -- "-j $chain\b" | sed 's/^-A /-D /' \
        | while read -r rule; do eval "$tool -t $table $rule" 2>/dev/null; done
    "$tool" -t "$table" -F "$chain" 2>/dev/null
    "$tool" -t "$table" -X "$chain" 2>/dev/null || say "cannot remove $tool -t $table chain $chain"
}
for tool in iptables ip6tables; do
    command -v "$tool" >/dev/null 2>&1 || continue
    for table in filter nat mangle; do
        for chain in $("$tool" -t "$table" -S 2>/dev/null | awk '$1 == "-N" { print $2 }'); do
            case "$chain" in
                "$NAT_CHAIN" | "$FILTER_CHAIN") drop_chain "$tool" "$table" "$chain" ;;
                KUBE-*) grep -qx "$tool $table $chain" "$dir/iptables-before" 2>/dev/null \
                    || drop_chain "$tool" "$table" "$chain" ;;
            esac
        done
    done
done

# 6. The kernel settings the kubelet may have changed.
if [ -f "$dir/sysctl-before" ]; then
    while IFS== read -r key value; do
        [ -n "$key" ] && [ "$(sysctl -n "$key" 2>/dev/null)" != "$value" ] && sysctl -q -w "$key=$value"
    done <"$dir/sysctl-before"
fi

# 7. Paths outside the node's directory that did not exist before it started, and its
#    run and state directories.
if [ -f "$dir/created-outside" ]; then
    while read -r path; do [ -n "$path" ] && rm -rf -- "$path"; done <"$dir/created-outside"
fi
# The run directory holds the kubelet's root (its pods and sockets) and containerd's socket.
rm -rf -- "$RUN_DIR" "$STATE_DIR"
# containerd's images and snapshots; the logs stay.
rm -rf -- "$dir/containerd-root"

# 8. Last, the bridge (the Pods' veths went with their network namespaces): a node that starts
#    waits for it to be gone, so it finds the host as it was before this one.
ip link show "$BRIDGE" >/dev/null 2>&1 && ip link del "$BRIDGE"
say "node in $dir removed"
