#!/usr/bin/env bash
# Provides the real Kubernetes that the end-to-end tests (the `e2e` and `node` tests) and
# scripts/dev-cluster.sh run, built from the Go module proxy:
#
# - the current release, v1.37.2: kube-apiserver, kube-controller-manager, kube-scheduler,
#   kubelet and kubectl;
# - the oldest release we claim, v1.35.4: kube-apiserver, kube-controller-manager and kubectl;
# - etcd v3.6.16, from its own Go module, for both.
#
# Each version builds through a small module of ours, scripts/kube-build/vVERSION/go.mod, that
# requires k8s.io/kubernetes and pins every k8s.io staging module at v0.MINOR.PATCH; its
# committed go.sum is what we trust. The version is stamped with -ldflags, as upstream's
# hack/lib/version.sh does, so /version and `kubectl version` tell the truth.
#
# The binaries are cached outside the clone, keyed by version:
# $RELOAD_INJECTOR_KUBE_CACHE_ROOT (default ~/.cache/reload-injector)/kube-vVERSION/. A warm
# machine pays nothing. If KUBEBUILDER_ASSETS names a directory holding kube-apiserver and etcd
# (the envtest convention), those are used instead and nothing is built.
#
#   scripts/install-kube-test-binaries.sh            # every version the tests run
#   scripts/install-kube-test-binaries.sh 1.37.2     # one version
#
# Prints each version's directory on its own line of stdout. Every failure names its step.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
modules="$here/kube-build"
current=1.37.2
floor=1.35.4
etcd_version=3.6.16
root="${RELOAD_INJECTOR_KUBE_CACHE_ROOT:-${HOME:-/root}/.cache/reload-injector}"

say() { echo "install-kube-test-binaries: $*" >&2; }
fail() { say "FAILED at step '$1': $2"; exit 1; }

if [ -n "${KUBEBUILDER_ASSETS:-}" ]; then
    for bin in kube-apiserver etcd; do
        [ -x "$KUBEBUILDER_ASSETS/$bin" ] \
            || fail "KUBEBUILDER_ASSETS" "$KUBEBUILDER_ASSETS/$bin is missing or not executable (unset KUBEBUILDER_ASSETS to build from the Go module proxy)"
    done
    say "using the binaries in KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS"
    echo "$KUBEBUILDER_ASSETS"
    exit 0
fi

# shellcheck source=lib/go-module-proxy.sh
. "$here/lib/go-module-proxy.sh"
use_module_proxy

# Builds the listed cmd/ binaries of one Kubernetes version into its cache directory.
build_kube() {
    local version=$1; shift
    local cache="$root/kube-v$version" module="$modules/v$version" missing=() t
    for t in "$@" etcd; do [ -x "$cache/$t" ] || missing+=("$t"); done
    if [ ${#missing[@]} -eq 0 ]; then echo "$cache"; return; fi
    [ -f "$module/go.sum" ] || fail "find the module for v$version" "$module/go.sum is missing (scripts/kube-build/new-version.sh $version writes it)"
    mkdir -p "$cache" || fail "create the cache" "cannot create $cache"

    local minor=${version#1.}; minor=${minor%%.*}
    local date; date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
    local ldflags="-s -w" p
    for p in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
        ldflags+=" -X $p.gitVersion=v$version -X $p.gitMajor=1 -X $p.gitMinor=$minor"
        ldflags+=" -X $p.gitTreeState=clean -X $p.gitCommit=module-k8s.io/kubernetes@v$version"
        ldflags+=" -X $p.buildDate=$date"
    done
    local out; out=$(mktemp -d "$cache/.build.XXXXXX")
    for t in "${missing[@]}"; do
        [ "$t" = etcd ] && continue
        say "v$version: go build k8s.io/kubernetes/cmd/$t (the first build of a version takes 10-20 minutes on 2 cores)"
        # Upstream links the kubelet with cgo and everything else statically (hack/lib/golang.sh).
        local cgo=0; [ "$t" = kubelet ] && cgo=1
        (cd "$module" && CGO_ENABLED=$cgo go build -trimpath -ldflags "$ldflags" -o "$out/$t" "k8s.io/kubernetes/cmd/$t") \
            || fail "go build k8s.io/kubernetes/cmd/$t v$version" "the Go build failed (see above); a download error means the module proxy ($GOPROXY) could not be reached"
        mv "$out/$t" "$cache/$t" || fail "install $t" "cannot move it into $cache"
    done
    rmdir "$out" 2>/dev/null || true
    if [ ! -x "$cache/etcd" ]; then
        cp "$(build_etcd)" "$cache/etcd.tmp" && mv "$cache/etcd.tmp" "$cache/etcd" \
            || fail "install etcd into $cache" "cannot copy it"
    fi
    "$cache/kube-apiserver" --version | grep -qx "Kubernetes v$version" \
        || fail "check the version of v$version" "$cache/kube-apiserver --version does not say v$version"
    say "v$version is in $cache"
    echo "$cache"
}

# etcd, from go.etcd.io/etcd/server/v3 (its main package is the `etcd` binary).
build_etcd() {
    local cache="$root/etcd-v$etcd_version" module="$modules/etcd-v$etcd_version"
    if [ ! -x "$cache/etcd" ]; then
        mkdir -p "$cache" || fail "create the cache" "cannot create $cache"
        say "go build go.etcd.io/etcd/server/v3@v$etcd_version (about 2 minutes)"
        (cd "$module" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$cache/etcd.tmp" go.etcd.io/etcd/server/v3) >&2 \
            || fail "go build etcd v$etcd_version" "the Go build failed (see above)"
        mv "$cache/etcd.tmp" "$cache/etcd"
    fi
    echo "$cache/etcd"
}

versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=("$current" "$floor")
for v in "${versions[@]}"; do
    case "$v" in
        "$current") build_kube "$v" kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl ;;
        "$floor") build_kube "$v" kube-apiserver kube-controller-manager kubectl ;;
        *) fail "choose a version" "v$v is not one we build (we build $current and $floor)" ;;
    esac
done
