#!/usr/bin/env bash
# MPI tests of the real binary: dry run, bad input on every rank, a fatal error on one rank.
# Usage: mpi_cli_test.sh BUILD/arclight SOURCE_DIR ALLOCATOR
set -u
bin=$(realpath "$1"); src=$2; allocator=${3:-}
mpirun=${MPIEXEC:-mpirun}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# Runs arclight on NP ranks, each rank printing "exit-code RANK CODE" after the binary ends.
# Bounded: the whole job gets 60 s.
run_ranks() {
  local np=$1; shift
  timeout 60 "$mpirun" --oversubscribe --allow-run-as-root -np "$np" \
    bash -c '"$0" "$@"; echo "exit-code $OMPI_COMM_WORLD_RANK $?"' "$bin" "$@" >"$work/out" 2>"$work/err"
  echo $? >"$work/rc"
}
codes() { grep -h '^exit-code' "$work/out" | awk '{print $3}' | sort | uniq -c | awk '{print $1 "x" $2}' | xargs; }

cd "$src"

# 1. The dry run prints the effective configuration and every rank's role.
run_ranks 4 train --config configs/workstation.toml --dry-run
[ "$(codes)" = "4x0" ] || fail "dry run: exit codes $(codes)"
grep -q 'layout.mode="split"' "$work/out" || fail "dry run: no effective configuration"
for role in "0     coordinator" "1     trainer" "2     runner" "3     runner"; do
  grep -q "^$role" "$work/out" || fail "dry run: no line '$role'"
done
[ "$(grep -c '^# roles' "$work/out")" = 1 ] || fail "dry run: roles printed more than once"
# Each rank's device (no GPU here: the CPU), a trainer's gradient transport (one trainer: none) and how the weights go
# from the trainer leader to the runners (from CPUs: MPI).
grep -q "^1 .* cpu .* none  *mpi$" "$work/out" || fail "dry run: no device, gradients and weights for the trainer: $(grep '^1 ' "$work/out")"
grep -q "^3 .* cpu .* -  *mpi$" "$work/out" || fail "dry run: no device and weights for a runner: $(grep '^3 ' "$work/out")"
run_ranks 4 train --config configs/workstation.toml --layout.trainers 2 --dry-run
grep -q "^2 .* cpu .* mpi  *-$" "$work/out" || fail "dry run: two trainers on CPUs should all-reduce over MPI: $(grep '^2 ' "$work/out")"

# 2. Bad input: one clear error, exit code 2 on every rank, within seconds.
check_bad_input() {
  local what=$1 expect=$2; shift 2
  local start=$SECONDS
  run_ranks 4 "$@"
  [ "$(codes)" = "4x2" ] || fail "$what: exit codes '$(codes)', want 4x2"
  [ "$(grep -c 'error\]' "$work/err")" = 1 ] || fail "$what: $(grep -c 'error\]' "$work/err") error lines, want 1"
  grep -q -- "$expect" "$work/err" || fail "$what: message lacks '$expect': $(cat "$work/err")"
  [ $((SECONDS - start)) -lt 30 ] || fail "$what: took $((SECONDS - start)) s"
}
printf '[run]\nstepz = 3\n' >"$work/unknown.toml"
check_bad_input "unknown key" "unknown key 'run.stepz'" train --config "$work/unknown.toml" --dry-run
printf '[run]\nsteps = "many"\n' >"$work/type.toml"
check_bad_input "wrong type" "run.steps" train --config "$work/type.toml" --dry-run
check_bad_input "impossible layout" "no runner" train --config configs/workstation.toml --layout.trainers 3 --dry-run
check_bad_input "missing config" "/nonexistent.toml" train --config /nonexistent.toml --dry-run

# 3. A fatal error on one rank ends every rank promptly, with the one message.
start=$SECONDS
run_ranks 4 train --config configs/workstation.toml --faults.fatal_rank 2
[ "$(cat "$work/rc")" != 124 ] || fail "fatal error: the job hung"
[ "$(cat "$work/rc")" != 0 ] || fail "fatal error: mpirun exited 0"
grep -q 'r2 error\] fault drill: rank 2' "$work/err" || fail "fatal error: message missing: $(cat "$work/err")"
[ "$(grep -c 'error\]' "$work/err")" = 1 ] || fail "fatal error: more than one arclight error line"
[ $((SECONDS - start)) -lt 30 ] || fail "fatal error: took $((SECONDS - start)) s"

# 4. One rank is not a job.
run_ranks 1 train --config configs/workstation.toml
[ "$(codes)" = "1x2" ] || fail "one rank: exit codes $(codes)"
grep -q 'at least 2' "$work/err" || fail "one rank: message missing"

# 5. inspect of an empty directory reports no checkpoint.
mkdir -p "$work/ckpt"
run_ranks 2 inspect "$work/ckpt"
grep -q "no checkpoint in $work/ckpt" "$work/out" || fail "inspect: $(cat "$work/out")"
grep -q "exit-code 0 1" "$work/out" || fail "inspect of an empty directory: not exit 1: $(codes)"
# ... and of one whose only version does not read: it is named INVALID, and the exit says nothing can resume.
head -c 100 /dev/urandom >"$work/ckpt/v00000002.h5"
run_ranks 2 inspect "$work/ckpt"
grep -q "v00000002.h5 .*INVALID" "$work/out" || fail "inspect of a damaged version: $(cat "$work/out")"
grep -q "exit-code 0 1" "$work/out" || fail "inspect with no valid version: not exit 1: $(codes)"

# 6. A bad value found by the job's own checks (not CLI11's) is refused the same way.
check_bad_input "unknown agent" "no such agent" train --config configs/workstation.toml --agent.name chess

# 7. The binary runs on the malloc the build linked (ALLOCATOR: jemalloc or glibc, from CMake), with
# its settings (src/app/jemalloc_settings.cpp): freed pages are kept, not given back to the kernel.
case "$allocator" in
  jemalloc)
    "$bin" --version | grep -q '^allocator: jemalloc ' || fail "--version: $("$bin" --version | grep allocator)"
    stats=$(MALLOC_CONF=stats_print:true "$bin" --version 2>&1)
    for decay in dirty muzzy; do
      grep -q "opt.${decay}_decay_ms: -1 " <<<"$stats" || fail "jemalloc runs without the binary's ${decay}_decay_ms"
    done ;;
  glibc) "$bin" --version | grep -q '^allocator: glibc malloc' || fail "--version: $("$bin" --version | grep allocator)" ;;
  *) fail "no allocator named (the test's third argument: jemalloc or glibc)" ;;
esac

echo "$((failures > 7 ? 0 : 7 - failures)) passed, $failures failed"
[ $failures = 0 ]
