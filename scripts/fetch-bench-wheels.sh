#!/usr/bin/env bash
# Downloads, here (a machine that reaches PyPI), the Python wheels that scripts/bench-h200.sh installs
# on the GPU machine (which reaches no registry): the reference implementation humming-kernels 0.1.20,
# for CPython 3.12 on x86-64 Linux (the GPU image's python3). Torch, the wheel's only heavy need, is
# already on the GPU machine, so nothing else is fetched (--no-deps); the script prints the wheel's
# declared requirements so that a missing one can be spotted.
#
#   scripts/fetch-bench-wheels.sh        # -> .whl/ (git-ignored), then carry ".whl" and ".gpu"
set -euo pipefail
cd "$(dirname "$0")/.."
version="${HUMMING_KERNELS_VERSION:-0.1.20}"
mkdir -p .whl
if ! ls .whl/humming_kernels-"$version"-*.whl >/dev/null 2>&1; then
  python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d .whl "humming-kernels==$version"
fi
for w in .whl/*.whl; do
  echo "$w ($(du -h "$w" | cut -f1))"
  python3 - "$w" <<'PY'
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
meta = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
for line in z.read(meta[0]).decode().splitlines() if meta else []:
    if line.startswith("Requires-Dist") and "extra ==" not in line:
        print("  needs", line.split(":", 1)[1].strip())
PY
done
