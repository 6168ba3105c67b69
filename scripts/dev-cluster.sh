#!/usr/bin/env bash
# A real, current Kubernetes on this machine with reload-injector installed, to try by hand:
# the same control plane the end-to-end tests run (etcd, kube-apiserver, kube-controller-manager
# and kube-scheduler v1.37, built by scripts/install-kube-test-binaries.sh), the shipped
# manifests applied with `kubectl apply -k manifests/`, and `serve` running as the shipped
# ServiceAccount (a token from the TokenRequest API, so the shipped RBAC is what is enforced),
# registered as the webhook with the certificate from `reload-injector certs`.
#
#   scripts/dev-cluster.sh up      # idempotent; prints `export KUBECONFIG=...`
#   scripts/dev-cluster.sh status  # what runs, by PID
#   scripts/dev-cluster.sh down    # stops every process it started, by PID; removes etcd's data
#
# Everything (certificates, kubeconfigs, PIDs and every process's log) goes to one directory:
# $RELOAD_INJECTOR_DEV_DIR, default /tmp/reload-injector-dev. Everything listens on 127.0.0.1
# only. No node runs: Pods are admitted (and mutated) but stay Pending.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
dir="${RELOAD_INJECTOR_DEV_DIR:-/tmp/reload-injector-dev}"
version="${RELOAD_INJECTOR_KUBE_VERSION:-$(sed -n 's/^current=//p' "$root/scripts/install-kube-test-binaries.sh")}"
etcd_port="${DEV_ETCD_PORT:-23790}"
api_port="${DEV_API_PORT:-16443}"
serve_port="${DEV_SERVE_PORT:-18443}"
metrics_port="${DEV_METRICS_PORT:-19090}"
admin_token="dev-admin-token"
own=reload-injector

say() { echo "dev-cluster: $*" >&2; }
fail() { say "FAILED at step '$1': $2"; exit 1; }

