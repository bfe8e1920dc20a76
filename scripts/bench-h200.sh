#!/usr/bin/env bash
# The side-by-side benchmark, run on the GPU machine: our gemm! kernels (.gpu/bench: graph replay,
# weights rotated past the L2 cache, cuBLAS on the unquantized weights, copy bandwidth and DRAM floor)
# and the Python reference humming-kernels 0.1.20 (humming_py_bench.py) on the same shapes and M, one
# after the other in one run, then one merged table with ours / humming-kernels per case (printed last).
#
# Here (a machine with Rust and PyPI), first:
#   scripts/build-gpu-bins.sh        # .gpu/bench (and the tests), .gpu/humming_py_bench.py
#   scripts/fetch-bench-wheels.sh    # .whl/humming_kernels-0.1.20-*.whl (its needs are on the GPU image)
# There, from the repository root, with ".gpu" and ".whl" carried:
#   bash scripts/bench-h200.sh [--shapes 4096x4096,...] [--ms 1,8,...] [--kernels w4a16,...]
#                              [--only ours|reference|merge] [-- more .gpu/bench arguments]
# --only splits the work over several calls (each call's $OUT comes back; `merge` needs both JSONs in
# $OUT, so copy them back there first). Results in $OUT (else ./bench-out): bench.json, bench-*.svg,
# humming_py_bench.json, merged.md, merged.json, merged.svg and the logs.
#
# Note: our W4A16 (`w4a16`) is `b: i4` (symmetric), the format of humming-kernels' "uint4" (q - 8).
# humming_py_bench.py replays graphs of 20 launches over its copies; ours rounds the launches up to a
# whole number of turns through the copies (every reuse of a copy is a full turn apart).
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-bench-out}"
mkdir -p "$out"
shapes=4096x4096,8192x8192,28672x4096,4096x14336
ms=1,8,16,32,64,128,256
kernels=w4a16
only=all
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --shapes) shapes="$2"; shift 2 ;;
    --ms) ms="$2"; shift 2 ;;
    --kernels) kernels="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "bench-h200: unknown argument $1" >&2; exit 2 ;;
  esac
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

if want reference; then
  echo "== reference: humming-kernels (humming_py_bench.py uint4:128 $ms)"
  if [ ! -f .gpu/humming_py_bench.py ] || ! ls .whl/humming_kernels-*.whl >/dev/null 2>&1; then
    echo "no .gpu/humming_py_bench.py or .whl/humming_kernels-*.whl: run scripts/build-gpu-bins.sh and"
    echo "scripts/fetch-bench-wheels.sh here and carry .gpu and .whl"; rc=1
  elif python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/site .whl/humming_kernels-*.whl; then
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
    # The same shapes as ours (the script has them fixed): "4096x4096,8192x8192" -> (4096, 4096), (8192, 8192)
    py_shapes=$(echo "$shapes" | sed -E 's/([0-9]+)[xX]([0-9]+)/(\1, \2)/g')
    sed -E "s/^shapes = .*/shapes = [$py_shapes]/" .gpu/humming_py_bench.py >/tmp/humming_py_bench.py
    OUT="$out" python3 /tmp/humming_py_bench.py uint4:128 "$ms" 2>&1 | tee "$out/humming_py_bench.log"
    [ "${PIPESTATUS[0]}" = 0 ] || rc=1
  else
    echo "installing the humming-kernels wheel failed"; rc=1
  fi
fi

if want merge; then
  echo "== merged: ours vs humming-kernels"
  if [ -f "$out/bench.json" ] && [ -f "$out/humming_py_bench.json" ]; then
    .gpu/bench --from "$out/bench.json" --reference "$out/humming_py_bench.json" --out "$out" || rc=1
  else
    echo "need $out/bench.json and $out/humming_py_bench.json"; rc=1
  fi
fi
echo "bench-h200: exit $rc"
exit $rc
