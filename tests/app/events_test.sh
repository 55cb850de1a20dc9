#!/usr/bin/env bash
# TensorBoard event files of a real run read back by an independent reader (Python, Debian's
# python3-protobuf), checked against metrics.jsonl; then the plots and the summary made from it.
set -u
bin=$(realpath "$1"); src=$2
mpirun=${MPIEXEC:-mpirun}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$src"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
timeout 120 "$mpirun" --oversubscribe --allow-run-as-root -np 4 "$bin" train --config configs/tiny.toml \
  --run.dir "$work/run" --run.steps 8 --grpo.validate_every 4 >"$work/out" 2>"$work/err" || fail "train: $(tail -3 "$work/err")"
mkdir -p "$work/py"
/usr/bin/python3 tests/app/read_events.py "$work/run" "$work/py" || fail "the event file did not read back"
/usr/bin/python3 scripts/plot_metrics.py "$work/run" >"$work/plot.out" 2>&1 || fail "plot_metrics.py: $(tail -3 "$work/plot.out")"
for png in learning.png validation.png throughput.png; do
  [ -s "$work/run/report/$png" ] || fail "no report/$png"
done
grep -q "^| steps | 8 |" "$work/run/report/summary.md" 2>/dev/null || fail "summary.md: $(cat "$work/run/report/summary.md" 2>/dev/null)"
echo "$((failures > 3 ? 0 : 3 - failures)) passed, $failures failed"
[ $failures = 0 ]
