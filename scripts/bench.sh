#!/usr/bin/env bash
# scripts/bench.sh NAME: builds and runs benchmark NAME (bench/NAME.sh); its last line
# is one JSON object of its figures. `scripts/bench.sh all` runs them all and ends with one
# table (figure, ours, baseline, ratio). `scripts/bench.sh` alone lists the benchmarks.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
available=$(cd "$root/bench" && ls ./*.sh 2>/dev/null | sed 's|^\./||; s|\.sh$||' | xargs)
name=${1:-}
if [ "$name" = all ]; then
  # Every benchmark in turn (one that fails is named at the end, the others still run); then one table of
  # figure, baseline and ratio.
  results=$(mktemp); trap 'rm -f "$results"' EXIT
  failed=""
  for b in $available; do
    echo "== $b" >&2
    if last=$(bash "$root/scripts/bench.sh" "$b" | tee /dev/stderr | tail -n 1); then
      echo "$b $last" >>"$results"
    else
      failed="$failed $b"
    fi
  done
  python3 "$root/scripts/bench_table.py" <"$results" || failed="$failed (the table: lines it could not read)"
  if [ -n "$failed" ]; then
    echo "bench: failed:$failed" >&2
    exit 1
  fi
  exit 0
fi
if [ -z "$name" ] || [ ! -f "$root/bench/$name.sh" ]; then
  echo "usage: scripts/bench.sh NAME|all   (benchmarks: ${available:-none yet})" >&2
  exit 2
fi
shift
bash "$root/scripts/build.sh" >/dev/null
exec bash "$root/bench/$name.sh" "$root" "$@"
