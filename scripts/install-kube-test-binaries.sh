#!/usr/bin/env bash
# Provides the real Kubernetes control plane that the end-to-end tests (tests/e2e_*.rs) run
# against: kube-apiserver and kube-controller-manager v1.20.2, built from Debian bookworm's
# `kubernetes` source package, and etcd from Debian's etcd-server package.
#
# The binaries are cached outside the clone, in $RELOAD_INJECTOR_KUBE_CACHE (default
# ~/.cache/reload-injector/kube-v1.20.2), so a warm machine pays nothing and a fresh clone
# reuses them. If KUBEBUILDER_ASSETS names a directory that holds kube-apiserver and etcd
# (the envtest convention), those are used instead and nothing is built.
#
# Prints the directory that holds the binaries on its last line of output (stdout).
# Every failure names the step that failed. Needs root for apt-get on a machine without the
# build packages.
set -euo pipefail

version=1.20.2
deb_version="1.20.5+really${version}-1.1+deb12u1"
orig="kubernetes_1.20.5+really${version}.orig.tar.gz"
orig_sha256=b83c0780efb182d928dc63d46488a847f161f04e40a94b96bf5247dd671ecdfc
cache="${RELOAD_INJECTOR_KUBE_CACHE:-${HOME:-/root}/.cache/reload-injector/kube-v${version}}"

say() { echo "install-kube-test-binaries: $*" >&2; }
fail() { say "FAILED at step '$1': $2"; exit 1; }

if [ -n "${KUBEBUILDER_ASSETS:-}" ]; then
    for bin in kube-apiserver etcd; do
        [ -x "$KUBEBUILDER_ASSETS/$bin" ] \
            || fail "KUBEBUILDER_ASSETS" "$KUBEBUILDER_ASSETS/$bin is missing or not executable (unset KUBEBUILDER_ASSETS to build v$version)"
    done
    say "using the binaries in KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS"
    echo "$KUBEBUILDER_ASSETS"
    exit 0
fi

have_all() {
    [ -x "$cache/kube-apiserver" ] && [ -x "$cache/kube-controller-manager" ] \
        && [ -x "$cache/etcd" ] && [ -x "$cache/kubectl" ]
}
if have_all; then
    echo "$cache"
    exit 0
fi

apt_updated=0
apt_install() {
    [ "$(id -u)" -eq 0 ] || fail "apt-get install $*" "need root; install the packages by hand, or point KUBEBUILDER_ASSETS at envtest binaries"
    if [ "$apt_updated" -eq 0 ]; then
        apt-get update -qq || fail "apt-get update" "the Debian package lists could not be fetched"
        apt_updated=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null \
        || fail "apt-get install $*" "see apt-get's message above"
}

mkdir -p "$cache" || fail "create the cache" "cannot create $cache"

# etcd: Debian's etcd-server (3.4; Kubernetes 1.20 supports etcd 3.4).
if [ ! -x "$cache/etcd" ]; then
    [ -x /usr/bin/etcd ] || apt_install etcd-server
    cp /usr/bin/etcd "$cache/etcd.tmp" && mv "$cache/etcd.tmp" "$cache/etcd" \
        || fail "copy etcd" "cannot copy /usr/bin/etcd into $cache"
fi

if have_all; then
    echo "$cache"
    exit 0
fi

# The Go toolchain and the one vendored library that must be replaced (see below).
go=/usr/lib/go-1.19/bin/go
[ -x "$go" ] || apt_install golang-1.19-go
reflect2=/usr/share/gocode/src/github.com/modern-go/reflect2
[ -d "$reflect2" ] || apt_install golang-github-modern-go-reflect2-dev
command -v dpkg-source >/dev/null 2>&1 || apt_install dpkg-dev

