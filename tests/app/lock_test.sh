#!/usr/bin/env bash
# Two jobs on one directory (issue 17, point 12): while a job runs, a second one (fresh or
# --resume auto, on its run.dir or its checkpoint.dir) exits 2 at start-up on every rank, naming
# the first one's host and PID, and leaves the first job's checkpoints and metrics where they are.
# Once the first job has ended, its directory is free again.
# Usage: lock_test.sh BUILD/arclight SOURCE_DIR
set -u
bin=$(realpath "$1"); src=$2
mpirun=${MPIEXEC:-mpirun}
work=$(mktemp -d)
first=
cleanup() {
  [ -n "$first" ] && kill -9 "$first" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
source "$src/tests/app/ranks.sh"

cd "$src"
run=$work/run
# The first job: far more steps than the test lasts, a version every step.
timeout 170 "$mpirun" --oversubscribe --allow-run-as-root -np 3 "$bin" train --config configs/tiny.toml \
  --run.dir "$run" --run.steps 100000 --checkpoint.every_steps 1 >"$work/first.out" 2>"$work/first.err" &
first=$!
for _ in $(seq 240); do [ -f "$run/checkpoints/LATEST" ] && break; sleep 0.5; done
[ -f "$run/checkpoints/LATEST" ] || { fail "the first job wrote no version: $(tail -5 "$work/first.err")"; exit 1; }

# The lock file names the first job's rank 0: this host, a live arclight process.
holder=$(cat "$run/.arclight.lock")
pid=${holder##*PID }
[ "$holder" = "host $(hostname), PID $pid" ] || fail "lock file says '$holder'"
grep -q arclight "/proc/$pid/cmdline" 2>/dev/null || fail "PID $pid in the lock file is no arclight process"

check_refused "a second fresh job" "run.dir $run is in use by another job ($holder)" --run.dir "$run"
check_refused "a second job with --resume auto" "run.dir $run is in use by another job ($holder)" \
  --run.dir "$run" --resume auto
check_refused "a second job on the checkpoint.dir only" \
  "checkpoint.dir $run/checkpoints is in use by another job ($holder)" \
  --run.dir "$work/other" --checkpoint.dir "$run/checkpoints"

# run.lock_wait_seconds: the held directory is waited for, then refused, saying so.
start=$SECONDS
check_refused "a job that waits 3 s for the directory" "run.dir $run is in use by another job ($holder), still after 3 s" \
  --run.dir "$run" --run.lock_wait_seconds 3
[ $((SECONDS - start)) -ge 3 ] || fail "the job waiting 3 s for the directory gave up after $((SECONDS - start)) s"
grep -q "is in use by another job ($holder): waiting up to 3 s for it to end" "$work/err" ||
  fail "no word of the wait: $(cat "$work/err")"

# A pre-emption's signal during the wait ends it at once (waiting on past Slurm's KillWait would end in SIGKILL):
# exit 3 on every rank, to be run again, saying why.
timeout 60 "$mpirun" --oversubscribe --allow-run-as-root -np 3 \
  bash -c 'trap : USR1; "$0" "$@"; echo "exit-code $OMPI_COMM_WORLD_RANK $?"' "$bin" train --config configs/tiny.toml \
  --run.dir "$run" --run.lock_wait_seconds 60 >"$work/out" 2>"$work/err" &
stopped=$!
for _ in $(seq 60); do grep -q "waiting up to 60 s" "$work/err" && break; sleep 0.5; done
grep -q "waiting up to 60 s" "$work/err" || fail "the job to be stopped did not wait: $(tail -3 "$work/err")"
start=$SECONDS
kill -USR1 "$(pgrep -P $stopped)"  # mpirun (under timeout) forwards SIGUSR1 to every rank (the wrapper outlives it)
wait "$stopped"
[ $((SECONDS - start)) -le 10 ] || fail "the waiting job took $((SECONDS - start)) s to end after SIGUSR1"
[ "$(codes)" = "3x3" ] || fail "a stop signal in the wait: exit codes '$(codes)', want 3x3: $(tail -3 "$work/err")"
grep -qF "is in use by another job ($holder): a stop signal came while waiting for it" "$work/err" ||
  fail "no word of the stop: $(cat "$work/err")"

# Nothing of the first job's was set aside, and it still runs.
[ -z "$(ls -d "$run"/checkpoints.superseded-* 2>/dev/null)" ] || fail "the first job's checkpoints were set aside"
[ ! -d "$run/archive" ] || fail "the first job's metrics were archived"
kill -0 "$first" 2>/dev/null || fail "the first job ended: $(tail -5 "$work/first.err")"

# Once it has ended (however: here kill -9 of the holder, and mpirun ends the rest), the lock is
# gone with it: a job waiting for it (a job requeued after its node failed) takes it and resumes, and so does one
# started afterwards.
timeout 120 "$mpirun" --oversubscribe --allow-run-as-root -np 3 "$bin" train --config configs/tiny.toml \
  --run.dir "$run" --run.steps 100000 --resume auto --run.lock_wait_seconds 60 >"$work/waiter.out" 2>"$work/waiter.err" &
waiter=$!
for _ in $(seq 60); do grep -q "waiting up to 60 s" "$work/waiter.err" && break; sleep 0.5; done
grep -q "waiting up to 60 s" "$work/waiter.err" || fail "the waiting job did not wait: $(tail -3 "$work/waiter.err")"
kill -9 "$pid"
wait "$first" 2>/dev/null
first=
for _ in $(seq 120); do grep -q "resuming guess from step" "$work/waiter.out" && break; sleep 0.5; done
grep -q "resuming guess from step" "$work/waiter.out" ||
  fail "the waiting job did not take the directory: $(tail -3 "$work/waiter.err")"
waiter_pid=$(cat "$run/.arclight.lock"); waiter_pid=${waiter_pid##*PID }
[ "$waiter_pid" != "$pid" ] && kill -9 "$waiter_pid" 2>/dev/null
wait "$waiter" 2>/dev/null
before=$failures
step=$(grep -o 'v[0-9]*' "$run/checkpoints/LATEST" | tr -dc 0-9 | sed 's/^0*//')
run_ranks train --config configs/tiny.toml --run.dir "$run" --resume auto --run.steps $((step + 1))
[ "$(codes)" = "3x0" ] || fail "resume after the first job: exit codes '$(codes)', want 3x0: $(tail -5 "$work/err")"
[ $failures = "$before" ] && passed=$((passed + 1))

echo "$passed passed, $failures failed"
[ $failures = 0 ]
