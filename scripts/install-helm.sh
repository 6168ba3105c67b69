#!/usr/bin/env bash
# Provides the `helm` that the chart's tests (tests/packaging/offline/helm_chart.rs, tests/packaging/e2e/helm.rs) run:
# Helm v4.3.1, built from the Go module proxy through a small module of ours,
# scripts/helm-build/vVERSION/go.mod, whose committed go.sum is what we trust. Nothing comes
# from a VCS host (`direct` is dropped from GOPROXY) and no release binary is downloaded.
#
# Why v4: Helm 3's last feature release was v3.22 (September 2026) and it gets security fixes
# only, until February 2027; v4 is the supported line. The chart is `apiVersion: v2`, which both
# v3 and v4 install, so users of either can use it.
#
# The binary is cached outside the clone, keyed by version:
# $RELOAD_INJECTOR_HELM_CACHE_ROOT (default ~/.cache/reload-injector)/helm-vVERSION/helm.
# A warm machine pays nothing. HELM_BIN naming an executable skips the build and is used as is.
#
# Prints the binary's path on its last line of stdout. Every failure names its step.
set -euo pipefail

version=4.3.1
major=${version%%.*}
here="$(cd "$(dirname "$0")" && pwd)"
module="$here/helm-build/v$version"
root="${RELOAD_INJECTOR_HELM_CACHE_ROOT:-${HOME:-/root}/.cache/reload-injector}"
cache="$root/helm-v$version"

say() { echo "install-helm: $*" >&2; }
fail() { say "FAILED at step '$1': $2"; exit 1; }

if [ -n "${HELM_BIN:-}" ]; then
    [ -x "$HELM_BIN" ] || fail "HELM_BIN" "$HELM_BIN is not an executable (unset HELM_BIN to build v$version)"
    say "using HELM_BIN=$HELM_BIN"
    echo "$HELM_BIN"
    exit 0
fi

if [ -x "$cache/helm" ]; then
    echo "$cache/helm"
    exit 0
fi

# shellcheck source=lib/go-module-proxy.sh
. "$here/lib/go-module-proxy.sh"
use_module_proxy

[ -f "$module/go.sum" ] || fail "find the module for v$version" "$module/go.sum is missing (scripts/helm-build/new-version.sh $version writes it)"
mkdir -p "$cache" || fail "create the cache" "cannot create $cache"

# The version `helm version` reports, stamped as helm's Makefile does.
pkg="helm.sh/helm/v$major"
ldflags="-s -w -X $pkg/internal/version.version=v$version"
ldflags+=" -X $pkg/internal/version.gitTreeState=clean"
tmp="$cache/helm.tmp.$$"
trap 'rm -f "$tmp"' EXIT
say "go build $pkg/cmd/helm v$version (a few minutes on 2 cores)"
(cd "$module" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$tmp" "$pkg/cmd/helm") >&2 \
    || fail "go build $pkg/cmd/helm v$version" "the Go build failed (see above); a download error means the module proxy ($GOPROXY) could not be reached"
"$tmp" version --short 2>/dev/null | grep -q "^v$version" \
    || fail "check the version" "the built helm says '$("$tmp" version --short 2>&1)', not v$version"
mv "$tmp" "$cache/helm" || fail "install helm" "cannot move it into $cache"
say "v$version is in $cache/helm"
echo "$cache/helm"
