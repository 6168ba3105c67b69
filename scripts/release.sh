#!/usr/bin/env bash
# Builds everything a release publishes, pushes the image index and the chart, prints their
# digests:
#
#   REGISTRY=ghcr.io/reload-injector scripts/release.sh 0.2.0
#
# - static binaries for linux/amd64 and linux/arm64 (scripts/release-binaries.sh), raw and as
#   `reload-injector-VERSION-linux-ARCH.tar.gz` (with LICENSE);
# - the image index REGISTRY/reload-injector:VERSION, one image per architecture holding what
#   the Dockerfile's runtime stage ships, written without Docker by scripts/lib/oci-image.sh;
# - an SPDX SBOM of each image (syft, which reads the dependency list `cargo auditable` embeds);
# - the Helm chart, its `image.digest` set to the index's digest, as the OCI artifact
#   oci://REGISTRY/charts/reload-injector, version VERSION;
# - a krew plugin manifest for `kubectl reload-injector` (reload-injector.yaml);
# - the image index as an OCI layout tarball (reload-injector-VERSION-oci.tar);
# - SHA256SUMS of the binaries, archives, layout tarball, chart and krew manifest.
#
# Reproducible: the same commit and toolchain give the same binaries, archives, chart and
# digests (times are the commit's, paths are remapped, every archive is written sorted and
# owned by 0). The SBOMs are not: syft writes its own creation time and a random namespace.
#
# It refuses, with one line and before building or pushing anything: a VERSION that is not
# semver (no leading v), one that is not Cargo.toml's (bump every file first: the test
# tests/packaging/offline/release_version.rs lists them), a CHANGELOG without its entry, a tree with uncommitted
# or untracked files, a REGISTRY it cannot reach, and a VERSION whose image or chart is there.
#
# Environment:
#   REGISTRY      where to push (required): the image goes to REGISTRY/reload-injector, the
#                 chart to REGISTRY/charts/reload-injector. The chart and manifests always name
#                 ghcr.io/reload-injector/reload-injector (the tests mirror ghcr.io to theirs).
#   RELEASE_DIR   where the artifacts go (default dist/VERSION, ignored by git)
#   RELEASE_URL   where the release's files are downloaded from, for the krew manifest
#                 (default https://github.com/reload-injector/reload-injector/releases/download/vVERSION)
#   RELEASE_CACHE a directory where binaries are kept by commit, target and toolchain: a second
#                 run for the same commit builds nothing (the tests use it; a release does not;
#                 scripts/release-binaries.sh fills it alone, before a registry is there)
#   RELEASE_ARCHES the architectures to build (default "amd64 arm64"; a published release has
#                 both: the tests' upgrade release builds only the node's, to save a build)
#   CRANE, HELM, SYFT  the tools (default: built by scripts/install-go-tools.sh, install-helm.sh)
#
# The last two lines of stdout are `image REF@DIGEST` and `chart REF@DIGEST`.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(dirname "$here")"
cd "$repo"

# One line, and the exit status 1. (scripts/lib/oci-image.sh calls it with a step and a reason.)
fail() { echo "release.sh: ${2:+failed to $1: }${2:-$1}" >&2; exit 1; }
say() { echo "release.sh: $*" >&2; }

