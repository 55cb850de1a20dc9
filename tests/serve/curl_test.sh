#!/usr/bin/env bash
# The endpoint as curl sees it: the token, the body limit, server-sent events, malformed JSON. Usage: curl_test.sh
# TEST_SERVER. Skipped (77) without curl.
set -u
command -v curl >/dev/null || { echo "SKIP: curl is not installed"; exit 77; }
work=$(mktemp -d)
trap 'exec 3>&-; wait; rm -rf "$work"' EXIT
mkfifo "$work/in"
"$1" <"$work/in" >"$work/port" &
exec 3>"$work/in"  # the server runs until this closes
for _ in $(seq 50); do [ -s "$work/port" ] && break; sleep 0.1; done
base="http://127.0.0.1:$(cat "$work/port")"
failures=0
check() {  # NAME EXPECTED ACTUAL
  if [ "$2" == "$3" ]; then echo "ok: $1"; else echo "FAIL: $1: expected [$2], got [$3]"; failures=$((failures + 1)); fi
}
# status and body of a POST: curl ARGS...
post() { curl -s -o "$work/body" -w '%{http_code}' -H 'Content-Type: application/json' "$@"; }
auth=(-H 'Authorization: Bearer secret-token')

check "no token is 401" 401 "$(post -d '{}' "$base/v1/completions")"
check "401 is an OpenAI error" authentication_error "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["error"]["type"])' "$work/body")"
check "a wrong token is 401" 401 "$(post -H 'Authorization: Bearer nope' -d '{}' "$base/v1/completions")"

big=$(head -c 2000 /dev/zero | tr '\0' 'x')
check "a body over the limit is 413" 413 "$(post "${auth[@]}" -d "{\"prompt\": \"$big\"}" "$base/v1/completions")"

check "malformed JSON is 400" 400 "$(post "${auth[@]}" -d '{"prompt": ' "$base/v1/completions")"
check "400 is an OpenAI error" invalid_request_error "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["error"]["type"])' "$work/body")"

check "a streamed chat is 200" 200 "$(post "${auth[@]}" -N -d '{"messages": [{"role": "user", "content": "hi"}], "stream": true}' "$base/v1/chat/completions")"
python3 - "$work/body" <<'PY' && check "SSE framing" ok ok || check "SSE framing" ok bad
import json, sys
raw = open(sys.argv[1]).read()
assert raw.endswith("data: [DONE]\n\n"), raw[-40:]
events = raw.split("\n\n")[:-1]
assert all(e.startswith("data: ") for e in events)
chunks = [json.loads(e[6:]) for e in events[:-1]]
assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
assert text == "Hello from the server", text
assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
PY
[ "$failures" -eq 0 ]
