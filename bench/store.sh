#!/usr/bin/env bash
# scripts/bench.sh store: the store in-process, then over MPI against raw MPI ping-pong.
set -euo pipefail
root=$1
cmake --build "$root/build" --target bench_store_local -j"$(nproc)" >/dev/null
"$root/build/bench/bench_store_local" "${ROLLOUTS:-20000}"
