#!/usr/bin/env bash
# The side-by-side benchmark, run on the GPU machine: our gemm! kernels (.gpu/bench: graph replay,
# weights rotated past the L2 cache, cuBLAS on the unquantized weights, copy bandwidth and DRAM floor)
# and the Python reference humming-kernels 0.1.20 (scripts/humming-kernels-bench.py: the same method,
# with torch.matmul as its cuBLAS) on the same shapes and M, one after the other in one run, then one
# merged table with ours / humming-kernels per case (printed last).
#
# Here (a machine with Rust and PyPI), first:
#   scripts/build-gpu-bins.sh        # .gpu/bench (and the tests)
#   scripts/fetch-bench-wheels.sh    # .whl/humming_kernels-0.1.20-*.whl (its needs are on the GPU image)
# There, from the repository root, with ".gpu" and ".whl" carried:
#   bash scripts/bench-h200.sh [--shapes 4096x4096,...] [--ms 1,8,...] [--kernels w4a16,...]
#                              [--only ours|reference|merge] [--reference-script PATH]
#                              [-- more .gpu/bench arguments]
#   bash scripts/bench-h200.sh --float    # the float-weight formats and Q4_K: the same as
#       --kernels w8a16_e4m3,mxfp4,nvfp4,mxfp8,mxfp6,q4_k --shapes 8192x8192,4096x4096 --ms 1,16,64,256,1024
#       (--shapes, --ms or --kernels given as well override the preset's)
#   bash scripts/bench-h200.sh --moe [--models qwen3_30b_a3b,deepseek_v3] [--ms 1,16,128,1024]
#       # the moe_indexed W4A16 GEMM and its routing helper (.gpu/bench_moe) against humming-kernels'
#       # indexed MoE (scripts/humming-kernels-moe-bench.py), merged into merged_moe.md; --only and
#       # --reference-script work the same (the script must write humming_moe_bench.json)
# --only splits the work over several calls (each call's $OUT comes back; `merge` needs both JSONs in
# $OUT, so copy them back there first). --reference-script runs another script in place of
# scripts/humming-kernels-bench.py; it is called the same way (python3 PATH --shapes S --ms M
# --formats F --out DIR, with OUT=DIR in its environment) and must write DIR/humming_py_bench.json
# in the same JSON contract (the reader is `merge` in examples/bench.rs). Results in $OUT (else
# ./bench-out): bench.json, bench-*.svg, humming_py_bench.json, merged.md, merged.json, merged.svg and
# the logs (with --moe: bench_moe.json, humming_moe_bench.json, merged_moe.md, merged_moe.json and the
# logs).
#
# The reference step runs the formats of --kernels by our names (--formats w4a16,mxfp4,...; the script
# takes them): our W4A16 (`w4a16`) is `b: i4` (symmetric), the format of humming-kernels' "uint4"
# (q - 8), group 128, and `w4a16-u4` is compared with that row too; `w8a16_e4m3`, `mxfp4`, `nvfp4`,
# `mxfp8`, `mxfp6` are humming-kernels' formats of those names. `w4a16-bf16` (humming-kernels runs
# fp16 only) and `q4_k` (GGUF Q4_K, no humming-kernels counterpart) have no reference rows: the merged
# table compares them with cuBLAS and the floor only. Both sides add copies of the
# weights until they hold more than 512 MiB (at least 2, at most 16 copies) and replay graphs of at
# least 20 launches, rounded up to a whole number of turns through the copies (every reuse of a copy
# is a full turn apart).
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-bench-out}"
mkdir -p "$out"
shapes=
ms=
kernels=
float=0
moe=0
models=
only=all
ref_script=
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --shapes) shapes="$2"; shift 2 ;;
    --ms) ms="$2"; shift 2 ;;
    --kernels) kernels="$2"; shift 2 ;;
    --float) float=1; shift ;;
    --moe) moe=1; shift ;;
    --models) models="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    --reference-script) ref_script="$2"; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "bench-h200: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [ "$moe" = 1 ]; then
  if [ -n "$shapes$kernels" ] || [ "$float" = 1 ]; then
    echo "bench-h200: --moe takes --models and --ms, not --shapes, --kernels or --float" >&2; exit 2
  fi
  : "${ms:=1,16,128,1024}" "${models:=qwen3_30b_a3b,deepseek_v3}"
  : "${ref_script:=scripts/humming-kernels-moe-bench.py}"
elif [ -n "$models" ]; then
  echo "bench-h200: --models goes with --moe" >&2; exit 2
fi
: "${ref_script:=scripts/humming-kernels-bench.py}"
if [ "$float" = 1 ]; then
  : "${shapes:=8192x8192,4096x4096}" "${ms:=1,16,64,256,1024}"
  : "${kernels:=w8a16_e4m3,mxfp4,nvfp4,mxfp8,mxfp6,q4_k}"
fi
: "${shapes:=4096x4096,8192x8192,28672x4096,4096x14336}" "${ms:=1,8,16,32,64,128,256}" "${kernels:=w4a16}"
# The reference's formats, by our kernel names: w4a16-u4 is compared with w4a16's "uint4" row;
# w4a16-bf16 and q4_k have none.
formats=
for kern in ${kernels//,/ }; do
  case "$kern" in
    w4a16-bf16 | q4_k) continue ;;
    w4a16-u4) f=w4a16 ;;
    *) f="$kern" ;;
  esac
  case ",$formats," in *",$f,"*) ;; *) formats="${formats:+$formats,}$f" ;; esac
