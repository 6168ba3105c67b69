#!/usr/bin/env bash
# Builds the release binary as a fully static executable (glibc linked statically, no
# dynamic loader needed), so it runs on a distroless/static or scratch image.
#
# It builds for the machine it runs on (rustc's host target): x86_64 on amd64, aarch64 on
# arm64. In a multi-platform image build (`docker buildx build --platform
# linux/amd64,linux/arm64`) each platform's build stage runs on that platform, and BuildKit
# sets TARGETARCH; the script then checks that the host is that architecture, so an image
# never ships a binary of another one.
#
# The Dockerfile runs exactly this script, and tests/dockerfile.rs runs it outside Docker
# and checks the result, so what the image ships is what the test suite checked.
# The binary is copied to ${CARGO_TARGET_DIR:-target}/static/reload-injector (the same path
# on every architecture); that path is printed on the last line of output (stdout).
set -euo pipefail
cd "$(dirname "$0")/.."

target=$(rustc -vV | sed -n 's/^host: //p')
if [ -z "$target" ]; then
    echo "build-static.sh: could not read the host target from 'rustc -vV'" >&2
    exit 1
fi
if [ -n "${TARGETARCH:-}" ]; then
    case "$TARGETARCH" in
        amd64) want=x86_64 ;;
        arm64) want=aarch64 ;;
        *)
            echo "build-static.sh: TARGETARCH=$TARGETARCH is not supported (amd64, arm64)" >&2
            exit 1
            ;;
    esac
    if [ "${target%%-*}" != "$want" ]; then
        echo "build-static.sh: TARGETARCH=$TARGETARCH needs a $want build host, this is $target" >&2
        exit 1
    fi
fi
# getrandom 0.3 finds glibc's getrandom() with dlsym, which a static binary cannot do, and
# would fall back to opening /dev/urandom; linux_getrandom makes it call getrandom(2) directly,
# so randomness needs no file (tests/dockerfile.rs runs the binary in an empty root).
export RUSTFLAGS="${RUSTFLAGS:+$RUSTFLAGS }-C target-feature=+crt-static --cfg getrandom_backend=\"linux_getrandom\""
cargo build --release --locked --target "$target" --bin reload-injector >&2
out="${CARGO_TARGET_DIR:-target}/static"
mkdir -p "$out"
cp "${CARGO_TARGET_DIR:-target}/$target/release/reload-injector" "$out/reload-injector"
echo "$out/reload-injector"
