#!/usr/bin/env bash
# Rank 0's store API (store.http) against the real binary, driven by curl while a job trains on 3 ranks: the URL file
# (mode 0600), the job's secret (path prefix or bearer; without it 404), Agent Lightning's routes and status codes on
# the store the MPI runners use, OTLP ingest, and the server gone (and its URL file) when the job ends.
# Usage: store_api_curl_test.sh BUILD/arclight SOURCE_DIR
set -u
bin=$(realpath "$1"); src=$2
mpirun=${MPIEXEC:-mpirun}
command -v curl >/dev/null || { echo "SKIP: no curl"; exit 77; }
work=$(mktemp -d)
trap 'kill -9 $(jobs -p) 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
checks=0; failures=0
check() { checks=$((checks + 1)); if ! eval "$1"; then echo "FAIL: $2"; failures=$((failures + 1)); fi; }
cd "$src"

timeout 150 "$mpirun" --oversubscribe --allow-run-as-root -np 3 "$bin" --log-level debug train --config configs/tiny.toml \
  --run.dir "$work/run" --run.steps 100000 --run.progress lines --checkpoint.every_steps 1 \
  --store.http true --store.http_port 0 >"$work/out" 2>"$work/err" &
job=$!
url_file=$work/run/store_api.url
for _ in $(seq 600); do
  grep -q '^step=1 ' "$work/out" 2>/dev/null && [ -s "$url_file" ] && break
  kill -0 $job 2>/dev/null || break
  sleep 0.1
done
if [ ! -s "$url_file" ]; then
  echo "FAIL: no $url_file: $(tail -5 "$work/err")"; exit 1
fi
check '[ "$(stat -c %a "$url_file")" = 600 ]' "the URL file is private (mode $(stat -c %a "$url_file"))"
base=$(cat "$url_file")        # http://127.0.0.1:PORT/SECRET
root=${base%/*}; secret=${base##*/}
check '[ "${#secret}" = 32 ]' "the URL ends in the job's secret"

# request METHOD URL [BODY [CURL ARGS...]]: the status in $status, the body in $body, the Content-Type in $type.
request() {
  local method=$1 url=$2 data=${3-}; shift 3 2>/dev/null || shift $#
  local args=(-s -o "$work/body" -D "$work/headers" -w '%{http_code}' -X "$method" "$@")
  [ -n "$data" ] && args+=(-H 'Content-Type: application/json' --data-binary "$data")
  status=$(curl "${args[@]}" "$url")
  body=$(cat "$work/body")
  type=$(grep -i '^content-type:' "$work/headers" | tr -d '\r' | cut -d' ' -f2-)
}
field() { python3 -c 'import json,sys; v=json.loads(sys.argv[1]); exec("for k in sys.argv[2:]: v = v[int(k)] if isinstance(v, list) else v[k]"); print(json.dumps(v) if not isinstance(v, str) else v)' "$body" "$@"; }
api=$base/v1/agl

# The secret: without it (or a wrong one) nothing is there; in the path or as a bearer header, the API answers.
request GET "$root/v1/agl/health"
check '[ "$status" = 404 ] && [ "$(field detail)" = "Not Found" ]' "no secret: 404 Not Found (got $status $body)"
request GET "$root/0123456789abcdef0123456789abcdef/v1/agl/health"
check '[ "$status" = 404 ]' "a wrong secret: 404 (got $status)"
request POST "$root/v1/traces" ""
check '[ "$status" = 404 ]' "OTLP without the secret: 404 (got $status)"
request GET "$api/health"
check '[ "$status" = 200 ] && [ "$(field status)" = ok ] && [ "$type" = application/json ]' \
  "health with the secret in the path (got $status $type $body)"
request GET "$root/v1/agl/health" "" -H "Authorization: Bearer $secret"
check '[ "$status" = 200 ]' "health with the bearer header (got $status)"

# The store the MPI runners use: the job's own rollouts are there.
request GET "$api/statistics"
check '[ "$status" = 200 ] && [ "$(field total_rollouts)" -gt 0 ] && [ "$(field total_spans)" -gt 0 ]' \
  "statistics show the job's rollouts and spans ($body)"
