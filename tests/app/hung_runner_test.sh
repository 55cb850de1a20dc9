#!/usr/bin/env bash
# A hung runner (issue 17): kill -STOP of a runner rank mid-run, on 4 ranks (rank 1 trains,
# ranks 2 and 3 run). The store requeues its work, the trainer leader fences it, and
#   1. the job reaches its last step, checkpoints and ends (exit 0) naming the rank;
#   2. SIGUSR1 while it is stopped still checkpoints and ends the job with exit 3 (requeue), and
#      the resume trains nothing twice;
#   3. colocated (3 ranks), where it trains too, the job ends promptly with exit 3 naming it.
# Every run is bounded; the stopped rank is killed at the end whatever happens.
# Usage: hung_runner_test.sh BUILD/arclight SOURCE_DIR
set -u
bin=$(realpath "$1"); src=$2
mpirun=${MPIEXEC:-mpirun}
work=$(mktemp -d)
ranks_of() { pgrep -f "^$bin train .*--run.dir $work/"; }
trap 'for p in $(ranks_of); do kill -CONT "$p"; kill -9 "$p"; done 2>/dev/null; kill -9 $(jobs -p) 2>/dev/null
      [ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
checks=0; failures=0
check() { checks=$((checks + 1)); if ! eval "$1"; then echo "FAIL: $2"; failures=$((failures + 1)); fi; }
cd "$src"
hung=3                  # a runner: trainers take the lowest worker ranks
limit=${HUNG_LIMIT:-4}  # run.hung_rank_seconds

# Starts a run on 4 ranks in the background; its exit code lands in $work/rc.
start() {  # start RUN_DIR [flags...]
  local dir=$1; shift
  rm -f "$work/rc"
  (timeout 150 "$mpirun" --oversubscribe --allow-run-as-root -np 4 "$bin" train --config configs/tiny.toml \
     --run.dir "$dir" --run.progress lines --rollout.unresponsive_seconds 2 --run.hung_rank_seconds "$limit" \
     --checkpoint.every_steps 0 "$@" >"$work/out" 2>"$work/err"; echo $? >"$work/rc") &
}
# The PID of a rank of the run under way.
pid_of_rank() {
  local p
  for p in $(ranks_of); do
    tr '\0' '\n' </proc/$p/environ 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1" && echo "$p"
  done
}
# Waits (bounded) until FILE has a line matching PATTERN, or the run has ended.
await() {  # await PATTERN FILE SECONDS
  for _ in $(seq $(($3 * 10))); do
    grep -q "$1" "$2" 2>/dev/null && return 0
    [ -f "$work/rc" ] && return 1
    sleep 0.1
  done
  return 1
}
finish() {  # waits for the run's exit code (the runs are bounded by timeout), into $rc; keeps its logs
  wait
  rc=$(cat "$work/rc" 2>/dev/null || echo none)
  runs=$((${runs:-0} + 1))
  cp "$work/out" "$work/run$runs.out"; cp "$work/err" "$work/run$runs.err"
}
stop_the_runner() {
  await '^step=3 ' "$work/out" 60 || { echo "FAIL: the run never reached step 3: $(tail -3 "$work/err")"; return 1; }
  victim=$(pid_of_rank $hung)
  [ -n "$victim" ] || { echo "FAIL: no rank $hung"; return 1; }
  kill -STOP "$victim"
  stopped_at=$SECONDS
}
last_step() { grep -o '^step=[0-9]*' "$work/out" | tail -1 | cut -d= -f2; }

# 1. Stopped at step 3 of 40: the others train to the end, the last version is written, and the
#    job ends, without waiting for the stopped rank, with exit 0 (the run is done).
start "$work/a" --run.steps 40
if stop_the_runner; then
  finish
  check '[ "$rc" = 0 ]' "stopped runner: exit $rc, not 0 ($((SECONDS - stopped_at)) s after the stop): $(tail -4 "$work/err")"
  check '[ "$(last_step)" = 40 ]' "stopped runner: the last step printed is $(last_step), not 40"
  check '[ "$(cat "$work/a/checkpoints/LATEST" 2>/dev/null)" = v00000040.h5 ]' \
    "stopped runner: LATEST is '$(cat "$work/a/checkpoints/LATEST" 2>&1)', not the last step's version"
  check 'grep -q "runner rank $hung has not taken policy version [0-9]* within $limit s.*Fenced" "$work/err"' \
    "the trainer leader did not fence rank $hung: $(grep -i 'warn\|error' "$work/err" | head -5)"
  check '[ "$(grep -c "the job ends without rank $hung (runner), which hangs: the run is done (exit 0)" "$work/err")" = 1 ]' \
    "no (or more than one) end message naming rank $hung: $(grep -i 'warn\|error' "$work/err" | tail -5)"
  check '[ "$(grep -c "error\]" "$work/err")" = 0 ]' "error lines: $(grep "error\]" "$work/err")"
  # Bounded: the stop costs about unresponsive_seconds and hung_rank_seconds, not the run's end.
  check '[ $((SECONDS - stopped_at)) -lt 60 ]' "stopped runner: the job took $((SECONDS - stopped_at)) s after the stop"
