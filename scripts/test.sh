#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what the tests need, then checks
# formatting, lints, and runs every test on the current Kubernetes (v1.37), then the end-to-end
# tests (the `e2e` modules, the ones that start a real API server; the node's run on v1.37
# only) again on the oldest version the README claims (v1.35).
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

# The suite's release builds (the node's product image, the release test's binaries for two
# architectures and two versions) use no LTO over 16 codegen units: the same code, optimised
# crate by crate. A change to src/ then costs about 76 CPU-seconds per build instead of 237 with
# thin LTO, and a new commit alone (the binary says it) 1 s instead of 153 (measured, 2 cores);
# the suite makes four such builds. A release (scripts/release.sh by hand or in the release
# workflow) and the Dockerfile keep Cargo.toml's profile (fat LTO, one unit).
export CARGO_PROFILE_RELEASE_LTO=off CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16

timed cargo fmt --all --check
timed cargo clippy --workspace --all-targets --locked -- -D warnings
# Every target is built first. The test targets are one binary per behaviour (tests/GROUP/main.rs:
# admission, controller, sidecar, status, packaging, cluster), each with modules by level;
# `node` is the level that needs this machine's one node or builds the release images, `e2e`
# the level that starts a real API server. Then two lanes run at once (most tests wait on a
# server, a process or the clock, not the CPU):
# - the node lane: every target's `node` tests (the release image, the real node's tests, the
#   release pushed to the node's registry and installed from it), each target in its own
#   process, all at once: one node runs on a machine, so a process that starts one holds the
#   machine's node lock (tests/cluster_support/node) until it ends, and another waits for it
#   there, after what it can do without a node (the release test's builds);
# - every other test, then the `e2e` tests again on the oldest version the README claims (the
#   node's excepted: a kubelet is built for the current version only).
# --no-fail-fast: one failing test target never hides the results of the others.
timed cargo test --workspace --all-targets --locked --no-run
node_targets=() other_args=() floor_args=()
for f in tests/*.rs tests/*/main.rs; do
    case "$f" in */main.rs) name=$(basename "$(dirname "$f")") ;; *) name=$(basename "$f" .rs) ;; esac
    other_args+=(--test "$name")
    if grep -q '^mod node {' "$f"; then node_targets+=("$name"); fi
    if grep -q '^mod e2e {' "$f"; then floor_args+=(--test "$name"); fi
done
floor=$(sed -n 's/^floor=//p' scripts/install-kube-test-binaries.sh)

# A lane's lines carry its name; its exit status is written where the script reads it back.
lane_dir=$(mktemp -d)
trap 'rm -rf "$lane_dir"' EXIT
lane() {
    local name=$1 rc=0
    shift
    "$@" > >(sed -u "s/^/[$name] /") 2>&1 || rc=$?
    echo "$rc" > "$lane_dir/$name"
}
node_lane_run() {
    local pids=() rc=0 target
    for target in "${node_targets[@]}"; do
        timed cargo test --locked --no-fail-fast --test "$target" -- node:: \
            > >(sed -u "s/^/[$target] /") 2>&1 &
        pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
    return "$rc"
}
other_lane_run() {
    local rc=0
    # The unit tests, and the fake API server's own tests (tests/fake_api.rs of its crate): one
    # workspace-wide run, so that its dependencies keep the features of the build above.
    timed cargo test --locked --no-fail-fast --workspace --lib --bins --examples --benches \
        --test fake_api || rc=$?
    timed cargo test --locked --no-fail-fast "${other_args[@]}" -- --skip node:: || rc=$?
    echo "test.sh: the end-to-end tests again, on Kubernetes v$floor" >&2
    RELOAD_INJECTOR_KUBE_VERSION=$floor \
        timed cargo test --locked --no-fail-fast "${floor_args[@]}" -- e2e:: || rc=$?
    return "$rc"
}
lane node node_lane_run &
node_pid=$!
lane other other_lane_run
wait "$node_pid"
status=0
for name in node other; do
    rc=$(cat "$lane_dir/$name" 2>/dev/null || echo 1)
    echo "test.sh: lane $name exited $rc" >&2
    [ "$rc" -eq 0 ] || status=1
done
echo "test.sh: everything took $SECONDS s" >&2
exit "$status"
