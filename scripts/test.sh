#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what the tests need, then checks
# formatting, lints, and runs every test target on the current Kubernetes (v1.37), then the
# end-to-end targets (tests/e2e*.rs, the ones that start a real API server; the node's,
# tests/e2e_node*.rs, run on v1.37 only) again on the oldest version the README claims (v1.35).
set -euo pipefail
cd "$(dirname "$0")/.."

# Runs one step and says how long it took (a slow CI run's log then tells where the time went).
timed() {
    local start=$SECONDS rc=0
    "$@" || rc=$?
    echo "test.sh: $1 ${2:-} took $((SECONDS - start)) s (exit $rc)" >&2
    return "$rc"
}

timed scripts/install-test-deps.sh

timed cargo fmt --check
timed cargo clippy --all-targets --locked -- -D warnings
# --no-fail-fast: one failing test target never hides the results of the others.
status=0
timed cargo test --all-targets --locked --no-fail-fast || status=$?

floor=$(sed -n 's/^floor=//p' scripts/install-kube-test-binaries.sh)
e2e=()
for f in tests/e2e*.rs; do
    # The node (kubelet, containerd) runs on the current version only.
    case "$f" in tests/e2e_node*) continue ;; esac
    e2e+=(--test "$(basename "$f" .rs)")
done
echo "test.sh: the end-to-end targets again, on Kubernetes v$floor" >&2
RELOAD_INJECTOR_KUBE_VERSION=$floor timed cargo test --locked --no-fail-fast "${e2e[@]}" || status=$?
echo "test.sh: everything took $SECONDS s" >&2
exit "$status"
