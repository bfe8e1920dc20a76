#!/usr/bin/env bash
# Development aid: builds examples/tune.rs at another revision (a branch, a commit) in a temporary git
# worktree that shares this checkout's target folder, and copies it to .gpu/tune_<name>, for same-call
# A/B runs on the GPU machine against .gpu/tune (scripts/tune-ab.sh). Run it after
# scripts/build-gpu-bins.sh, which empties .gpu/.
#   scripts/build-tune-variant.sh <revision> <name>     e.g. scripts/build-tune-variant.sh wide-tail wide
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 2 ] || { echo "usage: scripts/build-tune-variant.sh <revision> <name>" >&2; exit 2; }
rev="$1"; name="$2"
case "$name" in *[!A-Za-z0-9_-]*|"") echo "build-tune-variant: name must be letters, digits, - or _" >&2; exit 2 ;; esac
. scripts/cuda-env.sh
export HUMMING_REQUIRE_NVCC=1
root="$PWD"
wt="$(mktemp -d)/tree"
git worktree add -q --detach "$wt" "$rev"
trap 'git -C "$root" worktree remove --force "$wt"' EXIT
mkdir -p .gpu
# The shared target folder keeps the build incremental; the worktree's sources differ only where the
# revisions do.
(cd "$wt" && CARGO_TARGET_DIR="$root/target" cargo build -q --release --example tune)
cp target/release/examples/tune ".gpu/tune_$name"
echo "built .gpu/tune_$name from $(git rev-parse --short "$rev")"
echo "note: target/release/examples/tune is now the $rev build; scripts/build-gpu-bins.sh rebuilds it"
