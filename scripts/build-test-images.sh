#!/usr/bin/env bash
# Builds the images that the test suite's node runs, without Docker and without a registry, as
# OCI image-layout tarballs that `ctr -n k8s.io images import` accepts:
#
# - product: what the Dockerfile ships: the static binary from scripts/build-static.sh at
#   /reload-injector, USER 65532:65532, ENTRYPOINT ["/reload-injector"], the Dockerfile's
#   LABELs (all read from the Dockerfile's runtime stage; tests/packaging/node/node_images.rs checks the two
#   agree), plus the /etc/passwd, /etc/group and /tmp that distroless/static also has;
# - nginx: Debian's nginx-light binary with the libraries it links, busybox-static as its
#   shell and tools, and scripts/test-images/nginx.conf (serves /etc/nginx/conf.d/*.conf,
#   reloads on SIGHUP);
#   nginx-nonroot is the same with `USER 101:101`;
# - pause: scripts/test-images/pause.c, built with `gcc -static`.
#
# Each image is one uncompressed layer written deterministically by scripts/lib/oci-image.sh (the
# writer scripts/release.sh uses too), so its tag is its content: the first 16 hex digits of its
# manifest's sha256. A tarball whose content is already cached is not written again; the three
# newest of each image are kept. Cache: $RELOAD_INJECTOR_KUBE_CACHE_ROOT (default
# ~/.cache/reload-injector)/images/. The node imports nginx and pause with `ctr images import`;
# the product it pulls from the tests' registry (tests/cluster_support/node/registry.rs).
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

# shellcheck source=lib/oci-image.sh
. "$here/lib/oci-image.sh"

# Copies a dynamically linked program and every library it links (as ldd lists them).
copy_with_libs() {
    local program=$1 rootfs=$2 lib
    install -D -m 0755 "$program" "$rootfs$program"
    for lib in $(ldd "$program" | grep -o '/[^ ]*'); do
        install -D -m 0755 "$(readlink -f "$lib")" "$rootfs$lib"
    done
}

# Writes the tarball of image NAME whose manifest DESCRIPTOR is in LAYOUT (tagged by the
# manifest's digest, so the tag is the content); prints NAME REF TARBALL.
pack() {
    local name=$1 layout=$2 descriptor=$3 digest
    digest=$(sed -n 's/.*"digest":"sha256:\([0-9a-f]*\)".*/\1/p' <<<"$descriptor")
    [ ${#digest} -eq 64 ] || fail "write the image $name" "no manifest was written (see above)"
    local tag=${digest:0:16} ref="reload-injector.test/$name:${digest:0:16}"
    local out="$cache/$name-$tag.oci.tar"
    if [ ! -s "$out" ]; then
        oci_layout "$layout" "${descriptor%\}},\"annotations\":{\"io.containerd.image.name\":\"$ref\",\"org.opencontainers.image.ref.name\":\"$tag\"}}"
        (cd "$layout" && tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf "$out.tmp.$$" oci-layout index.json blobs) \
            && mv -f "$out.tmp.$$" "$out" || fail "write $out" "tar failed"
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

build_product() {
    local binary layout="$work/product-oci" descriptor
    binary=$(cd "$repo" && scripts/build-static.sh | tail -n1) || fail "scripts/build-static.sh" "the static build failed (see above)"
    case "$binary" in /*) ;; *) binary="$repo/$binary" ;; esac
    descriptor=$(product_image "$layout" "$work" "$repo/Dockerfile" "$binary" amd64)
    pack product "$layout" "$descriptor"
}

build_nginx() {
    local rootfs="$work/nginx" tool
    [ -x /usr/sbin/nginx ] && [ -x /bin/busybox ] || fail "find nginx and busybox" "run scripts/install-node-deps.sh"
    base_users "$rootfs"
    copy_with_libs /usr/sbin/nginx "$rootfs"
    install -D -m 0755 /bin/busybox "$rootfs/bin/busybox"
    for tool in sh cat ls ps kill sleep wget env id grep; do ln -s busybox "$rootfs/bin/$tool"; done
    install -D -m 0644 "$here/test-images/nginx.conf" "$rootfs/etc/nginx/nginx.conf"
    install -d -m 0755 "$rootfs/etc/nginx/conf.d"
    install -d -m 1777 "$rootfs/var/lib/nginx" "$rootfs/var/log/nginx" "$rootfs/run"
    pack nginx "$work/nginx-oci" "$(oci_image "$work/nginx-oci" "$rootfs" amd64 '{"Entrypoint":["/usr/sbin/nginx"],"Cmd":["-g","daemon off;"],"Env":["PATH=/usr/sbin:/usr/bin:/sbin:/bin"]}')"
    # The same files with a non-root USER of the image's own, which a Pod does not state: the
    # case the README says may end in EPERM.
    pack nginx-nonroot "$work/nginx-nonroot-oci" "$(oci_image "$work/nginx-nonroot-oci" "$rootfs" amd64 '{"Entrypoint":["/usr/sbin/nginx"],"Cmd":["-g","daemon off;"],"User":"101:101","Env":["PATH=/usr/sbin:/usr/bin:/sbin:/bin"]}')"
}

build_pause() {
    local rootfs="$work/pause"
    mkdir -p "$rootfs"
    gcc -static -O2 -o "$rootfs/pause" "$here/test-images/pause.c" || fail "gcc -static pause.c" "run scripts/install-node-deps.sh"
    strip "$rootfs/pause"
    pack pause "$work/pause-oci" "$(oci_image "$work/pause-oci" "$rootfs" amd64 '{"Entrypoint":["/pause"],"User":"65535:65535"}')"
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
