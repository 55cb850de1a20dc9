#!/usr/bin/env bash
# scripts/bench.sh allreduce: the MPI reducer vs one raw MPI_Allreduce of the same bytes (25 and 100 MB).
set -euo pipefail
root=$1
cmake --build "$root/build" --target bench_allreduce -j"$(nproc)" >/dev/null
flags=(--oversubscribe)
[ "$(id -u)" -ne 0 ] || flags+=(--allow-run-as-root)
timeout 600 mpirun "${flags[@]}" -np "${NP:-2}" "$root/build/bench/bench_allreduce" "${REPEATS:-5}"
