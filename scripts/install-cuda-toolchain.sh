#!/usr/bin/env bash
# Installs a pinned CUDA 13.0 compiler (nvcc 13.0.88) from PyPI wheels into a cache folder, so that
# the build can compile kernels ahead of time on a machine with no GPU and no system CUDA.
#
#   scripts/install-cuda-toolchain.sh          # installs (once) and prints the CUDA_HOME to use
#   eval "$(scripts/install-cuda-toolchain.sh --env)"   # installs and exports CUDA_HOME / NVCC, and puts
#                                                      # its libnvrtc on LD_LIBRARY_PATH (run-time compilation)
#
# Folder: $HUMMING_TOOLCHAIN_DIR, default ~/.cache/humming/toolchain/cuda-13.0.88.
# The pins matter: an unpinned nvidia-nvvm pulls a newer cicc whose PTX the 13.0 ptxas rejects, and
# without nvidia-cuda-cccl cuda_fp16.h fails on nv/target.
set -euo pipefail
dir="${HUMMING_TOOLCHAIN_DIR:-$HOME/.cache/humming/toolchain/cuda-13.0.88}"
want_env=0
[ "${1:-}" = "--env" ] && want_env=1
find_root() { ls -d "$dir"/venv/lib/python3*/site-packages/nvidia/cu13 2>/dev/null | head -n 1; }
root="$(find_root || true)"
if [ -z "$root" ] || [ ! -x "$root/bin/nvcc" ]; then
  echo "installing nvcc 13.0.88 from PyPI into $dir (about 520 MB on disk, once)" >&2
  mkdir -p "$dir"
  python3 -m venv "$dir/venv"
  "$dir/venv/bin/python" -m pip install -q --disable-pip-version-check \
    nvidia-cuda-nvcc==13.0.88 nvidia-nvvm==13.0.88 nvidia-cuda-crt==13.0.88 \
    nvidia-cuda-runtime==13.0.96 nvidia-cuda-cccl==13.0.85 nvidia-cuda-nvrtc==13.0.88 >&2
  root="$(find_root)"
fi
"$root/bin/nvcc" --version >/dev/null
if [ "$want_env" = 1 ]; then
  echo "export CUDA_HOME='$root'; export NVCC='$root/bin/nvcc'; export LD_LIBRARY_PATH='$root/lib'\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH};"
else
  echo "$root"
fi
