# Sourced (`. scripts/cuda-env.sh`, from the repository root) by the scripts that need the pinned NVCC:
# installs it once (scripts/install-cuda-toolchain.sh) and exports CUDA_HOME, NVCC and the NVRTC
# library path. A failed install stops the calling script: `eval "$(...)"` alone would hide the
# failure under `set -e`. (scripts/main.sh, which goes on without NVCC, calls the installer itself.)
toolchain_env="$(scripts/install-cuda-toolchain.sh --env)" || { echo "$(basename "$0"): the CUDA toolchain install failed" >&2; exit 1; }
eval "$toolchain_env"
