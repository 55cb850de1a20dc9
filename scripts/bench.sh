#!/usr/bin/env bash
# scripts/bench.sh NAME: builds and runs benchmark NAME (bench/NAME.sh); its last line
# is one JSON object of its figures. `scripts/bench.sh` alone lists the benchmarks.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
available=$(cd "$root/bench" && ls ./*.sh 2>/dev/null | sed 's|^\./||; s|\.sh$||' | xargs)
name=${1:-}
if [ -z "$name" ] || [ ! -f "$root/bench/$name.sh" ]; then
  echo "usage: scripts/bench.sh NAME   (benchmarks: ${available:-none yet})" >&2
  exit 2
fi
shift
bash "$root/scripts/build.sh" >/dev/null
exec bash "$root/bench/$name.sh" "$root" "$@"
