#!/usr/bin/env bash
# scripts/bench.sh store: the store in-process, then over MPI with 1..N clients against
# raw MPI ping-pong in the same run. Last line: one JSON object of all figures.
set -euo pipefail
root=$1
max_clients=${MAX_CLIENTS:-3}
cmake --build "$root/build" --target bench_store_local bench_store_mpi -j"$(nproc)" >/dev/null
flags=(--oversubscribe)
[ "$(id -u)" -ne 0 ] || flags+=(--allow-run-as-root)

local_out=$("$root/build/bench/bench_store_local" "${ROLLOUTS:-20000}")
echo "$local_out" | head -n -1
json=$(echo "$local_out" | tail -n 1)
mpi_json=""
for n in $(seq 1 "$max_clients"); do
  out=$(timeout 300 mpirun "${flags[@]}" -np $((n + 1)) "$root/build/bench/bench_store_mpi" "${MPI_ROLLOUTS:-2000}")
  echo "$out" | head -n -1
  mpi_json+="${mpi_json:+, }$(echo "$out" | tail -n 1)"
done
echo "${json%\}}, \"mpi\": [${mpi_json}]}"