work=$(mktemp -d "${TMPDIR:-/tmp}/kube-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
say "building kube-apiserver, kube-controller-manager and kubectl v$version in $work (about 6 minutes on 2 cores)"

# The source: a private apt configuration with a deb-src line, so the system's lists are
# untouched.
apt_dir="$work/apt"
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$work/src"
cat > "$apt_dir/sources.list" <<'EOF'
deb-src http://deb.debian.org/debian bookworm main
deb-src http://deb.debian.org/debian-security bookworm-security main
EOF
apt_private=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o APT::Sandbox::User=root
    -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache")
apt-get "${apt_private[@]}" update -qq >&2 \
    || fail "apt-get update (deb-src bookworm)" "Debian's source lists could not be fetched"
(cd "$work/src" && apt-get "${apt_private[@]}" source --download-only "kubernetes=$deb_version" >&2 2>/dev/null) \
    || fail "apt-get source kubernetes=$deb_version" "the source package could not be downloaded"
echo "$orig_sha256  $work/src/$orig" | sha256sum --check --quiet \
    || fail "check the tarball's sha256" "$orig does not have sha256 $orig_sha256"

# GOPATH mode: the tree lives at $GOPATH/src/k8s.io/kubernetes and builds from vendor/.
gopath="$work/gopath"
tree="$gopath/src/k8s.io/kubernetes"
mkdir -p "$gopath/src/k8s.io"
tar -xzf "$work/src/$orig" -C "$gopath/src/k8s.io" || fail "unpack $orig" "tar failed"
mv "$gopath/src/k8s.io/kubernetes-$version" "$tree" || fail "unpack $orig" "no kubernetes-$version directory in it"
export GOPATH="$gopath" GO111MODULE=off GOPROXY=off GOFLAGS= CGO_ENABLED=0 \
    GOCACHE="$work/gocache" PATH="$gopath/bin:$PATH"
cd "$tree"

# Fix-up 1: the vendored reflect2 1.0.1 crashes under Go >= 1.18 (fatal error: fault in
# mapiterinit, on the first mutating-webhook patch); Debian ships 1.0.2.
rm -rf vendor/github.com/modern-go/reflect2
cp -r "$reflect2" vendor/github.com/modern-go/reflect2 || fail "replace reflect2" "cannot copy $reflect2"

# Fix-up 2: the tarball lacks pkg/generated/openapi/zz_generated.openapi.go. Generate it with the
# vendored openapi-gen from every package tagged +k8s:openapi-gen, as upstream's make does
# (build/root/Makefile.generated_files: all Go directories, staging named as vendor/, minus
# code-generator and sample-apiserver).
"$go" build -o "$work/openapi-gen" ./vendor/k8s.io/kube-openapi/cmd/openapi-gen \
    || fail "build openapi-gen" "go build failed"
inputs=$(
    find -H . \( -path ./_\* -o -path ./.\* -o -path ./vendor \) -prune -o -type f -name '*.go' -print \
        | sed 's|^./staging/src|vendor|; s|^\./||' \
        | grep -v -e '^vendor/k8s.io/code-generator/' -e '^vendor/k8s.io/sample-apiserver/' \
        | while read -r f; do
            real=${f/#vendor\/k8s.io/staging/src/k8s.io}
            [ -f "$real" ] || real=$f
            if grep -q '^// *+k8s:openapi-gen=' "$real"; then dirname "$f"; fi
        done | LC_ALL=C sort -u | sed 's|^|k8s.io/kubernetes/|' | paste -sd, -
)
[ -n "$inputs" ] || fail "generate openapi" "found no package tagged +k8s:openapi-gen"
"$work/openapi-gen" --logtostderr -i "$inputs" \
    -p k8s.io/kubernetes/pkg/generated/openapi -O zz_generated.openapi \
    -h vendor/k8s.io/code-generator/hack/boilerplate.go.txt \
    -r "$work/openapi-violations.report" >&2 2>"$work/openapi-gen.log" \
    || { tail -20 "$work/openapi-gen.log" >&2; fail "generate openapi" "openapi-gen failed"; }
[ -s pkg/generated/openapi/zz_generated.openapi.go ] \
    || fail "generate openapi" "openapi-gen wrote no pkg/generated/openapi/zz_generated.openapi.go"

# The version the binaries report (/version), as upstream's hack/lib/version.sh stamps it.
pkg_prefix=k8s.io/kubernetes/vendor/k8s.io
ldflags="-s -w"
for p in client-go/pkg/version component-base/version; do
    ldflags+=" -X $pkg_prefix/$p.gitVersion=v$version -X $pkg_prefix/$p.gitMajor=1"
    ldflags+=" -X $pkg_prefix/$p.gitMinor=20 -X $pkg_prefix/$p.gitTreeState=clean"
    ldflags+=" -X $pkg_prefix/$p.gitCommit=debian-$deb_version"
    ldflags+=" -X $pkg_prefix/$p.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
done

# kubectl is built from the same tree, so the client the tests drive matches the server.
targets=(kube-apiserver kube-controller-manager kubectl)
mkdir -p "$work/out"
for t in "${targets[@]}"; do
    say "go build ./cmd/$t"
    "$go" build -ldflags "$ldflags" -o "$work/out/$t" "./cmd/$t" \
        || fail "go build ./cmd/$t" "the Go build failed (see above)"
done
for t in "${targets[@]}"; do
    mv "$work/out/$t" "$cache/$t" || fail "install $t" "cannot move it into $cache"
done
have_all || fail "check the cache" "$cache is still missing a binary"
say "installed into $cache"
echo "$cache"
