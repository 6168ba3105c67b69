#!/bin/sh
# See plugin.yaml. Manifests on stdin, the same manifests on stdout; $1 is serve's port.
# Python with PyYAML: the one scripts/install-test-deps.sh installs into .venv.
set -eu
exec "${RELOAD_INJECTOR_PYTHON:?set by tests/packaging/e2e/helm.rs to .venv/bin/python}" \
    "$(dirname "$0")/local_webhook.py" "$@"
