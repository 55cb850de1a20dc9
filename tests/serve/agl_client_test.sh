#!/usr/bin/env bash
# The store API driven by a client written from ../shared/agl-v0.3-interfaces.md with Python's standard library only
# (agl_client.py: the calls Agent Lightning's LightningStoreClient and runner make, in its JSON shapes).
# Usage: agl_client_test.sh STORE_API_TEST_SERVER SOURCE_DIR
set -u
server_bin=$(realpath "$1"); src=$(realpath "$2")
work=$(mktemp -d)
mkfifo "$work/stdin"
"$server_bin" test-token-0123 <"$work/stdin" >"$work/port" 2>"$work/log" &
server=$!
exec 3>"$work/stdin"  # the server serves until this closes
trap 'exec 3>&-; wait "$server" 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
port=$(head -1 "$work/port")
[ -n "$port" ] || { echo "FAIL: the test server printed no port: $(cat "$work/log")"; exit 1; }
timeout 120 python3 "$src/tests/serve/agl_client.py" "http://127.0.0.1:$port/test-token-0123"