# A process we started is running when its PID file names a live process of that command.
running() {
    local pidfile="$dir/$1.pid" pid
    [ -f "$pidfile" ] || return 1
    pid=$(cat "$pidfile")
    [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' < "/proc/$pid/cmdline" | grep -q -- "$2"
}

# start NAME MATCH COMMAND...: starts COMMAND in the background unless it runs already.
start() {
    local name=$1 match=$2; shift 2
    if running "$name" "$match"; then say "$name runs already (PID $(cat "$dir/$name.pid"))"; return; fi
    setsid "$@" >"$dir/$name.log" 2>&1 < /dev/null &
    echo $! > "$dir/$name.pid"
    say "$name started (PID $!), log $dir/$name.log"
}

# wait_for WHAT SECONDS COMMAND...: polls COMMAND every half second.
wait_for() {
    local what=$1 limit=$2; shift 2
    local deadline=$((SECONDS + limit))
    until "$@" >/dev/null 2>&1; do
        [ $SECONDS -lt $deadline ] || fail "wait for $what" "not within ${limit}s; the logs are in $dir"
        sleep 0.5
    done
}

kubectl_admin() { "$bin/kubectl" --kubeconfig "$dir/admin.kubeconfig" "$@"; }

write_kubeconfig() { # FILE TOKEN
    cat > "$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: dev
  cluster:
    server: https://127.0.0.1:$api_port
    certificate-authority: $dir/pki/ca.crt
users:
- name: user
  user:
    token: $2
contexts:
- name: dev
  context: {cluster: dev, user: user}
current-context: dev
EOF
}

up() {
    mkdir -p "$dir/pki" "$dir/webhook"
    bin=$("$root/scripts/install-kube-test-binaries.sh" "$version" | tail -n 1) \
        || fail "install the Kubernetes binaries" "see above"
    local product="${RELOAD_INJECTOR_BIN:-}"
    if [ -z "$product" ]; then
        say "building reload-injector (cargo build --locked)"
        (cd "$root" && cargo build --locked --quiet) || fail "cargo build" "see above"
        product="$root/target/debug/reload-injector"
    fi

    # Identity: the API server's certificate, the service-account key, the admin's token.
    if [ ! -f "$dir/pki/tls.crt" ]; then
        "$product" certs --out "$dir/pki" --service kubernetes --namespace default \
            --dns localhost --ip 127.0.0.1 >/dev/null || fail "certs for the API server" "see above"
        openssl ecparam -name prime256v1 -genkey -noout -out "$dir/pki/sa.key" 2>/dev/null \
            && openssl ec -in "$dir/pki/sa.key" -pubout -out "$dir/pki/sa.pub" 2>/dev/null \
            || fail "the service-account key" "openssl failed (install openssl)"
        echo "$admin_token,dev-admin,dev-admin,\"system:masters\"" > "$dir/pki/tokens.csv"
    fi
    write_kubeconfig "$dir/admin.kubeconfig" "$admin_token"

    start etcd "$bin/etcd" "$bin/etcd" --name=dev --data-dir="$dir/etcd-data" \
        --listen-client-urls="http://127.0.0.1:$etcd_port" --advertise-client-urls="http://127.0.0.1:$etcd_port" \
        --listen-peer-urls="http://127.0.0.1:$((etcd_port + 10))" \
        --initial-advertise-peer-urls="http://127.0.0.1:$((etcd_port + 10))" \
        --initial-cluster="dev=http://127.0.0.1:$((etcd_port + 10))" --log-level=warn
    wait_for "etcd" 60 curl -sf "http://127.0.0.1:$etcd_port/health"

    start kube-apiserver "$bin/kube-apiserver" "$bin/kube-apiserver" \
        --etcd-servers="http://127.0.0.1:$etcd_port" --bind-address=127.0.0.1 --advertise-address=127.0.0.1 \
        --endpoint-reconciler-type=none --secure-port="$api_port" --tls-cert-file="$dir/pki/tls.crt" --tls-private-key-file="$dir/pki/tls.key" \
        --client-ca-file="$dir/pki/ca.crt" --token-auth-file="$dir/pki/tokens.csv" --authorization-mode=RBAC \
        --service-account-issuer=https://kubernetes.default.svc.cluster.local \
        --service-account-key-file="$dir/pki/sa.pub" --service-account-signing-key-file="$dir/pki/sa.key" \
        --service-cluster-ip-range=10.0.0.0/24 --allow-privileged=true \
        --kubelet-preferred-address-types=InternalIP --v=1
    wait_for "kube-apiserver /readyz" 120 kubectl_admin get --raw=/readyz

    start kube-controller-manager "$bin/kube-controller-manager" "$bin/kube-controller-manager" \
        --kubeconfig="$dir/admin.kubeconfig" --leader-elect=false --bind-address=127.0.0.1 --secure-port=0 \
        --service-account-private-key-file="$dir/pki/sa.key" --root-ca-file="$dir/pki/ca.crt" \
        --use-service-account-credentials=false --v=1
    if [ -x "$bin/kube-scheduler" ]; then
        start kube-scheduler "$bin/kube-scheduler" "$bin/kube-scheduler" \
            --kubeconfig="$dir/admin.kubeconfig" --leader-elect=false --bind-address=127.0.0.1 --secure-port=0 --v=1
    fi

    # The product, as a user installs it: what `kubectl apply -k manifests/` applies, with only
    # the webhook's clientConfig pointed at the local serve and its CA (no node runs the
    # shipped Deployment's Pods).
    if [ ! -f "$dir/webhook/tls.crt" ]; then
        "$product" certs --out "$dir/webhook" --service "$own" --namespace "$own" --ip 127.0.0.1 >/dev/null \
            || fail "reload-injector certs" "see above"
    fi
    kubectl_admin kustomize "$root/manifests" > "$dir/manifests.yaml" \
        || fail "kubectl kustomize manifests/" "see above"
    SERVE_URL="https://127.0.0.1:$serve_port/mutate" CA_BUNDLE="$(cat "$dir/webhook/ca-bundle.b64")" \
        python3 - "$dir/manifests.yaml" > "$dir/manifests.local.yaml" <<'PY' || fail "point the webhook at serve" "see above"
import os, re, sys
# Rewrites each webhook's clientConfig block of the MutatingWebhookConfiguration, as text,
# so everything else stays exactly as kustomize built it.
text = open(sys.argv[1]).read()
docs = text.split("\n---\n")
for i, doc in enumerate(docs):
    if re.search(r"^kind: MutatingWebhookConfiguration$", doc, re.M):
        local = ("  clientConfig:\n    caBundle: %s\n    url: %s\n"
                 % (os.environ["CA_BUNDLE"], os.environ["SERVE_URL"]))
        doc, n = re.subn(r"^  clientConfig:\n(?:    .*\n)+", local, doc + "\n", flags=re.M)
        assert n > 0, "no clientConfig in the webhook configuration"
        docs[i] = doc.rstrip("\n")
print("\n---\n".join(docs))
PY
    kubectl_admin apply -f "$dir/manifests.local.yaml" >"$dir/apply.log" 2>&1 \
        || { cat "$dir/apply.log" >&2; fail "apply the manifests" "the API server refused an object"; }

    if ! running serve "reload-injector"; then
        local token
        token=$(kubectl_admin create token "$own" -n "$own" --duration=24h) \
            || fail "a token for the shipped ServiceAccount" "TokenRequest failed"
        write_kubeconfig "$dir/serve.kubeconfig" "$token"
    fi
    start serve "reload-injector" env KUBECONFIG="$dir/serve.kubeconfig" POD_NAME=dev-serve \
        RELOAD_INJECTOR_NAMESPACE="$own" "$product" serve \
        --listen="127.0.0.1:$serve_port" --metrics-listen="127.0.0.1:$metrics_port" \
        --tls-cert "$dir/webhook/tls.crt" --tls-key "$dir/webhook/tls.key" \
        --secret-hash-key-file "$dir/webhook/secret-hash.key"
    wait_for "serve /readyz" 120 curl -sf "http://127.0.0.1:$metrics_port/readyz"

    say "up: Kubernetes v$version with reload-injector; logs in $dir"
    echo "export KUBECONFIG=$dir/admin.kubeconfig PATH=$bin:\$PATH"
}

down() {
    local name pid
    for name in serve kube-scheduler kube-controller-manager kube-apiserver etcd; do
        [ -f "$dir/$name.pid" ] || continue
        pid=$(cat "$dir/$name.pid")
        if [ -d "/proc/$pid" ]; then
            kill -TERM "$pid" 2>/dev/null || true
            for _ in $(seq 1 50); do [ -d "/proc/$pid" ] || break; sleep 0.1; done
            [ -d "/proc/$pid" ] && kill -KILL "$pid" 2>/dev/null || true
            say "$name (PID $pid) stopped"
        fi
        rm -f "$dir/$name.pid"
    done
    rm -rf "$dir/etcd-data"
    say "down: nothing of the dev cluster runs; its logs stay in $dir"
}

status() {
    local name
    for name in etcd kube-apiserver kube-controller-manager kube-scheduler serve; do
        if [ -f "$dir/$name.pid" ] && [ -d "/proc/$(cat "$dir/$name.pid")" ]; then
            echo "$name: running (PID $(cat "$dir/$name.pid")), log $dir/$name.log"
        else
            echo "$name: not running"
        fi
    done
}

case "${1:-}" in
    up) up ;;
    down) down ;;
    status) status ;;
    *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
