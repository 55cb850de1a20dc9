#!/bin/bash
# arclight on 16 nodes x 8 GPUs: sbatch slurm/train_128gpu.sh
#
# Ranks: one per GPU (128) plus the coordinator, rank 0, which lives on the first node
# beside its 8 GPU ranks and uses no GPU (it serves the rollout store and runs GRPO's
# bookkeeping on CPU). A rank's GPU is its node-local rank modulo the GPUs per node.
#
# Overrides, by environment (sbatch --export) or by sbatch options, which beat the #SBATCH lines:
#   ARCLIGHT_CONFIG   configuration file            (configs/train_128gpu.toml)
#   ARCLIGHT_CKPT     checkpoint directory           (runs/<job name>/checkpoints; it beats the config's
#                     checkpoint.dir, and the chain's successors keep it)
#   ARCLIGHT_ARGS     extra `arclight train` flags, e.g. "--run.steps 500"
#   ARCLIGHT_BIN      the binary                      (build/arclight)
#   GPUS_PER_NODE     GPUs per node                   (Slurm's SLURM_GPUS_ON_NODE, else 8; 0 on CPU-only nodes)
#   sbatch --nodes=N  node count; the rank count follows: N x GPUS_PER_NODE + 1
#   ARCLIGHT_CHAIN    links left in the job chain (0: none). When the job is stopped by the
#                     time limit or a pre-emption before training is done, it checkpoints and
#                     submits its successor (afterany on this job), which resumes; a finished run
#                     submits nothing. With no links left it requeues itself instead.
#   ARCLIGHT_SBATCH_ARGS  sbatch options the successor is submitted with (the overrides this job had)
#   ARCLIGHT_SCRIPT   the script the successor runs   (slurm/train_128gpu.sh)
#   ARCLIGHT_MAX_HANG_REQUEUES  times a job that ended itself on a hung rank (exit 3, no signal) is requeued (3):
#                     a node that hangs again and again would otherwise requeue the job for ever
#   ARCLIGHT_MODEL_STAGE  a directory on each node's own disk (e.g. /tmp or /local/scratch): the Hugging Face model
#                     directory ARCLIGHT_MODEL (the config's model.path) is copied there once per node before training
#                     (srun, one task per node; the weights, JSON, Jinja and tokenizer.model files, links followed, as
#                     a Hugging Face cache's snapshot holds them) and every rank reads it from there (--model.path).
#                     Removed when the job step ends on its own; a job that Slurm ends (scancel, time limit, requeue)
#                     can start no step to remove it: the node's /tmp cleaning (job_container/tmpfs, an epilog) must.
#                     A resume goes on from another job's copy where the model's files are alike.
#
#SBATCH --job-name=arclight
#SBATCH --nodes=16
#SBATCH --ntasks-per-node=8
#SBATCH --gpus-per-node=8
#SBATCH --overcommit
#SBATCH --exclusive
#SBATCH --requeue
#SBATCH --time=24:00:00
#SBATCH --signal=B:USR1@600
#SBATCH --output=slurm-%x-%j.out
#SBATCH --error=slurm-%x-%j.out
#SBATCH --open-mode=append

set -uo pipefail
cd "${SLURM_SUBMIT_DIR:-.}"

config=${ARCLIGHT_CONFIG:-configs/train_128gpu.toml}
bin=${ARCLIGHT_BIN:-build/arclight}
ckpt=${ARCLIGHT_CKPT:-runs/${SLURM_JOB_NAME:-arclight}/checkpoints}
gpus=${GPUS_PER_NODE:-${SLURM_GPUS_ON_NODE:-8}}  # Slurm sets the second where it hands out GPUs
nodes=${SLURM_JOB_NUM_NODES:-1}
if [ "$gpus" -gt 0 ]; then ranks=$((nodes * gpus + 1)); else ranks=${SLURM_NTASKS:-2}; fi
exit_requeue=3  # arclight's exit code after a signal-triggered checkpoint

# NCCL: InfiniBand where present, its own CPU affinity (no binding by the launcher), and
# errors that surface instead of hanging.
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
export NCCL_IB_DISABLE=${NCCL_IB_DISABLE:-0}
export NCCL_ASYNC_ERROR_HANDLING=1
export NCCL_IGNORE_CPU_AFFINITY=1
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

echo "arclight job ${SLURM_JOB_ID:-?} (restart ${SLURM_RESTART_COUNT:-0}): $nodes node(s), $ranks ranks, config $config, checkpoints $ckpt"

# Slurm's warning before the time limit (B:USR1) reaches this shell: forward it to the job step,
# which checkpoints at its next step and exits with 3; this script then requeues or chains.
# SIGTERM means Slurm itself is ending the job (scontrol requeue, pre-emption, scancel): ask for
# a checkpoint within KillWait the same way, but leave the requeue to Slurm.
warned=0 termed=0 step=""
forward() { echo "arclight: $1 received, asking the job to checkpoint"; [ -n "$step" ] && kill -USR1 "$step" 2>/dev/null; }
trap 'warned=1; forward SIGUSR1' USR1
trap 'termed=1; forward SIGTERM' TERM

