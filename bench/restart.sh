#!/usr/bin/env bash
# scripts/bench.sh restart: time from launch to the first finished step after a failure. The
# workstation config (4 ranks) runs until version STEP is written and its rank 0 is killed
# (kill -9, as when a node fails); the page cache is dropped where it can be (root), and the
# job is relaunched with --resume auto for one step. Printed: seconds from launch to that step,
# split into start-up (MPI, placement, channels, LibTorch, the policy's construction; rank 0 reads
# the store meanwhile), restore (the trainers' shares read, broadcast and loaded) and the first step;
# and the bytes read from the checkpoint's files over the version's size. EVERY: versions every
# so many steps (default STEP: one version). FLAGS: more options for both runs (e.g.
# "--model.d_model 512 --model.n_layers 8" for a larger version).
set -euo pipefail
root=$1
step=${STEP:-10}
every=${EVERY:-$step}
extra=(${FLAGS:-})
cmake --build "$root/build" --target arclight -j"$(nproc)" >/dev/null
work=$(mktemp -d)
trap 'kill -9 $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
flags=(--oversubscribe)
[ "$(id -u)" -ne 0 ] || flags+=(--allow-run-as-root)
cd "$root"
train() {  # train LOG [flags...]: the job's lines, stdout and stderr, each with the time it came
  local log=$1; shift
  timeout 600 mpirun "${flags[@]}" -np 4 "$root/build/arclight" --log-level debug train \
    --config configs/workstation.toml --run.dir "$work/run" --checkpoint.every_steps "$every" "${extra[@]}" "$@" 2>&1 |
    /usr/bin/python3 -u -c 'import sys, time
for line in sys.stdin: print(f"{time.time():.6f} {line}", end="", flush=True)' >"$log"
}

# 1. Until version STEP is written; then rank 0 dies.
train "$work/first.log" --run.steps 100000 &
job=$!
for _ in $(seq 1200); do [ -f "$work/run/checkpoints/v$(printf %08d "$step").h5" ] && break; sleep 0.1; done
[ -f "$work/run/checkpoints/v$(printf %08d "$step").h5" ] || { echo "no version $step: $(tail -3 "$work/first.log")" >&2; exit 1; }
for p in $(pgrep -x arclight); do  # this run's rank 0 only (another job's ranks may share the machine)
  tr '\0' ' ' </proc/$p/cmdline 2>/dev/null | grep -qF -- "--run.dir $work/run " &&
    tr '\0' '\n' </proc/$p/environ 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=0" && kill -9 "$p"
done
wait $job || true

# 2. Cold where the page cache can be dropped (a replacement node reads from the file system).
cold=cold
sync; echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || cold=page-cache
launch=$(/usr/bin/python3 -c 'import time; print(f"{time.time():.6f}")')
# The step of the newest version, which the resume starts after (metrics.jsonl may hold later steps: versions are
# written while training goes on, and steps finished after it are trained again).
newest=$(ls "$work/run/checkpoints" | grep -E '^v[0-9]{8}\.h5$' | sort | tail -1)
resumed=$((10#${newest:1:8}))
train "$work/resume.log" --run.steps $((resumed + 1)) --resume auto || { tail -5 "$work/resume.log" >&2; exit 1; }

/usr/bin/python3 - "$work/resume.log" "$launch" "$cold" "$resumed" <<'PY'
import json, re, sys
log, launch, cold, resumed = sys.argv[1], float(sys.argv[2]), sys.argv[3], int(sys.argv[4])
lines = [(float(l.split(" ", 1)[0]), l.split(" ", 1)[1]) for l in open(log) if " " in l]
def first(pattern):
    for t, text in lines:
        m = re.search(pattern, text)
        if m: return t, m
    sys.exit(f"no line matches {pattern!r} in {log}")
placed, _ = first(r"arclight: \d+ ranks")
built, _ = first(r"debug\] the policy and its optimizer built in")
t_restore, m = first(r"restore: read ([0-9.e+-]+) times the version's (\d+) bytes \(rank 0 (\d+), the \d+ trainers (\d+)\) "
                     r"in ([0-9.e+-]+) s \(rank 0's reads and the store's import ([0-9.e+-]+) s\); the slowest trainer's restore ([0-9.e+-]+) s \(its share read ([0-9.e+-]+) s, "
                     r"broadcast ([0-9.e+-]+) s\)")
_, resumed_from = first(r"resuming from \S+: step (\d+),")
if int(resumed_from[1]) != resumed:
    sys.exit(f"resumed from step {resumed_from[1]}, not from the newest version's {resumed}")
t_step, _ = first(rf"^step={resumed + 1} ")
ratio, version_bytes, rank0_bytes, trainer_bytes = float(m[1]), int(m[2]), int(m[3]), int(m[4])
rank0_s, restore_s, share_s, broadcast_s = float(m[6]), float(m[7]), float(m[8]), float(m[9])
d = dict(launch_to_first_step_s=t_step - launch, startup_s=t_restore - restore_s - launch,
         startup_to_placement_s=placed - launch, startup_to_policy_built_s=built - launch,
         rank0_read_and_import_s=rank0_s,
         restore_s=restore_s, restore_share_read_s=share_s, restore_broadcast_s=broadcast_s,
         first_step_s=t_step - t_restore, bytes_read_over_version=ratio, version_bytes=version_bytes,
         rank0_bytes=rank0_bytes, trainer_bytes=trainer_bytes, read_kind=cold)
print(f"restart ({cold}): {d['launch_to_first_step_s']:.2f} s from launch to the first step = start-up "
      f"{d['startup_s']:.2f} s (placement done at {d['startup_to_placement_s']:.2f} s, the trainer's policy built at "
      f"{d['startup_to_policy_built_s']:.2f} s; rank 0 read and imported the store in {rank0_s:.2f} s"
      f") + restore {restore_s:.3f} s (share read {share_s:.3f} s, broadcast "
      f"{broadcast_s:.3f} s) + first step {d['first_step_s']:.2f} s; read {ratio:.3f} times the version's "
      f"{version_bytes / 1e6:.2f} MB (rank 0 {rank0_bytes / 1e6:.2f} MB, trainers {trainer_bytes / 1e6:.2f} MB)")
print(json.dumps(d))
PY
