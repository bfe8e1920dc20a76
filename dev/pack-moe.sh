#!/usr/bin/env bash
# Packs, here, what dev/moe-h200.sh runs on the H200 into .gpu-pack/moe.tar.xz (carry ".gpu-pack" and ".whl"):
# the MoE and persistent GPU tests and the MoE bench, built beforehand with
#   . scripts/cuda-env.sh; HUMMING_REQUIRE_NVCC=1 cargo test --release --no-run --test gpu_moe --test gpu_moe_persistent --test gpu_moe_layer \
#     --test gpu_persistent; HUMMING_REQUIRE_NVCC=1 cargo build --release --example bench_moe --example bench_moe_layer
set -euo pipefail
cd "$(dirname "$0")/.."
stage=$(mktemp -d)
newest() { ls -t $1 2>/dev/null | grep -v '\.d$' | head -1; }
for t in gpu_moe gpu_moe_persistent gpu_moe_layer gpu_persistent; do cp "$(newest "target/release/deps/$t-*")" "$stage/"; done
cp target/release/examples/bench_moe_layer "$stage/"
cp target/release/examples/bench_moe "$stage/"
cp "${HK_BENCH:-.gpu/humming_py_bench_ext.py}" "$stage/"  # the reference benchmark, fetched beside the wheel
mkdir -p .gpu-pack; rm -f .gpu-pack/moe.tar.xz
tar -C "$stage" -cJf .gpu-pack/moe.tar.xz .
rm -rf "$stage"
ls -la .gpu-pack/moe.tar.xz
