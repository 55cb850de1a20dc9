#!/bin/bash
# arclight on 16 nodes x 8 GPUs: sbatch slurm/train_128gpu.sh
#
# Ranks: one per GPU (128) plus the coordinator, rank 0, which lives on the first node
# beside its 8 GPU ranks and uses no GPU (it serves the rollout store and runs GRPO's
# bookkeeping on CPU). A rank's GPU is its node-local rank modulo the GPUs per node.
#
# Overrides, by environment (sbatch --export) or by sbatch options, which beat the #SBATCH lines:
#   ARCLIGHT_CONFIG   configuration file            (configs/train_128gpu.toml)
#   ARCLIGHT_CKPT     checkpoint directory           (runs/<job name>-<config's name>/checkpoints; it beats the
#                     config's checkpoint.dir, and the chain's successors keep it)
#   ARCLIGHT_ARGS     extra `arclight train` flags, e.g. "--run.steps 500" (not --config, --checkpoint.dir or
#                     --resume, which the script sets from the variables here)
#   ARCLIGHT_BIN      the binary                      (build/arclight)
#   GPUS_PER_NODE     GPUs per node                   (Slurm's SLURM_GPUS_ON_NODE, else 8; 0 on CPU-only nodes)
#   sbatch --nodes=N  node count; the rank count follows: N x GPUS_PER_NODE + 1
#   ARCLIGHT_CHAIN    links left in the job chain (0: none). When the job is stopped by the
#                     time limit or a pre-emption before training is done, it checkpoints and
#                     submits its successor (afterany on this job), which resumes; a finished run
#                     submits nothing. With no links left it requeues itself instead.
#   ARCLIGHT_SBATCH_ARGS  sbatch options the successor is submitted with, beyond what it takes from this job by itself
#                     (its node and task counts, GPUs per node, partition, account, QOS and time limit): --output, say
#   ARCLIGHT_SCRIPT   the script the successor runs   (slurm/train_128gpu.sh)
#   ARCLIGHT_MAX_FAILURE_REQUEUES  times in a row a job that failed (a rank or node lost: mpirun's exit 1 or a signal's
#                     128+N; a hung rank: exit 3 with no signal) is requeued without a new checkpoint in between (3). A
#                     new version starts the count again, so a long run survives any number of node failures, while a
#                     failure that comes back before the next checkpoint (a bad node, a bad version) ends the job.
#                     Counted in the checkpoint directory (.slurm-failures), so a chain's links share it.
#   ARCLIGHT_MODEL_STAGE  a directory on each node's own disk (e.g. /tmp or /local/scratch): the Hugging Face model
#                     directory ARCLIGHT_MODEL (required with it; the config must say model.source = "hf", as
#                     configs/qwen3_0.6b.toml does) is copied there once per node before training
#                     (srun, one task per node; the weights, JSON, Jinja and tokenizer.model files, links followed, as
#                     a Hugging Face cache's snapshot holds them) and every rank reads it from there (--model.path).
#                     Removed when the job step ends on its own; a job that Slurm ends (scancel, time limit, requeue)
#                     can start no step to remove it: the next job of the user that stages on the node does (the
#                     copies of the user's jobs no longer queued), or the node's /tmp cleaning.
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
# The config's name too: two runs of one job name and two configs must not resume each other.
config_name=$(basename "$config" .toml)
ckpt=${ARCLIGHT_CKPT:-runs/${SLURM_JOB_NAME:-arclight}-$config_name/checkpoints}
before_2026_12=runs/${SLURM_JOB_NAME:-arclight}/checkpoints  # the default before the config's name was in it
if [ -z "${ARCLIGHT_CKPT:-}" ] && ! compgen -G "$ckpt/v*.h5" >/dev/null && compgen -G "$before_2026_12/v*.h5" >/dev/null
then
  echo "arclight: going on with $before_2026_12, this job name's checkpoint directory before 2026-12 (the default is" \
    "now $ckpt; ARCLIGHT_CKPT names one)"
  ckpt=$before_2026_12
