#!/usr/bin/env bash
# Development aid, run on the GPU machine with .gpu carried (scripts/build-gpu-bins.sh here): one ncu
# report per (shape, M) of the kernel `gemm.run` launches for the W4A16 format (or --format), through
# .gpu/tune, so each report is one launch after tune's warm-up (cold L2: ncu flushes caches between
# passes). Reports (text) and a summary of the headline metrics go to $OUT (else ./profile-out).
#   bash scripts/profile-h200.sh [--shapes 8192x8192,4096x4096] [--ms 1,16] [--tiles "..."]
#                                [--format "a: f16, b: i4, scale: group(128)"] [--sections "A B"]
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-profile-out}"
mkdir -p "$out"
shapes=8192x8192,4096x4096
ms=1,16
tiles=""
format="a: f16, b: i4, scale: group(128)"
sections="SpeedOfLight SchedulerStats WarpStateStats LaunchStats Occupancy"
while [ $# -gt 0 ]; do
  case "$1" in
    --shapes) shapes="$2"; shift 2 ;;
    --ms) ms="$2"; shift 2 ;;
    --tiles) tiles="$2"; shift 2 ;;
    --format) format="$2"; shift 2 ;;
    --sections) sections="$2"; shift 2 ;;
    *) echo "profile-h200: unknown argument $1" >&2; exit 2 ;;
  esac
done
export HUMMING_CACHE_DIR=/tmp/humming-cache
secs=()
for s in $sections; do secs+=(--section "$s"); done
metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active
for shape in ${shapes//,/ }; do
  for m in ${ms//,/ }; do
    f="$out/ncu_${shape}_m${m}.txt"
    # tune: 3 warm-up launches before its graph; profile the third (caches flushed by ncu anyway).
    ncu --clock-control none -k regex:humming -s 2 -c 1 "${secs[@]}" --metrics "$metrics" \
      .gpu/tune --format "$format" --tiles "$tiles" --shapes "$shape" --ms "$m" >"$f" 2>&1
    echo "== $shape M=$m: $(grep -m1 -oE 'tune +b[^ ]+' "$f" || true)"
    grep -E "gpu__time_duration.sum|dram__bytes_read.sum|dram__throughput.avg.pct|smsp__inst_executed.sum|issue_active|Grid Size|Block Size|Registers Per|Achieved Occupancy|Theoretical Occupancy|Active Warps Per Scheduler|Eligible Warps Per Scheduler|Warp Cycles Per Issued" "$f" | sed 's/^ */  /'
  done
done
