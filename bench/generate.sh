#!/usr/bin/env bash
# scripts/bench.sh generate: generation tokens/s with the KV cache against without it.
set -euo pipefail
root=$1
cmake --build "$root/build" --target bench_generate -j"$(nproc)" >/dev/null
"$root/build/bench/bench_generate" "${BATCH:-64}" "${NEW_TOKENS:-56}"
