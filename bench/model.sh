#!/usr/bin/env bash
# scripts/bench.sh model: a random Llama of about 100 M parameters in Hugging Face layout (float32 safetensors,
# written by bench/model_bench.py): arclight's load seconds and peak RSS against the weight bytes, and its generated
# tokens/s with the KV cache (greedy) against a straightforward PyTorch generation loop with a KV cache
# (Debian's python3-torch) on the same weights, prompts and thread count. The two sides alternate ROUNDS times in
# one run; each side's best round counts.
set -euo pipefail
root=$1
batch=${BATCH:-8}; prompt=${PROMPT:-32}; new=${NEW_TOKENS:-64}; threads=${THREADS:-1}; rounds=${ROUNDS:-2}
# Both sides on the same threads: LibTorch's pool and OpenBLAS's own (Debian's torch reaches OpenBLAS through
# libblas.so.3, so torch.set_num_threads leaves OpenBLAS's pool at one thread per core: half the speed here).
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
cmake --build "$root/build" --target bench_model -j"$(nproc)" >/dev/null
dir=$(mktemp -d); results=$(mktemp)
trap 'rm -rf "$dir" "$results"' EXIT
/usr/bin/python3 "$root/bench/model_bench.py" write "$dir" | sed 's/^/model /' >"$results"
for _ in $(seq "$rounds"); do
  "$root/build/bench/bench_model" "$dir" "$batch" "$prompt" "$new" "$threads" | sed 's/^/ours /' >>"$results"
  /usr/bin/python3 "$root/bench/model_bench.py" generate "$dir" "$batch" "$prompt" "$new" "$threads" |
    sed 's/^/pytorch /' >>"$results"
done
/usr/bin/python3 - "$results" "$batch" "$prompt" "$new" "$threads" <<'PY'
import json, sys
runs = {"model": [], "ours": [], "pytorch": []}
for line in open(sys.argv[1]):
    side, _, payload = line.partition(" ")
    runs[side].append(json.loads(payload))
batch, prompt, new, threads = sys.argv[2:6]
model, ours, torch_runs = runs["model"][0], runs["ours"], runs["pytorch"]
weights = model["weight_bytes"]
peak = max(r["peak_rss"] for r in ours)
load_growth = max(r["load_peak_rss"] - r["rss_before_load"] for r in ours)
ours_rate = max(r["tokens_per_s"] for r in ours)
torch_rate = max(r["tokens_per_s"] for r in torch_runs)
same = all(r["first_row"] == torch_runs[0]["first_row"] for r in ours + torch_runs)
result = {
    "parameters": model["parameters"], "weight_bytes": weights,
    "load_seconds": round(min(r["load_s"] for r in ours), 3),
    "peak_rss_bytes": peak, "runtime_rss_bytes": max(r["rss_before_load"] for r in ours),
    "peak_rss_over_weights": round(peak / weights, 3),
    "load_rss_over_weights": round(load_growth / weights, 3),
    "tokens_per_s": round(ours_rate, 1), "pytorch_tokens_per_s": round(torch_rate, 1),
    "speed_ratio": round(ours_rate / torch_rate, 3), "same_greedy_tokens": same,
}
print(f"Llama, {model['parameters']:,} parameters, {weights / 2**20:.0f} MiB of float32 weights: loaded in "
      f"{result['load_seconds']} s; peak RSS {peak / 2**20:.0f} MiB = {result['peak_rss_over_weights']}x the weights "
      f"(LibTorch's runtime before the load {result['runtime_rss_bytes'] / 2**20:.0f} MiB; the load itself "
      f"{result['load_rss_over_weights']}x)")
print(f"greedy generation, batch {batch} x {prompt}-token prompts, {new} new tokens, {threads} thread(s), KV cache: "
      f"{ours_rate:.1f} tokens/s, PyTorch loop {torch_rate:.1f}: {result['speed_ratio']}x; "
      f"same greedy tokens: {'yes' if same else 'NO'}")
print(json.dumps(result))
PY
