#!/usr/bin/env bash
# Cuts a real model's GGUF into parts that fit what one device call may carry (64 MiB with the working
# tree and the binaries). The machine keeps ignored paths between calls while it is warm (30 s after a
# call), so issue the calls back to back, e.g. all in one batch.
#
#   scripts/split-model-for-device.sh            # SmolLM2 (98 MB)
#   scripts/split-model-for-device.sh gemma3     # Gemma-3-270M (253 MB)
#
# SmolLM2: .m1/part00 and .m2/part01 (git-ignored; .m1 and .m2 are removed first). Carry ".m1" in one
# call and ".m2" (with ".gpu") in the next, then there:
#   cat .m1/part00 .m2/part01 > /tmp/m.gguf && .gpu/smollm2 /tmp/m.gguf
#
# Gemma-3: xz-compressed (253 MB -> 238 MB) and cut into 60 MiB parts .m1/gemma3/xz.part00..03, with the
# SHA-256 of the GGUF in .m1/gemma3/sha256 (.m1/gemma3 is removed first). Carry ".m1/gemma3/xz.part00",
# then ".m1/gemma3/xz.part01", then ".m1/gemma3/xz.part02" (any command, e.g. `ls -la .m1/gemma3`),
# then ".m1/gemma3/xz.part03", ".m1/gemma3/sha256" and ".gpu/gemma3" with:
#   cat .m1/gemma3/xz.part* | xz -dc > /tmp/g.gguf && echo "$(cat .m1/gemma3/sha256)  /tmp/g.gguf" \
#     | sha256sum -c && .gpu/gemma3 /tmp/g.gguf
# (where xz is missing: python3 -c 'import lzma,sys; sys.stdout.buffer.write(lzma.decompress(
#  sys.stdin.buffer.read()))' in its place). Compressing takes about a minute on two cores.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-smollm2}" in
  smollm2)
    gguf="$(scripts/fetch-smollm2.sh)"
    rm -rf .m1 .m2 && mkdir -p .m1 .m2
    split -b 50M -d "$gguf" .m1/part
    mv .m1/part01 .m2/
    sha256sum "$gguf" | cut -d' ' -f1 > .m2/sha256
    ls -la .m1 .m2
    ;;
  gemma3)
    gguf="$(scripts/fetch-gemma3.sh)"
    rm -rf .m1/gemma3 && mkdir -p .m1/gemma3
    xz -T0 -6 -c "$gguf" | split -b 60M -d - .m1/gemma3/xz.part
    sha256sum "$gguf" | cut -d' ' -f1 > .m1/gemma3/sha256
    ls -la .m1/gemma3
    ;;
  *)
    echo "usage: scripts/split-model-for-device.sh [smollm2|gemma3]" >&2
    exit 2
    ;;
esac
