#!/usr/bin/env bash
# slurm/train_128gpu.sh's checks of its own input, run outside Slurm (as a workstation runs it): a setting that is no
# whole number, a flag in ARCLIGHT_ARGS that the script gives arclight itself, a stage with no model. Each is one
# sentence and exit 2 (never requeued) before mpirun starts; good input reaches the binary as the script says. Then,
# with stand-ins for Slurm's commands: which SIGTERM chains the run, and a failure with no requeue allowed.
# Usage: script_input_test.sh BUILD/arclight SOURCE_DIR (stand-ins record their arguments; the binary itself runs once)
set -u
binary=$(realpath "$1") src=$2
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$src"
for v in $(env | grep -o '^SLURM_[A-Z_]*'); do unset "$v"; done
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
cat >"$work/stand_in" <<'STAND_IN'
#!/usr/bin/env bash
printf '%s\n' "$@" >"$ARGS_FILE.$$"
STAND_IN
chmod +x "$work/stand_in"
export ARCLIGHT_BIN=$work/stand_in ARCLIGHT_CKPT=$work/ckpt ARGS_FILE=$work/args GPUS_PER_NODE=0

# Runs the script with the given environment settings; its output is in $work/out, its exit code in $rc.
run_script() { env "$@" timeout 120 bash slurm/train_128gpu.sh >"$work/out" 2>&1; rc=$?; }
refused() {
  local what=$1 want=$2; shift 2
  rm -f "$work"/args.*
  run_script "$@"
  [ "$rc" = 2 ] || fail "$what: exit $rc, want 2: $(tail -3 "$work/out")"
  grep -qF -- "$want" "$work/out" || fail "$what: no '$want' in: $(tail -3 "$work/out")"
  ! compgen -G "$work/args.*" >/dev/null || fail "$what: the binary ran"
}

refused "GPUS_PER_NODE=08" "GPUS_PER_NODE=08 is not a whole number" GPUS_PER_NODE=08
refused "ARCLIGHT_CHAIN=two" "ARCLIGHT_CHAIN=two is not a whole number" ARCLIGHT_CHAIN=two
refused "ARCLIGHT_MAX_FAILURE_REQUEUES=-1" "ARCLIGHT_MAX_FAILURE_REQUEUES=-1 is not a whole number" \
  ARCLIGHT_MAX_FAILURE_REQUEUES=-1
refused "--resume in ARCLIGHT_ARGS" "ARCLIGHT_ARGS gives --resume, which this script sets itself" \
  "ARCLIGHT_ARGS=--run.steps 5 --resume $work/ckpt/v00000004.h5"
refused "--checkpoint.dir= in ARCLIGHT_ARGS" "ARCLIGHT_ARGS gives --checkpoint.dir, which this script sets itself: ARCLIGHT_CKPT" \
  "ARCLIGHT_ARGS=--checkpoint.dir=$work/other"
refused "--config in ARCLIGHT_ARGS" "ARCLIGHT_ARGS gives --config, which this script sets itself: ARCLIGHT_CONFIG" \
  "ARCLIGHT_ARGS=--config configs/tiny.toml"
mkdir -p "$work/model" && echo '{}' >"$work/model/config.json"
refused "--model.path with a stage" "ARCLIGHT_ARGS gives --model.path, which this script sets itself" \
  ARCLIGHT_MODEL_STAGE="$work/stage" ARCLIGHT_MODEL="$work/model" "ARCLIGHT_ARGS=--model.path $work/model"
refused "a stage with no model" "ARCLIGHT_MODEL_STAGE needs ARCLIGHT_MODEL" ARCLIGHT_MODEL_STAGE="$work/stage"
refused "tasks per node against GPUs" "--ntasks-per-node is 4 but the nodes have 8 GPUs" GPUS_PER_NODE=8 \
  SLURM_NTASKS_PER_NODE=4

# Good input: every rank gets the script's flags once and ARCLIGHT_ARGS after them, --model.path among them where
# nothing is staged.
rm -f "$work"/args.*
run_script ARCLIGHT_CONFIG=configs/tiny.toml "ARCLIGHT_ARGS=--run.steps 5 --model.path $work/model"
[ "$rc" = 0 ] || fail "good input: exit $rc: $(tail -5 "$work/out")"
ranks=0
for f in "$work"/args.*; do
  [ -f "$f" ] || continue
  ranks=$((ranks + 1))
  got=$(xargs <"$f")
  want="train --config configs/tiny.toml --checkpoint.dir $work/ckpt --resume auto --run.steps 5 --model.path $work/model"
  [ "$got" = "$want" ] || fail "good input: a rank's arguments are '$got', want '$want'"
done
[ "$ranks" = 2 ] || fail "good input: $ranks ranks ran, want 2 (SLURM_NTASKS unset): $(tail -5 "$work/out")"

