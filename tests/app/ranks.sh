# Sourced by the app's script tests: run the real binary on 3 ranks and judge how each rank ended.
# Needs $bin, $mpirun and $work set; keeps the counts in $passed and $failures.
passed=0 failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# arclight on 3 ranks, each printing "exit-code RANK CODE" after the binary ends; ranks_timeout seconds at most.
run_ranks() {
  timeout "${ranks_timeout:-60}" "$mpirun" --oversubscribe --allow-run-as-root -np 3 \
    bash -c '"$0" "$@"; echo "exit-code $OMPI_COMM_WORLD_RANK $?"' "$bin" "$@" >"$work/out" 2>"$work/err"
}
# How the ranks ended, e.g. "3x2": three ranks with exit code 2.
codes() { grep -h '^exit-code' "$work/out" | awk '{print $3}' | sort | uniq -c | awk '{print $1 "x" $2}' | xargs; }

# A mistake refused at start-up: training on configs/tiny.toml with these flags ends with exit code 2 on every
# rank and one error line holding EXPECT (within refusal_limit seconds, when that is set).
check_refused() {
  local what=$1 expect=$2; shift 2
  local start=$SECONDS before=$failures
  run_ranks train --config configs/tiny.toml "$@"
  [ "$(codes)" = "3x2" ] || fail "$what: exit codes '$(codes)', want 3x2: $(tail -3 "$work/err")"
  [ "$(grep -c 'error\]' "$work/err")" = 1 ] || fail "$what: $(grep -c 'error\]' "$work/err") error lines, want 1"
  grep -qF -- "$expect" "$work/err" || fail "$what: message lacks '$expect': $(cat "$work/err")"
  [ -z "${refusal_limit:-}" ] || [ $((SECONDS - start)) -lt "$refusal_limit" ] ||
    fail "$what: took $((SECONDS - start)) s"
  [ $failures = "$before" ] && passed=$((passed + 1))
}