request GET "$api/workers"
check '[ "$status" = 200 ] && [ "$(field total)" -ge 1 ]' "the MPI runners are workers ($body)"

# A rollout of our own, start to end: 201 with its first attempt, a sequence id, a span (201), the attempt's end.
request POST "$api/rollouts" '{"input": {"task": "from curl"}, "mode": "test", "worker_id": "curl-worker"}'
check '[ "$status" = 201 ] && [ "$(field status)" = preparing ] && [ "$(field attempt sequence_id)" = 1 ]' \
  "start a rollout: 201 with attempt 1 (got $status $body)"
rid=$(field rollout_id); aid=$(field attempt attempt_id)
request POST "$api/spans/next" "{\"rollout_id\": \"$rid\", \"attempt_id\": \"$aid\"}"
check '[ "$status" = 200 ] && [ "$(field sequence_id)" = 1 ]' "spans/next: 1 (got $status $body)"
span='{"rollout_id": "'$rid'", "attempt_id": "'$aid'", "sequence_id": 1, "trace_id": "0123456789abcdef0123456789abcdef",
       "span_id": "0123456789abcdef", "parent_id": null, "name": "agentlightning.annotation",
       "status": {"status_code": "OK", "description": null},
       "attributes": {"agentlightning.reward.0.name": "primary", "agentlightning.reward.0.value": 1.0},
       "events": [], "links": [], "start_time": 1.0, "end_time": 2.0, "context": null, "parent": null,
       "resource": {"attributes": {}, "schema_url": ""}}'
request POST "$api/spans" "$span"
check '[ "$status" = 201 ] && [ "$(field sequence_id)" = 1 ]' "add a span: 201 (got $status $body)"
request POST "$api/rollouts/$rid" '{}'
check '[ "$status" = 200 ] && [ "$(field status)" = running ]' "a span moves the rollout to running (got $body)"
request POST "$api/spans/search" "{\"rollout_id\": \"$rid\", \"attempt_id\": \"latest\", \"name_contains\": \"annotation\"}"
check '[ "$status" = 200 ] && [ "$(field total)" = 1 ] && [ "$(field items 0 attributes agentlightning.reward.0.value)" = 1.0 ]' \
  "the span comes back ($body)"
span_in_memory=$body
request POST "$api/rollouts/$rid/attempts/latest" '{"status": "succeeded"}'
check '[ "$status" = 200 ] && [ "$(field status)" = succeeded ] && [ "$(field end_time)" != null ]' \
  "the attempt succeeds (got $status $body)"
request GET "$api/rollouts/$rid"
check '[ "$(field status)" = succeeded ] && [ "$(field attempt attempt_id)" = "$aid" ]' "the rollout succeeded ($body)"
rollout_in_memory=$body
request POST "$api/waits/rollouts" "{\"rollout_ids\": [\"$rid\", \"ro-999999\"], \"timeout\": 0.1}"
check '[ "$status" = 200 ] && [ "$(field 0 rollout_id)" = "$rid" ] && [ "$(python3 -c "import json,sys; print(len(json.loads(sys.argv[1])))" "$body")" = 1 ]' \
  "waits/rollouts: the ended one, unknown ids left out ($body)"

# Enqueue: 201, queuing, never attempted (no "attempt" key). Dequeue: the job's rollouts or ours, each attempted.
request POST "$api/queues/rollouts/enqueue" '{"rollouts": [{"input": {"task": "queued by curl"}}]}'
check '[ "$status" = 201 ] && [ "$(field 0 status)" = queuing ] && [ "$(field 0 resources_id)" != null ]' \
  "enqueue: 201, queuing, the latest policy as resources (got $status $body)"
queued=$(field 0 rollout_id)
request POST "$api/queues/rollouts/dequeue" '{"limit": 1, "worker_id": "curl-worker"}'
check '[ "$status" = 200 ]' "dequeue answers (got $status $body)"
if [ "$(python3 -c 'import json,sys; print(len(json.loads(sys.argv[1])))' "$body")" = 1 ]; then
  taken=$(field 0 rollout_id)
  check '[ "$(field 0 attempt rollout_id)" = "$taken" ] && [ "$(field 0 attempt worker_id)" = curl-worker ]' \
    "a dequeued rollout carries its attempt ($body)"
  request POST "$api/rollouts/$taken/attempts/latest" '{"status": "failed"}'  # back to the runners (retried)
  check '[ "$status" = 200 ] || [ "$status" = 409 ]' "the taken attempt fails (got $status $body)"
