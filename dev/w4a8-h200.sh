#!/usr/bin/env bash
# On the H200 (carry .gpu-pack from dev/pack-persistent.sh and .whl from scripts/fetch-bench-wheels.sh): the
# persistent kernel's tests (and gpu_act8 where packed), the W4A8 bench beside humming-kernels' dense_w4a8
# section and our W4A16 (BENCH=0 skips it), and the sanitizers on the W4A8 tests, each bounded so that one device call
# returns all logs, as $OUT/w4a8-logs.tar.xz.
set -uo pipefail
out="${OUT:-gpu-out}"; mkdir -p "$out" .gpu
tar -C .gpu -xJf .gpu-pack/gpu.tar.xz
export HUMMING_CACHE_DIR=/tmp/humming-cache
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
timeout "${TESTS_S:-90}" .gpu/gpu_persistent-* --test-threads=4 --nocapture > "$out/tests.log" 2>&1
echo "tests rc=$?: $(grep -E "test result" "$out/tests.log")"
grep -E "relative error|panicked" "$out/tests.log" | cut -c1-220
if [ "${ACT8:-1}" = 1 ] && ls .gpu/gpu_act8-* >/dev/null 2>&1; then
  timeout 120 .gpu/gpu_act8-* --test-threads=6 --nocapture > "$out/act8-tests.log" 2>&1
  echo "gpu_act8 rc=$?: $(grep -E "test result" "$out/act8-tests.log")"; grep -E "panicked" "$out/act8-tests.log" | cut -c1-220
fi
# Other builds of the bench (.gpu/ab/<name>/bench, where packed) timed beside this one, interleaved per shape.
if ls .gpu/ab/*/bench >/dev/null 2>&1; then
  for shape in ${AB_SHAPES:-8192x8192}; do
    for b in .gpu/ab/*/bench .gpu/bench; do
      v=$(basename "$(dirname "$b")"); [ "$b" = .gpu/bench ] && v=new
      timeout 90 $b --kernels "${AB_KERNELS:-w4a8_ss,w8a8_fp8_block_ss}" --shapes "$shape" --ms "${AB_MS:-256,1024,4096}" \
        --out "$out/ab-$v-$shape" > "$out/ab-$v-$shape.log" 2>&1
      grep -E "^(w4a|w8a)" "$out/ab-$v-$shape.log" | grep -v humming.gemm | sed "s/^/$v /"
    done
  done
fi
if [ "${BENCH:-1}" = 1 ]; then
  BENCH_KERNELS="${BENCH_KERNELS:-w4a16,w4a8,w4a8_ss,w4a8_int8,w4a8_int8_ss}" HK_SECTIONS=dense_w4a8 HB_BUDGET_S="${HB_BUDGET_S:-140}" \
    OUT="$out" timeout 300 bash scripts/act8-h200.sh bench > "$out/bench-step.log" 2>&1
  echo "bench rc=$?"; grep -cE "^w4a" "$out/bench.log"; tail -3 "$out/hk-ext.log" 2>/dev/null
fi
for tool in ${SAN_TOOLS-memcheck racecheck synccheck}; do
  HUMMING_GPU_QUICK=1 timeout "${SAN_S:-50}" compute-sanitizer --tool $tool .gpu/gpu_persistent-* "${SAN_TESTS:-w4a8}" --test-threads=1 \
    > "$out/$tool.log" 2>&1
  echo "$tool rc=$?: $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY|test result" "$out/$tool.log" | tail -2 | tr '\n' ' ')"
done
# (The device returns few files: the logs and results as one archive.)
tar -C "$out" -cJf /tmp/w4a8-logs.tar.xz . ; find "$out" -mindepth 1 -delete; mv /tmp/w4a8-logs.tar.xz "$out/"
exit 0
