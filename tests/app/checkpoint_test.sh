#!/usr/bin/env bash
# Checkpoints and restart with the real binary: periodic versions, resume (with another
# layout), a corrupt version skipped, SIGUSR1 (checkpoint, exit 3, resume), kill -9 of the
# coordinator, a trainer and a runner mid-run (each followed by --resume auto, the tasks trained on
# compared with an uninterrupted run), kill -9 inside a write, and a frozen base's incremental
# versions, and a restart's reads (each byte once; a damaged share). Every wait is bounded.
set -u
bin=$(realpath "$1"); src=$2
mpirun=${MPIEXEC:-mpirun}
work=$(mktemp -d); trap 'kill -9 $(jobs -p) 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
cd "$src"
checks=0; failures=0
check() { checks=$((checks + 1)); if ! eval "$1"; then echo "FAIL: $2"; failures=$((failures + 1)); fi; }
train() {  # train NP RUN_DIR [flags...]
  local np=$1 dir=$2; shift 2
  timeout 120 "$mpirun" --oversubscribe --allow-run-as-root -np "$np" "$bin" train --config configs/tiny.toml \
    --run.dir "$dir" "$@" >"$work/out" 2>"$work/err"
  rc=$?  # for the checks: inside check, $? would be check's own
}
steps_in() { grep -ho '"step":[0-9]*' "$@" | cut -d: -f2 | xargs; }
steps_of() { steps_in "$1/metrics.jsonl"; }
# train_and_kill NP RUN_DIR VICTIM_RANK VERSION [flags...]: kill -9 the rank at a random point
# (0 to 0.4 s) after VERSION is written.
train_and_kill() {
  local np=$1 dir=$2 victim=$3 version=$4; shift 4
  timeout 120 "$mpirun" --oversubscribe --allow-run-as-root -np "$np" "$bin" train --config configs/tiny.toml \
    --run.dir "$dir" "$@" >"$work/out" 2>"$work/err" &
  local job=$! pid="" p
  for _ in $(seq 400); do [ -f "$dir/checkpoints/$version" ] && break; sleep 0.05; done
  delay=0.$((RANDOM % 5))
  sleep "$delay"
  for p in $(pgrep -f "$bin train"); do
    tr '\0' '\n' </proc/$p/environ 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$victim" && pid=$p
  done
  check '[ -n "$pid" ]' "could not find rank $victim"
  [ -n "$pid" ] && kill -9 "$pid"
  wait $job; rc=$?
  check '[ $rc != 0 ]' "the run in $dir was over before rank $victim was killed, $delay s after $version"
}

# 1. Versions every 4 steps and at the end; the newest 3 are kept; h5dump reads them.
train 4 "$work/a" --run.steps 10 --checkpoint.every_steps 4
check '[ $rc = 0 ]' "first run failed: $(tail -3 "$work/err")"
check '[ "$(ls "$work/a/checkpoints" | xargs)" = "LATEST segments v00000004.h5 v00000008.h5 v00000010.h5" ]' \
  "versions: $(ls "$work/a/checkpoints" | xargs)"
check 'h5dump -H "$work/a/checkpoints/v00000010.h5" | grep -q "DATASET \"model.layers.0.self_attn.q_proj.weight\""' "h5dump cannot read a version"
"$bin" inspect "$work/a/checkpoints" >"$work/inspect" 2>&1
check 'grep -q "v00000010.h5 .* step 10  policy version 10  parent v00000008.h5.*valid" "$work/inspect"' "inspect: $(cat "$work/inspect")"

# 2. Resume on 3 ranks instead of 4: steps and versions continue, metrics and events hold each step once.
train 3 "$work/a" --run.steps 14 --checkpoint.every_steps 4 --resume auto
check '[ $rc = 0 ]' "resume failed: $(tail -3 "$work/err")"
check 'grep -q "^step=11 version=11 " "$work/out"' "resume did not continue at step 11: $(head -12 "$work/out")"
# The trainer leader checks what it restored (its share, the others' over MPI) against the checksum the store kept.
check 'grep -q "weights restored for policy version 10 are those it was trained to" "$work/err"' \
  "no check of the weights restored: $(grep -E "restored|rror" "$work/err" | head -3)"
