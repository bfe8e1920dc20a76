#!/usr/bin/env bash
# On the H200 (carry .gpu-pack from dev/pack-moe.sh and .whl from scripts/fetch-bench-wheels.sh): the persistent
# MoE kernel's tests, the MoE bench (ours, then humming-kernels' MoE section on the same models and M), and the
# sanitizers, each step bounded, so that one device call returns all logs as $OUT/moe-logs.tar.xz.
#   STEPS="tests bench layer sweep hk san"  (default: all)   MODELS=qwen3_30b_a3b,deepseek_v3   MS=1,16,128,1024,4096
#   FORMATS="w4a8 w4a16"   SWEEP_MS=128,1024 (block M 16..128 on Qwen3)   TESTS="moe_persistent moe_layer moe persistent"
set -uo pipefail
out="${OUT:-gpu-out}"; mkdir -p "$out" .gpu
tar -C .gpu -xJf .gpu-pack/moe.tar.xz
export HUMMING_CACHE_DIR=/tmp/humming-cache
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
steps=" ${STEPS:-tests bench layer sweep hk san} "
# The logs so far as one archive after every step (the device returns few files; a call cut short keeps it).
snapshot() { tar -C "$out" --exclude=moe-logs.tar.xz -cJf /tmp/moe-logs.tar.xz . && mv /tmp/moe-logs.tar.xz "$out/"; }
models="${MODELS:-qwen3_30b_a3b,deepseek_v3}"; ms="${MS:-1,16,128,1024,4096}"
if [[ $steps == *" tests "* ]]; then
  for t in ${TESTS:-moe_persistent moe_layer moe persistent}; do
    case $t in moe) filt="${MOE_FILTER:-w4a8}";; *) filt="";; esac
    timeout "${TESTS_S:-150}" .gpu/gpu_${t}-* $filt --test-threads=4 --nocapture > "$out/tests-$t.log" 2>&1
    echo "gpu_$t rc=$?: $(grep -E "test result" "$out/tests-$t.log")"
    grep -E "cases|rows|panicked" "$out/tests-$t.log" | cut -c1-240
  done
fi
snapshot
if [[ $steps == *" layer "* ]]; then
  mkdir -p "$out/layer"
  timeout "${LAYER_S:-300}" .gpu/bench_moe_layer --models "$models" --ms "$ms" --out "$out/layer" > "$out/layer/bench_moe_layer.log" 2>&1
  echo "layer rc=$?"; grep -vE "^\s*$" "$out/layer/bench_moe_layer.log" | tail -32
fi
snapshot
if [[ $steps == *" bench "* ]]; then
  for f in ${FORMATS:-w4a8}; do
    mkdir -p "$out/moe-$f"
    timeout "${BENCH_S:-300}" .gpu/bench_moe --format "$f" --models "$models" --ms "$ms" --out "$out/moe-$f" > "$out/moe-$f/bench_moe.log" 2>&1
    echo "bench $f rc=$?"; grep -E "^(qwen|deepseek)" "$out/moe-$f/bench_moe.log" | tail -20
  done
fi
snapshot
if [[ $steps == *" sweep "* ]]; then
  mkdir -p "$out/sweep"
  timeout "${SWEEP_S:-120}" .gpu/bench_moe --format w4a8 --models "${SWEEP_MODELS:-qwen3_30b_a3b}" --ms "${SWEEP_MS:-128,1024}" \
    --block-m "${SWEEP_BMS:-16,32,64,128}" --out "$out/sweep" > "$out/sweep/bench_moe.log" 2>&1
  echo "sweep rc=$?"; grep -E "^(qwen|deepseek)" "$out/sweep/bench_moe.log" | tail -20
fi
snapshot
if [[ $steps == *" hk "* ]] && ls .whl/humming_kernels-*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/humming_kernels-*.whl
  PYTHONPATH=/tmp/site HB_MOE_MODELS="$models" HB_MOE_MS="$ms" HB_BUDGET_S="${HB_BUDGET_S:-200}" OUT="$out" \
    timeout $(( ${HB_BUDGET_S:-200} + 40 )) python3 .gpu/humming_py_bench_ext.py moe > "$out/hk-moe.log" 2>&1
  echo "hk rc=$?"; grep -E "^moe" "$out/hk-moe.log" | tail -40
fi
snapshot
if [[ $steps == *" san "* ]]; then
  for tool in ${SAN_TOOLS-memcheck racecheck synccheck}; do
    HUMMING_GPU_QUICK=1 timeout "${SAN_S:-60}" compute-sanitizer --tool $tool .gpu/gpu_moe_persistent-* "${SAN_TESTS:-every_tile_w4a8}" \
      --test-threads=1 > "$out/$tool.log" 2>&1
    echo "$tool rc=$?: $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY|test result" "$out/$tool.log" | tail -2 | tr '\n' ' ')"
  done
fi
snapshot
if [[ $steps == *" ncu "* ]]; then
  # The routing helper and the GEMM of one gate-up launch per NCU_CASES entry (model:M), profiled once each.
  for case in ${NCU_CASES:-deepseek_v3:1024}; do
    for k in ${NCU_KERNELS:-route _t}; do
      log="$out/ncu-${case/:/-}-${k//[^a-z]/}.log"
      timeout 150 ncu --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
        --section SchedulerStats --section SourceCounters --section LaunchStats -k "regex:$k" -s 2 -c 1 \
        .gpu/bench_moe --format w4a8 --models "${case%%:*}" --ms "${case##*:}" --routings 1 --trials 1 \
        --reps 1 --out "$out/ncu-tmp" > "$log" 2>&1
      echo "ncu $case $k rc=$?"; grep -E "Duration|Throughput|Warp Cycles Per Issued|Issued Ipc|Registers Per|Grid Size" "$log" | head -14
    done
  done
fi
snapshot
find "$out" -mindepth 1 ! -name moe-logs.tar.xz -delete
exit 0
