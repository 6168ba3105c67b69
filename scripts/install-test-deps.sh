#!/usr/bin/env bash
# Installs what the tests need that cargo does not bring: each step is skipped when its
# tool is already there, so a warm machine pays nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

apt_updated=0
apt_install() {
    if [ "$(id -u)" -ne 0 ]; then
        echo "install-test-deps: need root to apt-get install $*; install them by hand or run as root" >&2
        exit 1
    fi
    if [ "$apt_updated" -eq 0 ]; then
        apt-get update -qq
        apt_updated=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# Real nginx for the watcher's end-to-end test.
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || apt_install nginx-light
