#!/usr/bin/env bash
# Builds dev/persistent_probe.cu here (the GPU machine has no Rust to write abi.cuh) into .gpu/probe,
# with the headers the emit example writes, and prints each probe kernel's registers and spills from
# its SASS when cuobjdump (and nvdisasm) are on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/cuda-env.sh
inc=target/persistent-probe-include
cargo run -q --example emit -- "a: e4m3, b: e4m3, c: bf16, scale: channel(f32), arch: [sm_90a]" --headers "$inc" >/dev/null
mkdir -p .gpu
"$NVCC" -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I"$inc" -Idev dev/persistent_probe.cu -o .gpu/probe \
  -diag-suppress 39 -L"$CUDA_HOME/lib" -Xcompiler -Wno-deprecated-declarations
command -v cuobjdump >/dev/null || exit 0
cuobjdump -sass .gpu/probe | python3 -c '
import re, sys
for f in re.split(r"\n\s*Function : ", sys.stdin.read())[1:]:
    m = re.search(r"PersistentTileILi(\d+)ELi(\d+)ELi(\d+)ELi(\d+)", f.split("\n")[0])
    if not m: continue
    regs = [int(x) for x in re.findall(r"\bR(\d+)\b", f)]
    print("x".join(m.groups()), "max register", max(regs), "STL", f.count("STL"), "GMMA", len(re.findall("GMMA", f)))'
