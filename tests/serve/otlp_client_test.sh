#!/usr/bin/env bash
# OTLP trace ingest driven by the official OpenTelemetry JS SDK (its OTLP/HTTP protobuf exporter, pinned, installed
# into a cache outside the repository): spans of every attribute type, events, links, parents, error status, two
# resources, gzip on and off; otlp_client.mjs compares each decoded span, and what the store API answers once it is
# stored, with what it exported. Skipped (77) where
# npm cannot install it.
# Usage: otlp_client_test.sh OTLP_TEST_SERVER SOURCE_DIR
set -u
server_bin=$(realpath "$1"); src=$(realpath "$2")
source "$src/tests/text/npm_cache.sh" || exit 77
work=$(mktemp -d)
mkfifo "$work/stdin"
"$server_bin" test-token "$work/spans.jsonl" "$work/stored.jsonl" <"$work/stdin" >"$work/port" 2>"$work/log" &
server=$!
exec 3>"$work/stdin"  # the server serves until this closes
trap 'exec 3>&-; wait "$server" 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
port=$(head -1 "$work/port")
[ -n "$port" ] || { echo "FAIL: the test server printed no port: $(cat "$work/log")"; exit 1; }
timeout 120 node "$src/tests/serve/otlp_client.mjs" "$npm_cache" "http://127.0.0.1:$port/v1/traces" test-token \
  "$work/spans.jsonl" "$work/stored.jsonl"
