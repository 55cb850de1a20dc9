#!/usr/bin/env bash
# scripts/bench.sh kv_window: the KV cache of layers with a sliding window. A runner's endpoint (`arclight serve`)
# holds a slot cache of runner.decode_rows rows of model.max_seq positions; a layer that attends through a window keeps
# only the window's keys and values, in a ring. One random Gemma 3-shaped model (12 layers, every sixth full, 4
# key/value heads of 64, float32 cache), served with 16 rows of 4,096 positions twice: with a window of 512 (10 of the
# 12 layers keep 512 positions a row) and with a window of 4,096 (every layer keeps them all: the baseline). Prints
# each server's peak resident memory once it listens (its cache allocated, no request served yet), and the cache
# bytes each should hold.
set -euo pipefail
root=$1
cmake --build "$root/build" --target arclight -j"$(nproc)" >/dev/null
work=$(mktemp -d)
pid=  # the server now, if any: peak_mib runs in this shell (its output to a file), so the trap sees it
trap '[ -z "$pid" ] || { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; }; rm -rf "$work"' EXIT
peak_mib() {  # peak_mib WINDOW: the server's VmHWM in MiB once it listens
  local window=$1 dir=$work/model_$1
  /usr/bin/python3 - "$root" "$dir" "$window" <<'PY'
import os, sys
sys.path.insert(0, os.path.join(sys.argv[1], "tests", "model"))
import hf_reference
config = {"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "vocab_size": 512, "hidden_size": 256,
          "intermediate_size": 512, "num_hidden_layers": 12, "num_attention_heads": 4, "num_key_value_heads": 4,
          "head_dim": 64, "max_position_embeddings": 8192, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
          "rope_local_base_freq": 10000.0, "sliding_window": int(sys.argv[3]), "sliding_window_pattern": 6,
          "query_pre_attn_scalar": 64, "hidden_activation": "gelu_pytorch_tanh", "tie_word_embeddings": True,
          "attn_logit_softcapping": None, "final_logit_softcapping": None, "bos_token_id": 2, "eos_token_id": [1]}
hf_reference.save_model(sys.argv[2], config, hf_reference.random_weights(config), False, 1)
PY
  # A small ChatML tokenizer (the first line of a fuzzer seed): the model's own tokenizer is not what is measured.
  head -n 1 "$root/tests/text/tokenizer_seeds/qwen_like.json" >"$dir/tokenizer.json"
  printf '[model]\nsource = "hf"\npath = "%s"\nmax_seq = 4096\nchat_template = "chatml"\n[runner]\ndecode_rows = 16\n' \
    "$dir" >"$work/serve_$window.toml"
  "$root/build/arclight" serve "$work/serve_$window.toml" --port 0 >"$work/out" 2>"$work/err" &
  pid=$!
  for _ in $(seq 1 600); do
    grep -q '^http' "$work/out" 2>/dev/null && break
    kill -0 "$pid" 2>/dev/null || { echo "serve failed: $(tail -3 "$work/err")" >&2; exit 1; }
    sleep 0.1
  done
  grep -q '^http' "$work/out" || { echo "serve did not listen within 60 s: $(tail -3 "$work/err")" >&2; exit 1; }
  sleep 1
  awk '/VmHWM/ {print int($2 / 1024)}' "/proc/$pid/status"
  kill -TERM "$pid"
  wait "$pid" 2>/dev/null || true
  pid=
}
peak_mib 512 >"$work/windowed"
peak_mib 4096 >"$work/full"
windowed=$(cat "$work/windowed") full=$(cat "$work/full")
/usr/bin/python3 - "$windowed" "$full" <<'PY'
import json, sys
windowed, full = int(sys.argv[1]), int(sys.argv[2])
row = 4 * 64 * 4 * 2  # key/value heads x head_dim x float32 bytes x (keys, values): a position's bytes in one layer
cache_full = 12 * 16 * 4096 * row / 2**20
cache_windowed = (2 * 16 * 4096 + 10 * 16 * 512) * row / 2**20
print(f"peak resident memory: window 512 {windowed} MiB, window 4096 (every position kept) {full} MiB; "
      f"the caches: {cache_windowed:.0f} MiB and {cache_full:.0f} MiB", file=sys.stderr)
print(json.dumps({"peak_rss_windowed_mib": windowed, "peak_rss_full_mib": full,
                  "kv_cache_windowed_mib": round(cache_windowed), "kv_cache_full_mib": round(cache_full),
                  "rss_saved_mib": full - windowed, "rss_ratio": round(windowed / full, 3)}))
PY
