#!/usr/bin/env bash
# model.source = "hf": the real binary trains tiny random Hugging Face models (made by tests/model/hf_reference.py)
# on 3 ranks, checkpoints and resumes them, computes in bfloat16 when asked; --dry-run says which model it loads;
# a model directory that does not fit ends the job on every rank with exit 2 and one message naming the problem.
# Usage: hf_model_test.sh BUILD/arclight SOURCE_DIR
set -u
bin=$(realpath "$1"); src=$2
mpirun=${MPIEXEC:-mpirun}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
source "$src/tests/app/ranks.sh"
ranks_timeout=150
cd "$src"
/usr/bin/python3 tests/model/hf_reference.py "$work/models" >/dev/null || { echo "FAIL: hf_reference.py"; exit 1; }

# One bit of a file's last byte (a safetensors file's: its last tensor's data) flipped.
flip_last_byte() {
  /usr/bin/python3 -c 'import sys; f = open(sys.argv[1], "r+b"); f.seek(-1, 2); b = f.read(1); f.seek(-1, 2)
f.write(bytes([b[0] ^ 1]))' "$1"
}
double_rope_theta() {
  /usr/bin/python3 -c 'import json, sys; p = sys.argv[1] + "/config.json"; c = json.load(open(p))
c["rope_theta"] = c.get("rope_theta", 10000.0) * 2; json.dump(c, open(p, "w"))' "$1"
}
metric_lines() { wc -l <"$1/metrics.jsonl" 2>/dev/null || echo 0; }
train() { run_ranks train --config configs/tiny.toml --model.source hf "$@"; }

# --dry-run names the model and its shape.
before=$failures
train --model.path "$work/models/qwen3" --dry-run --run.dir "$work/dry"
[ "$(codes)" = "3x0" ] || fail "dry run: exit codes '$(codes)': $(tail -3 "$work/err")"
grep -q "^# model ($work/models/qwen3, compute float32)" "$work/out" || fail "dry run: no model heading"
grep -q "^Qwen3ForCausalLM: 3 layers, hidden 24, 4 heads (2 key/value) of 10, .*q/k norms, yarn RoPE scaling, tied embeddings" \
  "$work/out" || fail "dry run: no model line: $(grep -A1 '# model' "$work/out")"
[ $failures = "$before" ] && passed=$((passed + 1))

# Three steps of Qwen3, then a resume to five: the checkpoint holds the model under transformers' names.
before=$failures
# Its template named (ChatML), where the model has none (no tokenizer files): the export says the two differ.
train --model.path "$work/models/qwen3" --model.chat_template chatml --run.dir "$work/qwen3" --run.steps 3 \
  --checkpoint.every_steps 3
[ "$(codes)" = "3x0" ] || fail "qwen3: exit codes '$(codes)': $(tail -3 "$work/err")"
[ "$(metric_lines "$work/qwen3")" = 3 ] || fail "qwen3: $(metric_lines "$work/qwen3") metric lines, want 3"
h5dump -n "$work/qwen3/checkpoints/v00000003.h5" 2>/dev/null | grep -q "model.layers.2.self_attn.q_norm.weight" ||
  fail "qwen3: the checkpoint lacks model.layers.2.self_attn.q_norm.weight"
train --model.path "$work/models/qwen3" --model.chat_template chatml --run.dir "$work/qwen3" --run.steps 5 \
  --resume auto
[ "$(codes)" = "3x0" ] || fail "qwen3 resume: exit codes '$(codes)': $(tail -3 "$work/err")"
[ "$(metric_lines "$work/qwen3")" = 5 ] || fail "qwen3 resume: $(metric_lines "$work/qwen3") metric lines, want 5"
[ $failures = "$before" ] && passed=$((passed + 1))

# export: the trained Qwen3 as a Hugging Face directory (sharded when asked) that arclight loads again.
before=$failures
"$bin" export "$work/qwen3/checkpoints" --hf "$work/export" >"$work/out" 2>"$work/err" || fail "export: $(cat "$work/err")"
# No generation_config.json where the model has none: transformers derives it from config.json, as for the model.
grep -q "(step 5) -> $work/export: .* F32 weights; model.safetensors config.json$" "$work/out" ||
  fail "export: $(cat "$work/out")"