check '[ "$(steps_of "$work/a")" = "$(seq 1 14 | xargs)" ]' "metrics steps: $(steps_of "$work/a")"
# Resumed from the run's last step: nothing is redone, so nothing is archived (a copy of the history at every requeue).
check '[ ! -e "$work/a/archive" ] && [ "$(ls "$work/a" | grep -c tfevents)" = 1 ]' \
  "a resume that redoes no step: $(ls -R "$work/a/archive" 2>&1 | xargs), $(ls "$work/a" | xargs)"
mkdir -p "$work/py"
check '/usr/bin/python3 tests/app/read_events.py "$work/a" "$work/py" >/dev/null' "event file after resume"

# 3. A corrupt newest version is skipped, with a warning, for the one before.
size=$(stat -c %s "$work/a/checkpoints/v00000014.h5")
printf '\xff\xff\xff\xff' | dd of="$work/a/checkpoints/v00000014.h5" bs=1 seek=$((size / 2)) conv=notrunc 2>/dev/null
train 4 "$work/a" --run.steps 13 --resume auto
check 'grep -q "skipping checkpoint .*v00000014.h5" "$work/err"' "no warning for the corrupt version: $(cat "$work/err")"
check 'grep -q "^step=13 version=13 " "$work/out"' "did not resume from step 12: $(grep -o "^step=[0-9]*" "$work/out" | head -2)"
# The rows of the steps redone (13 and 14) are what the archive keeps, and only those.
check '[ "$(ls "$work/a/archive"/*/ | xargs)" = metrics.redone.jsonl ] && [ "$(steps_in "$work/a/archive"/*/metrics.redone.jsonl)" = "13 14" ] &&
  [ "$(steps_of "$work/a")" = "$(seq 1 13 | xargs)" ]' \
  "the archive of a resume that redoes steps 13 and 14: $(ls -R "$work/a/archive" 2>&1 | xargs)"
# ... and set aside: once the run goes on from step 12, a later --resume auto must not go back to it (a read error
# that passed, not damage, would make it read).
check 'grep -q "versions after the one resumed from are set aside: v00000014.h5" "$work/err" &&
  [ ! -e "$work/a/checkpoints/v00000014.h5" ] && ls "$work/a/checkpoints/v00000014.h5.superseded-"* >/dev/null' \
  "the skipped version is not set aside: $(ls "$work/a/checkpoints" | xargs)"

# 3b. A version whose store does not read back while its model does: the trainers, which read their
# shares while rank 0 imports the store, load the version before with rank 0, and the runners get its weights.
train 4 "$work/u" --run.steps 8 --checkpoint.every_steps 4
check '[ $rc = 0 ]' "run for 3b failed: $(tail -3 "$work/err")"
train 4 "$work/u" --run.steps 10 --checkpoint.every_steps 4 --resume auto --faults.store_unreadable_step 8
check '[ $rc = 0 ] && grep -q "skipping checkpoint .*v00000008.h5: .*fault drill" "$work/err"' \
  "a store that does not read back: rc $rc, $(grep -v "^ " "$work/err" | head -5)"
# The runners sample step 5 with version 4's weights (staleness 0), not version 8's (-4).
check 'grep -q "resuming from .*v00000004.h5" "$work/err" && grep -q "^step=5 version=5 .* staleness=0.00 " "$work/out"' \
  "a store that does not read back: not resumed from the version before: $(grep "^step=5 " "$work/out")"

# 3c. A resume from a version set aside (3b's resume set the skipped version 8 aside): as from another directory,
# the logs read whole and the directory set aside; LATEST named the set-aside file, which it cannot, and the first
# save ended the job.
aside=$(ls -d "$work/u/checkpoints/v00000008.h5.superseded-"* | head -1)
train 4 "$work/u" --run.steps 10 --checkpoint.every_steps 4 --resume "$aside"
check '[ $rc = 0 ] && [ "$(cat "$work/u/checkpoints/LATEST")" = v00000010.h5 ] && grep -q "^step=9 " "$work/out"' \
  "a resume from a version set aside: rc $rc, LATEST $(cat "$work/u/checkpoints/LATEST" 2>&1), $(grep -v "^ " "$work/err" | tail -3)"

# 4. SIGUSR1: a checkpoint at the next step, exit code 3 (requeue), then resume.
timeout 120 "$mpirun" --oversubscribe --allow-run-as-root -np 4 "$bin" train --config configs/tiny.toml \
  --run.dir "$work/b" --run.steps 100000 --checkpoint.every_steps 0 >"$work/out" 2>"$work/err" &
