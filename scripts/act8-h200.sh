#!/usr/bin/env bash
# On the H200 (device tool, .gpu/ carried): the 8-bit-activation tests, their memcheck, and the dense
# regression of the shared loader and epilogue. Logs under $OUT.
#   bash scripts/act8-h200.sh [act8|regress|all]
set -uo pipefail
out="${OUT:-gpu-out}"; mkdir -p "$out"
export HUMMING_CACHE_DIR=/tmp/humming-cache
what="${1:-all}"
rc=0
if [ "$what" = act8 ] || [ "$what" = all ]; then
  .gpu/gpu_act8-* --test-threads=8 --nocapture 2>&1 | tee "$out/act8-tests.log" | grep -E "cases|pass|relative|FAILED|panicked|test result"
  [ "${PIPESTATUS[0]}" = 0 ] || rc=1
  HUMMING_GPU_QUICK=1 compute-sanitizer --tool memcheck .gpu/gpu_act8-* --test-threads=1 > "$out/act8-memcheck.log" 2>&1 || rc=1
  grep -E "ERROR SUMMARY|test result" "$out/act8-memcheck.log"
fi
if [ "$what" = regress ] || [ "$what" = all ]; then
  bash .gpu/gpu-run.sh tests gpu_tile_kind gpu_named gpu_matrix_w1 gpu_split_k gpu_stream gpu_atomic gpu_cluster gpu_moe_indexed_u4 gpu_moe_contiguous gpu_dense_glu 2>&1 | tail -40
  [ "${PIPESTATUS[0]}" = 0 ] || rc=1
fi
exit $rc
