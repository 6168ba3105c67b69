#!/usr/bin/env bash
# Builds the images that the test suite's node runs, without Docker and without a registry, as
# OCI image-layout tarballs that `ctr -n k8s.io images import` accepts:
#
# - product: what the Dockerfile ships: the static binary from scripts/build-static.sh at
#   /reload-injector, USER 65532:65532, ENTRYPOINT ["/reload-injector"], the Dockerfile's
#   LABELs (all read from the Dockerfile's runtime stage; tests/node_images.rs checks the two
#   agree), plus the /etc/passwd, /etc/group and /tmp that distroless/static also has;
# - nginx: Debian's nginx-light binary with the libraries it links, busybox-static as its
#   shell and tools, and scripts/test-images/nginx.conf (serves /etc/nginx/conf.d/*.conf,
#   reloads on SIGHUP);
#   nginx-nonroot is the same with `USER 101:101`;
# - pause: scripts/test-images/pause.c, built with `gcc -static`.
#
# Each image is one uncompressed layer written deterministically (sorted, owner 0, mtime 0), so
# its tag is its content: the first 16 hex digits of the layer's sha256. A tarball whose content
# is already cached is not written again; the three newest of each image are kept. Cache: $RELOAD_INJECTOR_KUBE_CACHE_ROOT (default
# ~/.cache/reload-injector)/images/.
#
#   scripts/build-test-images.sh [product|nginx|pause]...   # default: all three
#
# Prints one line per image on stdout: NAME REF TARBALL (REF like
# reload-injector.test/nginx:0123456789abcdef). Needs scripts/install-node-deps.sh first.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(dirname "$here")"
root="${RELOAD_INJECTOR_KUBE_CACHE_ROOT:-${HOME:-/root}/.cache/reload-injector}"
cache="$root/images"

say() { echo "build-test-images: $*" >&2; }
fail() { say "FAILED at step '$1': $2"; exit 1; }

mkdir -p "$cache" || fail "create the cache" "cannot create $cache"
work=$(mktemp -d "$cache/.build.XXXXXX")
trap 'rm -rf "$work"' EXIT

sha() { sha256sum "$1" | cut -d' ' -f1; }
size() { stat -c %s "$1"; }

# Copies a dynamically linked program and every library it links (as ldd lists them).
copy_with_libs() {
    local program=$1 rootfs=$2 lib
    install -D -m 0755 "$program" "$rootfs$program"
    for lib in $(ldd "$program" | grep -o '/[^ ]*'); do
        install -D -m 0755 "$(readlink -f "$lib")" "$rootfs$lib"
    done
}

# The Dockerfile's runtime stage (after the last FROM), continuation lines joined.
runtime_stage() {
    sed -e ':a' -e '/\\$/N; s/\\\n//; ta' "$repo/Dockerfile" | grep -v '^\s*#' | awk '/^FROM /{buf=""} {buf=buf $0 "\n"} END{printf "%s", buf}'
}

# Writes the image NAME from the directory ROOTFS with CONFIG (the image config's `config`
# object, JSON); prints NAME REF TARBALL.
pack() {
    local name=$1 rootfs=$2 config=$3 dir="$work/$1-oci"
    mkdir -p "$dir/blobs/sha256"
    local layer="$work/$name-layer.tar"
    (cd "$rootfs" && tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner \
        --format=posix --pax-option=delete=atime,delete=ctime -cf "$layer" -- *) \
        || fail "tar the $name root" "tar failed"
    local layer_sha; layer_sha=$(sha "$layer")
    local tag=${layer_sha:0:16} ref="reload-injector.test/$name:${layer_sha:0:16}"
    local out="$cache/$name-$tag.oci.tar"
    if [ ! -s "$out" ]; then
        mv "$layer" "$dir/blobs/sha256/$layer_sha"
        printf '{"architecture":"amd64","os":"linux","config":%s,"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
            "$config" "$layer_sha" >"$work/config.json"
        local config_sha; config_sha=$(sha "$work/config.json")
        cp "$work/config.json" "$dir/blobs/sha256/$config_sha"
        printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
            "$config_sha" "$(size "$work/config.json")" "$layer_sha" "$(size "$dir/blobs/sha256/$layer_sha")" >"$work/manifest.json"
        local manifest_sha; manifest_sha=$(sha "$work/manifest.json")
        cp "$work/manifest.json" "$dir/blobs/sha256/$manifest_sha"
        printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
            "$manifest_sha" "$(size "$work/manifest.json")" "$ref" "$tag" >"$dir/index.json"
        echo '{"imageLayoutVersion":"1.0.0"}' >"$dir/oci-layout"
        (cd "$dir" && tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf "$out.tmp" oci-layout index.json blobs) \
            && mv "$out.tmp" "$out" || fail "write $out" "tar failed"
        say "$ref written to $out"
        prune "$name"
    fi
    echo "$name $ref $out"
}

