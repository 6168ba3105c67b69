#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what the tests need, then checks
# formatting, lints, and runs every test target.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-test-deps.sh

cargo fmt --check
cargo clippy --all-targets --locked -- -D warnings
# --no-fail-fast: one failing test target never hides the results of the others.
cargo test --all-targets --locked --no-fail-fast
