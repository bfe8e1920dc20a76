#!/usr/bin/env bash
# Contributor aid for refactors of the CUDA headers or the code generator (no GPU needed): compiles a
# fixed set of kernel declarations for sm_90a and sm_80 with the pinned NVCC and writes each entry
# point's SASS (addresses and encodings stripped) and ptxas report into OUTDIR. Two snapshots taken
# before and after a change show, with `diff -r`, whether any kernel's machine code changed.
#   dev/sass-snapshot.sh OUTDIR [declaration ...]
# Needs cuobjdump (pip: nvidia-cuda-cuobjdump) on PATH or in $CUOBJDUMP.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: dev/sass-snapshot.sh OUTDIR [\"<gemm! fields>\" ...]" >&2; exit 2; }
out="$1"; shift
decls=("$@")
if [ ${#decls[@]} -eq 0 ]; then
  decls=(
    "a: f16, b: i4, scale: group(128)"
    "a: bf16, b: u4, scale: group(128), zero_point: int"
    "a: f16, b: u3, scale: group(64), zero_point: float"
    "a: f16, b: u8, scale: channel, bias: true, epilogue: silu"
    "a: bf16, b: i2, scale: group(32)"
    "a: f16, b: u4, scale: channel"
  )
fi
. scripts/cuda-env.sh
cuobjdump="${CUOBJDUMP:-$(command -v cuobjdump || true)}"
[ -n "$cuobjdump" ] || { echo "sass-snapshot: cuobjdump not found (pip install nvidia-cuda-cuobjdump; set CUOBJDUMP)" >&2; exit 2; }
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cargo build -q --example emit
emit=target/debug/examples/emit
i=0
for d in "${decls[@]}"; do
  "$emit" "$d" --headers "$work/include" > "$work/k$i.cu"
  for arch in sm_90a sm_80; do
    (
      "$NVCC" -cubin -arch="$arch" -std=c++17 -O3 -I"$work/include" -Xptxas -v "$work/k$i.cu" \
        -o "$work/k${i}_$arch.cubin" 2> "$work/k${i}_$arch.ptxas"
      grep -E "Used|spill" "$work/k${i}_$arch.ptxas" | sed -E 's/ptxas info +: //' > "$out/k${i}_$arch.ptxas"
      "$cuobjdump" -sass "$work/k${i}_$arch.cubin" \
        | sed -E -e 's#/\*[0-9a-f]{4,}\*/##' -e 's#/\* 0x[0-9a-f]+ \*/##' -e '/^\s*$/d' \
        > "$out/k${i}_$arch.sass"
    ) &
  done
  wait
  echo "$d" > "$out/k$i.decl"
  i=$((i + 1))
done
echo "sass-snapshot: $i declarations in $out"