done
want() { [ "$only" = all ] || [ "$only" = "$1" ]; }
export HUMMING_CACHE_DIR=/tmp/humming-cache
export PYTHONUNBUFFERED=1
rc=0
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$out/gpu.txt"

# cudarc opens libcublas with dlopen: when the loader does not know it, add the CUDA toolkit's folder
# or the one in PyTorch's nvidia-cublas package.
if ! ldconfig -p 2>/dev/null | grep -q 'libcublas\.so'; then
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
    $(python3 -c 'import glob, site
for s in site.getsitepackages(): print("\n".join(glob.glob(s + "/nvidia/*/lib")))' 2>/dev/null); do
    if ls "$d"/libcublas.so* >/dev/null 2>&1; then
      export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d"
      echo "libcublas from $d"
      break
    fi
  done
fi

# Installs the humming-kernels wheel of .whl/ on PYTHONPATH, else takes the one python3 imports;
# fails (with the reason) where there is neither.
reference_ready() {
  if ls .whl/humming_kernels-*.whl >/dev/null 2>&1; then
    if python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/humming_kernels-*.whl; then
      export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
    else
      echo "installing the humming-kernels wheel failed"; return 1
    fi
  elif python3 -c 'import humming' >/dev/null 2>&1; then
    echo "no .whl/humming_kernels-*.whl: using the humming-kernels that python3 already imports"
  else
    echo "no .whl/humming_kernels-*.whl and python3 cannot import humming: run"
    echo "scripts/fetch-bench-wheels.sh here and carry .whl"; return 1
  fi
}

if [ "$moe" = 1 ]; then
  if want ours; then
    echo "== ours: .gpu/bench_moe --models $models --ms $ms"
    if [ -x .gpu/bench_moe ]; then
      .gpu/bench_moe --models "$models" --ms "$ms" --out "$out" "${extra[@]}" 2>&1 | tee "$out/bench_moe.log"
      [ "${PIPESTATUS[0]}" = 0 ] || rc=1
    else
      echo "no .gpu/bench_moe: run scripts/build-gpu-bins.sh here and carry .gpu"; rc=1
    fi
  fi
  if want reference; then
    echo "== reference: humming-kernels ($ref_script --models $models --ms $ms)"
    if [ ! -f "$ref_script" ]; then
      echo "no reference script $ref_script"; rc=1
    elif reference_ready; then
      OUT="$out" python3 "$ref_script" --models "$models" --ms "$ms" --out "$out" 2>&1 \
        | tee "$out/humming_moe_bench.log"
      [ "${PIPESTATUS[0]}" = 0 ] || rc=1
    else
      rc=1
    fi
  fi
  if want merge; then
    echo "== merged: ours vs humming-kernels (MoE)"
    if [ -f "$out/bench_moe.json" ] && [ -f "$out/humming_moe_bench.json" ]; then
      .gpu/bench_moe --from "$out/bench_moe.json" --reference "$out/humming_moe_bench.json" --out "$out" || rc=1
    else
      echo "need $out/bench_moe.json and $out/humming_moe_bench.json"; rc=1
    fi
  fi
  echo "bench-h200: exit $rc"
  exit $rc
fi

if want ours; then
  echo "== ours: .gpu/bench --shapes $shapes --ms $ms --kernels $kernels"
  if [ -x .gpu/bench ]; then
    .gpu/bench --shapes "$shapes" --ms "$ms" --kernels "$kernels" --out "$out" "${extra[@]}" 2>&1 \
      | tee "$out/bench.log"
    [ "${PIPESTATUS[0]}" = 0 ] || rc=1
  else
    echo "no .gpu/bench: run scripts/build-gpu-bins.sh here and carry .gpu"; rc=1
  fi
fi

if want reference && [ -z "$formats" ]; then
  echo "== reference: none of --kernels $kernels has a humming-kernels counterpart"
elif want reference; then
  echo "== reference: humming-kernels ($ref_script --shapes $shapes --ms $ms --formats $formats)"
  ref_ok=1
  if [ ! -f "$ref_script" ]; then
    echo "no reference script $ref_script"; ref_ok=0
  elif ! reference_ready; then
    ref_ok=0
  fi
  if [ "$ref_ok" = 1 ]; then
    OUT="$out" python3 "$ref_script" --shapes "$shapes" --ms "$ms" --formats "$formats" --out "$out" 2>&1 \
      | tee "$out/humming_py_bench.log"
    [ "${PIPESTATUS[0]}" = 0 ] || rc=1
  else
    rc=1
  fi
fi

if want merge && [ -z "$formats" ]; then
  echo "== merged: nothing to merge (no humming-kernels run for --kernels $kernels)"
elif want merge; then
  echo "== merged: ours vs humming-kernels"
  if [ -f "$out/bench.json" ] && [ -f "$out/humming_py_bench.json" ]; then
    .gpu/bench --from "$out/bench.json" --reference "$out/humming_py_bench.json" --out "$out" || rc=1
  else
    echo "need $out/bench.json and $out/humming_py_bench.json"; rc=1
  fi
fi
echo "bench-h200: exit $rc"
exit $rc
