#!/usr/bin/env bash
# `arclight serve` driven by the official `openai` npm client (pinned, installed into a cache outside the repository):
# chat, streaming, seeds, n, logprobs, tools, completions with token ids, errors. Skipped (77) where npm cannot
# install it.
# Usage: openai_client_test.sh BIN SOURCE_DIR
set -u
bin=$(realpath "$1"); src=$(realpath "$2")
source "$src/tests/text/npm_cache.sh" || exit 77
work=$(mktemp -d)
trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null; rm -rf "$work"' EXIT
# A tiny model from scratch with room for the tool-call conversation.
cat >"$work/serve.toml" <<'TOML'
[model]
d_model = 32
n_layers = 1
n_heads = 4
d_ff = 64
max_seq = 1024
TOML
ARCLIGHT_API_KEY=test-key "$bin" serve "$work/serve.toml" --port 0 >"$work/url" 2>"$work/log" &
server=$!
for _ in $(seq 100); do [ -s "$work/url" ] && break; sleep 0.1; done
url=$(head -1 "$work/url")
[ -n "$url" ] || { echo "FAIL: arclight serve printed no URL: $(cat "$work/log")"; exit 1; }
timeout 120 node "$src/tests/serve/openai_client.mjs" "$npm_cache" "$url" test-key
