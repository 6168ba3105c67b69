#!/usr/bin/env bash
# Builds a release's static binaries from the checkout's HEAD, one per architecture, and prints
# `ARCH PATH` for each:
#
#   scripts/release-binaries.sh amd64 arm64
#
# scripts/release.sh runs it. Run alone, it builds a release's binaries before any registry is
# there (the test suite builds beside its other tests, then pushes with release.sh, which
# finds the binaries in RELEASE_CACHE and builds nothing).
#
# A release is built from a commit: a tree with uncommitted or untracked changes is refused.
#
# Environment:
#   RELEASE_CACHE a directory where binaries are kept by commit, architecture and toolchain
#                 (with any CARGO_PROFILE_RELEASE_* override): a second run for the same commit
#                 builds nothing. The eight newest are kept.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(dirname "$here")"
cd "$repo"

fail() { echo "release-binaries.sh: $*" >&2; exit 1; }

[ $# -gt 0 ] || fail "usage: scripts/release-binaries.sh ARCH... (amd64, arm64)"
for arch in "$@"; do
    case "$arch" in amd64 | arm64) ;; *) fail "'$arch' is not amd64 or arm64" ;; esac
done
git rev-parse --git-dir >/dev/null 2>&1 || fail "$repo is not a git checkout: a release is built from a commit"
[ -z "$(git status --porcelain --untracked-files=normal)" ] \
    || fail "the tree has uncommitted or untracked changes ($(git status --porcelain --untracked-files=normal | wc -l) paths): commit or stash them; a release is built from a commit"
commit=$(git rev-parse HEAD)

# The toolchain and any profile override (the test suite builds without LTO) are in the key.
toolchain=$( (rustc -vV; env | grep '^CARGO_PROFILE_RELEASE_' | sort) | sha256sum | cut -c1-12)
for arch in "$@"; do
    cached=""
    if [ -n "${RELEASE_CACHE:-}" ]; then
        cached="$RELEASE_CACHE/$commit-$arch-$toolchain/reload-injector"
        if [ -x "$cached" ]; then
            echo "$arch $cached"
            continue
        fi
    fi
    built=$(RELOAD_INJECTOR_COMMIT=$commit "$here/build-static.sh" "$arch" | tail -n1) \
        || fail "the $arch build failed (see above)"
    case "$built" in /*) ;; *) built="$repo/$built" ;; esac
    if [ -n "$cached" ]; then
        mkdir -p "$(dirname "$cached")" && cp "$built" "$cached.tmp.$$" && mv "$cached.tmp.$$" "$cached"
        find "$RELEASE_CACHE" -mindepth 1 -maxdepth 1 -type d -printf '%T@ %p\n' | sort -rn | tail -n +9 \
            | cut -d' ' -f2- | while read -r old; do rm -rf -- "$old"; done
        built=$cached
    fi
    echo "$arch $built"
done
