#!/usr/bin/env bash
# Builds the GPU test, example and benchmark binaries here (the GPU machine has no Rust) and copies
# them into .gpu/ (git-ignored), which the device call carries. NVCC (for the gemm!-declared kernels'
# fatbins) comes from scripts/install-cuda-toolchain.sh.
#   scripts/build-gpu-bins.sh            # tests + examples (smollm2, bench, ...)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/cuda-env.sh
export HUMMING_REQUIRE_NVCC=1
mkdir -p .gpu
rm -f .gpu/*
build() { # cargo args...; copies every executable artifact
  cargo "$@" --release --message-format=json 2>/dev/null \
    | python3 -c 'import json,sys
for l in sys.stdin:
    try: m=json.loads(l)
    except Exception: continue
    if m.get("reason")=="compiler-artifact" and m.get("executable"): print(m["executable"])' \
    | while read -r exe; do cp "$exe" .gpu/; echo "built $(basename "$exe")"; done
}
for t in humming-runtime/tests/gpu_*.rs; do build test --no-run -p humming-runtime --test "$(basename "$t" .rs)"; done
for t in tests/gpu_*.rs; do if [ -f "$t" ]; then build test --no-run --test "$(basename "$t" .rs)"; fi; done
for e in examples/*.rs; do if [ -f "$e" ]; then build build --example "$(basename "$e" .rs)"; fi; done
cp scripts/gpu-run.sh .gpu/
ls .whl/humming_kernels-*.whl >/dev/null 2>&1 \
  || echo "note: scripts/fetch-bench-wheels.sh fetches the humming-kernels wheel that bench-h200.sh needs" >&2
ls -la .gpu