[ $# -eq 1 ] || fail "usage: REGISTRY=HOST/ORG scripts/release.sh VERSION (e.g. 0.2.0)"
version=$1
semver='^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-((0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*)(\.(0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*))*))?$'
[[ "$version" =~ $semver ]] || fail "'$version' is not a semver version (like 0.2.0 or 1.0.0-rc.1, no leading v)"
[ -n "${REGISTRY:-}" ] || fail "REGISTRY is not set (e.g. REGISTRY=ghcr.io/reload-injector)"
registry=${REGISTRY%/}
read -r -a arches <<<"${RELEASE_ARCHES:-amd64 arm64}"
[ ${#arches[@]} -gt 0 ] || fail "RELEASE_ARCHES names no architecture (amd64, arm64)"
for arch in "${arches[@]}"; do
    case "$arch" in amd64 | arm64) ;; *) fail "RELEASE_ARCHES: '$arch' is not amd64 or arm64" ;; esac
done

# The tree states one version (tests/packaging/offline/release_version.rs holds every file to Cargo.toml's).
stated=$(sed -n '/^\[package\]/,/^\[/s/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n1)
[ "$version" = "$stated" ] || fail "'$version' is not the version this tree states (Cargo.toml: $stated); bump the version first"
grep -q "^## \[$version\]" CHANGELOG.md || fail "CHANGELOG.md has no entry '## [$version]'"
chart_version=$(sed -n 's/^version: *//p' charts/reload-injector/Chart.yaml)
[ "$version" = "$chart_version" ] || fail "'$version' is not the chart's version (charts/reload-injector/Chart.yaml: $chart_version); bump the version first"
git rev-parse --git-dir >/dev/null 2>&1 || fail "$repo is not a git checkout: a release is built from a commit"
[ -z "$(git status --porcelain --untracked-files=normal)" ] \
    || fail "the tree has uncommitted or untracked changes ($(git status --porcelain --untracked-files=normal | wc -l) paths): commit or stash them; a release is built from a commit"
commit=$(git rev-parse HEAD)
epoch=$(git log -1 --format=%ct HEAD)

tool_path() {
    local name=$1 line
    line=$("$here/install-go-tools.sh" "$name" | tail -n1) || fail "could not build $name (scripts/install-go-tools.sh $name)"
    echo "${line#"$name "}"
}
crane=${CRANE:-$(tool_path crane)}
syft=${SYFT:-$(tool_path syft)}
helm=${HELM:-$("$here/install-helm.sh" | tail -n1)} || fail "could not build helm (scripts/install-helm.sh)"

image_repo="$registry/reload-injector"
chart_repo="$registry/charts"

# absent REF: true when REF is not in the registry, stops when it is or the registry cannot be
# asked (`crane digest` says 404 / MANIFEST_UNKNOWN / NAME_UNKNOWN for a tag that is not there).
absent() {
    local out
    if out=$("$crane" digest "$1" 2>&1); then
        fail "$1 is already in the registry ($out): a version is released once; bump it"
    fi
    if grep -qE 'MANIFEST_UNKNOWN|NAME_UNKNOWN|404 Not Found' <<<"$out"; then
        return 0
    fi
    fail "cannot ask the registry for $1: $(grep -v '^\s*$' <<<"$out" | tail -n1)"
}
absent "$image_repo:$version"
absent "$chart_repo/reload-injector:$version"

out=${RELEASE_DIR:-dist/$version}
rm -rf "$out"
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
say "$version from $commit into $out"

# The binaries: one static build per architecture (scripts/release-binaries.sh, which keeps them
# in RELEASE_CACHE when it is set).
built=$("$here/release-binaries.sh" "${arches[@]}") || fail "the binaries could not be built (see above)"
binary() { sed -n "s/^$1 //p" <<<"$built"; }

# A gzipped tar of files, sorted, owned by 0, dated at the commit.
archive() {
    local dest=$1 dir=$2
    shift 2
    (cd "$dir" && tar --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner \
        --format=posix --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime -cf - "$@") \
        | gzip -n -9 >"$dest" || fail "failed to write $dest"
}

# shellcheck source=lib/oci-image.sh
. "$here/lib/oci-image.sh"

layout="$work/image"
descriptors=()
for arch in "${arches[@]}"; do
    bin=$(binary "$arch")
    install -m 0755 "$bin" "$out/reload-injector-linux-$arch"
    mkdir -p "$work/archive-$arch"
    install -m 0755 "$bin" "$work/archive-$arch/reload-injector"
    install -m 0644 LICENSE "$work/archive-$arch/LICENSE"
    archive "$out/reload-injector-$version-linux-$arch.tar.gz" "$work/archive-$arch" LICENSE reload-injector
    descriptor=$(product_image "$layout" "$work" "$repo/Dockerfile" "$bin" "$arch" gzip) \
        || fail "failed to write the $arch image"
    descriptors+=("$descriptor")
done
created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)
annotations=$(printf '{"org.opencontainers.image.created":"%s","org.opencontainers.image.revision":"%s","org.opencontainers.image.source":"https://github.com/reload-injector/reload-injector","org.opencontainers.image.version":"%s"}' \
    "$created" "$commit" "$version")
index=$(oci_index "$layout" "$annotations" "${descriptors[@]}")
oci_layout "$layout" "$index"
index_digest=$(sed -n 's/.*"digest":"\(sha256:[0-9a-f]*\)".*/\1/p' <<<"$index")
# The layout as one file, for registries that must be filled by hand (`crane push`, `skopeo copy`).
tar -C "$layout" --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner --mode=a+rX,u+w,go-w \
    -cf "$out/reload-injector-$version-oci.tar" oci-layout index.json blobs

# An SBOM per image, from a layout that holds that image alone.
for i in "${!arches[@]}"; do
    arch=${arches[$i]}
    one="$work/image-$arch"
    cp -al "$layout" "$one"
    rm "$one/index.json"
    oci_layout "$one" "${descriptors[$i]}"
    "$syft" scan "oci-dir:$one" --quiet --source-name reload-injector --source-version "$version" \
        -o "spdx-json=$out/reload-injector-$version-linux-$arch.spdx.json" \
        || fail "syft could not scan the $arch image"
done

# The chart, pinned to the index's digest, dated at the commit.
chart="$work/chart/reload-injector"
mkdir -p "$work/chart"
cp -r charts/reload-injector "$chart"
grep -q '^  digest: ""$' "$chart/values.yaml" || fail "charts/reload-injector/values.yaml has no line '  digest: \"\"' for the image digest"
sed -i "s/^  digest: \"\"\$/  digest: \"$index_digest\"/" "$chart/values.yaml"
find "$chart" -exec touch -h -d "@$epoch" {} +
SOURCE_DATE_EPOCH=$epoch "$helm" package "$chart" -d "$out" >/dev/null || fail "helm package failed"
chart_file="$out/reload-injector-$version.tgz"
[ -f "$chart_file" ] || fail "helm package wrote no $chart_file"
touch -d "@$epoch" "$chart_file"

# The krew manifest: `kubectl krew install --manifest=reload-injector.yaml`.
url=${RELEASE_URL:-https://github.com/reload-injector/reload-injector/releases/download/v$version}
{
    cat <<EOF
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: reload-injector
spec:
  version: v$version
  homepage: https://github.com/reload-injector/reload-injector
  shortDescription: Why a Pod did or did not reload its ConfigMap or Secret
  description: |
    Answers "why didn't my pod reload?" for workloads in namespaces that reload-injector
    serves: opt-in, the installation, what each container consumes and what a change does,
    whether the stamped config hash is current, recent ConfigChanged Events and the sidecar's
    reload lines. Read-only. Usage: kubectl reload-injector status deploy/NAME
  platforms:
EOF
    for arch in "${arches[@]}"; do
        cat <<EOF
    - selector:
        matchLabels:
          os: linux
          arch: $arch
      uri: $url/reload-injector-$version-linux-$arch.tar.gz
      sha256: $(oci_sha "$out/reload-injector-$version-linux-$arch.tar.gz")
      bin: reload-injector
      files:
        - from: reload-injector
          to: .
        - from: LICENSE
          to: .
EOF
    done
} >"$out/reload-injector.yaml"

summed=()
for arch in "${arches[@]}"; do
    summed+=("reload-injector-linux-$arch" "reload-injector-$version-linux-$arch.tar.gz")
done
(cd "$out" && sha256sum "${summed[@]}" "reload-injector-$version-oci.tar" "reload-injector-$version.tgz" \
    reload-injector.yaml >SHA256SUMS)

# Everything is built and checked: push.
pushed=$("$crane" push "$layout" "$image_repo:$version" 2>"$work/crane.log") \
    || fail "crane push failed: $(tail -n1 "$work/crane.log")"
[ "${pushed##*@}" = "$index_digest" ] || fail "the registry names the index ${pushed##*@}, not $index_digest"
"$helm" push "$chart_file" "oci://$chart_repo" >"$work/helm.log" 2>&1 \
    || fail "helm push failed: $(tail -n1 "$work/helm.log")"
chart_digest=$(sed -n 's/^Digest: //p' "$work/helm.log")
[ -n "$chart_digest" ] || fail "helm push printed no digest: $(cat "$work/helm.log")"
printf 'image %s:%s@%s\nchart %s/reload-injector:%s@%s\n' "$image_repo" "$version" "$index_digest" \
    "$chart_repo" "$version" "$chart_digest" >"$out/digests"
cat "$out/digests"
