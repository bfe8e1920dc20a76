#!/usr/bin/env bash
# Development aid (no GPU needed): compiles one kernel declaration with the pinned NVCC and prints, for
# one tile, its registers and the SASS instruction mix of its main K loop (the innermost loop that
# issues mma instructions), per iteration and thread.
#   scripts/sass.sh "a: f16, b: i4, scale: group(128)" [tile index, default 0] [arch, default sm_90a]
# Needs cuobjdump (pip: nvidia-cuda-cuobjdump) on PATH or in $CUOBJDUMP. Files in /tmp/humming-sass.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 1 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
  echo "usage: scripts/sass.sh \"<gemm! fields>\" [tile index, default 0] [arch, default sm_90a]" >&2
  echo "  e.g. scripts/sass.sh \"a: f16, b: i4, scale: group(128)\" 0" >&2
  exit 2
fi
fields="$1"; tile="${2:-0}"; arch="${3:-sm_90a}"
. scripts/cuda-env.sh
cuobjdump="${CUOBJDUMP:-$(command -v cuobjdump || true)}"
[ -n "$cuobjdump" ] || { echo "sass.sh: cuobjdump not found (pip install nvidia-cuda-cuobjdump; set CUOBJDUMP)" >&2; exit 2; }
d=/tmp/humming-sass; mkdir -p "$d"
cargo run -q --example emit -- "$fields" --headers "$d/include" > "$d/k.cu"
"$NVCC" -cubin -arch="$arch" -std=c++17 -O3 -I"$d/include" -Xptxas -v "$d/k.cu" -o "$d/k.cubin" 2> "$d/ptxas.log"
"$cuobjdump" -sass "$d/k.cubin" > "$d/k.sass"
python3 - "$d/k.sass" "$tile" "$d/ptxas.log" <<'PY'
import re, sys, collections
text = open(sys.argv[1]).read()
funcs = re.split(r"\n\s+Function : ", text)[1:]
funcs = {f.split("\n", 1)[0].strip(): f for f in funcs}
names = sorted(n for n in funcs if re.search(r"_t\d+$", n))
match = [n for n in names if n.endswith("_t" + sys.argv[2])]
if not match:
    sys.exit(f"sass.sh: no tile {sys.argv[2]}; this kernel has tiles " + ", ".join(n.rsplit("_t", 1)[1] for n in names))
name = match[0]
# The ptxas report of this entry point (stack/spills, registers).
log = open(sys.argv[3]).read()
m = re.search(r"Compiling entry function '" + re.escape(name) + r"'.*?\n.*?\n(.*?)\n(.*?Used.*?)\n", log, re.S)
if m:
    print(m.group(1).strip())
    print(m.group(2).replace("ptxas info    : ", "").strip())
ins = []
for line in funcs[name].split("\n"):
    m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
    if m:
        ins.append((int(m.group(1), 16), m.group(2)))
# The main K loop: the innermost loop (backward branch) whose body issues tensor-core instructions.
loops = []
for addr, txt in ins:
    t = re.search(r"0x([0-9a-f]+)", txt) if "BRA" in txt else None
    if t and int(t.group(1), 16) < addr:
        body = [x for a, x in ins if int(t.group(1), 16) <= a <= addr]
        if any(re.search(r"\b(HMMA|HGMMA|IMMA)", x) for x in body):
            loops.append((int(t.group(1), 16), addr, body))
if not loops:
    sys.exit("sass.sh: no loop with mma instructions found")
start, end, body = min(loops, key=lambda l: l[1] - l[0])
ops = collections.Counter(re.sub(r"^@!?U?P\w+\s+", "", t).split()[0].split(".")[0] for t in body)
print(f"{name}: main loop 0x{start:x}..0x{end:x}, {len(body)} instructions per iteration")
print("  " + ", ".join(f"{k} {v}" for k, v in ops.most_common()))
PY
