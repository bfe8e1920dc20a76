#!/usr/bin/env bash
# Runs on the GPU machine (through the device tool) from the repository root, with .gpu/ carried:
#   bash .gpu/gpu-run.sh [tests|sanitize|all]
# Logs go to $OUT (or ./gpu-out).
set -uo pipefail
out="${OUT:-gpu-out}"; mkdir -p "$out"
what="${1:-all}"
export HUMMING_CACHE_DIR=/tmp/humming-cache
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$out/gpu.txt"
rc=0
run_tests() {
  for t in .gpu/gpu_*-*; do
    [ -x "$t" ] || continue
    echo "== $t"
    "$t" --test-threads="$(nproc)" --nocapture 2>&1 | tee -a "$out/gpu-tests.log" | grep -E "passed|FAILED|panicked|error|skipped|test result" ; s=${PIPESTATUS[0]}
    [ "$s" = 0 ] || rc=1
  done
}
sanitize() {
  t=$(ls .gpu/gpu_correctness-* | head -n 1)
  echo "== compute-sanitizer memcheck (reduced set: every test, HUMMING_GPU_QUICK=1)"
  HUMMING_GPU_QUICK=1 compute-sanitizer --tool memcheck --error-exitcode 9 "$t" --test-threads=1 --nocapture 2>&1 \
    | tee "$out/sanitizer.log" | tail -n 15; s=${PIPESTATUS[0]}
  [ "$s" = 0 ] || rc=1
}
case "$what" in
  tests) run_tests ;;
  sanitize) sanitize ;;
  all) run_tests; sanitize ;;
  *) echo "gpu-run: unknown mode $what (tests, sanitize or all)"; rc=2 ;;
esac
echo "gpu-run: exit $rc"
exit $rc
