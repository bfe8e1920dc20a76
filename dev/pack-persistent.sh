#!/usr/bin/env bash
# Packs, here, what dev/persistent-cycle.sh runs on the H200 into .gpu-pack/gpu.tar.xz (carry ".gpu-pack"): the
# persistent tests, the bench example and the probe (dev/build-persistent-probe.sh), built beforehand.
set -euo pipefail
cd "$(dirname "$0")/.."
stage=$(mktemp -d)
newest() { ls -t $1 2>/dev/null | grep -v '\.d$' | head -1; }
cp "$(newest 'target/release/deps/gpu_persistent-*')" "$stage/"
act8="$(newest 'target/release/deps/gpu_act8-*')"; [ -n "$act8" ] && cp "$act8" "$stage/"
cp target/release/examples/bench "$stage/"
cp .gpu/probe "$stage/"
# Other builds' benches for dev/w4a8-h200.sh's A/B: AB_BENCHES="name=path name=path".
for nb in ${AB_BENCHES:-}; do mkdir -p "$stage/ab/${nb%%=*}" && cp "${nb#*=}" "$stage/ab/${nb%%=*}/bench"; done
[ -f .gpu/humming_py_bench_ext.py ] && cp .gpu/humming_py_bench_ext.py "$stage/"
mkdir -p .gpu-pack; rm -f .gpu-pack/gpu.tar.xz
tar -C "$stage" -cJf .gpu-pack/gpu.tar.xz .
rm -rf "$stage"
ls -la .gpu-pack/gpu.tar.xz