fi
gpus=${GPUS_PER_NODE:-${SLURM_GPUS_ON_NODE:-8}}  # Slurm sets the second where it hands out GPUs
nodes=${SLURM_JOB_NUM_NODES:-1}
exit_requeue=3  # arclight's exit code after a signal-triggered checkpoint
exit_usage=2    # bad configuration or input: never requeued
max_failures=${ARCLIGHT_MAX_FAILURE_REQUEUES:-${ARCLIGHT_MAX_HANG_REQUEUES:-3}}  # the second: its name before 2026-12
# A typo must not pass for a setting: `[ 6 -gt abc ]` is false, and such a limit requeued a failing job forever.
for setting in "GPUS_PER_NODE=$gpus" "ARCLIGHT_MAX_FAILURE_REQUEUES=$max_failures" "ARCLIGHT_CHAIN=${ARCLIGHT_CHAIN:-0}"; do
  case ${setting#*=} in  # no leading zero either: bash reads 08 as octal, and fails
    '' | *[!0-9]* | 0?*)
      echo "arclight: $setting is not a whole number"
      exit "$exit_usage"
      ;;
  esac
done
if [ "$gpus" -gt 0 ]; then ranks=$((nodes * gpus + 1)); else ranks=${SLURM_NTASKS:-2}; fi
read -r -a extra_args <<<"${ARCLIGHT_ARGS:-}"  # split on blanks, never globbed
read -r -a successor_args <<<"${ARCLIGHT_SBATCH_ARGS:-}"
# Flags this script gives arclight itself: CLI11 would refuse one given twice ("--resume: At Most 1"), naming neither
# ARCLIGHT_ARGS nor the variable that sets it.
for arg in ${extra_args[@]+"${extra_args[@]}"}; do
  case $arg in
    --config | --config=*) instead="ARCLIGHT_CONFIG names the configuration" ;;
    --checkpoint.dir | --checkpoint.dir=*) instead="ARCLIGHT_CKPT names the checkpoint directory" ;;
    --resume | --resume=*) instead="it resumes from the newest good version in ARCLIGHT_CKPT (--resume auto)" ;;
    --model.path | --model.path=*)
      [ -n "${ARCLIGHT_MODEL_STAGE:-}" ] || continue
      instead="with ARCLIGHT_MODEL_STAGE, ARCLIGHT_MODEL names the model to stage"
      ;;
    *) continue ;;
  esac
  echo "arclight: ARCLIGHT_ARGS gives ${arg%%=*}, which this script sets itself: $instead"
  exit "$exit_usage"
done
if [ "$gpus" -gt 0 ] && [ -n "${SLURM_NTASKS_PER_NODE:-}" ] && [ "$SLURM_NTASKS_PER_NODE" != "$gpus" ]; then
  # mpirun fills --ntasks-per-node slots a node: any other count puts two ranks on a GPU or leaves GPUs idle.
  echo "arclight: --ntasks-per-node is $SLURM_NTASKS_PER_NODE but the nodes have $gpus GPUs: give sbatch" \
    "--ntasks-per-node=$gpus (or GPUS_PER_NODE)"
  exit "$exit_usage"
fi

