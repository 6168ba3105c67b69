# syntax=docker/dockerfile:1
# One image for the webhook (`reload-injector serve`) and the injected sidecar
# (`reload-injector watch`): a static binary on distroless/static, no shell, non-root.
#
#   docker build -t ghcr.io/reload-injector/reload-injector:0.1.0 .
#
# The build step is scripts/build-static.sh, which the test suite also runs outside Docker
# (tests/dockerfile.rs) and checks: static executable, starts without any libc files.

FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN scripts/build-static.sh
RUN cp target/x86_64-unknown-linux-gnu/release/reload-injector /reload-injector

FROM gcr.io/distroless/static-debian12:nonroot
LABEL org.opencontainers.image.title="reload-injector" \
      org.opencontainers.image.description="Makes ConfigMap and Secret changes reach running applications safely" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /reload-injector /reload-injector
# distroless "nonroot": uid/gid 65532. The manifests set the same runAsUser.
USER 65532:65532
ENTRYPOINT ["/reload-injector"]
