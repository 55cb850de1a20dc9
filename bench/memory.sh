#!/usr/bin/env bash
# scripts/bench.sh memory: rank 0's peak resident memory (VmHWM, which rank 0 prints at the
# end) over a run's length. The tiny config on 3 ranks, a checkpoint every 10 steps, for 50 and
# for 500 steps: with checkpoint.span_log = "all" (the default: spans leave rank 0 once a
# committed version holds them and they were trained on) and "none" (once trained on); and the
# same 500 steps without checkpoints, where "all" keeps every span in memory (the baseline).
# The aim (issue 11): the 500-step peak at most 1.1 times the 50-step one. STEPS overrides 500.
set -euo pipefail
root=$1
long=${STEPS:-500}
cmake --build "$root/build" --target arclight -j"$(nproc)" >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
flags=(--oversubscribe)
[ "$(id -u)" -ne 0 ] || flags+=(--allow-run-as-root)
cd "$root"
peak() {  # peak STEPS EVERY [flags...]: rank 0's peak resident memory in MiB, a checkpoint every EVERY steps
  local steps=$1 every=$2; shift 2
  rm -rf "$work/run"
  timeout 1200 mpirun "${flags[@]}" -np 3 "$root/build/arclight" train --config configs/tiny.toml \
    --run.dir "$work/run" --run.steps "$steps" --checkpoint.every_steps "$every" "$@" >"$work/out" 2>"$work/err" ||
    { echo "the run of $steps steps failed: $(tail -3 "$work/err")" >&2; exit 1; }
  sed -n "s/.*rank 0's peak resident memory \([0-9]*\) MiB.*/\1/p" "$work/err"
}
short_all=$(peak 50 10)
long_all=$(peak "$long" 10)
long_none=$(peak "$long" 10 --checkpoint.span_log none)
long_kept=$(peak "$long" 0)
/usr/bin/python3 - "$short_all" "$long_all" "$long_none" "$long_kept" "$long" <<'PY'
import json, sys
short_all, long_all, long_none, long_kept = map(int, sys.argv[1:5])
steps = int(sys.argv[5])
print(f"rank 0's peak resident memory: {short_all} MiB after 50 steps, {long_all} MiB after {steps} "
      f"(span_log all), {long_none} MiB (span_log none), {long_kept} MiB with no checkpoint to let spans go to",
      file=sys.stderr)
print(json.dumps({"rank0_peak_mib_50_steps": short_all, f"rank0_peak_mib_{steps}_steps": long_all,
                  f"rank0_peak_mib_{steps}_steps_span_log_none": long_none,
                  f"rank0_peak_mib_{steps}_steps_no_checkpoints": long_kept,
                  "long_over_short": round(long_all / short_all, 3),
                  "long_over_short_span_log_none": round(long_none / short_all, 3),
                  "no_checkpoints_over_short": round(long_kept / short_all, 3)}))
PY
