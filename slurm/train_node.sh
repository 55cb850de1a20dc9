#!/bin/bash
# arclight on one node of a cluster (a quick run, a debug session): sbatch slurm/train_node.sh
# The same launcher as train_128gpu.sh on one node: 8 GPU ranks plus the coordinator, or
# CPU ranks with GPUS_PER_NODE=0 and sbatch --gpus-per-node=0 (then --ntasks sets the rank count).
#SBATCH --job-name=arclight-node
#SBATCH --nodes=1
#SBATCH --ntasks=9
#SBATCH --gpus-per-node=8
#SBATCH --requeue
#SBATCH --time=04:00:00
#SBATCH --signal=B:USR1@300
#SBATCH --output=slurm-%x-%j.out
#SBATCH --error=slurm-%x-%j.out
#SBATCH --open-mode=append
export ARCLIGHT_CONFIG=${ARCLIGHT_CONFIG:-configs/workstation.toml}
export ARCLIGHT_SCRIPT=${ARCLIGHT_SCRIPT:-slurm/train_node.sh}
exec bash "${SLURM_SUBMIT_DIR:-.}/slurm/train_128gpu.sh" "$@"
