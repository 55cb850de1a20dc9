#!/usr/bin/env bash
# Operator mistakes (issue 17) refused at start-up on every rank, with one sentence and exit code 2,
# before any training: an unusable checkpoint.dir, an empty --resume, a step too big to hold.
# Usage: operator_test.sh BUILD/arclight SOURCE_DIR
set -u
bin=$(realpath "$1"); src=$2
mpirun=${MPIEXEC:-mpirun}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
source "$src/tests/app/ranks.sh"
refusal_limit=30  # start-up checks: no training first

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
# A loop of links and a name too long: one sentence (a file system error the check did not catch ended rank 0 in
# std::terminate, the other ranks waiting).
ln -s "$work/loop_b" "$work/loop_a"; ln -s "$work/loop_a" "$work/loop_b"
check_refused "checkpoint.dir in a loop of links" "checkpoint.dir $work/loop_a/ckpt cannot hold checkpoints: cannot create it" \
  --checkpoint.dir "$work/loop_a/ckpt" --run.dir "$work/run"
long="$work/$(printf 'a%.0s' $(seq 300))/ckpt"
check_refused "checkpoint.dir name too long" "checkpoint.dir $long cannot hold checkpoints" \
  --checkpoint.dir "$long" --run.dir "$work/run"
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