job=$!
for _ in $(seq 100); do [ -f "$work/b/metrics.jsonl" ] && [ "$(wc -l <"$work/b/metrics.jsonl")" -ge 3 ] && break; sleep 0.2; done
kill -USR1 "$(pgrep -P $job)"  # mpirun (under timeout) forwards SIGUSR1 to every rank
wait $job; rc=$?
check '[ $rc = 3 ]' "SIGUSR1: exit code $rc, want 3: $(tail -3 "$work/err")"
check '[ -f "$work/b/checkpoints/LATEST" ]' "SIGUSR1: no checkpoint"
saved=$(steps_of "$work/b" | awk '{print $NF}')
train 4 "$work/b" --run.steps $((saved + 2)) --resume auto
check '[ $rc = 0 ] && [ "$(steps_of "$work/b")" = "$(seq 1 $((saved + 2)) | xargs)" ]' "resume after SIGUSR1: $(steps_of "$work/b")"

# 5. kill -9 of rank 0 (coordinator), rank 1 (trainer) and rank 2 (a runner) at a point of a
# run where the next step's rollouts are in flight (max_staleness 2): mpirun ends the job, and
# --resume auto finishes it from the last version. Every step happens once, and every task is
# trained on exactly as often as in a run that was never interrupted, counted from the store's
# ledger in the last version.
long=(--run.steps 40 --checkpoint.every_steps 2 --grpo.max_staleness 2)
train 4 "$work/reference" "${long[@]}"
check '[ $rc = 0 ]' "reference run failed: $(tail -3 "$work/err")"
"$bin" inspect --trained "$work/reference/checkpoints" >"$work/reference.trained"
check 'grep -q "5120 rollouts of .* over 40 steps; 0 rollouts trained on twice" "$work/reference.trained"' \
  "reference ledger: $(tail -1 "$work/reference.trained")"
# Rank 0 is killed late in the run: resuming in place, it reads the store's logs only from the newest version's
# part (issue 18), and what it left in the version still counts in the ledger the next versions hold.
for victim in 0 1 2; do
  dir="$work/kill$victim"
  version=v00000004.h5
  [ $victim = 0 ] && version=v00000020.h5
  train_and_kill 4 "$dir" "$victim" $version "${long[@]}"
  train 4 "$dir" "${long[@]}" --resume auto
  check '[ $rc = 0 ]' "resume after kill -9 of rank $victim: $(tail -3 "$work/err")"
  check '[ "$(steps_of "$dir")" = "$(seq 1 40 | xargs)" ]' "steps after kill -9 of rank $victim: $(steps_of "$dir")"
  "$bin" inspect --trained "$dir/checkpoints" >"$dir.trained"
  check 'diff <(head -n -1 "$work/reference.trained") <(head -n -1 "$dir.trained") >/dev/null && grep -q "5120 rollouts.* 0 rollouts trained on twice" "$dir.trained"' \
    "kill -9 of rank $victim: tasks trained on differ from the uninterrupted run: $(diff "$work/reference.trained" "$dir.trained" | head -5)"
  if [ $victim = 0 ]; then
    rank0_bytes=$(grep -o "restore: read .* (rank 0 [0-9]*" "$work/err" | grep -o "[0-9]*$")
    logs_bytes=$(cat "$dir"/checkpoints/segments/store.* | wc -c)
    check '[ -n "$rank0_bytes" ] && [ "$rank0_bytes" -lt $((logs_bytes / 4)) ]' \
      "rank 0 resuming late read ${rank0_bytes:-?} bytes, against the logs' $logs_bytes: not just the newest part"
  fi
done

# 6. kill -9 in the middle of a checkpoint write (rank 0 dies with the file written but not
# closed or renamed): the previous version restores, and the leftover goes with the next retention.
train 4 "$work/c" --run.steps 10 --checkpoint.every_steps 2 --faults.kill_in_checkpoint 6
check '[ $rc != 0 ] && [ -f "$work/c/checkpoints/v00000006.h5.tmp" ] && grep -q v00000004.h5 "$work/c/checkpoints/LATEST"' \
  "kill in a write: $(ls "$work/c/checkpoints" | xargs)"
train 4 "$work/c" --run.steps 10 --checkpoint.every_steps 2 --resume auto
check '[ $rc = 0 ] && grep -q "resuming from .*v00000004.h5" "$work/err"' "resume after a kill in a write: $(grep resuming "$work/err")"
check '[ "$(steps_of "$work/c")" = "$(seq 1 10 | xargs)" ] && [ ! -e "$work/c/checkpoints/v00000006.h5.tmp" ]' \
  "after a kill in a write: steps $(steps_of "$work/c"), files $(ls "$work/c/checkpoints" | xargs)"