# Its config and tokenizer files come from the model the run trained: another (a config.json changed) is refused;
# the run's own directory edited since is said, and exported with it.
cp -r "$work/models/qwen3" "$work/qwen3_rope" && double_rope_theta "$work/qwen3_rope"
"$bin" export "$work/qwen3/checkpoints" --model "$work/qwen3_rope" --hf "$work/rope_export" >"$work/out" 2>"$work/err"
[ $? = 2 ] && grep -q "qwen3_rope is not the model the run trained (config.json differs)" "$work/err" ||
  fail "export from another model's files: $(cat "$work/err")"
cp "$work/models/qwen3/config.json" "$work/config.saved" && double_rope_theta "$work/models/qwen3"
"$bin" export "$work/qwen3/checkpoints" --hf "$work/edited_export" >"$work/out" 2>"$work/err" &&
  grep -q "config.json differs since the run's version was saved; exporting with them" "$work/err" ||
  fail "export from the run's own edited model: $(cat "$work/err")"
mv "$work/config.saved" "$work/models/qwen3/config.json"
grep -q "export: the run rendered its chats with chat template \"chatml\" (model.chat_template), but .* carry none arclight" \
  "$work/err" || fail "export: no word of the run's chat template: $(cat "$work/err")"
"$bin" export "$work/qwen3/checkpoints/v00000003.h5" --hf "$work/sharded" --max-shard-bytes 20000 >"$work/out" 2>&1 ||
  fail "sharded export: $(cat "$work/out")"
[ -f "$work/sharded/model.safetensors.index.json" ] && [ -f "$work/sharded/model-00002-of-00004.safetensors" ] ||
  fail "sharded export: $(ls "$work/sharded" | xargs)"
# Staging left by exports that were killed (Ctrl-C ends an export with no unwinding): this host's dead process's is
# removed by the next export to that directory; a live process's, one whose lock is held (a process of another PID
# namespace) and another host's (a shared file system) stay.
sleep 0 & dead=$!; wait $dead
sleep 0 & locked=$!; wait $locked
for owner in "$(hostname)-$dead" "$(hostname)-$$" "$(hostname)-$locked" "elsewhere-$dead"; do
  mkdir -p "$work/again.partial-$owner" && touch "$work/again.partial-$owner/.export.lock"
done
flock "$work/again.partial-$(hostname)-$locked/.export.lock" sleep 60 & holder=$!
sleep 0.5
"$bin" export "$work/qwen3/checkpoints" --hf "$work/again" >"$work/out" 2>&1 || fail "export again: $(cat "$work/out")"
kill $holder 2>/dev/null
[ ! -e "$work/again.partial-$(hostname)-$dead" ] && [ -d "$work/again.partial-$(hostname)-$$" ] &&
  [ -d "$work/again.partial-$(hostname)-$locked" ] && [ -d "$work/again.partial-elsewhere-$dead" ] &&
  [ ! -e "$work/again/.export.lock" ] || fail "stale staging: $(ls -d "$work"/again.partial-* | xargs)"
# An empty directory that exists (made by the user for its group, or a mount point) is filled, not replaced: its
# inode, mode and setgid bit stay; a killed export's staging inside it is no obstacle to the next.
mkdir -m 2750 "$work/filled"
inode=$(stat -c %i:%a "$work/filled")
mkdir -p "$work/filled/.partial-$(hostname)-$dead" && touch "$work/filled/.partial-$(hostname)-$dead/.export.lock"
"$bin" export "$work/qwen3/checkpoints" --hf "$work/filled" >"$work/out" 2>&1 || fail "export into a directory: $(cat "$work/out")"
[ "$(stat -c %i:%a "$work/filled")" = "$inode" ] && [ -f "$work/filled/config.json" ] &&
  [ -f "$work/filled/model.safetensors" ] && [ -z "$(ls -A "$work/filled" | grep -v -x -E 'config.json|model.safetensors|generation_config.json|tokenizer.json|tokenizer_config.json')" ] ||
  fail "export into a directory: $inode -> $(stat -c %i:%a "$work/filled"): $(ls -A "$work/filled" | xargs)"
