#!/usr/bin/env bash
# Installs every Debian package that building, testing and the demo need.
# Idempotent: when everything is present it only checks, quickly and quietly.
set -euo pipefail

packages=(
  build-essential cmake pkg-config git
  openmpi-bin libopenmpi-dev
  libhdf5-openmpi-dev hdf5-tools
  libcli11-dev
  libboost-test-dev
  # the episode batcher runs each episode on a stack of its own (fibers)
  libboost-context-dev
  libtorch-dev
  # the binary's malloc: rank 0's store allocates many small records (CMakeLists.txt says why)
  libjemalloc-dev
  # safetensors headers (and config.json): outside input, read with a well-fuzzed JSON library
  nlohmann-json3-dev
  # checkpoints: XXH3-64 beside CRC-32C decides that a tensor did not change (header-only)
  libxxhash-dev
  # the text module's tokenizers: Unicode regexes of tokenizer.json pre-tokenizers (UTF, UCP, JIT)
  libpcre2-dev
  # Qwen's tokenizer.json normalizes to NFC: ICU's normalizer (Unicode's reference library)
  libicu-dev
  # the serve module's HTTP server (runner endpoints); curl drives it in the tests
  libcpp-httplib-dev curl
  # LibTorch falls back to the slow reference BLAS without an optimized one.
  libopenblas0-pthread
  clang libclang-rt-14-dev
  # tests/format_test.sh: every C++ file in the style of .clang-format
  clang-format
  # TensorBoard event files are protobuf records; the tests read them back with Python.
  protobuf-compiler libprotobuf-dev python3-protobuf
  # scripts/plot_metrics.py
  python3-matplotlib
  # tests/model/hf_reference.py: tiny Hugging Face models and their logits, from a PyTorch nobody here built
  python3-torch python3-numpy
  # the Slurm tests start a one-node cluster; bc and hdf5-tools serve the benchmarks and tests
  slurmctld slurmd slurm-client munge bc
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Debian's LibTorch links the generic libblas.so.3; make sure the alternative points at OpenBLAS.
blas=$(update-alternatives --query libblas.so.3-x86_64-linux-gnu 2>/dev/null | awk '/^Value:/{print $2}')
case "$blas" in
  *openblas*) ;;
  *)
    cand=$(update-alternatives --list libblas.so.3-x86_64-linux-gnu 2>/dev/null | grep openblas | head -n1 || true)
    if [ -n "$cand" ]; then $SUDO update-alternatives --set libblas.so.3-x86_64-linux-gnu "$cand" >/dev/null; fi
    ;;
esac