# The model staged to every node's own disk (ARCLIGHT_MODEL_STAGE), at a path of this job's.
model_args=()
staged=""
if [ -n "${ARCLIGHT_MODEL_STAGE:-}" ]; then
  if [ -z "${ARCLIGHT_MODEL:-}" ] || [ ! -f "${ARCLIGHT_MODEL}/config.json" ]; then
    echo "arclight: ARCLIGHT_MODEL_STAGE needs ARCLIGHT_MODEL, a model directory with config.json (it is '${ARCLIGHT_MODEL:-}')"
    exit 2
  fi
  staged="${ARCLIGHT_MODEL_STAGE%/}/arclight-model-${SLURM_JOB_ID:-$$}"
  [ "${staged#/}" = "$staged" ] && staged="$PWD/$staged"  # the copy runs in the model's directory
  # What loading reads, not the rest of the directory (a clone's .git, Llama's original/*.pth); -L: a Hugging Face
  # cache's snapshot is links to its blobs.
  copy='rm -rf "$1" && mkdir -p "$1" && cd "$2" &&
    for f in *.safetensors *.json *.jinja tokenizer.model; do [ -e "$f" ] || continue; cp -L "$f" "$1/" || exit 1; done'
  if ! srun --nodes="$nodes" --ntasks="$nodes" --ntasks-per-node=1 --kill-on-bad-exit=1 \
    bash -c "$copy" stage "$staged" "$ARCLIGHT_MODEL"; then
    echo "arclight: could not copy $ARCLIGHT_MODEL to $staged on every node"
    srun --nodes="$nodes" --ntasks="$nodes" --ntasks-per-node=1 rm -rf "$staged"
    exit 1
  fi
  echo "arclight: the model $ARCLIGHT_MODEL is staged to $staged on each of the $nodes node(s)"
  model_args=(--model.path "$staged")
fi
unstage() {
  [ -n "$staged" ] && srun --nodes="$nodes" --ntasks="$nodes" --ntasks-per-node=1 rm -rf "$staged"
}

root=""
[ "$(id -u)" -eq 0 ] && root="--allow-run-as-root"
# rank 0 first on node 0; the GPU ranks fill 8 slots per node; the one rank more than the slots
# (oversubscription of one) lands on node 0 too.
mpirun $root --oversubscribe --bind-to none -np "$ranks" \
  "$bin" train --config "$config" --checkpoint.dir "$ckpt" --resume auto ${model_args[@]+"${model_args[@]}"} ${ARCLIGHT_ARGS:-} &
step=$!
while :; do
  wait "$step"; rc=$?
  # wait returns early (>128) when a trapped signal arrives; the step is still running then.
  kill -0 "$step" 2>/dev/null || break
done
echo "arclight: the job step exited with $rc"
unstage
if [ "$rc" -eq "$exit_requeue" ] && [ "$warned" = 0 ] && [ "$termed" = 0 ]; then
  # Exit 3 with no signal seen: the job's own end (a hung rank or node), or Slurm's SIGTERM that
  # reached the ranks before this shell: give that a few seconds to come.
  sleep 5 & wait $! 2>/dev/null
fi

if [ "$rc" -eq "$exit_requeue" ] && [ "$warned" = 0 ] && [ "$termed" = 1 ]; then
  # The ranks checkpointed on Slurm's own SIGTERM (requeue, pre-emption, scancel), which may
  # reach this shell after they are done: Slurm decides what happens next. (Exit 3 with no
  # signal at all is the job's own: a hung rank or node. It requeues below.)
  echo "arclight: checkpointed; Slurm is ending or requeueing this job"
  exit "$exit_requeue"
fi
if [ "$rc" -eq "$exit_requeue" ] && [ "$warned" = 0 ] && [ "${SLURM_RESTART_COUNT:-0}" -ge "${ARCLIGHT_MAX_HANG_REQUEUES:-3}" ]; then
  echo "arclight: the job ended on a hung rank after ${SLURM_RESTART_COUNT:-0} restarts; not requeued again" \
    "(ARCLIGHT_MAX_HANG_REQUEUES=${ARCLIGHT_MAX_HANG_REQUEUES:-3})"
  exit "$exit_requeue"
fi
if [ "$rc" -eq "$exit_requeue" ]; then
  # Checkpointed on a signal (or ended on a hung rank), training not done: the next link of the chain, or a requeue.
  chain=${ARCLIGHT_CHAIN:-0}
  if [ "$chain" -gt 0 ] && [ -n "${SLURM_JOB_ID:-}" ]; then
    # In the environment, not in --export=NAME=VALUE: a comma in the path would cut it there. Without this job's
    # restart count: Slurm sets none on a fresh job, and the successor would count this one's hang requeues.
    next=$(ARCLIGHT_CHAIN=$((chain - 1)) ARCLIGHT_CKPT=$ckpt env -u SLURM_RESTART_COUNT sbatch --parsable ${ARCLIGHT_SBATCH_ARGS:-} \
      --dependency="afterany:$SLURM_JOB_ID" --job-name="${SLURM_JOB_NAME:-arclight}" --export=ALL \
      "${ARCLIGHT_SCRIPT:-slurm/train_128gpu.sh}") &&
      { echo "arclight: submitted the next link, job $next ($((chain - 1)) left after it)"; exit 0; }
  fi
  if [ -n "${SLURM_JOB_ID:-}" ] && scontrol requeue "$SLURM_JOB_ID"; then
    echo "arclight: requeued job $SLURM_JOB_ID"
    exit 0
  fi
  # Not requeueable (or outside Slurm): end in failure, so that an afternotok successor starts.
  exit "$exit_requeue"
fi
exit "$rc"
