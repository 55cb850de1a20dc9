#!/usr/bin/env bash
# scripts/bench.sh agl: Agent Lightning's store API over HTTP (bench/agl_bench.cpp: requests/s of enqueue, dequeue,
# span ingest as JSON and OTLP, completing an attempt, and store_mpi.cpp's mix; 1 client thread and CLIENTS (2)) set
# against the store over MPI with 1 client (bench_store_mpi, each operation's rate and the mix's) and in-process
# (bench_store_local), measured in the same run; Agent Lightning v0.3's in-memory store managed about 2,600 ops/s
# in-process on this kind of machine (issue 15). Last line: one JSON object of all figures and ratios.
set -euo pipefail
root=$1
cmake --build "$root/build" --target bench_agl bench_store_local bench_store_mpi -j"$(nproc)" >/dev/null
flags=(--oversubscribe)
[ "$(id -u)" -ne 0 ] || flags+=(--allow-run-as-root)

local_out=$("$root/build/bench/bench_store_local" "${LOCAL_ROLLOUTS:-20000}")
echo "$local_out" | head -n -1
mpi_out=$(timeout 300 mpirun "${flags[@]}" -np 2 "$root/build/bench/bench_store_mpi" "${MPI_ROLLOUTS:-2000}")
echo "$mpi_out" | head -n -1
http_out=$(timeout 600 "$root/build/bench/bench_agl" "${ROLLOUTS:-2000}" "${CLIENTS:-2}")
echo "$http_out" | head -n -1

python3 - "$(echo "$local_out" | tail -n 1)" "$(echo "$mpi_out" | tail -n 1)" "$(echo "$http_out" | tail -n 1)" <<'PY'
import json
import sys

local, mpi, out = (json.loads(a) for a in sys.argv[1:4])
agl_v03 = 2600  # Agent Lightning v0.3's in-memory store, in-process: issue 15's figure, a reference not measured here
http = out["http"][0]  # 1 client thread, as the MPI run's 1 client
ratios = {
    "enqueue_over_mpi": http["enqueue_per_s"] / mpi["enqueue_per_s"],
    "dequeue_over_mpi": http["dequeue_per_s"] / mpi["dequeue_per_s"],
    "spans_json_over_mpi": http["spans_json_per_s"] / mpi["add_span_per_s"],
    "spans_otlp_over_mpi": http["spans_otlp_per_s"] / mpi["add_span_per_s"],
    "otlp_batch_spans_over_mpi": http["otlp_batch_spans_per_s"] / mpi["add_span_per_s"],
    "complete_over_mpi": http["complete_per_s"] / mpi["update_attempt_per_s"],
    "mix_over_mpi": http["mix_ops_per_s"] / mpi["mpi_ops_per_s"],
    "mix_over_local": http["mix_ops_per_s"] / local["local_ops_per_s"],
    "mix_over_agl_v03": http["mix_ops_per_s"] / agl_v03,
}
r = {k: round(v, 4) for k, v in ratios.items()}
print(f"HTTP / MPI, 1 client each: enqueue {r['enqueue_over_mpi']}, dequeue {r['dequeue_over_mpi']}, "
      f"span JSON {r['spans_json_over_mpi']}, span OTLP {r['spans_otlp_over_mpi']} "
      f"(10 spans a request: {r['otlp_batch_spans_over_mpi']}), attempt succeeded {r['complete_over_mpi']}, "
      f"the mix {r['mix_over_mpi']}")
print(f"the mix over HTTP (1 client) / in-process store: {r['mix_over_local']}; "
      f"/ Agent Lightning v0.3's in-memory store in-process (~{agl_v03} ops/s, issue 15's figure, not measured "
      f"here): {r['mix_over_agl_v03']}")
out.update(mpi=mpi, local_ops_per_s=local["local_ops_per_s"], agl_v03_in_process_ops_per_s=agl_v03, ratios=r)
print(json.dumps(out))
PY
