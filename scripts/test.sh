#!/usr/bin/env bash
# The test command (README): installs the pinned NVCC from PyPI once (cached outside the repo), then
# builds everything (every gemm! kernel is compiled by NVCC for its declared archs) and runs all tests.
# GPU tests print "skipped: <name> (no GPU)" on a machine without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(scripts/install-cuda-toolchain.sh --env)"
if [ "${CI:-}" = "true" ]; then export HUMMING_REQUIRE_NVCC=1; fi
cargo test --workspace --all-targets
cargo test --workspace --doc
