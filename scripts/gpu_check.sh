#!/usr/bin/env bash
# The GPU check (issue 16): one call on a GPU machine builds arclight against that machine's Python PyTorch (CUDA),
# runs what needs a GPU and writes the figures as JSON.
#
#   here, on a CPU machine with apt:  scripts/gpu_check.sh --fetch
#       Debian's .deb files of what the GPU machine lacks -> .gpu-debs/ (ignored by git, carried by the device call)
#   there, on the GPU machine:        scripts/gpu_check.sh [OUT_DIR]
#       unpack .gpu-debs/ (never over a file the image has), build into build-gpu/, check, measure
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
  # Headers, CMake configs and tools of what arclight builds against (scripts/setup.sh's list without LibTorch).
  dev=(libopenmpi-dev openmpi-bin openmpi-common libhdf5-openmpi-dev libcli11-dev libboost-test-dev
    libboost-context-dev nlohmann-json3-dev libcpp-httplib-dev libpcre2-dev libicu-dev protobuf-compiler
    libprotobuf-dev pkgconf hdf5-tools libjemalloc-dev libjemalloc2)
  # The libraries that the built binaries and Open MPI's plugins load, found by walking their NEEDED entries (not
  # through LibTorch's, which the wheel brings), as Debian packages; the C and C++ runtimes the machine has.
  binaries=("$root"/build/arclight "$root"/build/tests/test_model /usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/*.so
    /usr/bin/orted /usr/bin/mpirun /usr/bin/protoc)
  libs=$(/usr/bin/python3 - "${binaries[@]}" <<'EOF'
import re, subprocess, sys
where = {}
for line in subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout.splitlines():
    m = re.match(r"\s*(\S+) \(libc6,x86-64.*\) => (\S+)", line)
    if m: where.setdefault(m.group(1), m.group(2))
skip = re.compile(r"^(libtorch|libc10|libcaffe2|libshm|libc\.so|libm\.so|libstdc\+\+|libgcc_s|ld-linux|libdl|libpthread|librt)")
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
  runtime=$(for l in $libs; do dpkg -S "$(readlink -f "$l")" 2>/dev/null || dpkg -S "$l" 2>/dev/null; done | cut -d: -f1 |
    sort -u | grep -v -E '^(libc6|libgcc-s1|libstdc\+\+6)$' || true)
  rm -rf "$debs"
  mkdir -p "$debs"
  (cd "$debs" && apt-get download "${dev[@]}" $runtime >/dev/null)
  grep -qx '/.gpu-debs/' "$root/.git/info/exclude" 2>/dev/null || echo '/.gpu-debs/' >>"$root/.git/info/exclude"
  echo "gpu_check: $(ls "$debs" | wc -l) packages, $(du -sh "$debs" | cut -f1) in $debs; carry .gpu-debs"
  exit 0
fi

# ---- there: unpack, build, check, measure ----
out=${1:-${OUT:-$root/gpu-check-out}}
mkdir -p "$out"
log=$out/gpu_check.log
exec > >(tee "$log") 2>&1
json=$out/gpu_check.json
echo '{}' >"$json"
# record KEY JSON_VALUE: one entry of the figures, written at once (a stage that dies leaves the others).
record() { /usr/bin/env python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d[sys.argv[2]]=json.loads(sys.argv[3]); json.dump(d,open(sys.argv[1],"w"),indent=1)' "$json" "$1" "$2"; }
stage() { echo; echo "==== $* ($(date +%T))"; }
seconds_since() { echo $(($(date +%s) - $1)); }

stage "machine"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())'
record machine "$(python3 -c 'import json,torch; print(json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None, "gpus": torch.cuda.device_count()}))')"

stage "unpack Debian's packages"
if ! ls "$debs"/*.deb >/dev/null 2>&1; then
  echo "no .deb files in $debs: run scripts/gpu_check.sh --fetch on a Debian machine and carry .gpu-debs"
  record unpack '{"ok": false}'
  exit 1
fi
staging=$(mktemp -d)
for f in "$debs"/*.deb; do dpkg-deb -x "$f" "$staging" || dpkg -x "$f" "$staging"; done
# Never over a file of the image (its own, newer libraries stay); directory links such as /lib -> usr/lib are kept.
tar -C "$staging" -cf - . | tar -C / -xf - --skip-old-files --keep-directory-symlink
ldconfig
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_plm_rsh_agent=false
mpirun --version | head -1 && record unpack '{"ok": true}' || record unpack '{"ok": false}'

stage "build against the wheel's LibTorch"
start=$(date +%s)
torch_cmake=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
nccl_dir=$(python3 -c 'import nvidia.nccl as n; print(list(n.__path__)[0])')  # the NCCL wheel's
nccl_lib=$(ls "$nccl_dir"/lib/libnccl.so* 2>/dev/null | head -1)
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S "$root" -B "$root/build-gpu" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$torch_cmake" -DCUDAToolkit_ROOT=/usr/local/cuda \
  -DNCCL_INCLUDE_DIR="$nccl_dir/include" -DNCCL_LIBRARY="$nccl_lib" &&
  cmake --build "$root/build-gpu" -j"$(nproc)" --target arclight test_model test_algo test_comm hf_reference_check bench_model bench_train_step
built=$?
record build "{\"ok\": $([ $built = 0 ] && echo true || echo false), \"seconds\": $(seconds_since "$start")}"
[ $built = 0 ] || exit 1
bin=$root/build-gpu
"$bin/arclight" --version

stage "unit tests with a GPU (the policy on CUDA against the CPU, the NCCL reducer on one rank)"
for t in "test_model --run_test=policy" "test_algo" "test_comm --run_test=*/nccl*"; do
  start=$(date +%s)
  $bin/tests/$t --log_level=test_suite --report_level=short >"$out/t.log" 2>&1
  rc=$?
  tail -5 "$out/t.log"
  grep -E "Test case .* (skipped|is skipped)" "$out/t.log" | head -5
  record "${t%% *}" "{\"ok\": $([ $rc = 0 ] && echo true || echo false), \"seconds\": $(seconds_since "$start")}"
done

stage "the decoder against PyTorch and transformers (tiny Llama, Qwen2, Qwen3, Mistral)"
models=$(mktemp -d)
python3 "$root/tests/model/hf_reference.py" "$models" >/dev/null
dirs=("$models/llama" "$models/qwen2" "$models/qwen3" "$models/mistral")
"$bin/tests/hf_reference_check" --device 0 "${dirs[@]}" | tee "$out/ref_cuda.txt"
cuda_vs_torch=$?
python3 "$root/tests/model/transformers_reference.py" "${dirs[@]}" | tee "$out/transformers.txt"
"$bin/tests/hf_reference_check" "${dirs[@]}" | tee "$out/ref_transformers_cpu.txt"
cpu_vs_transformers=$?
"$bin/tests/hf_reference_check" --device 0 "${dirs[@]}" | tee "$out/ref_transformers_cuda.txt"
cuda_vs_transformers=$?
record reference "{\"cuda_vs_pytorch_ok\": $([ $cuda_vs_torch = 0 ] && echo true || echo false), \"cpu_vs_transformers_ok\": $([ $cpu_vs_transformers = 0 ] && echo true || echo false), \"cuda_vs_transformers_ok\": $([ $cuda_vs_transformers = 0 ] && echo true || echo false)}"

stage "mpirun -np 3: one trainer and one runner on the GPU"
run=$(mktemp -d)
"$bin/arclight" --version >/dev/null
timeout 60 mpirun -np 3 "$bin/arclight" train --config "$root/configs/tiny.toml" --run.dir "$run" --dry-run |
  tee "$out/dry_run.txt" | grep -E "^rank|cuda|cpu" | head -8
start=$(date +%s)
timeout 240 mpirun -np 3 "$bin/arclight" train --config "$root/configs/tiny.toml" --run.dir "$run" --run.steps 10 \
  >"$out/train.txt" 2>&1
rc=$?
tail -5 "$out/train.txt"
steps=$(wc -l <"$run/metrics.jsonl" 2>/dev/null || echo 0)
record training "{\"ok\": $([ $rc = 0 ] && echo true || echo false), \"steps\": $steps, \"seconds\": $(seconds_since "$start")}"

stage "generation on the GPU: a random 0.5 B Qwen2 in bfloat16, arclight against transformers' generate"
# Last: figures, not checks. Each command has a limit, so that a slow one leaves the device's call its time.
gen=$(mktemp -d)
trap 'rm -rf "$gen"' EXIT
start=$(date +%s)
timeout 90 python3 "$root/bench/model_bench.py" write-qwen2 "$gen" | tee "$out/gen_model.txt"
# batch 16, prompts of 128 tokens, 128 new ones, greedy with the KV cache on both sides
timeout 120 "$bin/bench/bench_model" "$gen" 16 128 128 8 0 bfloat16 | tee "$out/gen_ours.txt"
timeout 120 python3 "$root/bench/model_bench.py" transformers "$gen" 16 128 128 | tee "$out/gen_transformers.txt"
generation=$(python3 - "$out" <<'PY'
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
ours_step=$(timeout 150 mpirun -np 1 "$bin/bench/bench_train_step" 8 256 5 "$gen" 0 bfloat16 | tail -1)
torch_step=$(timeout 150 python3 "$root/bench/train_step_hf.py" "$gen" 8 256 5 bfloat16 | tail -1)
echo "arclight ${ours_step:-failed} s, PyTorch ${torch_step:-failed} s a step"
training_step=$(python3 -c 'import json,sys
a, b = (float(x) if x else None for x in sys.argv[1:3])
print(json.dumps({"step_s": a, "pytorch_step_s": b, "pytorch_over_ours": b / a if a and b else None}))' \
  "$ours_step" "$torch_step")
record training_step "${training_step:-null}"
echo "training step stage: $(seconds_since "$start") s"

echo
cat "$json"