# NCCL: InfiniBand where present, its own CPU affinity (no binding by the launcher), and
# errors that surface instead of hanging.
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
export NCCL_IB_DISABLE=${NCCL_IB_DISABLE:-0}
export NCCL_ASYNC_ERROR_HANDLING=1
export NCCL_IGNORE_CPU_AFFINITY=1
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
# Slurm ends a job (requeue, pre-emption, scancel, the time limit) with SIGTERM to every process, the ranks and mpirun
# among them, and SIGKILL KillWait seconds later. mpirun then ends the ranks with Open MPI 4.1's kill sequence: SIGCONT,
# odls_base_sigkill_timeout seconds (1 by default), SIGTERM, as long again, SIGKILL: too soon for them to finish the
# step and checkpoint. Half of KillWait brings mpirun's SIGKILL with Slurm's. Not all of it: mpirun sleeps the same
# twice after any rank's non-zero exit (exit 3 after a checkpoint too), even where every rank has ended, and at KillWait
# it held the whole allocation idle for twice KillWait (a minute, with Slurm's default) at every requeue.
killwait=$(scontrol show config 2>/dev/null | awk '$1 == "KillWait" { print $3 }')
[[ "$killwait" =~ ^[0-9]+$ ]] || killwait=30
export OMPI_MCA_odls_base_sigkill_timeout=${OMPI_MCA_odls_base_sigkill_timeout:-$(((10#$killwait + 1) / 2))}

echo "arclight job ${SLURM_JOB_ID:-?} (restart ${SLURM_RESTART_COUNT:-0}): $nodes node(s), $ranks ranks, config $config, checkpoints $ckpt"

# Slurm's warning before the time limit (B:USR1) reaches this shell: forward it to the job step,
# which checkpoints at its next step and exits with 3; this script then requeues or chains.
# SIGTERM means Slurm itself is ending the job (scontrol requeue, pre-emption, scancel): ask for
# a checkpoint within KillWait the same way, but leave the requeue to Slurm.
warned=0 termed=0 trapped=0 step=""
forward() { echo "arclight: $1 received, asking the job to checkpoint"; [ -n "$step" ] && kill -USR1 "$step" 2>/dev/null; }
trap 'warned=1 trapped=1; forward SIGUSR1' USR1
trap 'termed=1 trapped=1; forward SIGTERM' TERM

# The model staged to every node's own disk (ARCLIGHT_MODEL_STAGE), at a path of this job's.
on_each_node=(srun --nodes="$nodes" --ntasks="$nodes" --ntasks-per-node=1)
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
  # cache's snapshot is links to its blobs. First the copies of this user's jobs that Slurm ended (no step could
  # remove them) go: those whose job is no longer in the queue ($3, a list of job ids; empty when squeue failed).
  copy='if [ -n "$3" ]; then for d in "$(dirname "$1")"/arclight-model-*; do
      [ -O "$d" ] && [[ " $3 " != *" ${d##*-} "* ]] && rm -rf "$d"; done; fi
    rm -rf "$1" && mkdir -p "$1" && cd "$2" &&
    for f in *.safetensors *.json *.jinja tokenizer.model; do [ -e "$f" ] || continue; cp -L "$f" "$1/" || exit 1; done'
  live=$(squeue -h -u "$(id -un)" -o %A 2>/dev/null | xargs)
  [ -n "$live" ] && live="${SLURM_JOB_ID:-$$} $live"
  if ! "${on_each_node[@]}" --kill-on-bad-exit=1 bash -c "$copy" stage "$staged" "$ARCLIGHT_MODEL" "$live" &&
    [ "$trapped" = 0 ]; then  # a copy that Slurm's SIGTERM ended is no failure of the copy: see below
    echo "arclight: could not copy $ARCLIGHT_MODEL to $staged on every node"
    timeout 120 "${on_each_node[@]}" rm -rf "$staged"
    exit 1
  fi
  [ "$trapped" = 0 ] && echo "arclight: the model $ARCLIGHT_MODEL is staged to $staged on each of the $nodes node(s)"
  model_args=(--model.path "$staged")
fi
unstage() {  # bounded: a node that hung the job may not answer
  [ -n "$staged" ] && timeout 120 "${on_each_node[@]}" rm -rf "$staged"
}

root=""
[ "$(id -u)" -eq 0 ] && root="--allow-run-as-root"
# After any rank's non-zero exit (3 after a checkpoint too) mpirun outlives the ranks by twice its
# odls_base_sigkill_timeout (KillWait, above), the allocation idle. Rank 0 writes the job's exit code into this file
# once every rank is past MPI_Finalize (nothing else is left to wait for), and a non-zero one ends mpirun here.
# (A rank 0 placed on another node than this shell writes nothing: mpirun's own end is waited for, as before.)
end_lingering_mpirun() {
  trap '' TERM USR1  # Slurm's signals are the main shell's to act on; this one only watches
  while kill -0 "$step" 2>/dev/null; do
    if [ -s "$exit_code_file" ]; then
      local code
      code=$(<"$exit_code_file")
      [[ "$code" =~ ^[1-9][0-9]*$ ]] || return  # 0: mpirun ends by itself, its remote daemons with it
      sleep 2  # the ranks' own ends past MPI_Finalize, and their last output through mpirun
      kill -0 "$step" 2>/dev/null || return
      echo "arclight: every rank has ended (exit $code); ending mpirun, which would wait" \
        "${OMPI_MCA_odls_base_sigkill_timeout}s twice more"
      kill -KILL "$step"
      return
    fi
    sleep 0.5
  done
}
if [ "$trapped" = 1 ]; then
  # The signal came while the model was being staged (bash runs a trap once its foreground srun ends): nothing was
  # forwarded, and training would only start to stop. It ends as a checkpointed step would: chained or requeued (the
  # warning), or left to Slurm (its SIGTERM). (One that comes between this test and `step=$!` below is not forwarded:
  # the ranks then stop at Slurm's SIGTERM at the time limit, within KillWait.)
  echo "arclight: the signal came before training started; not starting it"
  rc=$exit_requeue
else
  # rank 0 first on node 0; the GPU ranks fill 8 slots per node; the one rank more than the slots
  # (oversubscription of one) lands on node 0 too.
  exit_code_file=$(mktemp "${TMPDIR:-/tmp}/arclight-exit.XXXXXX" 2>/dev/null) || exit_code_file=""
  ARCLIGHT_EXIT_CODE_FILE=$exit_code_file mpirun $root --oversubscribe --bind-to none -np "$ranks" \
    "$bin" train --config "$config" --checkpoint.dir "$ckpt" --resume auto ${model_args[@]+"${model_args[@]}"} \
    ${extra_args[@]+"${extra_args[@]}"} &
  step=$!
  [ -n "$exit_code_file" ] && { end_lingering_mpirun & watcher=$!; }
  wait "$step" 2>/dev/null; rc=$?  # (no "Killed" line for the mpirun ended below)
  while [ "$trapped" = 1 ]; do
    # A trapped signal ended the wait early (>128; the step may have ended meanwhile), or came just after it returned
    # the step's status: a second wait gives the status (bash keeps it; 127 where a shell would not, and rc has it).
    trapped=0
    wait "$step" 2>/dev/null; again=$?
    [ "$again" -eq 127 ] && break
    rc=$again
  done
  if [ -n "$exit_code_file" ]; then
    kill -KILL "$watcher" 2>/dev/null
    wait "$watcher" 2>/dev/null
    code=$(<"$exit_code_file")
    if [ "$rc" -eq 137 ] && [[ "$code" =~ ^[0-9]+$ ]]; then
      # mpirun killed (here, or by Slurm's SIGKILL) after every rank had ended: the job's code is rank 0's (the others
      # end 0, or the job aborts). Its session directory is left, which it would have removed on its way out.
      rc=$code
      rm -rf "${TMPDIR:-/tmp}"/ompi.*."$(id -u)"/pid."$step"
    fi
    rm -f "$exit_code_file"
  fi
  echo "arclight: the job step exited with $rc"
fi
unstage
if [ "$rc" -ne 0 ] && [ "$rc" -ne "$exit_usage" ] && [ "$termed" = 0 ] &&
  ! { [ "$warned" = 1 ] && [ "$rc" -eq "$exit_requeue" ]; }; then
  # A failure, no SIGTERM seen (after the warning too): the job's own (a hung rank, a rank or node lost), or Slurm's
  # SIGTERM that reached the ranks (on any node) before this shell: give that a few seconds to come.
  sleep 5 & wait $! 2>/dev/null
fi

# Slurm's SIGTERM at the job's time limit rather than scancel, scontrol requeue or a pre-emption: while this script
# runs, squeue and scontrol say COMPLETING for all of them, but only the time limit ends a job that has run its
# TimeLimit (RunTime is counted to the instant Slurm ended it).
seconds_of() {  # Slurm's [days-]hours:minutes:seconds
  local t=$1 days=0 h m s
  [[ "$t" == *-* ]] && { days=${t%%-*}; t=${t#*-}; }
  IFS=: read -r h m s <<<"$t"
  echo $((((10#$days * 24 + 10#$h) * 60 + 10#$m) * 60 + 10#$s))
}
ran_out_of_time() {
  local job run limit
  job=$(timeout 30 scontrol show job "${SLURM_JOB_ID:-none}" 2>/dev/null) || return 1
  run=$(grep -oE 'RunTime=([0-9]+-)?[0-9]+:[0-9]+:[0-9]+' <<<"$job") || return 1
  limit=$(grep -oE 'TimeLimit=([0-9]+-)?[0-9]+:[0-9]+:[0-9]+' <<<"$job") || return 1  # UNLIMITED: never
  [ "$(seconds_of "${run#*=}")" -ge "$(seconds_of "${limit#*=}")" ]
}
if [ "$rc" -eq "$exit_requeue" ] && [ "$termed" = 1 ] && ! ran_out_of_time; then
  # The ranks checkpointed on Slurm's own SIGTERM (requeue, pre-emption, scancel), which may reach this shell after
  # they are done: Slurm decides what happens next, after Slurm's warning too (a successor or a requeue would go on
  # with a run its user cancelled, or beside the pre-empted job Slurm requeues). The time limit's SIGTERM is chained or
  # requeued below, as the warning is. (Exit 3 with no signal at all is the job's own: a hung rank or node. It requeues
  # below.) mpirun, told by the SIGTERM too, would live on for twice its odls_base_sigkill_timeout (KillWait here)
  # whatever the ranks do: it was ended once they had (end_lingering_mpirun).
  echo "arclight: stopped (checkpointed, if training had started); Slurm is ending or requeueing this job"
  exit "$exit_requeue"
fi
# A failure of the job's own (no SIGTERM from Slurm): a hung rank (exit 3, with no warning), a rank or node lost
# (mpirun's 1, or 128+N for a rank a signal killed), after Slurm's warning too (which ended the job FAILED, neither
# requeued nor chained: the run stopped until someone submitted it again). Requeued while the run makes progress: the
# count of failures since the newest version began is kept beside the versions, and a new version starts it again.
failed=0
if [ "$termed" = 0 ] && [ "$rc" -ne 0 ] && [ "$rc" -ne "$exit_usage" ] &&
  ! { [ "$warned" = 1 ] && [ "$rc" -eq "$exit_requeue" ]; }; then
  latest=$(cat "$ckpt/LATEST" 2>/dev/null || echo none)
  read -r last_latest failures 2>/dev/null <"$ckpt/.slurm-failures" || failures=0
  [[ "${failures:-}" =~ ^[0-9]+$ ]] && [ "${last_latest:-}" = "$latest" ] || failures=0
  failures=$((failures + 1))
  # Kept even where the job failed before the ranks made the directory (a wrong ARCLIGHT_BIN would otherwise requeue
  # for ever); a count that cannot be kept ends the job.
  if ! { mkdir -p "$ckpt" && echo "$latest $failures" >"$ckpt/.slurm-failures.tmp" &&
    mv -f "$ckpt/.slurm-failures.tmp" "$ckpt/.slurm-failures"; } 2>/dev/null; then
    echo "arclight: the job failed (exit $rc), and its count of failures cannot be kept in $ckpt: not requeued"
    exit "$rc"
  fi
  if [ "$failures" -gt "$max_failures" ]; then
    echo "arclight: the job failed (exit $rc) $failures times in a row with no new checkpoint (latest: $latest);" \
      "not requeued again (ARCLIGHT_MAX_FAILURE_REQUEUES=$max_failures)"
    exit "$rc"
  fi
  echo "arclight: the job failed (exit $rc), failure $failures of at most $max_failures since its latest checkpoint" \
    "($latest): requeueing it to resume"
  failed=1
fi
if [ "$rc" -eq "$exit_requeue" ] || [ "$failed" = 1 ]; then
  # Checkpointed on a signal (or failed), training not done: the next link of the chain, or a requeue.
  chain=${ARCLIGHT_CHAIN:-0}
  if [ "$chain" -gt 0 ] && [ -n "${SLURM_JOB_ID:-}" ]; then
    # In the environment, not in --export=NAME=VALUE: a comma in the path would cut it there. Without this job's
    # restart count: Slurm sets none on a fresh job.
    # It asks for what this job got, whether the #SBATCH lines or sbatch's options said so; ARCLIGHT_SBATCH_ARGS
    # come after, and win.
    # Tasks per node where the job had that, so that a --nodes in ARCLIGHT_SBATCH_ARGS scales the job; else the count.
    allocation=(--nodes="$nodes")
    if [ -n "${SLURM_NTASKS_PER_NODE:-}" ]; then
      allocation+=(--ntasks-per-node="$SLURM_NTASKS_PER_NODE")
    elif [ -n "${SLURM_NTASKS:-}" ]; then
      allocation+=(--ntasks="$SLURM_NTASKS")
    fi
    [ -n "${SLURM_GPUS_PER_NODE:-}" ] && allocation+=(--gpus-per-node="$SLURM_GPUS_PER_NODE")
    [ -n "${SLURM_JOB_PARTITION:-}" ] && allocation+=(--partition="$SLURM_JOB_PARTITION")
    [ -n "${SLURM_JOB_ACCOUNT:-}" ] && allocation+=(--account="$SLURM_JOB_ACCOUNT")
    [ -n "${SLURM_JOB_QOS:-}" ] && allocation+=(--qos="$SLURM_JOB_QOS")
    limit=$(squeue -h -j "$SLURM_JOB_ID" -o %l 2>/dev/null)
    [[ "$limit" =~ ^([0-9:-]+|UNLIMITED)$ ]] && allocation+=(--time="$limit")
    next=$(ARCLIGHT_CHAIN=$((chain - 1)) ARCLIGHT_CKPT=$ckpt env -u SLURM_RESTART_COUNT sbatch --parsable \
      "${allocation[@]}" ${successor_args[@]+"${successor_args[@]}"} \
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
[ "$rc" -eq 0 ] && rm -f "$ckpt/.slurm-failures"  # done: a later run in the directory counts afresh
exit "$rc"