# Another weight type than the source's (a float32 run on a bfloat16 model is rounded unless asked): the weights and
# config.json's torch_dtype say it, and it loads.
"$bin" export "$work/qwen3/checkpoints" --hf "$work/bf16" --dtype bfloat16 >"$work/out" 2>&1 ||
  fail "export --dtype: $(cat "$work/out")"
grep -q "BF16 weights" "$work/out" && grep -q '"torch_dtype": "bfloat16"' "$work/bf16/config.json" ||
  fail "export --dtype bfloat16: $(cat "$work/out"; grep dtype "$work/bf16/config.json")"
for exported in export sharded bf16 filled; do
  train --model.path "$work/$exported" --dry-run --run.dir "$work/dry"
  [ "$(codes)" = "3x0" ] || fail "$exported does not load: $(tail -3 "$work/err")"
done
"$bin" export "$work/qwen3/checkpoints" --hf "$work/export" >"$work/out" 2>"$work/err"
[ $? = 2 ] && grep -q "exists and is not an empty directory" "$work/err" || fail "export over a model: $(cat "$work/err")"
[ $failures = "$before" ] && passed=$((passed + 1))

# LoRA: only the adapters train and go into the checkpoints (small versions); resume; export merged.
before=$failures
# An entropy bonus: the random model may never earn a reward in 5 steps (no advantage, no gradient), and lora_B starts
# at zero; the PEFT check needs adapters that moved.
lora=(--model.path "$work/models/qwen3" --run.dir "$work/lora" --model.lora_rank 4 --model.lora_targets q v down
  --grpo.entropy_coef 0.01)
train "${lora[@]}" --run.steps 3 --checkpoint.every_steps 3
[ "$(codes)" = "3x0" ] || fail "lora: exit codes '$(codes)': $(tail -3 "$work/err")"
tensors=$(h5ls "$work/lora/checkpoints/v00000003.h5/model/parameters" 2>/dev/null | awk '{print $1}')
[ "$(echo "$tensors" | wc -l)" = 18 ] || fail "lora: $(echo "$tensors" | wc -l) tensors in the checkpoint, want 18"
echo "$tensors" | grep -qv "lora_" && fail "lora: the checkpoint holds a frozen tensor: $(echo "$tensors" | grep -v lora_ | head -1)"
train "${lora[@]}" --run.steps 5 --resume auto
[ "$(codes)" = "3x0" ] || fail "lora resume: exit codes '$(codes)': $(tail -3 "$work/err")"
[ "$(metric_lines "$work/lora")" = 5 ] || fail "lora resume: $(metric_lines "$work/lora") metric lines, want 5"
"$bin" export "$work/lora/checkpoints" --hf "$work/lora_export" >"$work/out" 2>"$work/err"
[ $? = 2 ] && grep -q "holds LoRA adapters only; --merge-lora" "$work/err" || fail "lora export unmerged: $(cat "$work/err")"
"$bin" export "$work/lora/checkpoints" --hf "$work/lora_export" --merge-lora >"$work/out" 2>"$work/err" ||
  fail "lora export: $(cat "$work/err")"
grep -q "LoRA merged into" "$work/err" && fail "a float32 merge spoke of rounding: $(cat "$work/err")"
# Merged into bfloat16: how many of the updates the rounding lost is said.
"$bin" export "$work/lora/checkpoints" --hf "$work/lora_export_bf16" --merge-lora --dtype bfloat16 >"$work/out" \
  2>"$work/err" || fail "lora export in bf16: $(cat "$work/err")"
grep -q "LoRA merged into BF16 weights: [0-9]* of the [1-9][0-9]* weights the adapters change" "$work/err" ||
  fail "a bf16 merge said nothing of its rounding: $(cat "$work/err")"
train --model.path "$work/lora_export" --dry-run --run.dir "$work/dry"
[ "$(codes)" = "3x0" ] || fail "the merged export does not load: $(tail -3 "$work/err")"
# The adapters un-merged, as PEFT lays them out; merged by PEFT's rule they give the merged export's weights.
# From another directory, the base model named relatively: the adapter still names it (absolutely).
(cd "$work" && "$bin" export lora/checkpoints --model models/qwen3 --peft lora_peft) >"$work/out" 2>"$work/err" ||
  fail "peft export: $(cat "$work/err")"
