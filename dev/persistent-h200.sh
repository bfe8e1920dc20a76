#!/usr/bin/env bash
# On the H200 (device tool; carry .gpu, with .gpu/probe from dev/build-persistent-probe.sh): the
# persistent probe's tail cases, under compute-sanitizer, its timing over the three shapes,
# and torch._scaled_mm on the same shapes. Logs under $OUT.
#   bash dev/persistent-h200.sh [what] [Ms] [shapes]
set -uo pipefail
out="${OUT:-gpu-out}"; mkdir -p "$out"
what="${1:-all}"; ms="${2:-16,64,256,1024,4096}"; shapes="${3:-8192x8192,28672x4096,4096x14336}"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
if ! timeout 30 .gpu/probe tails > "$out/tails.log" 2>&1; then
  echo "tails failed or hung"; cat "$out/tails.log"; exit 1
fi
grep -E "FAIL|err=" "$out/tails.log" | awk '{print $1, $2, $3, $9, $10, $NF}'
if [ "${SANITIZE:-1}" = 1 ]; then
  for tool in memcheck racecheck synccheck; do
    timeout 90 compute-sanitizer --tool $tool .gpu/probe tails > "$out/sanitizer-$tool.log" 2>&1
    echo "$tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitizer-$tool.log" | tail -1)"
  done
fi
timeout 300 .gpu/probe "$what" "$ms" "$shapes" 2>&1 | grep -v "M=   77\|plain-store" | tee "$out/probe.log"
[ "${ANCHOR:-1}" = 1 ] && timeout 120 python3 dev/scaled_mm_anchor.py "$ms" "$shapes" 2>&1 | tee "$out/scaled_mm.log"
exit 0
