#!/usr/bin/env bash
# Operator mistakes (issue 17) refused at start-up on every rank, with one sentence and exit code 2,
# before any training: an unusable checkpoint.dir, an empty --resume, a step too big to hold.
# Usage: operator_test.sh BUILD/arclight SOURCE_DIR
set -u
bin=$(realpath "$1"); src=$2
mpirun=${MPIEXEC:-mpirun}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
passed=0 failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# Runs arclight on 3 ranks, each rank printing "exit-code RANK CODE" after the binary ends; 60 s at most.
run_ranks() {
  timeout 60 "$mpirun" --oversubscribe --allow-run-as-root -np 3 \
    bash -c '"$0" "$@"; echo "exit-code $OMPI_COMM_WORLD_RANK $?"' "$bin" "$@" >"$work/out" 2>"$work/err"
}
codes() { grep -h '^exit-code' "$work/out" | awk '{print $3}' | sort | uniq -c | awk '{print $1 "x" $2}' | xargs; }

# Each case names a run.dir under $work: should a check regress, its training stays out of the source tree.
# A mistake: exit code 2 on every rank, one error line holding EXPECT, within seconds (no training first).
check_refused() {
  local what=$1 expect=$2; shift 2
  local start=$SECONDS before=$failures
  run_ranks train --config configs/tiny.toml "$@"
  [ "$(codes)" = "3x2" ] || fail "$what: exit codes '$(codes)', want 3x2"
  [ "$(grep -c 'error\]' "$work/err")" = 1 ] || fail "$what: $(grep -c 'error\]' "$work/err") error lines, want 1"
  grep -qF -- "$expect" "$work/err" || fail "$what: message lacks '$expect': $(cat "$work/err")"
  [ $((SECONDS - start)) -lt 30 ] || fail "$what: took $((SECONDS - start)) s"
  [ $failures = "$before" ] && passed=$((passed + 1))
}

cd "$src"

# Point 13. Tests run as root, and root writes into a chmod 555 directory: so the unwritable
# directories here are ones root cannot write either (a regular file, a path under /dev/null, /proc).
touch "$work/a_file"
check_refused "checkpoint.dir a file" "checkpoint.dir $work/a_file cannot hold checkpoints: it is not a directory" \
  --checkpoint.dir "$work/a_file" --run.dir "$work/run"
check_refused "checkpoint.dir under /dev/null" "checkpoint.dir /dev/null/ckpt cannot hold checkpoints: cannot create it" \
  --checkpoint.dir /dev/null/ckpt --run.dir "$work/run"
check_refused "checkpoint.dir in /proc" "checkpoint.dir /proc/arclight_ckpt cannot hold checkpoints" \
  --checkpoint.dir /proc/arclight_ckpt --run.dir "$work/run"
# The default, <run.dir>/checkpoints, is checked too.
check_refused "run.dir a file" "checkpoint.dir $work/a_file/checkpoints cannot hold checkpoints" \
  --run.dir "$work/a_file"

# A missing directory is created at start-up and the run goes on.
before=$failures
run_ranks train --config configs/tiny.toml --run.dir "$work/run" --run.steps 1 --checkpoint.dir "$work/new/ckpt"
[ "$(codes)" = "3x0" ] || fail "missing checkpoint.dir: exit codes '$(codes)', want 3x0: $(tail -5 "$work/err")"
[ -d "$work/new/ckpt" ] || fail "missing checkpoint.dir: not created"
[ -z "$(find "$work/new/ckpt" -name '.arclight_probe_*')" ] || fail "missing checkpoint.dir: probe file left behind"
[ $failures = "$before" ] && passed=$((passed + 1))

# Point 14: an empty --resume (an empty variable in a script) is not a fresh run.
check_refused "empty --resume" "--resume needs auto or a version file" --resume "" --run.dir "$work/run"

# Point 6: a step's rollouts must fit in rank 0's memory.
check_refused "huge tasks_per_step" "more than the 1000000 allowed" --grpo.tasks_per_step 2000000000 --run.dir "$work/run"

echo "$passed passed, $failures failed"
[ $failures = 0 ]