else
  failures=$((failures + 1)); finish
fi
check '[ -z "$(ranks_of)" ]' "ranks left over: $(ranks_of | xargs)"

# 2. SIGUSR1 (as Slurm's warning) while the runner is stopped: a checkpoint and exit 3, promptly.
start "$work/b" --run.steps 100000
if stop_the_runner && await "runner rank $hung has sent no sign of life" "$work/err" 60; then
  signalled_at=$SECONDS
  for p in $(ranks_of); do kill -USR1 "$p"; done
  finish
  check '[ "$rc" = 3 ]' "SIGUSR1 with a stopped runner: exit $rc, not 3: $(tail -4 "$work/err")"
  check '[ $((SECONDS - signalled_at)) -lt 30 ]' "SIGUSR1 with a stopped runner: it took $((SECONDS - signalled_at)) s"
  check 'grep -q "stopping after step [0-9]* on a signal" "$work/out" "$work/err"' "no stop on the signal"
  check 'grep -q "the job ends without rank $hung (runner), which hangs: checkpointed on a signal (exit 3" "$work/err"' \
    "no end message naming rank $hung: $(tail -4 "$work/err")"
  saved=$(cat "$work/b/checkpoints/LATEST" 2>/dev/null)
  check '[ -n "$saved" ]' "SIGUSR1 with a stopped runner: no checkpoint"
  # The resume (every rank alive) goes on from there; no rollout is trained on twice.
  at=${saved#v}; at=$((10#${at%.h5}))
  start "$work/b" --run.steps $((at + 3)) --resume auto
  finish
  check '[ "$rc" = 0 ]' "resume after the stop: exit $rc: $(tail -3 "$work/err")"
  check 'grep -q "resuming from .*$saved" "$work/err"' "the resume did not start from $saved: $(head -3 "$work/err")"
  "$bin" inspect --trained "$work/b/checkpoints" >"$work/trained" 2>&1
  check 'grep -q "; 0 rollouts trained on twice" "$work/trained"' "trained twice: $(tail -1 "$work/trained")"
else
  failures=$((failures + 1)); echo "FAIL: rank 0 never named the stopped rank: $(tail -3 "$work/err")"; finish
fi
check '[ -z "$(ranks_of)" ]' "ranks left over: $(ranks_of | xargs)"

# 3. Colocated (every worker trains and runs): the others wait for the stopped rank in every
#    all-reduce, so the job ends, promptly, with one message naming it and exit 3 (requeue).
hung=2
start "$work/c" --run.steps 100000 --layout.mode colocated
if stop_the_runner; then
  finish
  check '[ "$rc" = 3 ]' "colocated, a stopped rank: exit $rc, not 3: $(tail -4 "$work/err")"
  check '[ $((SECONDS - stopped_at)) -lt 60 ]' "colocated, a stopped rank: the job took $((SECONDS - stopped_at)) s to end"
  check '[ "$(grep -c "error\]" "$work/err")" = 1 ] && grep -q "error\] rank $hung (runner+trainer) has sent no sign of life for $limit s.*training cannot go on without it" "$work/err"' \
    "colocated, a stopped rank: not one error naming rank $hung: $(grep "error\]" "$work/err")"
else
  failures=$((failures + 1)); finish
fi
check '[ -z "$(ranks_of)" ]' "ranks left over: $(ranks_of | xargs)"

echo "$((checks - failures)) passed, $failures failed"
[ $failures = 0 ]
