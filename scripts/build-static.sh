#!/usr/bin/env bash
# Builds the release binary as a fully static executable (glibc linked statically, no
# dynamic loader needed), so it runs on a distroless/static or scratch image.
#
# The Dockerfile runs exactly this script, and tests/dockerfile.rs runs it outside Docker
# and checks the result, so what the image ships is what the test suite checked.
# Prints the path of the binary on its last line of output (stdout).
set -euo pipefail
cd "$(dirname "$0")/.."

target=x86_64-unknown-linux-gnu
# getrandom 0.3 finds glibc's getrandom() with dlsym, which a static binary cannot do, and
# would fall back to opening /dev/urandom; linux_getrandom makes it call getrandom(2) directly,
# so randomness needs no file (tests/dockerfile.rs runs the binary in an empty root).
export RUSTFLAGS="${RUSTFLAGS:+$RUSTFLAGS }-C target-feature=+crt-static --cfg getrandom_backend=\"linux_getrandom\""
cargo build --release --locked --target "$target" --bin reload-injector >&2
echo "${CARGO_TARGET_DIR:-target}/$target/release/reload-injector"
