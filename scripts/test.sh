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

# The suite's release builds (the node's product image, the release test's binaries for two
# architectures and two versions) use thin LTO over 16 codegen units: the same code in about a
# third of the build time. A release (scripts/release.sh by hand or in the release workflow) and
# the Dockerfile keep Cargo.toml's profile (fat LTO, one unit).
export CARGO_PROFILE_RELEASE_LTO=thin CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16

timed cargo fmt --check
timed cargo clippy --all-targets --locked -- -D warnings
# Every target is built first; then two lanes run at once (most tests wait on a server, a
# process or the clock, not the CPU):
# - the node lane, one target after another: the release image (tests/dockerfile.rs,
#   tests/node_images.rs), the real node's targets (only one node can run on a machine),
#   tests/e2e_outage.rs (most of its minute is waiting for a CronJob to fire) and the release
#   pushed to the node's registry and installed from it (tests/release.rs);
# - every other target, then the end-to-end targets again on the oldest version the README
#   claims (the node's excepted: a kubelet is built for the current version only).
# --no-fail-fast: one failing test target never hides the results of the others.
timed cargo test --all-targets --locked --no-run
node_lane=(dockerfile node_images e2e_node e2e_node_faults e2e_node_scenarios e2e_node_in_place e2e_outage release)
in_node_lane() { local t; for t in "${node_lane[@]}"; do [ "$t" = "$1" ] && return 0; done; return 1; }
others=(--lib --bins --examples --benches)
floor_e2e=()
for f in tests/*.rs; do
    name=$(basename "$f" .rs)
    in_node_lane "$name" || others+=(--test "$name")
    case "$name" in e2e_node*) ;; e2e*) floor_e2e+=(--test "$name") ;; esac
done
node_args=()
for t in "${node_lane[@]}"; do node_args+=(--test "$t"); done
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
# One node per machine: the lane waits, on this lock, for another run's node lane (a developer's
# run in another checkout takes it too).
node_lane_run() {
    timed flock /tmp/reload-injector-node.lock cargo test --locked --no-fail-fast "${node_args[@]}"
}
other_lane_run() {
    local rc=0
    timed cargo test --locked --no-fail-fast "${others[@]}" || rc=$?
    echo "test.sh: the end-to-end targets again, on Kubernetes v$floor" >&2
    RELOAD_INJECTOR_KUBE_VERSION=$floor timed cargo test --locked --no-fail-fast "${floor_e2e[@]}" || rc=$?
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