# 7. A frozen base (only the last block trains): versions link to the first full one's frozen tensors.
train 4 "$work/d" --run.steps 6 --checkpoint.every_steps 2 --grpo.train_blocks 1 --checkpoint.full_every 3
check 'h5ls -r "$work/d/checkpoints/v00000006.h5" | grep -q "/model/parameters/model.embed_tokens.weight *External Link {v00000002.h5//model/parameters/model.embed_tokens.weight}"' \
  "frozen embedding not linked: $(h5ls -r "$work/d/checkpoints/v00000006.h5" | grep embed_tokens)"
check 'h5ls -r "$work/d/checkpoints/v00000006.h5" | grep "/model/parameters/model.layers.0.self_attn.q_proj.weight" | grep -vq "External"' \
  "a trained tensor was linked"
"$bin" inspect "$work/d/checkpoints" >"$work/inspect" 2>&1
check 'grep -Eq "v00000006.h5 .* parent v00000004.h5 \(links to v00000002.h5.* and [0-9]+ log segments\)  valid" "$work/inspect"' "inspect: $(cat "$work/inspect")"

# 8. Two trainers write their shards of each version into one file (parallel HDF5); one
# trainer resumes from it (elastic restart).
train 5 "$work/e" --run.steps 4 --checkpoint.every_steps 2 --layout.trainers 2
check '[ $rc = 0 ]' "two trainers: $(tail -3 "$work/err")"
train 3 "$work/e" --run.steps 6 --checkpoint.every_steps 2 --resume auto
check '[ $rc = 0 ] && grep -q "resuming from .*v00000004.h5" "$work/err" && [ "$(steps_of "$work/e")" = "1 2 3 4 5 6" ]' \
  "resume from two trainers' version: $(tail -3 "$work/err")"

# 9. Deterministic: a fixed seed, synchronous steps (max_staleness 0) and a fixed layout of one
# trainer and one runner. A run killed (kill -9 of rank 0) and resumed ends with parameters and
# optimizer state bit-identical to a run never interrupted, and the same rewards at every step.
same=(--run.steps 40 --checkpoint.every_steps 4 --checkpoint.full_every 1)
state_of() { h5dump -g /model/parameters -g /optim "$1/checkpoints/v00000040.h5" | tail -n +2 | md5sum; }
rewards_of() { grep -o '"reward":[0-9.e-]*' "$1/metrics.jsonl" | xargs; }
train 3 "$work/det_a" "${same[@]}"
check '[ $rc = 0 ]' "deterministic reference: $(tail -3 "$work/err")"
train_and_kill 3 "$work/det_b" 0 v00000008.h5 "${same[@]}"
train 3 "$work/det_b" "${same[@]}" --resume auto
check '[ $rc = 0 ] && [ "$(steps_of "$work/det_b")" = "$(seq 1 40 | xargs)" ]' "deterministic resume: $(tail -3 "$work/err")"
check '[ "$(state_of "$work/det_a")" = "$(state_of "$work/det_b")" ]' \
  "parameters after kill and resume differ from the uninterrupted run's (resumed from $(grep -o "resuming from [^:]*" "$work/err"))"
check '[ "$(rewards_of "$work/det_a")" = "$(rewards_of "$work/det_b")" ]' "rewards differ after kill and resume"

# 10. A fresh run (no --resume) into a directory that holds versions sets them aside, intact.
train 4 "$work/a" --run.steps 2 --checkpoint.every_steps 2
check '[ $rc = 0 ] && [ "$(ls "$work/a/checkpoints" | xargs)" = "LATEST segments v00000002.h5" ] && ls -d "$work/a/checkpoints.superseded-"* >/dev/null' \
  "fresh run over old versions: $(ls "$work/a" | xargs)"
check '"$bin" inspect "$work/a/checkpoints.superseded-"* | grep -q "step 13 .* valid"' "set-aside versions do not read"

