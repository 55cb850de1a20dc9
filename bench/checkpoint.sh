#!/usr/bin/env bash
# scripts/bench.sh checkpoint: a full checkpoint write with fsync against dd conv=fsync and
# torch.save + fsync of the same bytes to the same directory; the blocking copy against memcpy;
# a restore against a read of the same file. One run, one directory.
set -euo pipefail
root=$1
params=${PARAMETERS:-8388608}
dir=${CHECKPOINT_BENCH_DIR:-$root/build/bench/checkpoint_bench}
rm -rf "$dir"; mkdir -p "$dir"; trap 'rm -rf "$dir"' EXIT
cmake --build "$root/build" --target bench_checkpoint -j"$(nproc)" >/dev/null
out=$("$root/build/bench/bench_checkpoint" "$dir/ours" "$params")
echo "$out" | head -n 1
json=$(echo "$out" | tail -n 1)
bytes=$(echo "$json" | /usr/bin/python3 -c "import json,sys; print(int(json.load(sys.stdin)['bytes']))")
file=$(echo "$json" | /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)['file'])")
start=$(date +%s.%N)
dd if=/dev/zero of="$dir/dd.bin" bs=1M count=$((bytes / 1048576)) conv=fsync status=none
dd_s=$(echo "$(date +%s.%N) - $start" | bc)
start=$(date +%s.%N)
cat "$file" >/dev/null
read_s=$(echo "$(date +%s.%N) - $start" | bc)
if ! /usr/bin/python3 -c "import torch" 2>/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-torch >/dev/null
fi
torch_s=$(/usr/bin/python3 - "$dir/torch.pt" "$params" <<'PY'
import os, sys, time, torch
path, n = sys.argv[1], int(sys.argv[2])
state = {"parameters": torch.full((n,), 0.5), "exp_avg": torch.full((n,), 0.25), "exp_avg_sq": torch.full((n,), 0.125)}
t = time.perf_counter()
with open(path, "wb") as f:
    torch.save(state, f)
    f.flush()
    os.fsync(f.fileno())
print(f"{time.perf_counter() - t:.4f}")
PY
)
/usr/bin/python3 - "$json" "$dd_s" "$torch_s" "$read_s" <<'PY'
import json, sys
d = json.loads(sys.argv[1])
dd, torch_s, read_s = (float(x) for x in sys.argv[2:5])
d.update(dd_fsync_s=dd, torch_save_fsync_s=torch_s, cold_read_s=read_s,
         write_vs_dd=dd / d["write_s"], write_vs_torch=torch_s / d["write_s"],
         blocking_over_memcpy=d["blocking_s"] / d["memcpy_s"], restore_over_read=d["restore_s"] / read_s)
print(f"write+fsync vs dd conv=fsync: {d['write_vs_dd']:.2f}; vs torch.save+fsync: {d['write_vs_torch']:.2f}; "
      f"blocking/memcpy: {d['blocking_over_memcpy']:.2f}; restore/read of the file: {d['restore_over_read']:.2f}")
del d["file"]
print(json.dumps(d))
PY