fi
request GET "$api/rollouts/$queued"
check '[ "$status" = 200 ] && [ "$(field rollout_id)" = "$queued" ]' "the enqueued rollout is there ($body)"
request GET "$api/rollouts/ro-999999"
check '[ "$status" = 200 ] && [ "$body" = null ] && [ "$type" = application/json ]' "a missing rollout: 200 null (got $status $body)"

# Workers and resources.
request POST "$api/workers/curl-worker" '{"heartbeat_stats": {"cpu_percent": 3.5}}'
check '[ "$status" = 200 ] && [ "$(field worker_id)" = curl-worker ]' "a worker's heartbeat (got $status $body)"
request GET "$api/resources/latest"
check '[ "$status" = 200 ] && [ "$body" != null ]' "the latest resources ($body)"

# Errors: 400 for paging the API refuses, 422 for a body that does not validate, 409 for a move the store refuses.
request POST "$api/rollouts/search" '{"limit": 0}'
check '[ "$status" = 400 ] && [ -n "$(field detail)" ]' "limit 0: 400 with detail (got $status $body)"
request POST "$api/rollouts/search" '{"sort_by": "no_such_field"}'
check '[ "$status" = 400 ]' "sort_by no field: 400 (got $status)"
request POST "$api/queues/rollouts/enqueue" '{"rollouts": [{"input": 1, "mode": "bogus"}]}'
check '[ "$status" = 422 ] && [ -n "$(field detail 0 msg)" ]' "a bad mode: 422 in pydantic's shape (got $status $body)"
request POST "$api/queues/rollouts/enqueue" '{"rollouts": '
check '[ "$status" = 422 ]' "a body that is not JSON: 422 (got $status)"
request POST "$api/rollouts/$rid" '{"status": null}'
check '[ "$status" = 400 ]' "status null: 400 (got $status)"
request POST "$api/rollouts/$rid" '{"status": "cancelled"}'
check '[ "$status" = 409 ] && [ -n "$(field detail)" ]' "a succeeded rollout takes no more updates: 409 (got $status $body)"
request POST "$api/no/such/route" '{}'
check '[ "$status" = 404 ] && [ -n "$(field detail)" ]' "no route: 404 with detail (got $status $body)"

# OTLP/HTTP: an empty export is taken (200, protobuf); another Content-Type is 400.
request POST "$base/v1/traces" "" -H 'Content-Type: application/x-protobuf' --data-binary ''
check '[ "$status" = 200 ] && [ "$type" = application/x-protobuf ]' "an empty OTLP export: 200 (got $status $type)"
request POST "$base/v1/traces" '{}'
check '[ "$status" = 400 ]' "OTLP as JSON: 400 (got $status)"
request POST "$base/v1/metrics" "" -H 'Content-Type: application/x-protobuf' --data-binary ''
check '[ "$status" = 501 ] && [ -n "$(field detail)" ]' "OTLP metrics: 501, as Agent Lightning answers (got $status $body)"

# Each open connection holds one of the API's threads: 100 clients that keep theirs open and busy (as Agent Lightning's
# runners heartbeat) leave it answering the others (64 such starved every other client).
python3 - "$root" "$secret" "$work/held" <<'PY' &
import http.client, sys, time, urllib.parse
url = urllib.parse.urlsplit(sys.argv[1])
held = [http.client.HTTPConnection(url.hostname, url.port, timeout=10) for _ in range(100)]
def round_trip():
    for c in held:
        c.request("GET", f"/{sys.argv[2]}/v1/agl/health")
        c.getresponse().read()
round_trip()
open(sys.argv[3], "w").write("ready")
for _ in range(8):  # busy: never idle long enough to be closed
    time.sleep(1)
    round_trip()
PY
holder=$!
for _ in $(seq 150); do [ -s "$work/held" ] && break; sleep 0.1; done  # 100 round trips with training going on
request GET "$api/health" "" --max-time 3
check '[ -s "$work/held" ] && [ "$status" = 200 ]' \
  "100 connections open at once (within 15 s: $([ -s "$work/held" ] && echo yes || echo no)), another client answered: $status"
