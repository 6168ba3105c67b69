#!/usr/bin/env bash
# Installs the runtime half of the test suite's node (tests/cluster_support/node/, scripts/dev-cluster.sh),
# from Debian 12's packages: containerd (with its CRI plugin), runc, the CNI plugins `bridge`,
# `host-local` and `loopback`, iptables (the kubelet and the bridge plugin add rules), and what
# the local images are built from (scripts/build-test-images.sh): nginx-light and
# busybox-static for the app image, a static libc for the pause binary.
#
# The kubelet itself is built with the control plane (scripts/install-kube-test-binaries.sh).
# Each package is installed only when its file is missing, so a warm machine pays nothing.
set -euo pipefail

say() { echo "install-node-deps: $*" >&2; }

need=()
want() { [ -e "$1" ] || need+=("$2"); }
want /usr/bin/containerd containerd
want /usr/sbin/runc runc
want /usr/lib/cni/bridge containernetworking-plugins
want /usr/sbin/iptables iptables
want /usr/sbin/nginx nginx-light
want /bin/busybox busybox-static
want /usr/lib/x86_64-linux-gnu/libc.a libc6-dev
want /usr/bin/gcc gcc
[ ${#need[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
    say "need root to apt-get install ${need[*]}; install them by hand or run as root"
    exit 1
fi
say "apt-get install ${need[*]}"
apt-get -o DPkg::Lock::Timeout=600 update -qq
DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${need[@]}" >/dev/null
# Debian's package starts containerd as a service where there is an init system to do it; the
# tests run their own containerd with their own config, root and socket, never this one.
