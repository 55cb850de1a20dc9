#!/usr/bin/env bash
# scripts/bench.sh train: one training step of arclight (2 MPI ranks) against PyTorch DDP
# (gloo, Debian's python3-torch, 2 processes) on the same model and batch, in one run.
set -euo pipefail
root=$1
batch=${BATCH:-512}; length=${LENGTH:-17}; steps=${STEPS:-10}
cmake --build "$root/build" --target bench_train_step -j"$(nproc)" >/dev/null
flags=(--oversubscribe)
[ "$(id -u)" -ne 0 ] || flags+=(--allow-run-as-root)
ours=$(timeout 600 mpirun "${flags[@]}" -np 2 "$root/build/bench/bench_train_step" "$batch" "$length" "$steps")
# One compute thread a process on both sides: ours sets LibTorch's and OpenBLAS's pools to 1; Debian's PyTorch
# reaches OpenBLAS through libblas.so.3, whose pool torch.set_num_threads leaves on every core.
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
port=$((29500 + RANDOM % 1000))
timeout 600 /usr/bin/python3 "$root/bench/ddp_train.py" 1 2 "$port" "$batch" "$length" "$steps" >/dev/null &
second=$!
ddp=$(timeout 600 /usr/bin/python3 "$root/bench/ddp_train.py" 0 2 "$port" "$batch" "$length" "$steps")
wait "$second"  # its failure fails the bench (set -e)
ratio=$(/usr/bin/python3 -c "print(f'{$ddp / $ours:.3f}')")
echo "train step, batch $batch x $length tokens, 2 processes: arclight ${ours}s, PyTorch DDP (gloo) ${ddp}s: DDP/ours = ${ratio}"
echo "{\"arclight_step_s\": $ours, \"ddp_step_s\": $ddp, \"ddp_over_ours\": $ratio}"
