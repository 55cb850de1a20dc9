#!/usr/bin/env bash
# Installs what is missing, configures and builds into build/. Extra arguments go to cmake --build.
# ARCLIGHT_TORCH picks the LibTorch: empty for Debian's (CPU only, the default here), "python" for the one of
# python3's torch (a CUDA wheel on a GPU machine or login node), or the directory of an unpacked LibTorch zip.
# NCCL and the CUDA toolkit come from /usr/local/cuda, or from CUDAToolkit_ROOT / NCCL_LIBRARY given to cmake.
# ARCLIGHT_SETUP=0 leaves the packages alone (a login node without sudo whose modules provide them; setup.sh also
# installs what the tests need: a local Slurm, munge, python3-torch).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
[ "${ARCLIGHT_SETUP:-1}" = 0 ] || bash "$root/scripts/setup.sh"
torch=()
case "${ARCLIGHT_TORCH:-}" in
  "") ;;
  python) torch=(-DCMAKE_PREFIX_PATH="$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')") ;;
  *) torch=(-DCMAKE_PREFIX_PATH="$(cd "$ARCLIGHT_TORCH" && pwd)") ;;
esac
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" "${torch[@]}" >/dev/null
cmake --build "$root/build" -j"$(nproc)" "$@"
