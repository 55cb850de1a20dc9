#!/usr/bin/env bash
# scripts/bench.sh long_context: the memory one training step takes as its sequence grows, arclight against plain
# PyTorch (Debian's python3-torch) in one run. Both train the same Llama-shaped model (bench/long_context.py: 16 heads,
# 4 layers, a vocabulary of 32,000, float32, one compute thread) on one sequence of SHORT (512) and of LONG (2,048)
# tokens; the figure is each process's peak resident memory (its maximum RSS, from getrusage), and its growth from
# SHORT to LONG: PyTorch's eager attention keeps every layer's [heads, T, T] probabilities for the backward (1 GiB at
# 2,048 tokens here) and its loss (bench/ddp_train.py's) a [T, vocabulary] log_softmax beside the logits; arclight
# recomputes the attention's probabilities and the head's logits a block at a time; and arclight again with
# model.gradient_checkpointing (each layer recomputed in the backward, its input alone kept). Also each one's seconds
# of its third step at LONG (two warm-up steps before it).
set -euo pipefail
root=$1
short=${SHORT:-512} long=${LONG:-2048}
cmake --build "$root/build" --target bench_train_step -j"$(nproc)" >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 "$root/bench/long_context.py" write "$work/model"
# One compute thread on both sides: bench_train_step sets LibTorch's and OpenBLAS's pools to 1; Debian's PyTorch
# reaches OpenBLAS through libblas.so.3, whose pool torch.set_num_threads leaves on every core.
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
measure() {  # measure COMMAND...: "peak_MiB seconds" (the command prints its step seconds last)
  /usr/bin/python3 -c '
import resource, subprocess, sys
done = subprocess.run(["timeout", "1200", *sys.argv[1:]], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
if done.returncode != 0:
    sys.exit(f"failed ({done.returncode}): {sys.argv[1:]}: {done.stderr[-400:]}")
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024, done.stdout.split()[-1])' "$@"
}
ours() { measure "$root/build/bench/bench_train_step" 1 "$1" 1 "$work/model" -1 float32 "${@:2}"; }
theirs() { measure /usr/bin/python3 "$root/bench/long_context.py" step "$work/model" "$1"; }
# Assignments, so that a failed measurement ends the script (set -e)
out=$(ours "$short") && read -r ours_short _ <<<"$out"
out=$(ours "$long") && read -r ours_long ours_seconds <<<"$out"
out=$(ours "$short" recompute) && read -r recompute_short _ <<<"$out"
out=$(ours "$long" recompute) && read -r recompute_long recompute_seconds <<<"$out"
out=$(theirs "$short") && read -r theirs_short _ <<<"$out"
out=$(theirs "$long") && read -r theirs_long theirs_seconds <<<"$out"
/usr/bin/python3 - "$short" "$long" "$ours_short" "$ours_long" "$theirs_short" "$theirs_long" "$recompute_short" \
  "$recompute_long" "$ours_seconds" "$theirs_seconds" "$recompute_seconds" <<'PY'
import json, sys
short, long, ours_short, ours_long, theirs_short, theirs_long, recompute_short, recompute_long = map(int, sys.argv[1:9])
ours_seconds, theirs_seconds, recompute_seconds = map(float, sys.argv[9:12])
ours_growth, theirs_growth = ours_long - ours_short, theirs_long - theirs_short
recompute_growth = recompute_long - recompute_short
probabilities = 4 * 16 * long * long * 4 / 2**20  # layers x heads x T x T x float32
print(f"peak resident memory, one training step: arclight {ours_short} MiB at {short} tokens, {ours_long} MiB at "
      f"{long} (+{ours_growth}); PyTorch {theirs_short} MiB, {theirs_long} MiB (+{theirs_growth}); eager "
      f"attention's probabilities at {long}: {probabilities:.0f} MiB. Step at {long}: arclight {ours_seconds:.2f} s, "
      f"PyTorch {theirs_seconds:.2f} s; with model.gradient_checkpointing {recompute_short} and {recompute_long} MiB "
      f"(+{recompute_growth}), {recompute_seconds:.2f} s", file=sys.stderr)
print(json.dumps({"short_tokens": short, "tokens": long, "arclight_peak_mib": ours_long, "pytorch_peak_mib": theirs_long,
                  "arclight_growth_mib": ours_growth, "pytorch_growth_mib": theirs_growth,
                  "growth_ratio": round(ours_growth / theirs_growth, 3), "arclight_step_s": ours_seconds,
                  "pytorch_step_s": theirs_seconds, "recompute_peak_mib": recompute_long,
                  "recompute_growth_mib": recompute_growth, "recompute_step_s": recompute_seconds}))
PY