kill $holder 2>/dev/null; wait $holder 2>/dev/null

# Once a version holds our ended rollout's span and record (a checkpoint every step), rank 0 lets go of them; a search
# reads them back from the checkpoint, the same, and a change is refused as before (issue 11, point 3).
steps_now=$(grep -c '^step=' "$work/out")
for _ in $(seq 300); do [ "$(grep -c '^step=' "$work/out")" -ge $((steps_now + 3)) ] && break; sleep 0.1; done
let_go='[1-9][0-9]* spans and [1-9][0-9]* rollouts left rank 0.s memory'
check '[ "$(grep -c "^step=" "$work/out")" -ge $((steps_now + 3)) ] && grep -q "$let_go" "$work/err"' \
  "three more steps, each checkpointed, and spans and records let go of: $(grep -c "^step=" "$work/out") steps, $(tail -2 "$work/err")"
request POST "$api/spans/search" "{\"rollout_id\": \"$rid\", \"attempt_id\": \"latest\", \"name_contains\": \"annotation\"}"
check '[ "$status" = 200 ] && [ "$body" = "$span_in_memory" ]' "the span read back from the checkpoint: $status $body"
request GET "$api/rollouts/$rid"
check '[ "$status" = 200 ] && [ "$body" = "$rollout_in_memory" ]' "the rollout read back from the checkpoint: $status $body"
request POST "$api/rollouts/$rid" '{"status": "cancelled"}'
check '[ "$status" = 409 ]' "the rollout let go of takes no update: 409 (got $status $body)"
request POST "$api/rollouts/search" "{\"rollout_id_in\": [\"$rid\"], \"rollout_id_contains\": \"no such\", \"filter_logic\": \"or\"}"
check '[ "$status" = 200 ] && [ "$(field total)" = 1 ] && [ "$(field items 0 rollout_id)" = "$rid" ]' \
  "a search naming it (filter_logic or) finds it: $status $body"

# The job still trains; SIGUSR1 ends it at a checkpoint (exit 3), and the API goes with it.
kill -USR1 "$(pgrep -P $job)"  # mpirun (under timeout) forwards SIGUSR1 to every rank
wait $job; rc=$?
check '[ "$rc" = 3 ] || [ "$rc" = 0 ]' "the job ends (exit $rc): $(tail -3 "$work/err")"
check '[ ! -e "$url_file" ]' "the URL file is gone with the job"
check '! curl -s -o /dev/null --max-time 2 "$api/health"' "nothing listens any more"

# Resumed, the store keeps in memory only what no version holds: our span comes back from the version, the same.
last=$(grep -c '^step=' "$work/out")
timeout 150 "$mpirun" --oversubscribe --allow-run-as-root -np 3 "$bin" --log-level debug train --config configs/tiny.toml \
  --run.dir "$work/run" --run.steps $((last + 200)) --run.progress lines --checkpoint.every_steps 1 \
  --store.http true --store.http_port 0 --resume auto >"$work/out" 2>"$work/err" &
job=$!
for _ in $(seq 600); do
  [ -s "$url_file" ] && grep -q "$let_go" "$work/err" && break
  kill -0 $job 2>/dev/null || break
  sleep 0.1
done
api=$(cat "$url_file")/v1/agl
request POST "$api/spans/search" "{\"rollout_id\": \"$rid\", \"attempt_id\": \"latest\", \"name_contains\": \"annotation\"}"
check 'grep -q "resuming from" "$work/err" && grep -q "$let_go" "$work/err" &&
  [ "$status" = 200 ] && [ "$body" = "$span_in_memory" ]' \
  "after a resume, the span read back from the version: $status $body $(grep -E "resuming|error" "$work/err" | head -2)"
request GET "$api/rollouts/$rid"
check '[ "$status" = 200 ] && [ "$body" = "$rollout_in_memory" ]' "after a resume, the rollout read back: $status $body"
kill -USR1 "$(pgrep -P $job)"
wait $job; rc=$?
check '[ "$rc" = 3 ] || [ "$rc" = 0 ]' "the resumed job ends (exit $rc): $(tail -3 "$work/err")"

