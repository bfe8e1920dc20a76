#!/usr/bin/env bash
# On the H200 (device tool, .gpu/ carried): the 8-bit-activation tests, their memcheck, the dense
# regression of the shared loader and epilogue, and the benchmark. Logs under $OUT.
#   bash scripts/act8-h200.sh [act8|persistent|moe|regress|bench|moe-bench|all]
# `persistent` runs the persistent kernel's tests (tests/gpu_persistent.rs) and their memcheck,
# racecheck and synccheck.
# `bench` runs .gpu/bench on the W4A8 / W8A8 kernels and W4A16, then, where .whl/ holds the
# humming-kernels wheel and .gpu/humming_py_bench_ext.py its extended reference benchmark, that
# benchmark's dense W4A8 and W8A8 sections; `python3 dev/merge-act8.py` merges the two JSON files.
# BENCH_KERNELS and HK_SECTIONS narrow `bench`. `moe-bench` runs .gpu/bench_moe in W4A8 and W4A16 on $MOE_MODELS (default qwen3_30b_a3b) and the
# reference benchmark's MoE section on the same models; `.gpu/bench_moe --from ... --reference ...`
# merges them.
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
if [ "$what" = persistent ] || [ "$what" = all ]; then
  .gpu/gpu_persistent-* --test-threads=4 --nocapture 2>&1 | tee "$out/persistent-tests.log" | grep -E "cases|pass|relative|FAILED|panicked|test result"
  [ "${PIPESTATUS[0]}" = 0 ] || rc=1
  for tool in memcheck racecheck synccheck; do
    HUMMING_GPU_QUICK=1 compute-sanitizer --tool $tool .gpu/gpu_persistent-* --test-threads=1 > "$out/persistent-$tool.log" 2>&1 || rc=1
    echo "$tool: $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$out/persistent-$tool.log" | tail -1)"
  done
fi
if [ "$what" = regress ] || [ "$what" = all ]; then
  bash .gpu/gpu-run.sh tests gpu_tile_kind gpu_named gpu_matrix_w1 gpu_split_k gpu_stream gpu_atomic gpu_cluster gpu_moe_indexed_u4 gpu_moe_contiguous gpu_dense_glu 2>&1 | tail -40
  [ "${PIPESTATUS[0]}" = 0 ] || rc=1
fi
if [ "$what" = moe ] || [ "$what" = all ]; then
  .gpu/gpu_moe-* --test-threads=8 --nocapture 2>&1 | tee "$out/moe-tests.log" | grep -E "cases|FAILED|panicked|test result"
  [ "${PIPESTATUS[0]}" = 0 ] || rc=1
fi
if [ "$what" = moe-bench ]; then
  models="${MOE_MODELS:-qwen3_30b_a3b}"
  for f in w4a8 w4a16; do
    mkdir -p "$out/moe-$f"
    .gpu/bench_moe --format "$f" --models "$models" --out "$out/moe-$f" > "$out/moe-$f/bench_moe.log" 2>&1 || rc=1
    grep -E "^(qwen|deepseek)" "$out/moe-$f/bench_moe.log" | tail -16
  done
  if ls .whl/humming_kernels-*.whl >/dev/null 2>&1 && [ -f .gpu/humming_py_bench_ext.py ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/humming_kernels-*.whl \
      && PYTHONPATH=/tmp/site HB_MOE_MODELS="$models" HB_BUDGET_S="${HB_BUDGET_S:-200}" OUT="$out" python3 .gpu/humming_py_bench_ext.py moe > "$out/hk-moe.log" 2>&1 \
      || rc=1
    grep -E "^moe" "$out/hk-moe.log" | tail -16
  fi
fi
if [ "$what" = bench ]; then
  .gpu/bench --kernels "${BENCH_KERNELS:-w4a16,w4a8,w4a8_int8,w8a8_fp8,w8a8_fp8_block,w8a8_fp8_ss,w8a8_fp8_block_ss}" --shapes 8192x8192,28672x4096,4096x14336 \
    --ms 1,16,64,256,1024,4096 --out "$out" 2>&1 | tee "$out/bench.log" | grep -E "^(w4a|w8a)" || rc=1
  if ls .whl/humming_kernels-*.whl >/dev/null 2>&1 && [ -f .gpu/humming_py_bench_ext.py ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/humming_kernels-*.whl \
      && PYTHONPATH=/tmp/site HB_BUDGET_S="${HB_BUDGET_S:-240}" OUT="$out" python3 .gpu/humming_py_bench_ext.py "${HK_SECTIONS:-dense_w4a8,dense_w8a8_fp8}" > "$out/hk-ext.log" 2>&1 \
      || rc=1
  fi
fi
exit $rc
