#!/usr/bin/env bash
# Installs what `cargo bench` needs beyond the test tools: everything from
# install-test-deps.sh (nginx-light and wrk from Debian), plus oha (the open-loop load
# generator, from crates.io) into the project-local target/bench-tools/bin. Each step is
# skipped when its tool is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-test-deps.sh

if [ ! -x target/bench-tools/bin/oha ] && ! command -v oha >/dev/null 2>&1; then
    # A separate target dir keeps oha's build out of the project's.
    CARGO_TARGET_DIR=target/bench-tools/build cargo install oha --locked --root target/bench-tools
fi
