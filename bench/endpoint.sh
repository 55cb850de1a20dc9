#!/usr/bin/env bash
# scripts/bench.sh endpoint: CLIENTS (256) concurrent streamed completions against `arclight serve` (one runner's
# endpoint, a process of its own) over the same sequences decoded in-process by one DecodeBatch: tokens/s and their
# ratio (aim >= 0.8), time to first token p50/p99, and the cost of one one-token request over an in-process one.
# The model: d_model 256, 4 layers (MODEL_DIM, LAYERS to change it).
set -euo pipefail
root=$1
cmake --build "$root/build" --target bench_endpoint arclight -j"$(nproc)" >/dev/null
work=$(mktemp -d)
server=""  # set -u: the trap runs on any exit, the server started or not
trap '[ -z "$server" ] || { kill "$server" 2>/dev/null; wait "$server" 2>/dev/null || true; }; rm -rf "$work"' EXIT
clients=${CLIENTS:-256}
cat >"$work/serve.toml" <<TOML
[run]
seed = 1
[model]
d_model = ${MODEL_DIM:-256}
n_layers = ${LAYERS:-4}
n_heads = 8
d_ff = $((4 * ${MODEL_DIM:-256}))
max_seq = 256
[runner]
decode_rows = $clients
TOML
ARCLIGHT_API_KEY=bench-key "$root/build/arclight" serve "$work/serve.toml" --port 0 >"$work/url" 2>"$work/log" &
server=$!
for _ in $(seq 200); do [ -s "$work/url" ] && break; kill -0 "$server" 2>/dev/null || break; sleep 0.1; done
[ -s "$work/url" ] || { echo "arclight serve did not start within 20 s:" >&2; cat "$work/log" >&2; exit 1; }
"$root/build/bench/bench_endpoint" "$work/serve.toml" "$(head -1 "$work/url")" bench-key "$clients" \
  "${PROMPT_TOKENS:-32}" "${NEW_TOKENS:-32}"
