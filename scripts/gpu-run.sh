#!/usr/bin/env bash
# Runs on the GPU machine (through the device tool) from the repository root, with .gpu/ carried:
#   bash .gpu/gpu-run.sh [tests|sanitize|races|all] [test name filters, `tests` only]
# Logs go to $OUT (or ./gpu-out). On an H200 `tests` runs every .gpu/gpu_* binary. gpu_correctness
# and gpu_reductions take 7-8 minutes together on a cold kernel cache (`gpu_matrix`, `gpu_graph`,
# `gpu_dependent` about 6, the others about 2); gpu_formats about 7 (its every-format and named-format tests; the format matrix is
# untimed). Where a call is limited to 10 minutes, split it with test name filters (`tests gpu_matrix
# gpu_graph gpu_dependent`, then `tests gpu_long gpu_tile gpu_stream gpu_atomic gpu_split_k
# gpu_cluster gpu_batch`, then `tests gpu_every gpu_named gpu_scale`, then `tests gpu_format_matrix`). `sanitize` takes
# a few minutes on a warm cache, more on a cold one.
set -uo pipefail
out="${OUT:-gpu-out}"; mkdir -p "$out"
what="${1:-all}"
[ $# -gt 0 ] && shift
filters=("$@")
export HUMMING_CACHE_DIR=/tmp/humming-cache
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$out/gpu.txt"
rc=0
# gpu_graph_replay runs alone, after the others: it captures a CUDA graph, which other tests'
# device-wide work in the same process (context set-up, module loads) could disturb; and a kernel
# that left a split-K ticket or lock word set would hang its replays, under `timeout` here.
graph_test=gpu_graph_replay
run_tests() {
  local want_graph=0 f
  [ ${#filters[@]} -eq 0 ] && want_graph=1
  for f in "${filters[@]}"; do [[ "$graph_test" == *"$f"* ]] && want_graph=1; done
  for t in .gpu/gpu_*-*; do
    [ -x "$t" ] || continue
    echo "== $t"
    "$t" --test-threads="$(nproc)" --nocapture "${filters[@]}" --skip "$graph_test" 2>&1 | tee -a "$out/gpu-tests.log" | grep -E "passed|FAILED|panicked|error|skipped|test result" ; s=${PIPESTATUS[0]}
    [ "$s" = 0 ] || rc=1
    if [ "$want_graph" = 1 ] && "$t" --list 2>/dev/null | grep -q "^$graph_test: test"; then
      timeout 300 "$t" --test-threads=1 --nocapture --exact "$graph_test" 2>&1 | tee -a "$out/gpu-tests.log" | grep -E "passed|FAILED|panicked|error|skipped|test result|$graph_test:" ; s=${PIPESTATUS[0]}
      [ "$s" = 0 ] || { echo "gpu-run: $graph_test exit $s (124: timed out)"; rc=1; }
    fi
  done
}
sanitize() {
  for t in .gpu/gpu_*-*; do
    [ -x "$t" ] || continue
    echo "== compute-sanitizer memcheck of $t (reduced set: every test, HUMMING_GPU_QUICK=1)"
    # Tests in parallel: one at a time, the suite takes far longer under the sanitizer.
    HUMMING_GPU_QUICK=1 compute-sanitizer --tool memcheck --error-exitcode 9 "$t" --test-threads=8 --nocapture 2>&1 \
      | tee -a "$out/sanitizer.log" | tail -n 15; s=${PIPESTATUS[0]}
    [ "$s" = 0 ] || rc=1
  done
}
# Shared-memory races and barrier misuse (racecheck, synccheck) on the tests that reach the split-K
# tails, the staged epilogue and the shared-memory sum of two K-warpgroups (quick set; racecheck is
# slow, so not every test): the reductions (gpu_reductions) and six tile kinds (gpu_correctness).
races() {
  for tool in racecheck synccheck; do
    for spec in "gpu_reductions gpu_cluster_split_k gpu_stream_k gpu_atomic_split_k gpu_split_k_partials_beyond_f16" \
                "gpu_correctness gpu_tile_kind_3 gpu_tile_kind_7 gpu_tile_kind_11 gpu_tile_kind_13 gpu_tile_kind_16 gpu_tile_kind_17"; do
      set -- $spec
      t=$(ls .gpu/"$1"-* | head -n 1); shift
      echo "== compute-sanitizer $tool of $t ($*, HUMMING_GPU_QUICK=1)"
      HUMMING_GPU_QUICK=1 compute-sanitizer --tool "$tool" --error-exitcode 9 "$t" --test-threads=1 --nocapture "$@" 2>&1 \
        | tee -a "$out/$tool.log" | tail -n 6; s=${PIPESTATUS[0]}
      [ "$s" = 0 ] || rc=1
    done
  done
}
case "$what" in
  tests) run_tests ;;
  sanitize) sanitize ;;
  races) races ;;
  all) run_tests; sanitize ;;
  *) echo "gpu-run: unknown mode $what (tests, sanitize, races or all)"; rc=2 ;;
esac
echo "gpu-run: exit $rc"
exit $rc
