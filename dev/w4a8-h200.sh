#!/usr/bin/env bash
# On the H200 (carry .gpu-pack from dev/pack-persistent.sh and .whl from scripts/fetch-bench-wheels.sh): the
# persistent kernel's tests (and gpu_act8 where packed), the W4A8 bench beside humming-kernels' dense_w4a8
# section and our W4A16, and the sanitizers on the W4A8 tests, each bounded so that one device call
# returns all logs, as $OUT/w4a8-logs.tar.xz.
set -uo pipefail
out="${OUT:-gpu-out}"; mkdir -p "$out" .gpu
tar -C .gpu -xJf .gpu-pack/gpu.tar.xz
export HUMMING_CACHE_DIR=/tmp/humming-cache
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
timeout 90 .gpu/gpu_persistent-* --test-threads=4 --nocapture > "$out/tests.log" 2>&1
echo "tests rc=$?: $(grep -E "test result" "$out/tests.log")"
grep -E "relative error|panicked" "$out/tests.log" | cut -c1-220
if ls .gpu/gpu_act8-* >/dev/null 2>&1; then
  timeout 120 .gpu/gpu_act8-* --test-threads=6 --nocapture > "$out/act8-tests.log" 2>&1
  echo "gpu_act8 rc=$?: $(grep -E "test result" "$out/act8-tests.log")"; grep -E "panicked" "$out/act8-tests.log" | cut -c1-220
fi
# A baseline build of the kernel (.gpu/base/bench, where packed) timed beside this one, interleaved.
if [ -x .gpu/base/bench ]; then
  for v in base new; do
    b=.gpu/bench; [ $v = base ] && b=.gpu/base/bench
    timeout 60 $b --kernels "${AB_KERNELS:-w4a8_ss,w8a8_fp8_block_ss}" --shapes 8192x8192 --ms 256,1024,4096 \
      --out "$out/ab-$v" > "$out/ab-$v.log" 2>&1
    grep -E "^(w4a|w8a)" "$out/ab-$v.log" | grep -v humming.gemm | sed "s/^/$v /"
  done
fi
BENCH_KERNELS="${BENCH_KERNELS:-w4a16,w4a8,w4a8_ss,w4a8_int8,w4a8_int8_ss}" HK_SECTIONS=dense_w4a8 HB_BUDGET_S="${HB_BUDGET_S:-140}" \
  OUT="$out" timeout 300 bash scripts/act8-h200.sh bench > "$out/bench-step.log" 2>&1
echo "bench rc=$?"; grep -cE "^w4a" "$out/bench.log"; tail -3 "$out/hk-ext.log" 2>/dev/null
for tool in memcheck racecheck synccheck; do
  HUMMING_GPU_QUICK=1 timeout "${SAN_S:-50}" compute-sanitizer --tool $tool .gpu/gpu_persistent-* "${SAN_TESTS:-w4a8}" --test-threads=1 \
    > "$out/$tool.log" 2>&1
  echo "$tool rc=$?: $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY|test result" "$out/$tool.log" | tail -2 | tr '\n' ' ')"
done
# (The device returns few files: the logs and results as one archive.)
tar -C "$out" -cJf "$out/w4a8-logs.tar.xz" --exclude='*.tar.xz' . && find "$out" -mindepth 1 ! -name '*.tar.xz' -delete
exit 0