# 11. A version of another model configuration is bad input: one message (from rank 0), a
# non-zero exit, no hang, and the checkpoint directory as it was. A change that keeps every
# tensor's shape (the number of heads) is another model too.
latest_before=$(cat "$work/e/checkpoints/LATEST")
for wrong in "--model.d_model 48" "--layout.trainers 2 --model.n_heads 8"; do
  train 5 "$work/e" --run.steps 8 $wrong --resume auto
  check '[ $rc = 2 ] && [ "$(grep -c "holds another model" "$work/err")" = 1 ]' \
    "resume with $wrong: rc $rc, $(grep -v "^--\|^ \|^$" "$work/err" | head -3)"
  check '[ "$(cat "$work/e/checkpoints/LATEST")" = "$latest_before" ] && [ ! -e "$work/e/checkpoints.superseded-"* ]' \
    "a failed resume changed the checkpoint directory: $(ls "$work/e" | xargs)"
done
# The same model written otherwise (16.0 for 16) is the same model: compared by value, it resumes.
train 3 "$work/e" --run.steps 8 --model.lora_alpha 16.0 --resume auto
check '[ $rc = 0 ] && grep -q "resuming from" "$work/err"' \
  "resume with model.lora_alpha 16.0 (saved: 16): rc $rc, $(grep -v "^--\|^ \|^$" "$work/err" | head -3)"

# 12. A restart reads each byte of the version once: rank 0 the store and the meta, each trainer
# its share of the model, broadcast among them (a model large enough to outweigh the store). A
# run killed and resumed goes on exactly as one never interrupted (two trainers, one runner,
# synchronous steps). Then a damaged share (one bit of the last tensor's moments in the newest
# version, which the second trainer reads) is found, and every rank resumes from the version
# before, with a warning naming the damaged one.
big=(--checkpoint.every_steps 4 --checkpoint.full_every 1 --grpo.max_staleness 0 --layout.trainers 2
  --layout.runners 1 --model.d_model 256 --model.d_ff 1024)
ratio_of() { grep -o "restore: read [0-9.e+-]* times" "$work/err" | awk '{print $3}'; }
train 4 "$work/once_a" "${big[@]}" --run.steps 20
check '[ $rc = 0 ]' "reference for the restart's reads: $(tail -3 "$work/err")"
train_and_kill 4 "$work/once_b" 0 v00000008.h5 "${big[@]}" --run.steps 20
train 4 "$work/once_b" "${big[@]}" --run.steps 20 --resume auto
check '[ $rc = 0 ] && [ "$(steps_of "$work/once_b")" = "$(seq 1 20 | xargs)" ]' "resume for the restart's reads: $(tail -3 "$work/err")"
ratio=$(ratio_of)
echo "restart read $ratio times the version's bytes: $(grep -o "restore: read .*" "$work/err")"
check '[ -n "$ratio" ] && awk -v r="$ratio" "BEGIN { exit !(r > 0.9 && r <= 1.1) }"' "bytes read over the version's size: '$ratio', want at most 1.1"
state20() { h5dump -g /model/parameters -g /optim "$1/checkpoints/v00000020.h5" | tail -n +2 | md5sum; }
check '[ "$(rewards_of "$work/once_a")" = "$(rewards_of "$work/once_b")" ] && [ "$(state20 "$work/once_a")" = "$(state20 "$work/once_b")" ]' \
  "after a restart that read each byte once, the run differs from the uninterrupted one"
newest="$work/once_b/checkpoints/v00000020.h5"
read -r size offset < <(h5dump -p -H -d /optim/exp_avg/lm_head.weight "$newest" | awk '$1 == "SIZE" {s = $2} $1 == "OFFSET" {o = $2} END {print s, o}')
at=$((offset + size / 2))
byte=$(od -An -tu1 -j "$at" -N1 "$newest" | tr -d ' ')
printf "\\$(printf %o $((byte ^ 16)))" | dd of="$newest" bs=1 seek="$at" conv=notrunc 2>/dev/null
train 4 "$work/once_b" "${big[@]}" --run.steps 22 --resume auto
check '[ $rc = 0 ] && grep -q "skipping checkpoint .*v00000020.h5: .*checksum mismatch in /optim/exp_avg/lm_head.weight" "$work/err"' \
  "a damaged share: rc $rc, $(grep -v "^ " "$work/err" | head -5)"
check 'grep -q "resuming from .*v00000016.h5" "$work/err" && grep -q "^step=17 " "$work/out" && [ "$(steps_of "$work/once_b")" = "$(seq 1 22 | xargs)" ]' \
  "a damaged share: not resumed from the version before: $(grep -o "^step=[0-9]*" "$work/out" | head -2 | xargs), $(grep resuming "$work/err")"

echo "$((checks - failures)) passed, $failures failed"
[ $failures = 0 ]
