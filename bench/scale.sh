#!/usr/bin/env bash
# scripts/bench.sh scale: rank 0's capacity against many logical runners (1,024 by default,
# multiplexed on 3 client ranks, 4 requests in flight on each: fewer in all than rank 0's 16 posted
# receives, as on the cluster, where each of 128 ranks holds one against 128 posted) that follow a
# runner's message pattern with the sizes of configs/train_128gpu.toml; the demand is that config's
# rollouts per step over the step time that docs/capacity.md estimates (0.3 s). Last line: one JSON
# object.
set -euo pipefail
root=$1
cmake --build "$root/build" --target bench_scale -j"$(nproc)" >/dev/null
flags=(--oversubscribe)
[ "$(id -u)" -ne 0 ] || flags+=(--allow-run-as-root)
timeout 900 mpirun "${flags[@]}" -np $((${CLIENT_RANKS:-3} + 1)) "$root/build/bench/bench_scale" \
  "${RUNNERS:-1024}" "${STEPS:-20}" "${ROLLOUTS_PER_STEP:-8192}" "${STEP_SECONDS:-0.3}" "${IN_FLIGHT:-4}"
