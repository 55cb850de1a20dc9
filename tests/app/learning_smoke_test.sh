#!/usr/bin/env bash
# The real binary learns: on configs/tiny.toml (guess 1..7, fixed seed), the mean reward of
# the last 5 steps beats the first 5, and every step's line is in metrics.jsonl; usage.json has
# every rank, its CPU over the training's window holding its compute, the start apart. On-policy
# (tiny.toml: max_staleness 0, one epoch) the trainer's log-probs, taken at each token's sampling
# temperature, are those the runners recorded: hardly a ratio clipped at any step.
# Usage: learning_smoke_test.sh BIN SOURCE_DIR [NP [extra train flags...]]
set -u
bin=$(realpath "$1"); src=$2; np=${3:-4}; shift 3 2>/dev/null || shift $#
mpirun=${MPIEXEC:-mpirun}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$src"
timeout 170 "$mpirun" --oversubscribe --allow-run-as-root -np "$np" "$bin" train --config configs/tiny.toml \
  --run.dir "$work/run" "$@" >"$work/out" 2>"$work/err"
rc=$?
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
[ $rc = 0 ] || fail "train exited $rc: $(tail -5 "$work/err")"
lines=$(wc -l <"$work/run/metrics.jsonl" 2>/dev/null || echo 0)
[ "$lines" = 25 ] || fail "metrics.jsonl has $lines lines, want 25"
grep -q '^step=25 version=25 reward=' "$work/out" || fail "no progress line for step 25"
first=0; last=0; clipped=1
[ -f "$work/run/metrics.jsonl" ] && read -r first last clipped < <(python3 - "$work/run/metrics.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
r = [row["reward"] for row in rows]
print(sum(r[:5]) / 5, sum(r[-5:]) / 5, max(row["clip_fraction"] for row in rows))
PY
)
echo "mean reward, first 5 steps: $first; last 5 steps: $last; most clipped in a step: $clipped"
usage=$(python3 - "$work/run/usage.json" "$np" <<'PY' 2>&1
import json, sys
u = json.load(open(sys.argv[1]))
ranks = u["ranks"]
assert len(ranks) == int(sys.argv[2]), f"{len(ranks)} ranks in usage.json"
for r in ranks:
    window = r["user_seconds"] + r["system_seconds"]
    assert r["start_cpu_seconds"] > 0.05, f"rank {r['rank']}: start {r['start_cpu_seconds']} s"
    assert r["compute_seconds"] <= window + 0.05, f"rank {r['rank']}: compute {r['compute_seconds']} > {window}"
    assert window <= u["wall_seconds"] * u["node_cores"], f"rank {r['rank']}: {window} s of CPU"
    # LibTorch alone is more than 50 MiB resident; a terabyte is a unit gone wrong
    assert 50 < r["peak_resident_mib"] < 1 << 20, f"rank {r['rank']}: peak {r['peak_resident_mib']} MiB"
print("ok")
PY
)
[ "$usage" = ok ] || fail "usage.json: $usage"
python3 -c "import sys; sys.exit(0 if $last > $first + 0.2 else 1)" || fail "reward did not rise ($first -> $last)"
python3 -c "import sys; sys.exit(0 if $clipped < 0.02 else 1)" || fail "on-policy, yet $clipped of a step's ratios clipped"
echo "$((failures > 5 ? 0 : 5 - failures)) passed, $failures failed"
[ $failures = 0 ]
