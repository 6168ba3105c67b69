# Sourced by the scripts that build Go programs from the module proxy
# (install-kube-test-binaries.sh, install-helm.sh); they define say() and fail() first.
#
# use_module_proxy: the machine's Go, or (when a module's `go` line needs a newer one) the
# approved toolchain that GOTOOLCHAIN fetches from the module proxy, and from nowhere else:
# `direct` is dropped from GOPROXY, so no module and no toolchain comes from a VCS host.
use_module_proxy() {
    command -v go >/dev/null 2>&1 \
        || fail "find go" "no 'go' on PATH: install Go 1.25 or newer (go.dev/dl, or your distribution's golang package)"
    local proxy
    proxy=$(go env GOPROXY | tr ',|' '\n\n' | grep -v -e '^direct$' -e '^off$' | paste -sd, -)
    [ -n "$proxy" ] || fail "read GOPROXY" "GOPROXY names no module proxy (it is '$(go env GOPROXY)'); set GOPROXY to one"
    export GOPROXY="$proxy" GOTOOLCHAIN=auto GOFLAGS=-mod=readonly GOWORK=off
}
