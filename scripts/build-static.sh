#!/usr/bin/env bash
# Builds the release binary as a fully static executable (glibc linked statically, no
# dynamic loader needed), so it runs on a distroless/static or scratch image.
#
#   scripts/build-static.sh           # for the machine it runs on (rustc's host target)
#   scripts/build-static.sh arm64     # for linux/amd64 or linux/arm64, from any host
#
# Without an argument it builds for the host: x86_64 on amd64, aarch64 on arm64. In a
# multi-platform image build (`docker buildx build --platform linux/amd64,linux/arm64`) each
# platform's build stage runs on that platform, and BuildKit sets TARGETARCH; the script then
# checks that the host is that architecture, so an image never ships a binary of another one.
# With an argument (scripts/release.sh) it cross-compiles where the host differs: arm64 on an
# x86_64 host links with Debian's gcc-aarch64-linux-gnu and its static glibc
# (libc6-dev-arm64-cross), after `rustup target add aarch64-unknown-linux-gnu`.
#
# Reproducible: the same commit and toolchain give the same bytes wherever the checkout is.
# Paths of the checkout and of cargo's home are written as /src and /cargo into the binary
# (--remap-path-prefix); the commit comes from RELOAD_INJECTOR_COMMIT, else from git (`unknown`
# without either), and `--version` prints it. `cargo auditable` (crates.io: cargo-auditable)
# embeds the dependency list, from which scanners (syft, the release's SBOM) read what the
# binary holds.
#
# The Dockerfile runs exactly this script, and tests/packaging/node/dockerfile.rs runs it outside Docker
# and checks the result, so what the image ships is what the test suite checked.
# The binary is copied to ${CARGO_TARGET_DIR:-target}/static/reload-injector (host build) or
# .../static/linux-ARCH/reload-injector (ARCH given); that path is printed on the last line
# of output (stdout).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

fail() { echo "build-static.sh: $*" >&2; exit 1; }

host=$(rustc -vV | sed -n 's/^host: //p')
[ -n "$host" ] || fail "could not read the host target from 'rustc -vV'"
arch_of() {
    case "$1" in
        amd64) echo x86_64 ;;
        arm64) echo aarch64 ;;
        *) fail "architecture '$1' is not supported (amd64, arm64)" ;;
    esac
}
if [ -n "${TARGETARCH:-}" ]; then
    want=$(arch_of "$TARGETARCH") || exit 1
    [ "${host%%-*}" = "$want" ] || fail "TARGETARCH=$TARGETARCH needs a $want build host, this is $host"
fi
out="${CARGO_TARGET_DIR:-target}/static"
target=$host
if [ $# -gt 0 ]; then
    target="$(arch_of "$1")-unknown-linux-gnu" || exit 1
    out="$out/linux-$1"
fi
if [ "$target" != "$host" ]; then
    cross=${target%%-*}-linux-gnu
    command -v "$cross-gcc" >/dev/null \
        || fail "no $cross-gcc to link $target: apt-get install gcc-${cross//_/-} (scripts/install-test-deps.sh does)"
    rustup target list --installed 2>/dev/null | grep -qx "$target" \
        || fail "the Rust standard library for $target is missing: rustup target add $target"
    upper=$(tr 'a-z-' 'A-Z_' <<<"$target")
    export "CARGO_TARGET_${upper}_LINKER=$cross-gcc" "CC_${target//-/_}=$cross-gcc" "AR_${target//-/_}=$cross-ar"
fi
cargo auditable --help >/dev/null 2>&1 \
    || fail "cargo-auditable is missing: cargo install cargo-auditable --locked --version 0.7.7 (scripts/install-test-deps.sh does)"

if [ -z "${RELOAD_INJECTOR_COMMIT:-}" ]; then
    RELOAD_INJECTOR_COMMIT=$(git rev-parse HEAD 2>/dev/null || echo unknown)
fi
export RELOAD_INJECTOR_COMMIT
# getrandom 0.3 finds glibc's getrandom() with dlsym, which a static binary cannot do, and
# would fall back to opening /dev/urandom; linux_getrandom makes it call getrandom(2) directly,
# so randomness needs no file (tests/packaging/node/dockerfile.rs runs the binary in an empty root).
cargo_home=${CARGO_HOME:-${HOME:-/root}/.cargo}
export RUSTFLAGS="${RUSTFLAGS:+$RUSTFLAGS }-C target-feature=+crt-static --cfg getrandom_backend=\"linux_getrandom\" --remap-path-prefix=$repo=/src --remap-path-prefix=$cargo_home=/cargo"
# Run by a test, the script inherits what cargo sets for a test binary (CARGO_PKG_NAME, …); build
# scripts that watch those variables (ring's) would rebuild ring and all above it, here and again
# in the next build from a shell. The build sees what a shell gives it.
unset CARGO_MANIFEST_DIR CARGO_MANIFEST_PATH CARGO_CRATE_NAME CARGO_PRIMARY_PACKAGE "${!CARGO_PKG_@}"
# Two runs at once (the suite builds the image and the Dockerfile's binary side by side) take
# turns, and the binary is put in place whole: a reader never sees half of it.
mkdir -p "$out"
exec 9>"$out/.build.lock"
flock 9
cargo auditable build --release --locked --target "$target" --bin reload-injector >&2
cp "${CARGO_TARGET_DIR:-target}/$target/release/reload-injector" "$out/.reload-injector.$$"
mv -f "$out/.reload-injector.$$" "$out/reload-injector"
echo "$out/reload-injector"