grep -q "chat template" "$work/err" && fail "peft export: a template warning for a run of the model's own: $(cat "$work/err")"
/usr/bin/python3 tests/app/peft_check.py "$work/models/qwen3" "$work/lora_peft" "$work/lora_export" >"$work/out" 2>&1 ||
  fail "peft export: $(tail -3 "$work/out")"
# Merged into another base model (llama: as many LoRA floats would merge silently; here the names differ).
"$bin" export "$work/lora/checkpoints" --model "$work/models/llama" --hf "$work/wrong_base" --merge-lora \
  >"$work/out" 2>"$work/err"
[ $? = 2 ] && grep -q "models/llama is not the model the run trained (config.json differs" "$work/err" ||
  fail "lora export merged into another model: $(cat "$work/err")"
# The base replaced since by one of the same names and shapes (one bit of its last tensor flipped): a merged export
# into it and a resume on it are refused (they would go on with adapters trained on another model).
cp -r "$work/models/qwen3" "$work/models/qwen3_changed"
flip_last_byte "$work/models/qwen3_changed/model.safetensors"
"$bin" export "$work/lora/checkpoints" --model "$work/models/qwen3_changed" --hf "$work/changed_base" --merge-lora \
  >"$work/out" 2>"$work/err"
[ $? = 2 ] && grep -q "holds another base model than the run trained on" "$work/err" ||
  fail "lora export merged into a changed base: $(cat "$work/err")"
# The adapters apart (--peft) onto it too: PEFT would apply them to a base they were not trained on.
"$bin" export "$work/lora/checkpoints" --model "$work/models/qwen3_changed" --peft "$work/changed_peft" \
  >"$work/out" 2>"$work/err"
[ $? = 2 ] && grep -q "holds another base model than the run trained on" "$work/err" ||
  fail "peft export onto a changed base: $(cat "$work/err")"
mv "$work/models/qwen3" "$work/models/qwen3_original" && mv "$work/models/qwen3_changed" "$work/models/qwen3"
train "${lora[@]}" --run.steps 6 --resume auto  # refused once the trainer has read the version: MPI_Abort(2)
rc=$?
[ $rc = 2 ] && [ "$(grep -c 'error\]' "$work/err")" = 1 ] &&
  grep -q "holds LoRA adapters of another base model than model.path holds now" "$work/err" ||
  fail "lora resume on a base replaced since: rc $rc, $(grep 'error\]' "$work/err")"
rm -rf "$work/models/qwen3" && mv "$work/models/qwen3_original" "$work/models/qwen3"
# A runner that read another base (its node's own copy of the model, which differs) would keep it for the whole run:
# refused at start-up (exit 2), naming it. One launch, the runner (rank 2) given the changed copy.
cp -r "$work/models/qwen3" "$work/models/qwen3_node_copy"
flip_last_byte "$work/models/qwen3_node_copy/model.safetensors"
# So is a second trainer (rank 2 of 4) that read it: the trainers would restore and refuse versions unalike.
node_run=(train --config configs/tiny.toml --model.source hf --run.dir "$work/lora_nodes" --model.lora_rank 4
  --run.steps 2)
same=(--model.path "$work/models/qwen3") other=(--model.path "$work/models/qwen3_node_copy")
for role in runner trainer; do
  if [ $role = runner ]; then  # rank 0 the coordinator, 1 the trainer, 2 the runner
    launch=(-np 2 "$bin" "${node_run[@]}" "${same[@]}" : -np 1 "$bin" "${node_run[@]}" "${other[@]}")
  else  # 1 and 2 trainers, 3 the runner
    node_run+=(--layout.trainers 2)
    launch=(-np 2 "$bin" "${node_run[@]}" "${same[@]}" : -np 1 "$bin" "${node_run[@]}" "${other[@]}"
      : -np 1 "$bin" "${node_run[@]}" "${same[@]}")
  fi
  timeout 150 "$mpirun" --oversubscribe --allow-run-as-root "${launch[@]}" >"$work/out" 2>"$work/err"
  rc=$?
  [ $rc = 2 ] && [ "$(grep -c 'error\]' "$work/err")" = 1 ] &&
    grep -q "$role rank(s) 2 read another base model from model.path than rank 1 " "$work/err" ||
    fail "lora $role on another base: rc $rc, $(grep 'error\]' "$work/err")"
