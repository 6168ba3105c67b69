# syntax=docker/dockerfile:1
# One image for the webhook (`reload-injector serve`) and the injected sidecar
# (`reload-injector watch`): a static binary on distroless/static, no shell, non-root.
#
#   docker build --build-arg RELOAD_INJECTOR_COMMIT=$(git rev-parse HEAD) -t ghcr.io/reload-injector/reload-injector:0.2.0 .
#   docker buildx build --platform linux/amd64,linux/arm64 -t ghcr.io/reload-injector/reload-injector:0.2.0 .
#
# Releases are built without Docker by scripts/release.sh (the same runtime stage, read from this
# file by scripts/lib/oci-image.sh): that is what ghcr.io/reload-injector/reload-injector holds.
#
# Each platform's build stage runs on that platform (natively or under emulation) and builds
# for its own host target; BuildKit's TARGETARCH (amd64, arm64) lets the script check that.
#
# The build step is scripts/build-static.sh, which the test suite also runs outside Docker
# (tests/dockerfile.rs) and checks: static executable, starts without any libc files.

FROM rust:1.95-bookworm AS build
ARG TARGETARCH
# The commit `--version` prints (.git is not in the build context); `unknown` without it.
ARG RELOAD_INJECTOR_COMMIT=unknown
RUN cargo install cargo-auditable --locked --version 0.7.7
WORKDIR /src
COPY . .
RUN scripts/build-static.sh
RUN cp target/static/reload-injector /reload-injector

FROM gcr.io/distroless/static-debian12:nonroot
LABEL org.opencontainers.image.title="reload-injector" \
      org.opencontainers.image.description="Makes ConfigMap and Secret changes reach running applications safely" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /reload-injector /reload-injector
# distroless "nonroot": uid/gid 65532. The manifests set the same runAsUser.
USER 65532:65532
ENTRYPOINT ["/reload-injector"]
