#!/usr/bin/env bash
# Development aid (no GPU needed): compiles one kernel declaration for sm_90a with the pinned NVCC and
# prints, per tile, registers and the SASS instruction mix of its innermost loop (the main K loop).
#   scripts/sass.sh "a: f16, b: i4, scale: group(128)" [tile index] [arch]
# Needs cuobjdump (pip: nvidia-cuda-cuobjdump) on PATH or in $CUOBJDUMP. Files in /tmp/humming-sass.
set -euo pipefail
cd "$(dirname "$0")/.."
fields="$1"; tile="${2:-0}"; arch="${3:-sm_90a}"
eval "$(scripts/install-cuda-toolchain.sh --env)"
cuobjdump="${CUOBJDUMP:-$(command -v cuobjdump || true)}"
[ -n "$cuobjdump" ] || { echo "sass.sh: cuobjdump not found (pip install nvidia-cuda-cuobjdump; set CUOBJDUMP)" >&2; exit 2; }
d=/tmp/humming-sass; mkdir -p "$d"
cargo run -q --example emit -- "$fields" > "$d/k.cu"
"$NVCC" -cubin -arch="$arch" -std=c++17 -O3 -Icuda -Xptxas -v "$d/k.cu" -o "$d/k.cubin" 2> "$d/ptxas.log"
grep -E "registers|spill" "$d/ptxas.log" | sed 's/^ptxas info    : //'
"$cuobjdump" -sass "$d/k.cubin" > "$d/k.sass"
python3 - "$d/k.sass" "$tile" <<'PY'
import re, sys, collections
text = open(sys.argv[1]).read()
funcs = re.split(r"\n\s+Function : ", text)[1:]
funcs = {f.split("\n", 1)[0].strip(): f for f in funcs}
name = [n for n in funcs if n.endswith("_t" + sys.argv[2])][0]
ins = []
for line in funcs[name].split("\n"):
    m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
    if m: ins.append((int(m.group(1), 16), m.group(2)))
# Loops: backward branches; report the largest body without a nested backward branch.
loops = []
for addr, txt in ins:
    m = re.search(r"BRA\s+(?:`?\(?\.L_x_\d+\)?|0x([0-9a-f]+))", txt)
    t = re.search(r"0x([0-9a-f]+)", txt) if "BRA" in txt else None
    if t and int(t.group(1), 16) < addr: loops.append((int(t.group(1), 16), addr))
if not loops: print("no loop found"); sys.exit()
start, end = max(loops, key=lambda l: l[1] - l[0])
body = [t for a, t in ins if start <= a <= end]
ops = collections.Counter(re.sub(r"^@!?U?P\w+\s+", "", t).split()[0].split(".")[0] for t in body)
print(f"{name}: loop 0x{start:x}..0x{end:x}, {len(body)} instructions")
print("  " + ", ".join(f"{k} {v}" for k, v in ops.most_common()))
PY
