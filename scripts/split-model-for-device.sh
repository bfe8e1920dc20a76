#!/usr/bin/env bash
# The SmolLM2 GGUF (98 MB) is larger than what one device call may carry (64 MiB with the binaries).
# This splits it into .m1/part00 and .m2/part01 (git-ignored). Carry ".m1" in one call and ".m2" (with
# ".gpu") in the next, issued at once while the machine is still warm (it keeps ignored paths between
# calls), then there: cat .m1/part00 .m2/part01 > /tmp/m.gguf && .gpu/smollm2 /tmp/m.gguf
set -euo pipefail
cd "$(dirname "$0")/.."
gguf="$(scripts/fetch-smollm2.sh)"
rm -rf .m1 .m2 && mkdir -p .m1 .m2
split -b 50M -d "$gguf" .m1/part
mv .m1/part01 .m2/
sha256sum "$gguf" | cut -d' ' -f1 > .m2/sha256
ls -la .m1 .m2
