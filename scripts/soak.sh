#!/usr/bin/env bash
# Soak test: the real `reload-injector serve` (release build) under mixed load for DURATION
# (default 10m; e.g. 90s, 30m, 1h): valid reviews of every fixture, bad inputs, reconnects,
# and a kubelet-style certificate rotation every minute. Once a second the load pauses for a
# quiet reading of RSS and open file descriptors; every 30 s it prints the median of those
# readings and the error count. It fails unless no valid request failed, RSS and fds are flat
# (after warm-up, the last sample and the trend within 10% of the first sample) and every
# rotation was picked up. The server runs as shipped (see docs/security.md, "Soak").
# `cargo test` runs the same test for 60 s.
set -euo pipefail
cd "$(dirname "$0")/.."

duration="${1:-10m}"
case "$duration" in
    *h) seconds=$(( ${duration%h} * 3600 )) ;;
    *m) seconds=$(( ${duration%m} * 60 )) ;;
    *s) seconds=${duration%s} ;;
    *[!0-9]* | "") echo "usage: $0 [DURATION]   (e.g. 600, 90s, 10m, 1h)" >&2; exit 2 ;;
    *) seconds=$duration ;;
esac
if [ "$seconds" -lt 24 ]; then
    echo "soak: DURATION must be at least 24s (four rotations, six samples)" >&2
    exit 2
fi

export RELOAD_INJECTOR_SOAK_SECONDS="$seconds"
exec cargo test --release --locked --test admission local::soak -- --nocapture
