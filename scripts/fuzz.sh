#!/usr/bin/env bash
# Fuzzes the review path for DURATION (default 10m): AdmissionReview bodies through the real
# /mutate router and YAML through `inject`, four targets side by side, each for DURATION.
# A failure is shrunk and saved under tests/fixtures/fuzz/<target>/; commit it with the fix.
#
#   scripts/fuzz.sh            # ten minutes
#   scripts/fuzz.sh 90s        # s, m or h; a bare number is seconds
set -euo pipefail
cd "$(dirname "$0")/.."

duration="${1:-10m}"
case "$duration" in
  *h) seconds=$(( ${duration%h} * 3600 )) ;;
  *m) seconds=$(( ${duration%m} * 60 )) ;;
  *s) seconds=${duration%s} ;;
  *[!0-9]* | '') echo "usage: $0 [DURATION like 600, 90s, 10m, 1h]" >&2; exit 2 ;;
  *) seconds=$duration ;;
esac

command -v cargo >/dev/null || {
  echo "cargo is missing: install Rust from https://rustup.rs (the stable toolchain is enough)" >&2
  exit 2
}

target_dir="${CARGO_TARGET_DIR:-target}"
report="$target_dir/fuzz-report.txt"
mkdir -p "$target_dir"
rm -f "$report"

echo "building the fuzz targets (release)..."
# The test binary is run directly, so that nothing is rebuilt inside the timed part.
binary=$(cargo test --release --locked --test admission --no-run --message-format json \
  | grep '"name":"admission"' | sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -n 1)
[ -x "$binary" ] || { echo "failed to find the admission test binary" >&2; exit 2; }
echo "fuzzing for ${seconds}s per target, four targets side by side"
started=$(date +%s)
status=0
FUZZ_SECONDS="$seconds" FUZZ_REPORT="$(realpath "$report")" \
  "$binary" offline::fuzz:: --test-threads 4 --nocapture || status=$?
ended=$(date +%s)

echo
echo "== fuzz summary =="
total=0
touch "$report"
while read -r target inputs secs; do
  printf '%-48s %10s inputs in %8s s\n' "$target" "$inputs" "$secs"
  total=$(( total + inputs ))
done < "$report"
echo "total $total inputs in $(( ended - started )) s wall clock"
if [ "$status" -ne 0 ]; then
  echo "FAILED: see the saved input named above, under tests/fixtures/fuzz/" >&2
fi
exit "$status"
