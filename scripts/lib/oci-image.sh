# shellcheck shell=bash
# Sourced by scripts/build-test-images.sh and scripts/release.sh: the one writer of OCI images
# (layers, configs, manifests, indexes in an OCI image layout), and the product's image as the
# Dockerfile's runtime stage describes it. The caller defines fail STEP MESSAGE first.
#
# Deterministic: a layer is a tar with sorted names, owner 0:0, mtime 0 and no atime/ctime,
# compressed (if at all) with `gzip -n`; configs and manifests are written field by field in a
# fixed order. The same files give the same digests on every run and every machine.

oci_sha() { sha256sum "$1" | cut -d' ' -f1; }
oci_size() { stat -c %s "$1"; }

# oci_blob LAYOUT FILE: moves FILE into LAYOUT's blobs; prints its sha256.
oci_blob() {
    local sha
    sha=$(oci_sha "$2")
    mkdir -p "$1/blobs/sha256"
    mv "$2" "$1/blobs/sha256/$sha"
    echo "$sha"
}

# oci_platform ARCH: the platform fields of linux/ARCH (amd64, arm64), as JSON members.
oci_platform() {
    case "$1" in
        amd64) echo '"architecture":"amd64","os":"linux"' ;;
        arm64) echo '"architecture":"arm64","os":"linux","variant":"v8"' ;;
        *) fail "choose a platform" "no platform linux/$1 (amd64, arm64)" ;;
    esac
}

# oci_image LAYOUT ROOTFS ARCH CONFIG [gzip]: writes the image of directory ROOTFS for linux/ARCH
# into LAYOUT (one layer; CONFIG is the image config's `config` object, JSON) and prints the
# manifest's descriptor (JSON, with its platform).
oci_image() {
    local layout=$1 rootfs=$2 arch=$3 config=$4 compress=${5:-} tmp
    mkdir -p "$layout/blobs/sha256"
    tmp=$(mktemp -d "$layout/.image.XXXXXX")
    (cd "$rootfs" && tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner \
        --format=posix --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
        -cf "$tmp/layer" -- *) || fail "tar $rootfs" "tar failed"
    local diff_id layer_type=application/vnd.oci.image.layer.v1.tar
    diff_id=$(oci_sha "$tmp/layer")
    if [ "$compress" = gzip ]; then
        gzip -n -9 -c "$tmp/layer" >"$tmp/layer.gz" && mv "$tmp/layer.gz" "$tmp/layer" \
            || fail "gzip the layer of $rootfs" "gzip failed"
        layer_type+="+gzip"
    fi
    local layer_size layer_sha platform config_size config_sha manifest_size manifest_sha
    layer_size=$(oci_size "$tmp/layer")
    layer_sha=$(oci_blob "$layout" "$tmp/layer")
    platform=$(oci_platform "$arch")
    printf '{%s,"config":%s,"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
        "$platform" "$config" "$diff_id" >"$tmp/config"
    config_size=$(oci_size "$tmp/config")
    config_sha=$(oci_blob "$layout" "$tmp/config")
    printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"%s","digest":"sha256:%s","size":%s}]}' \
        "$config_sha" "$config_size" "$layer_type" "$layer_sha" "$layer_size" >"$tmp/manifest"
    manifest_size=$(oci_size "$tmp/manifest")
    manifest_sha=$(oci_blob "$layout" "$tmp/manifest")
    rmdir "$tmp"
    printf '{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"platform":{%s}}\n' \
        "$manifest_sha" "$manifest_size" "$platform"
}

