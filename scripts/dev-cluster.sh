#!/usr/bin/env bash
# A real, current Kubernetes on this machine with reload-injector installed, to try by hand. It is
# the end-to-end tests' own cluster (examples/dev_cluster.rs runs tests/cluster_support): etcd,
# kube-apiserver, kube-controller-manager and kube-scheduler v1.37 (scripts/install-kube-test-binaries.sh),
# and by default the test node too: a kubelet, containerd, runc and the CNI bridge 10.231.40.0/24,
# running images built locally (scripts/build-test-images.sh). The product is installed as
# docs/install.md says (certs/generate.sh, then `kubectl apply -k`), so `serve` runs as the
# shipped Deployment's two Pods behind its Service, and Pods you create really run.
#
#   scripts/dev-cluster.sh up [--no-node]   # prints `export KUBECONFIG=... PATH=...`
#   scripts/dev-cluster.sh status           # what runs, by PID
#   scripts/dev-cluster.sh down             # stops it; the node's watchdog removes the node
#
# `--no-node` runs the control plane only, with `serve` as a local process that has the shipped
# ServiceAccount's identity (Pods are admitted and mutated but stay Pending). The node needs
# root and the packages of scripts/install-node-deps.sh, and only one node runs on a machine
# (the test suite's node tests wait while one runs).
#
# The state ($RELOAD_INJECTOR_DEV_DIR, default /tmp/reload-injector-dev) holds the PID, the admin
# kubeconfig, the log of the cluster program and `logs`, a link to every process's log.
# Everything listens on 127.0.0.1 or the bridge only.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
dir="${RELOAD_INJECTOR_DEV_DIR:-/tmp/reload-injector-dev}"
version="${RELOAD_INJECTOR_KUBE_VERSION:-$(sed -n 's/^current=//p' "$root/scripts/install-kube-test-binaries.sh")}"

say() { echo "dev-cluster: $*" >&2; }
fail() { say "FAILED at step '$1': $2"; exit 1; }

# The cluster program's PID, when it still runs.
pid_running() {
    local pid
    [ -f "$dir/dev-cluster.pid" ] || return 1
    pid=$(cat "$dir/dev-cluster.pid")
    [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' < "/proc/$pid/cmdline" | grep -q dev_cluster \
        && echo "$pid"
}

up() {
    local node_flag=() pid bin
    case "${1:-}" in
        --no-node) node_flag=(--no-node) ;;
        "") ;;
        *) echo "usage: $0 up [--no-node]" >&2; exit 2 ;;
    esac
    bin=$("$root/scripts/install-kube-test-binaries.sh" "$version" | tail -n 1) \
        || fail "install the Kubernetes binaries" "see above"
    if pid=$(pid_running); then
        say "runs already (PID $pid)"
    else
        if [ ${#node_flag[@]} -eq 0 ]; then
            [ "$(id -u)" -eq 0 ] || fail "start the node" "the node needs root (or run: $0 up --no-node)"
            [ -x "$bin/kubelet" ] || fail "start the node" "v$version has no kubelet here (the node runs the current version only; run: $0 up --no-node)"
            "$root/scripts/install-node-deps.sh" || fail "install the node's packages" "see above"
        fi
        say "building reload-injector and the cluster program (cargo build --locked)"
        # As from a shell: a test that runs this script passes on the CARGO_PKG_* of its binary,
        # which ring's build script watches (see scripts/build-static.sh).
        (cd "$root" && unset CARGO_MANIFEST_DIR CARGO_MANIFEST_PATH CARGO_CRATE_NAME CARGO_PRIMARY_PACKAGE "${!CARGO_PKG_@}" && cargo build --locked --quiet --bin reload-injector --example dev_cluster) \
            || fail "cargo build" "see above"
        mkdir -p "$dir"
        rm -f "$dir/ready"
        RELOAD_INJECTOR_BIN="$root/target/debug/reload-injector" RELOAD_INJECTOR_KUBE_VERSION="$version" \
            setsid "$root/target/debug/examples/dev_cluster" --dir "$dir" "${node_flag[@]}" \
            > "$dir/dev-cluster.log" 2>&1 < /dev/null &
        pid=$!
        echo "$pid" > "$dir/dev-cluster.pid"
        say "started (PID $pid), log $dir/dev-cluster.log; the first start builds the node's images (minutes)"
        until [ -f "$dir/ready" ]; do
            if ! [ -d "/proc/$pid" ]; then
                tail -n 30 "$dir/dev-cluster.log" >&2
                fail "start the cluster" "the cluster program exited (log above, $dir/dev-cluster.log)"
            fi
            sleep 1
        done
    fi
    say "up: Kubernetes v$version with reload-injector; logs in $dir/logs/"
    if [ -s "$dir/images" ]; then
        say "the node has no registry; its images (use imagePullPolicy: Never): $(paste -sd' ' "$dir/images")"
    fi
    echo "export KUBECONFIG=$dir/admin.kubeconfig PATH=$bin:\$PATH"
}

down() {
    local pid watchdog
    if pid=$(pid_running); then
        # The node's watchdog starts cleaning once the cluster program is gone.
        watchdog=$(cat "$dir/logs/node/pids/node-down" 2>/dev/null || true)
        kill -TERM "$pid"
        for _ in $(seq 1 100); do [ -d "/proc/$pid" ] || break; sleep 0.1; done
        [ -d "/proc/$pid" ] && kill -KILL "$pid" 2>/dev/null || true
        say "the cluster (PID $pid) stopped"
        if [ -n "$watchdog" ]; then
            for _ in $(seq 1 1200); do [ -d "/proc/$watchdog" ] || break; sleep 0.1; done
            say "the node is removed (log $dir/logs/node/node-down.log)"
        fi
    fi
    rm -f "$dir/dev-cluster.pid" "$dir/ready" "$dir/admin.kubeconfig"
    say "down: nothing of the dev cluster runs; its logs stay in $dir"
}

status() {
    local pid
    if pid=$(pid_running); then
        echo "cluster: running (PID $pid), log $dir/dev-cluster.log, process logs in $dir/logs/"
        [ -f "$dir/ready" ] || echo "cluster: still starting"
        if [ -d "$dir/logs/node/pids" ]; then
            for f in "$dir"/logs/node/pids/*; do
                echo "node: $(basename "$f") PID $(cat "$f")"
            done
        fi
    else
        echo "cluster: not running"
    fi
}

case "${1:-}" in
    up) shift; up "$@" ;;
    down) down ;;
    status) status ;;
    *) echo "usage: $0 up [--no-node] | status | down" >&2; exit 2 ;;
esac