# Resumed in place with checkpoint.span_log = "none" (spans leave memory kept nowhere, and the versions' span log leaves
# them out), then again with "all": that version's log numbers its entries apart from the store's count, so rank 0
# reads it whole, and the spans it lets go of from then on read back from the versions.
resume() {  # resume STEPS_MORE [TRAIN ARGS...]: a job resumed in place, the store API's base in $api once it serves
  local more=$1; shift
  timeout 150 "$mpirun" --oversubscribe --allow-run-as-root -np 3 "$bin" --log-level debug train --config configs/tiny.toml \
    --run.dir "$work/run" --run.steps 100000 --run.progress lines --checkpoint.every_steps 1 \
    --store.http true --store.http_port 0 --resume auto "$@" >"$work/out" 2>"$work/err" &
  job=$!
  for _ in $(seq 600); do
    [ -s "$url_file" ] && [ "$(grep -c '^step=' "$work/out")" -ge "$more" ] && break
    kill -0 $job 2>/dev/null || break
    sleep 0.1
  done
  api=$(cat "$url_file" 2>/dev/null)/v1/agl
}
resume 4 --checkpoint.span_log none
check 'grep -q "$let_go" "$work/err"' "with span_log none, spans leave memory: $(tail -2 "$work/err")"
kill -USR1 "$(pgrep -P $job)"
wait $job; rc=$?
check '[ "$rc" = 3 ] || [ "$rc" = 0 ]' "the job with span_log none ends (exit $rc): $(tail -3 "$work/err")"
resume 1
check 'grep -q "read it from its start.*reading its logs whole" "$work/err"' \
  "resumed with span_log all, rank 0 reads the version's logs whole: $(grep -E "resuming|whole|error" "$work/err" | head -3)"
# A rollout left running holds the records after it in memory (they go front to back): the span of the one after
# it then reads back by its place in the versions' span log, which must be the file's.
request POST "$api/rollouts" '{"input": {"task": "holds the records after it"}, "mode": "test", "worker_id": "curl-worker"}'
holder=$(field rollout_id)
request POST "$api/rollouts" '{"input": {"task": "after span_log none"}, "mode": "test", "worker_id": "curl-worker"}'
new_rid=$(field rollout_id); new_aid=$(field attempt attempt_id)
new_span=${span//\"$rid\"/\"$new_rid\"}
new_span=${new_span//\"$aid\"/\"$new_aid\"}
request POST "$api/spans" "$new_span"
check '[ "$status" = 201 ]' "a span of a rollout after the resume: 201 (got $status $body)"
request POST "$api/spans/search" "{\"rollout_id\": \"$new_rid\", \"attempt_id\": \"latest\"}"
new_span_in_memory=$body
request POST "$api/rollouts/$new_rid/attempts/latest" '{"status": "succeeded"}'
spans_go='[1-9][0-9]* spans and [0-9]* rollouts left rank 0.s memory'  # the records stay: the holder holds them
spans_went=$(grep -c "$spans_go" "$work/err")
for _ in $(seq 300); do [ "$(grep -c "$spans_go" "$work/err")" -ge $((spans_went + 3)) ] && break; sleep 0.1; done
request POST "$api/spans/search" "{\"rollout_id\": \"$new_rid\", \"attempt_id\": \"latest\"}"
check '[ "$(grep -c "$spans_go" "$work/err")" -ge $((spans_went + 3)) ] && [ "$status" = 200 ] &&
  [ "$(field total)" = 1 ] && [ "$body" = "$new_span_in_memory" ]' \
  "its span, let go of, reads back from the versions: $status $body (in memory: $new_span_in_memory)"
request GET "$api/rollouts/$holder"
check '[ "$status" = 200 ] && [ "$(field end_time)" = null ]' "the rollout that holds the records has not ended: $body"
kill -USR1 "$(pgrep -P $job)"
wait $job; rc=$?
check '[ "$rc" = 3 ] || [ "$rc" = 0 ]' "the job resumed with span_log all ends (exit $rc): $(tail -3 "$work/err")"

echo "$((checks - failures)) of $checks checks passed"
[ "$failures" = 0 ]