# Keeps the three newest tarballs of image NAME (each build of the product is a new one); a node
# imports its images at start, so an older tarball is never read again.
prune() {
    find "$cache" -maxdepth 1 -regextype posix-extended -regex ".*/$1-[0-9a-f]{16}\.oci\.tar" -printf '%T@ %p\n' \
        | sort -rn | tail -n +4 | cut -d' ' -f2- | while read -r old; do rm -f -- "$old"; done
}

# /etc/passwd and /etc/group as distroless has them (root, nobody, nonroot 65532).
users() {
    mkdir -p "$1/etc"
    printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$1/etc/passwd"
    printf 'root:x:0:\nnogroup:x:65534:\nnonroot:x:65532:\n' >"$1/etc/group"
    install -d -m 1777 "$1/tmp"
}

build_product() {
    local rootfs="$work/product" stage user entrypoint labels binary
    stage=$(runtime_stage)
    user=$(sed -n 's/^USER \(.*\)$/\1/p' <<<"$stage")
    entrypoint=$(sed -n 's/^ENTRYPOINT \(.*\)$/\1/p' <<<"$stage")
    [ -n "$user" ] && [ -n "$entrypoint" ] || fail "read the Dockerfile" "no USER or ENTRYPOINT in its runtime stage"
    grep -qx 'COPY --from=build /reload-injector /reload-injector' <<<"$stage" \
        || fail "read the Dockerfile" "its runtime stage no longer copies /reload-injector; update this script"
    # LABEL k="v" k2="v2" → {"k":"v","k2":"v2"} (the Dockerfile's values hold no quotes).
    labels=$(sed -n 's/^LABEL *//p' <<<"$stage" | grep -o '[a-z.]*="[^"]*"' | sed 's/^\([^=]*\)=/"\1":/' | paste -sd, -)
    binary=$(cd "$repo" && scripts/build-static.sh | tail -n1) || fail "scripts/build-static.sh" "the static build failed (see above)"
    case "$binary" in /*) ;; *) binary="$repo/$binary" ;; esac
    users "$rootfs"
    install -m 0755 "$binary" "$rootfs/reload-injector"
    pack product "$rootfs" "{\"User\":\"$user\",\"Entrypoint\":$entrypoint,\"Labels\":{$labels},\"Env\":[\"PATH=/usr/local/bin:/usr/bin:/bin\"]}"
}

build_nginx() {
    local rootfs="$work/nginx" tool
    [ -x /usr/sbin/nginx ] && [ -x /bin/busybox ] || fail "find nginx and busybox" "run scripts/install-node-deps.sh"
    users "$rootfs"
    copy_with_libs /usr/sbin/nginx "$rootfs"
    install -D -m 0755 /bin/busybox "$rootfs/bin/busybox"
    for tool in sh cat ls ps kill sleep wget env id grep; do ln -s busybox "$rootfs/bin/$tool"; done
    install -D -m 0644 "$here/test-images/nginx.conf" "$rootfs/etc/nginx/nginx.conf"
    install -d -m 0755 "$rootfs/etc/nginx/conf.d"
    install -d -m 1777 "$rootfs/var/lib/nginx" "$rootfs/var/log/nginx" "$rootfs/run"
    pack nginx "$rootfs" '{"Entrypoint":["/usr/sbin/nginx"],"Cmd":["-g","daemon off;"],"Env":["PATH=/usr/sbin:/usr/bin:/sbin:/bin"]}'
    # The same files with a non-root USER of the image's own, which a Pod does not state: the
    # case the README says may end in EPERM.
    pack nginx-nonroot "$rootfs" '{"Entrypoint":["/usr/sbin/nginx"],"Cmd":["-g","daemon off;"],"User":"101:101","Env":["PATH=/usr/sbin:/usr/bin:/sbin:/bin"]}'
}

build_pause() {
    local rootfs="$work/pause"
    mkdir -p "$rootfs"
    gcc -static -O2 -o "$rootfs/pause" "$here/test-images/pause.c" || fail "gcc -static pause.c" "run scripts/install-node-deps.sh"
    strip "$rootfs/pause"
    pack pause "$rootfs" '{"Entrypoint":["/pause"],"User":"65535:65535"}'
}

images=("$@")
[ ${#images[@]} -gt 0 ] || images=(product nginx pause)
for image in "${images[@]}"; do
    case "$image" in
        product) build_product ;;
        nginx) build_nginx ;;
        pause) build_pause ;;
        *) fail "choose an image" "no image '$image' (product, nginx or pause)" ;;
    esac
done
