#!/usr/bin/env bash
# scripts/bench.sh decode_batch: tokens/s of ragged sequences decoded by DecodeBatch against equal prompts generated
# in lockstep by Policy::generate.
set -euo pipefail
root=$1
cmake --build "$root/build" --target bench_decode_batch -j"$(nproc)" >/dev/null
"$root/build/bench/bench_decode_batch" "${SEQUENCES:-64}" "${NEW_TOKENS:-56}"