# Slurm's SIGTERM after the ranks checkpointed (exit 3): the time limit's (the job has run its TimeLimit) goes on to
# the chain's next link; scancel's, scontrol requeue's or a pre-emption's (before the limit) is Slurm's to decide.
# scontrol, squeue and sbatch are stand-ins here that say what a job's state says and record a submission.
mkdir -p "$work/bin"
cat >"$work/bin/scontrol" <<'SCONTROL'
#!/usr/bin/env bash
[ "$2" = config ] && { echo "KillWait                = ${FAKE_KILLWAIT:-1} sec"; exit 0; }  # see below
echo "JobId=77 JobName=arclight"
echo "   RunTime=$FAKE_RUN_TIME TimeLimit=$FAKE_TIME_LIMIT TimeMin=N/A"
SCONTROL
printf '#!/usr/bin/env bash\necho 30:00\n' >"$work/bin/squeue"
printf '#!/usr/bin/env bash\necho "$*" >"%s/submitted"; echo 4242\n' "$work" >"$work/bin/sbatch"
cat >"$work/checkpoints_on_usr1" <<'RANK'
#!/usr/bin/env bash
trap 'exit 3' USR1
touch "$STARTED"
while :; do sleep 0.1; done
RANK
chmod +x "$work/bin"/* "$work/checkpoints_on_usr1"
stopped_by_slurm() {  # stopped_by_slurm RUN_TIME TIME_LIMIT: the script's output in $work/out
  rm -f "$work/submitted" "$work/started"
  PATH="$work/bin:$PATH" SLURM_JOB_ID=77 ARCLIGHT_CHAIN=1 ARCLIGHT_BIN="$work/checkpoints_on_usr1" \
    STARTED="$work/started" FAKE_RUN_TIME=$1 FAKE_TIME_LIMIT=$2 timeout --foreground 120 bash slurm/train_128gpu.sh >"$work/out" 2>&1 &
  local script=$!
  for _ in $(seq 200); do [ -e "$work/started" ] && break; sleep 0.1; done
  kill -TERM "$script"
  wait "$script"
}
stopped_by_slurm 00:00:03 00:30:00
grep -q "Slurm is ending or requeueing this job" "$work/out" && [ ! -e "$work/submitted" ] ||
  fail "scancel's SIGTERM: $(grep arclight: "$work/out" | tail -3) $(cat "$work/submitted" 2>/dev/null)"
stopped_by_slurm 00:30:02 00:30:00
grep -q "submitted the next link, job 4242" "$work/out" && grep -q -- "--dependency=afterany:77" "$work/submitted" ||
  fail "the time limit's SIGTERM: $(grep arclight: "$work/out" | tail -3)"
stopped_by_slurm 1-00:00:09 UNLIMITED
grep -q "Slurm is ending or requeueing this job" "$work/out" && [ ! -e "$work/submitted" ] ||
  fail "SIGTERM with no time limit: $(grep arclight: "$work/out" | tail -3)"

# mpirun's kill sequence sleeps odls_base_sigkill_timeout twice: half of Slurm's KillWait (rounded up) gives the ranks
# all of it after Slurm's SIGTERM; 15 where scontrol says nothing readable (half of Slurm's default).
printf '#!/usr/bin/env bash\necho "$OMPI_MCA_odls_base_sigkill_timeout" >"%s/sigkill_timeout"\n' "$work" >"$work/says_timeout"
chmod +x "$work/says_timeout"
for kill_wait in "7 4" "1 1" "30 15" "soon 15"; do
  read -r given want <<<"$kill_wait"
  rm -f "$work/sigkill_timeout"
  env -u OMPI_MCA_odls_base_sigkill_timeout PATH="$work/bin:$PATH" FAKE_KILLWAIT="$given" ARCLIGHT_BIN="$work/says_timeout" \
    timeout 120 bash slurm/train_128gpu.sh >"$work/out" 2>&1
  got=$(cat "$work/sigkill_timeout" 2>/dev/null)
  [ "$got" = "$want" ] || fail "KillWait $given: odls_base_sigkill_timeout '$got', want $want: $(tail -3 "$work/out")"
done

# After a non-zero exit mpirun sleeps odls_base_sigkill_timeout twice, every rank gone: 40 s here (KillWait 40). The
# real binary (a setting it does not know: exit 2 on every rank, past MPI_Finalize) tells the script its exit code,
# and the script ends mpirun at once.
mkdir "$work/tmp"
start=$SECONDS
PATH="$work/bin:$PATH" TMPDIR="$work/tmp" FAKE_KILLWAIT=40 ARCLIGHT_BIN="$binary" ARCLIGHT_CONFIG=configs/tiny.toml \
  ARCLIGHT_ARGS="--run.no_such_setting 1" timeout 120 bash slurm/train_128gpu.sh >"$work/out" 2>&1
rc=$? took=$((SECONDS - start))
[ "$rc" = 2 ] && [ "$took" -lt 20 ] && grep -q "every rank has ended (exit 2); ending mpirun" "$work/out" ||
  fail "mpirun after the ranks' exit 2: exit $rc after $took s: $(grep arclight "$work/out" | tail -3)"
left=$(find "$work/tmp" -name 'arclight-exit.*' -o -name "pid.*")
[ -z "$left" ] || fail "left behind: $left"

# ARCLIGHT_MAX_FAILURE_REQUEUES=0: a failure of the job's own is never requeued; the job fails, saying so.
printf '#!/usr/bin/env bash\nexit 1\n' >"$work/fails" && chmod +x "$work/fails"
rm -f "$work/ckpt/.slurm-failures"
PATH="$work/bin:$PATH" SLURM_JOB_ID=77 ARCLIGHT_MAX_FAILURE_REQUEUES=0 ARCLIGHT_BIN="$work/fails" \
  FAKE_RUN_TIME=00:00:03 FAKE_TIME_LIMIT=00:30:00 timeout 120 bash slurm/train_128gpu.sh >"$work/out" 2>&1
rc=$?
[ "$rc" != 0 ] && grep -q "not requeued again (ARCLIGHT_MAX_FAILURE_REQUEUES=0)" "$work/out" ||
  fail "a failure with no requeue allowed: exit $rc: $(grep arclight: "$work/out" | tail -3)"

echo "$failures failures"
[ "$failures" = 0 ]
