#!/usr/bin/env bash
# On the H200 (device tool; carry .gpu-pack holding gpu.tar.xz from dev/pack-persistent.sh): one
# build-check-time cycle of the persistent kernel. Unpacks the binaries, then runs the steps named in
# $STEPS (default all, in this order), each log under $OUT, and tars the logs into $OUT/logs.tar.xz.
#   tests   the runtime's persistent tests (tests/gpu_persistent.rs) and their sanitizers
#   probe   dev/persistent_probe.cu's tail cases and timings beside torch._scaled_mm ($PROBE_WHAT,
#           $PROBE_MS, $PROBE_SHAPES)
#   bench   examples/bench.rs on $BENCH_KERNELS over $BENCH_MS and the three shapes
#   ncu     one probe launch under ncu ($NCU_WHAT at M = $NCU_M on $NCU_SHAPE, the first tile the
#           probe times there, after its correctness launch and two warm-ups): stall reasons
set -uo pipefail
out="${OUT:-gpu-out}"; mkdir -p "$out"
steps="${STEPS:-tests probe bench ncu}"
mkdir -p .gpu; [ -f .gpu-pack/gpu.tar.xz ] && tar -C .gpu -xJf .gpu-pack/gpu.tar.xz
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
for step in $steps; do
  start=$(date +%s)
  case "$step" in
    tests) OUT="$out" timeout 420 bash scripts/act8-h200.sh persistent 2>&1 | tail -25 ;;
    probe) OUT="$out" SANITIZE="${PROBE_SANITIZE:-0}" timeout 400 bash dev/persistent-h200.sh "${PROBE_WHAT:-all}" \
             "${PROBE_MS:-256,1024,4096}" "${PROBE_SHAPES:-8192x8192,28672x4096,4096x14336}" 2>&1 | tail -60 ;;
    bench) timeout 500 .gpu/bench --kernels "${BENCH_KERNELS:-w8a8_fp8,w8a8_fp8_ss,w8a8_fp8_block_ss}" \
             --shapes "${BENCH_SHAPES:-8192x8192,28672x4096,4096x14336}" --ms "${BENCH_MS:-1,16,64,256,1024,4096}" \
             --out "$out/bench" > "$out/bench.log" 2>&1; echo "bench rc=$?"; grep -E "^(w4a|w8a)" "$out/bench.log" ;;
    ncu) PROBE_SKIP_TAILS=1 timeout 300 ncu --set full -k regex:probe_kernel -s 3 -c 1 -o "$out/ncu" .gpu/probe "${NCU_WHAT:-block}" \
           "${NCU_M:-4096}" "${NCU_SHAPE:-8192x8192}" > "$out/ncu-run.log" 2>&1
         ncu -i "$out/ncu.ncu-rep" --page details > "$out/ncu-details.txt" 2>&1
         ncu -i "$out/ncu.ncu-rep" --page source --csv --print-source sass > "$out/ncu-src.csv" 2>&1
         python3 dev/ncu-stalls.py "$out/ncu-src.csv" --top 20 > "$out/ncu-stalls.txt" 2>&1
         grep -E "Duration|Compute \(SM\) Throughput|L2 Cache Throughput|DRAM Throughput|Registers Per|Issue Slots Busy|No Eligible|Eligible Warps" "$out/ncu-details.txt" | head -20
         head -30 "$out/ncu-stalls.txt" ;;
  esac
  echo "== $step: $(( $(date +%s) - start )) s"
done
tar -C "$out" -cJf "$out/logs.tar.xz" --exclude=logs.tar.xz --exclude='*.ncu-rep' . 2>/dev/null
exit 0
