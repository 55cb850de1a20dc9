#!/usr/bin/env bash
# scripts/bench.sh demo: the workstation demo (configs/workstation.toml, 4 ranks) for a fixed
# number of steps, its own 300 (STEPS to change); where its CPU time goes, from
# <run.dir>/usage.json (each rank's user, system and compute time, the last being the CPU time
# it spends generating or training, all over the training's wall time; the CPU each rank spent
# starting, loading LibTorch, before it is printed apart), and each rank's peak resident memory.
# Fewer steps weigh the start more: up to its first checkpoint (step 50) rank 0's store grows
# into memory it touches for the first time, which costs it a page fault each 4 KiB.
# Aims on 4 ranks and 2 cores: system time <= 10% of all CPU time, rank 0 <= 15% of a core,
# compute efficiency (compute time of all ranks / (cores x wall time)) >= 0.75.
set -euo pipefail
root=$1
steps=${STEPS:-300}
run=$(mktemp -d)
trap 'rm -rf "$run"' EXIT
flags=(--oversubscribe)
[ "$(id -u)" -ne 0 ] || flags+=(--allow-run-as-root)
cd "$root"
timeout 1200 mpirun "${flags[@]}" -np "${NP:-4}" build/arclight train --config configs/workstation.toml \
  --run.dir "$run" --run.steps "$steps" >/dev/null
python3 - "$run" "$steps" <<'PY'
import json, sys
run, steps = sys.argv[1], int(sys.argv[2])
u = json.load(open(f"{run}/usage.json"))
wall, cores, ranks = u["wall_seconds"], u["node_cores"], u["ranks"]
user = sum(r["user_seconds"] for r in ranks)
system = sum(r["system_seconds"] for r in ranks)
compute = sum(r["compute_seconds"] for r in ranks)
start = sum(r["start_cpu_seconds"] for r in ranks)
rank0 = ranks[0]["user_seconds"] + ranks[0]["system_seconds"]
last = [json.loads(l) for l in open(f"{run}/metrics.jsonl")][-1]
fig = {
    "steps": steps, "ranks": len(ranks), "cores": cores,
    "seconds_per_step": round(wall / steps, 3),
    "user_seconds": round(user, 1), "system_seconds": round(system, 1),
    "system_share": round(system / max(1e-9, user + system), 3),
    "rank0_core_share": round(rank0 / wall, 3),
    "compute_efficiency": round(compute / (cores * wall), 3),
    "start_cpu_seconds": round(start, 1),
    "peak_resident_mib": [r["peak_resident_mib"] for r in ranks],
    "val_success": last.get("val_success"),
}
for r in ranks:
    print(f"rank {r['rank']} {r['role']:<12} user {r['user_seconds']:7.1f} s  system {r['system_seconds']:6.1f} s  "
          f"compute {r['compute_seconds']:7.1f} s  ({(r['user_seconds'] + r['system_seconds']) / wall:.2f} of a core; "
          f"{r['start_cpu_seconds']:.1f} s to start; peak {r['peak_resident_mib']} MiB)")
print(f"{steps} steps in {wall:.1f} s on {cores} cores: system share {fig['system_share']} (aim <= 0.10), "
      f"rank 0 {fig['rank0_core_share']} of a core (aim <= 0.15), compute efficiency {fig['compute_efficiency']} (aim >= 0.75)")
print(json.dumps(fig))
PY