# oci_index LAYOUT ANNOTATIONS DESCRIPTOR...: writes an image index of the DESCRIPTORs (JSON
# objects) with ANNOTATIONS (a JSON object) into LAYOUT; prints its descriptor.
oci_index() {
    local layout=$1 annotations=$2 tmp size sha
    shift 2
    tmp=$(mktemp "$layout/.index.XXXXXX")
    printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[%s],"annotations":%s}' \
        "$(IFS=,; echo "$*")" "$annotations" >"$tmp"
    size=$(oci_size "$tmp")
    sha=$(oci_blob "$layout" "$tmp")
    printf '{"mediaType":"application/vnd.oci.image.index.v1+json","digest":"sha256:%s","size":%s}\n' "$sha" "$size"
}

# oci_layout LAYOUT DESCRIPTOR: makes LAYOUT an OCI image layout whose index.json names
# DESCRIPTOR (what `crane push LAYOUT REF` pushes, and what `ctr images import` reads).
oci_layout() {
    echo '{"imageLayoutVersion":"1.0.0"}' >"$1/oci-layout"
    printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[%s]}' "$2" >"$1/index.json"
}

# The Dockerfile's runtime stage (after the last FROM), continuation lines joined.
product_stage() {
    local dockerfile=$1
    sed -e ':a' -e '/\\$/N; s/\\\n//; ta' "$dockerfile" | grep -v '^\s*#' \
        | awk '/^FROM /{buf=""} {buf=buf $0 "\n"} END{printf "%s", buf}'
}

# product_config DOCKERFILE: the image config's `config` object the runtime stage describes:
# USER, ENTRYPOINT and LABELs, and distroless/static's PATH.
product_config() {
    local stage user entrypoint labels
    stage=$(product_stage "$1")
    user=$(sed -n 's/^USER \(.*\)$/\1/p' <<<"$stage")
    entrypoint=$(sed -n 's/^ENTRYPOINT \(.*\)$/\1/p' <<<"$stage")
    [ -n "$user" ] && [ -n "$entrypoint" ] || fail "read the Dockerfile" "no USER or ENTRYPOINT in its runtime stage"
    grep -qx 'COPY --from=build /reload-injector /reload-injector' <<<"$stage" \
        || fail "read the Dockerfile" "its runtime stage no longer copies /reload-injector; update scripts/lib/oci-image.sh"
    # LABEL k="v" k2="v2" → {"k":"v","k2":"v2"} (the Dockerfile's values hold no quotes).
    labels=$(sed -n 's/^LABEL *//p' <<<"$stage" | grep -o '[a-z.]*="[^"]*"' | sed 's/^\([^=]*\)=/"\1":/' | paste -sd, -)
    printf '{"User":"%s","Entrypoint":%s,"Labels":{%s},"Env":["PATH=/usr/local/bin:/usr/bin:/bin"]}' \
        "$user" "$entrypoint" "$labels"
}

# base_users ROOTFS: /etc/passwd, /etc/group (root, nobody, nonroot 65532) and a world-writable
# /tmp, as distroless/static has them; every mode set explicitly (no umask in the image).
base_users() {
    install -d -m 0755 "$1" "$1/etc"
    printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$1/etc/passwd"
    printf 'root:x:0:\nnogroup:x:65534:\nnonroot:x:65532:\n' >"$1/etc/group"
    chmod 0644 "$1/etc/passwd" "$1/etc/group"
    install -d -m 1777 "$1/tmp"
}

# product_image LAYOUT WORK DOCKERFILE BINARY ARCH [gzip]: the product's image for linux/ARCH
# (what the Dockerfile's runtime stage ships: BINARY at /reload-injector, its USER, ENTRYPOINT
# and LABELs) into LAYOUT, its root built under WORK; prints the manifest's descriptor.
product_image() {
    local layout=$1 work=$2 dockerfile=$3 binary=$4 arch=$5 compress=${6:-} config rootfs
    config=$(product_config "$dockerfile")
    rootfs="$work/product-$arch"
    rm -rf "$rootfs"
    base_users "$rootfs"
    install -m 0755 "$binary" "$rootfs/reload-injector"
    oci_image "$layout" "$rootfs" "$arch" "$config" "$compress"
}
