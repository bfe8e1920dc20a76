#!/usr/bin/env bash
# On the H200 (carry .gpu-pack holding ab.tar.xz: variant folders a/ and b/, each with gpu_persistent and
# bench, built here from two versions of the kernel headers): the persistent tests matching $TESTS of each
# variant, then each variant's bench on $BENCH_KERNELS, the two interleaved per shape so that both see
# the same clocks. Logs under $OUT.
set -uo pipefail
out="${OUT:-gpu-out}"; mkdir -p "$out" .gpu
tar -C .gpu -xJf .gpu-pack/ab.tar.xz
export HUMMING_CACHE_DIR=/tmp/humming-cache
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
for v in ${VARIANTS:-a b}; do
  timeout 200 .gpu/$v/gpu_persistent ${TESTS:-w4a8} --test-threads=3 --nocapture > "$out/tests-$v.log" 2>&1
  echo "$v tests rc=$?: $(grep -E "test result" "$out/tests-$v.log")"
  grep -E "relative error|panicked" "$out/tests-$v.log" | cut -c1-200 | head -8
done
for shape in ${BENCH_SHAPES:-8192x8192 4096x14336}; do
  for v in ${VARIANTS:-a b}; do
    timeout 200 .gpu/$v/bench --kernels "${BENCH_KERNELS:-w4a16,w4a8_ss}" --shapes "$shape" --ms "${BENCH_MS:-16,256,1024,4096}" \
      --out "$out/bench-$v-$shape" > "$out/bench-$v-$shape.log" 2>&1
    grep -E "^(w4a|w8a)" "$out/bench-$v-$shape.log" | grep -v humming.gemm | sed "s/^/$v /" | tail -12
  done
done
exit 0