done
"$bin" export "$work/qwen3/checkpoints" --peft "$work/not_lora" >"$work/out" 2>"$work/err"
[ $? = 2 ] && grep -q "is not a LoRA run" "$work/err" || fail "peft export of a full run: $(cat "$work/err")"
"$bin" export "$work/lora/checkpoints" >"$work/out" 2>"$work/err"
[ $? = 2 ] && grep -q "say where to write" "$work/err" || fail "export without --hf or --peft: $(cat "$work/err")"
# A checkpoint that is not there: one line and exit 2, as any program ends (Open MPI's banner about a job killed
# followed every refusal before).
"$bin" export "$work/nowhere" --hf "$work/nowhere_export" >"$work/out" 2>"$work/err"
[ $? = 2 ] && grep -q "^\[arclight r0 error\] export: $work/nowhere does not exist" "$work/err" &&
  [ "$(wc -l <"$work/err")" = 1 ] || fail "export of a missing checkpoint: $(cat "$work/err")"
[ $failures = "$before" ] && passed=$((passed + 1))

# Llama with bfloat16 compute, from bfloat16 shards (Mistral's), two steps each.
for model in llama mistral; do
  before=$failures
  train --model.path "$work/models/$model" --run.dir "$work/$model" --run.steps 2 --model.dtype bfloat16
  [ "$(codes)" = "3x0" ] || fail "$model bfloat16: exit codes '$(codes)': $(tail -3 "$work/err")"
  [ "$(metric_lines "$work/$model")" = 2 ] || fail "$model bfloat16: $(metric_lines "$work/$model") metric lines"
  [ $failures = "$before" ] && passed=$((passed + 1))
done

before=$failures
# Qwen3's run (at step 5) resumed with its model copied elsewhere (a job staging it to its nodes' own disks) goes on
# from the copy; from another copy whose config.json differs (another rope_theta: the same tensors) it is refused,
# naming the file, on every rank at once.
cp -r "$work/models/qwen3" "$work/qwen3_staged"
train --model.path "$work/qwen3_staged" --model.chat_template chatml --run.dir "$work/qwen3" --run.steps 6 --resume auto
[ "$(codes)" = "3x0" ] || fail "qwen3 resume from a copy: exit codes '$(codes)': $(tail -3 "$work/err")"
[ "$(metric_lines "$work/qwen3")" = 6 ] || fail "qwen3 resume from a copy: $(metric_lines "$work/qwen3") metric lines"
grep -q "model.path $work/qwen3_staged is not the directory the version was saved with" "$work/err" ||
  fail "qwen3 resume from a copy: no word of the other directory: $(grep 'info\]' "$work/err" | head -3)"
cp -r "$work/qwen3_staged" "$work/qwen3_other" && double_rope_theta "$work/qwen3_other"
train --model.path "$work/qwen3_other" --model.chat_template chatml --run.dir "$work/qwen3" --run.steps 7 \
  --resume auto
rc=$?
[ $rc = 2 ] && [ "$(grep -c 'error\]' "$work/err")" = 1 ] &&
  grep -q "holds another model (model.path $work/qwen3_other: config.json differs since the version was saved)" \
    "$work/err" || fail "qwen3 resume from a changed copy: rc $rc, $(grep 'error\]' "$work/err")"
[ "$(metric_lines "$work/qwen3")" = 6 ] || fail "qwen3 resume from a changed copy: the run went on"
# The directory the version was saved with, changed since: the user's own edit, warned of, and the run goes on.
double_rope_theta "$work/qwen3_staged"
train --model.path "$work/qwen3_staged" --model.chat_template chatml --run.dir "$work/qwen3" --run.steps 7 \
  --resume auto
