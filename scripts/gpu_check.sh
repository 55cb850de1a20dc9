#!/usr/bin/env bash
# The GPU check (issue 16): one call on a GPU machine builds arclight against that machine's Python PyTorch (CUDA),
# runs what needs a GPU and writes the figures as JSON.
#
#   here, on a CPU machine with apt:  scripts/gpu_check.sh --fetch
#       Debian's packages of what the GPU machine lacks, as one archive of their files and the links that their
#       installation would make -> .gpu-debs/ (ignored by git, carried by the device call)
#   there, on the GPU machine:        scripts/gpu_check.sh [OUT_DIR]
#       unpack .gpu-debs/ into / (never over a file the image has), build into build-gpu/, check, measure
#       -> OUT_DIR/gpu_check.json and OUT_DIR/gpu_check.log
#
# The GPU machine has PyTorch with CUDA and NCCL (a wheel), nvcc, CMake and a compiler, but no Open MPI, HDF5,
# CLI11, Boost, protobuf, PCRE2, ICU or cpp-httplib, and no network. Every stage runs even when one before it failed
# (where it can), and says so in the JSON: one call of the device's few minutes tells as much as it can.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
debs=$root/.gpu-debs

# ---- here: fetch Debian's packages ----
if [ "${1:-}" = "--fetch" ]; then
  set -e
  # Headers, CMake configs and tools of what arclight builds against (scripts/setup.sh's list without LibTorch), with
  # the -dev packages they depend on (meta-packages such as libboost-test-dev hold no headers; cpp-httplib's
  # pkg-config file needs OpenSSL's, Brotli's and zlib's), less the C and C++ toolchain's, which the machine has.
  direct=(libopenmpi-dev openmpi-bin openmpi-common libhdf5-openmpi-dev libcli11-dev libboost-test-dev
    libboost-context-dev nlohmann-json3-dev libxxhash-dev libcpp-httplib-dev libpcre2-dev libicu-dev protobuf-compiler
    libprotobuf-dev pkgconf pkgconf-bin hdf5-tools libjemalloc-dev libjemalloc2)
  mapfile -t dev < <(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
    --no-replaces --no-enhances "${direct[@]}" | grep -E '^[a-z0-9][^ ]*-dev$' | sort -u |
    grep -v -E '^(libc6|libcrypt|libgcc-.*|libgfortran-.*|libstdc\+\+-.*|linux-libc|libnsl|libtirpc|autotools)-dev$' |
    while read -r p; do dpkg -s "$p" >/dev/null 2>&1 && echo "$p"; done)
  dev+=("${direct[@]}")
  # The libraries that the built binaries and Open MPI's plugins load, found by walking their NEEDED entries (not
  # through LibTorch's, which the wheel brings), as Debian packages; the C and C++ runtimes the machine has.
  binaries=("$root"/build/arclight "$root"/build/tests/test_model /usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/*.so
    /usr/bin/orted /usr/bin/mpirun /usr/bin/protoc /usr/bin/pkgconf)
  libs=$(/usr/bin/python3 - "${binaries[@]}" <<'EOF'
import re, subprocess, sys
where = {}
for line in subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout.splitlines():
    m = re.match(r"\s*(\S+) \(libc6,x86-64.*\) => (\S+)", line)
    if m: where.setdefault(m.group(1), m.group(2))
skip = re.compile(r"^(libtorch|libc10|libcaffe2|libshm|libc\.so|libm\.so|libstdc\+\+|libgcc_s|ld-linux|libdl|libpthread|librt\.so)")
todo, seen = list(sys.argv[1:]), set()
while todo:
    path = todo.pop()
    if path in seen: continue
    seen.add(path)
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True).stdout
    for name in re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", out):
        if not skip.match(name) and name in where: todo.append(where[name])
for path in sorted(seen - set(sys.argv[1:])): print(path)
EOF
)
  # owners FILE...: the packages that own them (dpkg -S: "a, b: path" where two do, diversion lines dropped)
  owners() {
    for f in "$@"; do dpkg -S "$f" 2>/dev/null || dpkg -S "${f#/usr}" 2>/dev/null || true; done |
      grep -v '^diversion' | sed 's/: .*//; s/, /\n/g' | sed 's/:.*//' | sort -u
  }
  # The C and C++ toolchain and runtimes, which the machine has (GCC's directories are owned by all its packages).
  toolchain='libc6|libc6-dev|libgcc-s1|libstdc\+\+6|(libstdc\+\+|libgcc|libgfortran)-[0-9]+-dev|(gcc|g\+\+|cpp|gfortran|gnat|libgnat)-[0-9]+.*|libcc1-0'
  runtime=$(for l in $libs; do owners "$(readlink -f "$l")" "$l"; done | sort -u | grep -v -x -E "$toolchain" || true)
  # Built in a directory of its own, which replaces .gpu-debs/ only once whole.
  download=$(mktemp -d)
  trap 'rm -rf "$download"' EXIT
  (cd "$download" && apt-get download -q $(printf '%s\n' "${dev[@]}" $runtime | sort -u) >/dev/null)
  mkdir "$download/root" "$download/out"
  for f in "$download"/*.deb; do dpkg-deb -x "$f" "$download/root"; done
  # The packages of files that links in the tree point to but that it lacks (libhdf5_hl.so's library, say): a
  # -dev package's link to a library that none of arclight's binaries loads. Links resolve inside the tree.
  for round in 1 2; do
    (cd "$download/root" && find . -type l) | while read -r link; do
      target=$(readlink "$download/root/$link")
      case $target in /etc/alternatives/*) continue ;; /*) ;; *) target=$(dirname "${link#.}")/$target ;; esac
      target=$(realpath -m -s "$target")
      [ -e "$download/root$target" ] || [ -e "$download/root${target#/usr}" ] || echo "$target"
    done | sort -u >"$download/missing.txt"
    mapfile -t missing <"$download/missing.txt"
    owners "${missing[@]}" | grep -v -x -E "$toolchain" >"$download/more.txt" || true
    [ -s "$download/more.txt" ] || break
    echo "gpu_check: for links in the tree: $(tr '\n' ' ' <"$download/more.txt")"
    (cd "$download" && apt-get download -q $(cat "$download/more.txt") >/dev/null)
    for p in $(cat "$download/more.txt"); do dpkg-deb -x "$download/${p}"_*.deb "$download/root"; done
  done
  ls "$download"/*.deb | xargs -n1 basename >"$download/out/packages.txt"
  # One archive of their files, without documentation and static libraries (the device call carries 64 MiB in all,
  # the .deb files come to 62 MiB).
  rm -rf "$download"/root/usr/share/{doc,man,info,lintian,locale}
  find "$download/root" -name '*.a' -delete
  tar -C "$download/root" -cf - . | xz -T0 -6 >"$download/out/debian-root.tar.xz"
  # dpkg-deb -x runs no maintainer scripts: the links that Debian's alternatives make at install time (mpicc,
  # mpicxx, mpirun, h5pcc, the MPI and HDF5 pkg-config files) are listed here and made there.
  for name in mpi mpirun h5pcc hdf5.pc mpi-x86_64-linux-gnu; do
    update-alternatives --query "$name" 2>/dev/null | awk '/^Link:/ {print $2} /^Slaves:/ {s++; next}
      /^[A-Z]/ {if (s) s = 2} /^ / && s == 1 {print $2}' || true
  done | { grep -v '^/usr/share/man/' || true; } | while read -r link; do
    target=$(readlink "$link") || continue
    case $target in /etc/alternatives/*) target=$(readlink "$target") ;; esac
    echo "$link $target"
  done >"$download/out/links.txt"
  grep -q '^/usr/bin/mpirun ' "$download/out/links.txt" || { echo "gpu_check: Debian's mpirun link not found"; exit 1; }
  rm -rf "$debs"
  mv "$download/out" "$debs"
  echo "gpu_check: $(wc -l <"$debs/packages.txt") packages and $(wc -l <"$debs/links.txt") links, $(du -sh "$debs" | cut -f1) in $debs; carry .gpu-debs"
  exit 0
fi


# ---- there: unpack, build, check, measure ----
# Everything runs against one deadline (GPU_CHECK_SECONDS from the start, 540 unless given): a stage that would pass
# it is cut short or skipped and says so, and the figures gathered so far stay in the JSON. Stages run in the order of
# what they tell: the build, the GPU tests, a training run, the reference logits, then the benchmarks.
out=${1:-${OUT:-$root/gpu-check-out}}
mkdir -p "$out"
log=$out/gpu_check.log
exec > >(tee "$log") 2>&1
tee_pid=$!
# However the script ends, the log's last lines reach the file before the call returns.
trap 'exec >&- 2>&-; wait "$tee_pid"' EXIT
json=$out/gpu_check.json
echo '{}' >"$json"
work=$(mktemp -d /tmp/gpu-check.XXXXXX)  # details, shown in the log (the device call brings back few files)
deadline=$(($(date +%s) + ${GPU_CHECK_SECONDS:-540}))
# record KEY JSON_VALUE: one entry of the figures, written at once (a stage that dies leaves the others).
record() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d[sys.argv[2]]=json.loads(sys.argv[3]); json.dump(d,open(sys.argv[1],"w"),indent=1)' "$json" "$1" "$2"; }
stage() { echo; echo "==== $* ($(date +%T), $((deadline - $(date +%s))) s left)"; }
seconds_since() { echo $(($(date +%s) - $1)); }
truth() { [ "$1" = 0 ] && echo true || echo false; }
# limited SECONDS COMMAND...: COMMAND with at most SECONDS, fewer where the deadline is nearer; exit 124 if cut short
# or not started (under 5 s left).
limited() {
  local seconds=$1 left=$((deadline - $(date +%s)))
  shift
  [ "$left" -lt "$seconds" ] && seconds=$left
  if [ "$seconds" -lt 5 ]; then
    echo "gpu_check: no time left for: $*"
    return 124
  fi
  timeout -k 5 "$seconds" "$@"
}
# show FILE [LINES]: its last lines, without LibTorch's stack frames (an exception's message comes before them)
show() { echo "---- $1"; grep -v -E '^frame #[0-9]+:' "$1" | tail -n "${2:-15}"; }

stage "machine"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
record machine "$(python3 -c 'import json,torch; print(json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None, "gpus": torch.cuda.device_count()}))')"
cat "$json"
(g++ --version | head -1; cmake --version | head -1; /usr/local/cuda/bin/nvcc --version | tail -1; ninja --version) 2>&1

stage "unpack Debian's packages"
if [ ! -f "$debs/debian-root.tar.xz" ]; then
  echo "no $debs/debian-root.tar.xz: run scripts/gpu_check.sh --fetch on a Debian machine and carry .gpu-debs"
  record unpack '{"ok": false}'
  exit 1
fi
staging=$work/staging
mkdir -p "$staging"
tar -C "$staging" -xJf "$debs/debian-root.tar.xz"
# An archive fetched before a package joined the list (xxhash, 2026-12-05) fails at configure: say so at once.
for header in xxhash.h CLI/CLI.hpp nlohmann/json.hpp httplib.h pcre2.h; do
  [ -f "$staging/usr/include/$header" ] || echo "gpu_check: $header is not in $debs: the archive is stale; rerun --fetch"
done
# Never over a file of the image (its own, newer libraries stay); directory links such as /lib -> usr/lib are kept.
tar -C "$staging" -cf - . | tar -C / -xf - --skip-old-files --keep-directory-symlink
while read -r link target; do
  [ -e "$link" ] || [ -L "$link" ] || { mkdir -p "$(dirname "$link")" && ln -s "$target" "$link"; }
done <"$debs/links.txt"
# Boost in a prefix of its own: an image with other Boost headers and no Boost.Test of theirs would mix two versions.
boost=/opt/arclight-boost
mkdir -p "$boost"
(cd "$staging" && tar -cf - usr/include/boost usr/lib/x86_64-linux-gnu/libboost_* usr/lib/x86_64-linux-gnu/cmake/Boost* \
  usr/lib/x86_64-linux-gnu/cmake/boost_*) | tar -C "$boost" -xf -
boost_config=$(ls -d "$boost"/usr/lib/x86_64-linux-gnu/cmake/Boost-* 2>/dev/null | head -1)
[ -n "$boost_config" ] || echo "gpu_check: no Boost CMake config in the archive"
ldconfig
# Open MPI as root, on one machine without ssh; shared memory and TCP only (no InfiniBand in a VM).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_plm_rsh_agent=false OMPI_MCA_pml=ob1 \
  OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_vader_single_copy_mechanism=none
export HDF5_USE_SHLIB=yes  # h5pcc links the shared HDF5 (the archive carries no static libraries)
mpirun --version | head -1
record unpack "{\"ok\": $(truth $?)}"

stage "configure and build against the wheel's LibTorch"
start=$(date +%s)
torch_cmake=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
torch_dir=$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')
abi=$(python3 -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))')
nvidia_dir=$(python3 -c 'import nvidia; print(list(nvidia.__path__)[0])' 2>/dev/null)  # the NCCL wheel's, which torch loads
nccl=()  # else CMake looks in /usr/local/cuda
nccl_lib=$([ -n "$nvidia_dir" ] && find "$nvidia_dir" -name 'libnccl.so*' | head -1)
nccl_header=$([ -n "$nvidia_dir" ] && find "$nvidia_dir" -name nccl.h | head -1)
[ -n "$nccl_lib" ] && [ -n "$nccl_header" ] && nccl=(-DNCCL_INCLUDE_DIR="$(dirname "$nccl_header")" -DNCCL_LIBRARY="$nccl_lib")
echo "torch $torch_dir (C++11 ABI $abi), NCCL ${nccl[*]:-from /usr/local/cuda}"
export TORCH_CUDA_ARCH_LIST=9.0
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
common=(-S "$root" -B "$root/build-gpu" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release
  -DCUDAToolkit_ROOT=/usr/local/cuda -DCUDA_TOOLKIT_ROOT_DIR=/usr/local/cuda
  -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DCMAKE_CUDA_ARCHITECTURES=90
  "${nccl[@]}"
  -DMPI_C_COMPILER=/usr/bin/mpicc.openmpi -DMPI_CXX_COMPILER=/usr/bin/mpicxx.openmpi
  -DHDF5_C_COMPILER_EXECUTABLE=/usr/bin/h5pcc.openmpi
  -DBoost_DIR="$boost_config" -DBoost_NO_SYSTEM_PATHS=ON)
how=torch_config
rm -rf "$root/build-gpu"  # a build left by an earlier call on a warm machine would pass for this one's
limited 120 cmake "${common[@]}" -DCMAKE_PREFIX_PATH="$torch_cmake" >"$work/configure.txt" 2>&1
configured=$?
if [ $configured = 0 ] && ! grep -q "LibTorch CUDA ON" "$work/configure.txt" ||
  grep -A3 "CMake Error" "$work/configure.txt" | grep -q -E "Torch|Caffe2"; then
  # LibTorch's own config (Caffe2's CUDA checks) failed here or found no CUDA: the same libraries named directly.
  show "$work/configure.txt" 40
  how=shim
  rm -rf "$root/build-gpu"
  mkdir -p "$work/torch-shim"
  cat >"$work/torch-shim/TorchConfig.cmake" <<SHIM
set(_lib "$torch_dir/lib")
foreach(_name torch torch_cpu torch_cuda c10 c10_cuda)
  add_library(\${_name} SHARED IMPORTED)
  set_target_properties(\${_name} PROPERTIES IMPORTED_LOCATION "\${_lib}/lib\${_name}.so")
endforeach()
set(TORCH_INCLUDE_DIRS "$torch_dir/include;$torch_dir/include/torch/csrc/api/include;/usr/local/cuda/include")
set_target_properties(torch PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "\${TORCH_INCLUDE_DIRS}"
  INTERFACE_COMPILE_DEFINITIONS "_GLIBCXX_USE_CXX11_ABI=$abi"
  INTERFACE_LINK_LIBRARIES "torch_cpu;c10;c10_cuda;-Wl,--no-as-needed;\${_lib}/libtorch_cuda.so;-Wl,--as-needed")
set(TORCH_LIBRARIES torch)
set(TORCH_CXX_FLAGS "-D_GLIBCXX_USE_CXX11_ABI=$abi")
set(Torch_FOUND TRUE)
SHIM
  limited 120 cmake "${common[@]}" -DTorch_DIR="$work/torch-shim" >"$work/configure.txt" 2>&1
  configured=$?
fi
grep -E "arclight:|Found (MPI|HDF5|Boost|Torch|CUDAToolkit)|CMake Error" "$work/configure.txt" | head -20
[ $configured = 0 ] || show "$work/configure.txt" 40
targets=(arclight test_model test_algo test_reducer test_weight_channel hf_reference_check bench_model bench_train_step)
built=1
if [ $configured = 0 ]; then
  # -k 0: a target that fails leaves the others built (each stage below checks for its binary)
  keep_going=(-k)
  [ ${#generator[@]} = 0 ] || keep_going=(-k 0)
  limited 330 cmake --build "$root/build-gpu" -j"$(nproc)" --target "${targets[@]}" -- "${keep_going[@]}" >"$work/build.txt" 2>&1
  built=$?
  grep -E -m 30 "error|Error|undefined reference" "$work/build.txt"
  show "$work/build.txt" 5
fi
record build "{\"ok\": $(truth $built), \"configured\": $(truth $configured), \"torch\": \"$how\", \"seconds\": $(seconds_since "$start")}"
bin=$root/build-gpu
[ $configured = 0 ] || exit 1
# A target that failed leaves the others' stages (each checks for its binary): arclight's training runs below.
[ -x "$bin/arclight" ] && "$bin/arclight" --version

stage "unit tests with a GPU: the policy and a GRPO step on CUDA against the CPU, the NCCL reducer on one rank"
run_test() {  # NAME SECONDS COMMAND...
  local name=$1 seconds=$2 rc start
  shift 2
  start=$(date +%s)
  limited "$seconds" "$@" --color_output=no >"$work/$name.txt" 2>&1
  rc=$?
  grep -E "skipped|error|failed|passed|Leaving test case|last checkpoint" "$work/$name.txt" | tail -12
  # A case skipped by its precondition (no GPU seen) passes too: the counts say whether the GPU cases ran.
  local passed skipped
  passed=$(grep -oE '[0-9]+ test cases? out of [0-9]+ passed' "$work/$name.txt" | tail -1 | grep -oE '^[0-9]+')
  skipped=$(grep -oE '[0-9]+ test cases? out of [0-9]+ skipped' "$work/$name.txt" | tail -1 | grep -oE '^[0-9]+')
  record "$name" "{\"ok\": $(truth $rc), \"rc\": $rc, \"passed\": ${passed:-null}, \"skipped\": ${skipped:-0}, \"seconds\": $(seconds_since "$start")}"
}
# The MPI tests' main (tests/mpi_test_main.hpp) sets --log_level and --report_level itself: Boost.Test refuses a
# parameter given twice (exit 200 on every rank), so the others name them here.
run_test test_model_policy 120 "$bin/tests/test_model" --run_test=policy --log_level=test_suite --report_level=short
# The last device run (LibTorch 2.11) crashed in this case, which passes on Debian's 1.13: again with every assertion
# logged, so that the last one passed shows where.
if grep -q "memory access violation" "$work/test_model_policy.txt"; then
  limited 60 "$bin/tests/test_model" --run_test=policy/a_hugging_face_model_loads_by_transformers_names \
    --log_level=all --color_output=no >"$work/policy_crash.txt" 2>&1
  show "$work/policy_crash.txt" 25
fi
run_test test_algo_trainer_gpu 120 "$bin/tests/test_algo" --run_test=trainer_gpu --log_level=test_suite --report_level=short
run_test test_reducer_nccl 60 mpirun --oversubscribe -np 1 "$bin/tests/test_reducer" --run_test=reducer/nccl_sums_exactly_on_gpus
# The weights over NCCL from a leader to two runners, all on the one GPU: each rank a host of its own to NCCL.
# NCCL on one GPU for several ranks, each a host of its own: sockets on the loopback only (the InfiniBand libraries
# unpacked above make its IB transport loadable), connections made at set-up (NCCL 2.22+ makes them at the first
# collective, where a rank that never comes holds the others inside it), and what it chose logged.
nccl_env=(-x NCCL_SOCKET_IFNAME=lo -x NCCL_IB_DISABLE=1 -x NCCL_NVLS_ENABLE=0 -x NCCL_RUNTIME_CONNECT=0
  -x NCCL_DEBUG=INFO -x NCCL_DEBUG_SUBSYS=INIT,NET)
run_test test_weight_channel_nccl 120 mpirun --oversubscribe -np 3 -x ARCLIGHT_TEST_SHARED_GPU=1 "${nccl_env[@]}" \
  "$bin/tests/test_weight_channel" --run_test=weight_channel

if [ -x "$bin/arclight" ]; then
  stage "mpirun -np 3: rank 0 on the CPU, one trainer and one runner on the GPU"
  run=$work/run
  limited 60 mpirun --oversubscribe -np 3 "$bin/arclight" train --config "$root/configs/tiny.toml" --run.dir "$run" --dry-run \
    >"$work/dry_run.txt" 2>&1
  show "$work/dry_run.txt" 25
  start=$(date +%s)
  limited 150 mpirun --oversubscribe -np 3 "$bin/arclight" train --config "$root/configs/tiny.toml" --run.dir "$run" --run.steps 10 \
    --checkpoint.every_steps 5 >"$work/train.txt" 2>&1
  rc=$?
  show "$work/train.txt" 12
  steps=$(wc -l <"$run/metrics.jsonl" 2>/dev/null || echo 0)
  tail -1 "$run/metrics.jsonl" 2>/dev/null
  record training "{\"ok\": $(truth $rc), \"rc\": $rc, \"steps\": $steps, \"seconds\": $(seconds_since "$start")}"

  stage "resume on the GPU: the trainer restores the version of step 10 into GPU memory (its share, then NCCL)"
  start=$(date +%s)
  limited 120 mpirun --oversubscribe -np 3 "$bin/arclight" train --config "$root/configs/tiny.toml" --run.dir "$run" --run.steps 12 \
    --checkpoint.every_steps 5 --resume auto >"$work/resume.txt" 2>&1
  rc=$?
  show "$work/resume.txt" 12
  resumed_steps=$(wc -l <"$run/metrics.jsonl" 2>/dev/null || echo 0)
  record resume_on_gpu "{\"ok\": $(truth $rc), \"rc\": $rc, \"steps_after\": $resumed_steps, \"seconds\": $(seconds_since "$start")}"

  stage "mpirun -np 3 again, the weights over NCCL in bf16 (each rank a host of its own to NCCL: NCCL_HOSTID)"
  # NCCL takes one rank per GPU a host: on one GPU, the trainer leader and the runner reach each other over sockets.
  per_rank_host=(bash -c 'NCCL_HOSTID=gpu-check-$OMPI_COMM_WORLD_RANK exec "$0" "$@"')
  run=$work/run_nccl
  limited 60 mpirun --oversubscribe -np 3 "${nccl_env[@]}" "${per_rank_host[@]}" "$bin/arclight" train \
    --config "$root/configs/tiny.toml" --run.dir "$run" --comm.compression bf16 --run.hung_rank_seconds 20 --dry-run \
    >"$work/dry_run_nccl.txt" 2>&1
  grep -E "^(rank|1|2) " "$work/dry_run_nccl.txt"
  start=$(date +%s)
  # A broadcast that stalls is given up for sends of its own after run.hung_rank_seconds: 20 s, within the limit.
  limited 90 mpirun --oversubscribe -np 3 "${nccl_env[@]}" "${per_rank_host[@]}" "$bin/arclight" train \
    --config "$root/configs/tiny.toml" --run.dir "$run" --comm.compression bf16 --run.steps 10 \
    --run.hung_rank_seconds 20 >"$work/train_nccl.txt" 2>&1
  rc=$?
  show "$work/train_nccl.txt" 12
  steps=$(wc -l <"$run/metrics.jsonl" 2>/dev/null || echo 0)
  over_nccl=$(grep -c "^1 .* nccl$" "$work/dry_run_nccl.txt")
  # Whether the run itself kept NCCL (the dry run says what it would use), or gave up a broadcast for sends.
  gave_up=$(grep -c "sends each runner its versions on its own" "$work/train_nccl.txt")
  record training_weights_over_nccl "{\"ok\": $(truth $rc), \"rc\": $rc, \"steps\": $steps, \"leader_sends_over_nccl\": $over_nccl, \"broadcast_given_up\": $gave_up, \"seconds\": $(seconds_since "$start")}"
else
  record training '{"ok": false, "built": false}'
fi

stage "the decoder against PyTorch and transformers (tiny Llama, Qwen2, Qwen3, Mistral, Gemma 1, 2 and 3)"
models=$work/models
mkdir -p "$models"
dirs=("$models/llama" "$models/qwen2" "$models/qwen3" "$models/mistral" "$models/gemma2" "$models/gemma3" "$models/gemma")
limited 90 python3 "$root/tests/model/hf_reference.py" "$models" >/dev/null
limited 60 "$bin/tests/hf_reference_check" --device 0 "${dirs[@]}" >"$work/ref_cuda.txt" 2>&1
cuda_vs_torch=$?
show "$work/ref_cuda.txt" 8
limited 120 python3 "$root/tests/model/transformers_reference.py" "${dirs[@]}" 2>&1 | tail -8
transformers_rc=${PIPESTATUS[0]}
# Only where transformers wrote the references: otherwise the files still hold plain PyTorch's, and a match with them
# is no word on transformers (null).
tf_cpu=null tf_cuda=null
if [ "$transformers_rc" = 0 ]; then
  limited 60 "$bin/tests/hf_reference_check" "${dirs[@]}" >"$work/ref_tf_cpu.txt" 2>&1
  tf_cpu=$(truth $?)
  show "$work/ref_tf_cpu.txt" 8
  limited 60 "$bin/tests/hf_reference_check" --device 0 "${dirs[@]}" >"$work/ref_tf_cuda.txt" 2>&1
  tf_cuda=$(truth $?)
  show "$work/ref_tf_cuda.txt" 8
fi
record reference "{\"cuda_vs_pytorch_ok\": $(truth $cuda_vs_torch), \"transformers_ran\": $(truth "$transformers_rc"), \"cpu_vs_transformers_ok\": $tf_cpu, \"cuda_vs_transformers_ok\": $tf_cuda}"

# A stage that timed out may have left ranks on the GPU (a hung job ignores SIGTERM, and timeout's SIGKILL reaches
# mpirun only): they would share the GPU with the timed stages below.
# Only this build's: on a shared node, another job's arclight ranks are not ours to kill.
leftover=$(pgrep -f "^$bin/(arclight|tests/test_weight_channel|tests/test_reducer)( |\$)")
[ -n "$leftover" ] && kill -9 $leftover 2>/dev/null
record leftover_processes_killed "$(echo "$leftover" | grep -c .)"

stage "generation on the GPU: a random 0.5 B Qwen2 in bfloat16, arclight against transformers' generate"
gen=$work/qwen2-0.5b
start=$(date +%s)
limited 90 python3 "$root/bench/model_bench.py" write-qwen2 "$gen" 2>&1 | tail -3
# batch 16, prompts of 128 tokens, 128 new ones, greedy with the KV cache on both sides
limited 120 "$bin/bench/bench_model" "$gen" 16 128 128 8 0 bfloat16 >"$work/gen_ours.txt" 2>&1
show "$work/gen_ours.txt" 4
limited 120 python3 "$root/bench/model_bench.py" transformers "$gen" 16 128 128 >"$work/gen_transformers.txt" 2>&1
show "$work/gen_transformers.txt" 4
generation=$(python3 - "$work" <<'PY'
import json, sys
def last(name):
    try:
        return json.loads(open(f"{sys.argv[1]}/{name}").read().strip().splitlines()[-1])
    except Exception:
        return {}
ours, theirs = last("gen_ours.txt"), last("gen_transformers.txt")
rate, base = ours.get("tokens_per_s"), theirs.get("tokens_per_s")
same = sum(a == b for a, b in zip(ours.get("first_row", []), theirs.get("first_row", [])))
print(json.dumps({"tokens_per_s": rate, "transformers_tokens_per_s": base,
                  "ratio": rate / base if rate and base else None, "first_row_same_tokens": same}))
PY
)
echo "$generation"
record generation "${generation:-null}"
echo "generation stage: $(seconds_since "$start") s"

stage "a training step on the GPU: the same model, bfloat16 forward over float32 weights, against PyTorch's own"
start=$(date +%s)
# 8 sequences of 256 tokens: forward, GRPO loss, backward, clip, AdamW; the median of 5 steps after 2 warm-ups
ours_step=$(limited 150 mpirun -np 1 "$bin/bench/bench_train_step" 8 256 5 "$gen" 0 bfloat16 2>"$work/step_ours.txt" | tail -1)
show "$work/step_ours.txt" 4
torch_step=$(limited 150 python3 "$root/bench/train_step_hf.py" "$gen" 8 256 5 bfloat16 2>"$work/step_torch.txt" | tail -1)
show "$work/step_torch.txt" 4
# model.gradient_checkpointing: each layer run again in a nested backward, which on CUDA runs on the device's thread
recompute_step=$(limited 150 mpirun -np 1 "$bin/bench/bench_train_step" 8 256 5 "$gen" 0 bfloat16 recompute \
  2>"$work/step_recompute.txt" | tail -1)
show "$work/step_recompute.txt" 4
echo "arclight ${ours_step:-failed} s (${recompute_step:-failed} s recomputing layers), PyTorch ${torch_step:-failed} s a step"
training_step=$(python3 -c 'import json,sys
def number(x):
    try: return float(x)
    except ValueError: return None
a, b, c = number(sys.argv[1]), number(sys.argv[2]), number(sys.argv[3])
print(json.dumps({"step_s": a, "pytorch_step_s": b, "pytorch_over_ours": b / a if a and b else None,
                  "recompute_step_s": c}))' \
  "$ours_step" "$torch_step" "$recompute_step")
record training_step "${training_step:-null}"
echo "training step stage: $(seconds_since "$start") s"

echo
cat "$json"
rm -rf "$work"
