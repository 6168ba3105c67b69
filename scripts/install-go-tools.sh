#!/usr/bin/env bash
# Provides the Go programs that the release (scripts/release.sh) and its tests need, built from
# the Go module proxy, each through a small module of ours whose committed go.sum is what we
# trust (nothing comes from a VCS host, no release binary is downloaded):
#
#   crane       go-containerregistry v0.22.1's `crane`: pushes the image index, reads digests
#               (scripts/tool-build/crane-v0.22.1/)
#   registry    go-containerregistry's registry served over HTTPS on loopback: the tests' OCI
#               registry (scripts/tool-build/registry/, a main package of ours)
#   syft        syft v1.57.1: the SBOM of the image (scripts/tool-build/syft-v1.57.1/)
#   actionlint  actionlint v1.7.12: checks .github/workflows/ (scripts/tool-build/actionlint-v1.7.12/)
#
# Cached outside the clone, keyed by version:
# $RELOAD_INJECTOR_TOOLS_CACHE_ROOT (default ~/.cache/reload-injector)/NAME-vVERSION/NAME.
# A warm machine pays nothing.
#
#   scripts/install-go-tools.sh                 # all four
#   scripts/install-go-tools.sh crane syft      # those named
#
# Prints one line per tool on stdout, `NAME PATH`. Every failure names its step.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="${RELOAD_INJECTOR_TOOLS_CACHE_ROOT:-${HOME:-/root}/.cache/reload-injector}"

say() { echo "install-go-tools: $*" >&2; }
fail() { say "FAILED at step '$1': $2"; exit 1; }

# NAME → version, module directory, package to build, and the -X that stamps its version.
tool() {
    case "$1" in
        crane)
            version=0.22.1 module="$here/tool-build/crane-v$version"
            pkg=github.com/google/go-containerregistry/cmd/crane
            stamp="-X github.com/google/go-containerregistry/cmd/crane/cmd.Version=v$version" ;;
        registry)
            # Our own main.go: the cache key holds a digest of its source as well.
            module="$here/tool-build/registry" pkg=. stamp=""
            version=$(sed -n 's/^require github.com\/google\/go-containerregistry v//p' "$module/go.mod")
            version+="-$(cat "$module/main.go" "$module/go.mod" "$module/go.sum" | sha256sum | cut -c1-12)" ;;
        syft)
            version=1.57.1 module="$here/tool-build/syft-v$version"
            pkg=github.com/anchore/syft/cmd/syft stamp="-X main.version=$version" ;;
        actionlint)
            version=1.7.12 module="$here/tool-build/actionlint-v$version"
            pkg=github.com/rhysd/actionlint/cmd/actionlint
            stamp="-X github.com/rhysd/actionlint.version=$version" ;;
        *) fail "choose a tool" "no tool '$1' (crane, registry, syft or actionlint)" ;;
    esac
}

build() {
    local name=$1 version module pkg stamp
    tool "$name"
    local cache="$root/$name-v$version"
    if [ -x "$cache/$name" ]; then
        echo "$name $cache/$name"
        return
    fi
    [ -f "$module/go.sum" ] || fail "find the module of $name v$version" "$module/go.sum is missing (scripts/tool-build/new-version.sh $name $version writes it)"
    [ -n "${GOPROXY_READY:-}" ] || { use_module_proxy; GOPROXY_READY=1; }
    mkdir -p "$cache" || fail "create the cache" "cannot create $cache"
    local tmp="$cache/$name.tmp.$$"
    say "go build $name v$version (once per machine)"
    (cd "$module" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $stamp" -o "$tmp" "$pkg") >&2 \
        || { rm -f "$tmp"; fail "go build $name v$version" "the Go build failed (see above); a download error means the module proxy ($GOPROXY) could not be reached"; }
    mv "$tmp" "$cache/$name" || fail "install $name" "cannot move it into $cache"
    say "$name v$version is in $cache/$name"
    echo "$name $cache/$name"
}

# shellcheck source=lib/go-module-proxy.sh
. "$here/lib/go-module-proxy.sh"

names=("$@")
[ ${#names[@]} -gt 0 ] || names=(crane registry syft actionlint)
for name in "${names[@]}"; do build "$name"; done