[ "$(codes)" = "3x0" ] || fail "qwen3 resume after an edit in place: exit codes '$(codes)': $(tail -3 "$work/err")"
grep -q "warn\].*model.path $work/qwen3_staged: config.json differs since .* was saved; going on" "$work/err" ||
  fail "qwen3 resume after an edit in place: no warning: $(grep 'warn\]' "$work/err" | head -3)"
[ "$(metric_lines "$work/qwen3")" = 7 ] || fail "qwen3 resume after an edit in place: $(metric_lines "$work/qwen3")"
# The copy gone with its job: an export says to name the model (--model), not that a file cannot be opened.
rm -rf "$work/qwen3_staged"
"$bin" export "$work/qwen3/checkpoints" --hf "$work/export_gone" >"$work/out" 2>"$work/err"
[ $? = 2 ] && grep -q "holds no config.json now .*--model DIR names the model it started from" "$work/err" ||
  fail "export after the model's copy went: $(cat "$work/err")"
[ $failures = "$before" ] && passed=$((passed + 1))

# Refused at start-up on every rank, with exit 2 and one error line holding EXPECT (ranks.sh).
refused() { check_refused "$1" "$2" --model.source hf --run.dir "$work/refused" "${@:3}"; }
cp -r "$work/models/mistral" "$work/one_shard_gone" && rm "$work/one_shard_gone/model-00002-of-00002.safetensors"
refused "a missing shard" "model-00002-of-00002.safetensors" --model.path "$work/one_shard_gone"
cp -r "$work/models/qwen2" "$work/gpt2"
sed -i 's/Qwen2ForCausalLM/GPT2LMHeadModel/' "$work/gpt2/config.json"
refused "an unknown architecture" 'architecture "GPT2LMHeadModel" is not supported' --model.path "$work/gpt2"
refused "no model.path" 'model.source = "hf" needs model.path'
# A Hugging Face model named while model.source is scratch (the default): said, not a tiny random model trained.
check_refused "model.path with a scratch model" 'model.path is for a Hugging Face model, but model.source = "scratch"' \
  --run.dir "$work/refused" --model.path "$work/models/qwen3"
check_refused "a chat template with a scratch model" 'model.chat_template is for a Hugging Face model' \
  --run.dir "$work/refused" --model.chat_template qwen3
refused "an unknown chat template name" "llama2" --model.path "$work/models/qwen3" --model.chat_template llama2
cp -r "$work/models/qwen2" "$work/odd_template"
echo '{"chat_template": "{% for m in messages %}{{ m.content }}{% endfor %}"}' >"$work/odd_template/tokenizer_config.json"
refused "a chat template not recognised" "tokenizer_config.json" --model.path "$work/odd_template"
before=$failures
train --model.path "$work/odd_template" --model.chat_template chatml --dry-run --run.dir "$work/dry"
[ "$(codes)" = "3x0" ] || fail "a named chat template: exit codes '$(codes)': $(tail -3 "$work/err")"
grep -q "^# model ($work/odd_template, compute float32, chat template chatml)" "$work/out" ||
  fail "a named chat template: $(grep '^# model' "$work/out")"
[ $failures = "$before" ] && passed=$((passed + 1))
refused "float16 on CPUs" "model.dtype = float16 needs GPUs" --model.path "$work/models/qwen3" --model.dtype float16
# A reasoning parser reads <think> blocks: a template that does not think would give every answer to the reasoning
# (Qwen3 Instruct-2507's model does not think).
refused "a reasoning parser beside a template that does not think" \
  "runner.reasoning_parser = qwen3 reads the <think> block a thinking model's answer begins with (qwen3, qwen3-thinking-2507, deepseek-r1); the served chat template, qwen3-instruct-2507, does not think" \
  --model.path "$work/models/qwen3" --model.chat_template qwen3-instruct-2507 --runner.reasoning_parser qwen3
check_refused "a reasoning parser with a scratch model" "the served chat template, chatml, does not think" \
  --run.dir "$work/refused" --runner.reasoning_parser qwen3

echo "$passed passed, $failures failed"
[ $failures = 0 ]
