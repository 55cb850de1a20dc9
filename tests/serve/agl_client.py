"""Agent Lightning v0.3's store client calls, with Python's standard library only, written from
../shared/agl-v0.3-interfaces.md (not from the server's code): what LightningStoreClient and a runner do, checked
against the document's shapes, status codes and semantics. Usage: agl_client.py BASE_URL (http://host:port/<token>).
"""
import json
import sys
import urllib.error
import urllib.request

from otlp_wire import field, fixed64, key_value

BASE = sys.argv[1].rstrip("/") + "/v1/agl"
failures = []


def call(method, path, body=None, base=BASE):
    """One request; returns (status, parsed JSON). Every JSON answer must say application/json (aiohttp's resp.json)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status, raw, ctype = response.status, response.read(), response.headers.get("Content-Type", "")
    except urllib.error.HTTPError as error:
        status, raw, ctype = error.code, error.read(), error.headers.get("Content-Type", "")
    check(ctype.split(";")[0] == "application/json", f"{method} {path}: Content-Type {ctype!r}")
    return status, json.loads(raw)


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAIL:", what)


# The health probe the client's retries use.
status, body = call("GET", "/health")
check(status == 200 and body == {"status": "ok"}, f"health: {status} {body}")

# The trainer side: resources (201, version 1), then enqueue_many_rollouts (201), resources_id filled in.
status, resources = call("POST", "/resources", {"main_llm": {"resource_type": "llm", "endpoint": "http://llm/v1",
                                                           "model": "m", "api_key": None, "sampling_parameters": {}}})
check(status == 201 and resources["version"] == 1, f"add_resources: {status} {resources}")
check(resources["resources"]["main_llm"]["model"] == "m", "add_resources keeps NamedResources")
status, rollouts = call("POST", "/queues/rollouts/enqueue", {"rollouts": [
    {"input": {"question": "1+1"}, "mode": "train", "resources_id": resources["resources_id"], "config": None,
     "metadata": None},
    {"input": {"question": "2+2"}, "mode": "val", "resources_id": resources["resources_id"],
     "config": {"max_attempts": 2, "retry_condition": ["failed"]}, "metadata": {"k": "v"}},
]})
check(status == 201 and len(rollouts) == 2, f"enqueue: {status} {rollouts}")
for r in rollouts:
    check(r["status"] == "queuing" and "attempt" not in r, f"an enqueued rollout is queuing, never attempted: {r}")
    check(r["metadata"] is not None and isinstance(r["config"]["retry_condition"], list), f"defaults filled: {r}")
first, second = rollouts
check(second["metadata"] == {"k": "v"} and second["config"]["max_attempts"] == 2, f"config and metadata: {second}")

# get_rollout_by_id: a rollout never attempted has no "attempt" key; a missing one is 200 null.
status, got = call("GET", "/rollouts/" + first["rollout_id"])
check(status == 200 and got["input"] == {"question": "1+1"} and "attempt" not in got, f"get_rollout_by_id: {got}")
status, missing = call("GET", "/rollouts/ro-does-not-exist")
check(status == 200 and missing is None, f"a missing rollout: {status} {missing}")

# The runner: a heartbeat (update_worker), dequeue_rollout (limit 1), resources by id, then its rollout.
status, worker = call("POST", "/workers/Worker-0", {"heartbeat_stats": {"cpu_percent": 12.5, "host": "h"}})
check(status == 200 and worker["worker_id"] == "Worker-0", f"update_worker: {status} {worker}")
status, taken = call("POST", "/queues/rollouts/dequeue", {"limit": 1, "worker_id": "Worker-0"})
check(status == 200 and len(taken) == 1, f"dequeue: {status} {taken}")
ar = taken[0]
attempt = ar["attempt"]
check(ar["rollout_id"] == first["rollout_id"], "dequeue is first in, first out")
check(ar["status"] == "preparing" and attempt["status"] == "preparing" and attempt["sequence_id"] == 1,
      f"a dequeued rollout and its attempt are preparing: {ar}")
check(attempt["rollout_id"] == ar["rollout_id"] and attempt["worker_id"] == "Worker-0", f"the attempt: {attempt}")
status, worker = call("GET", "/workers/Worker-0")
check(worker["status"] == "busy" and worker["current_rollout_id"] == ar["rollout_id"], f"the worker is busy: {worker}")
status, res = call("GET", "/resources/" + ar["resources_id"])
check(status == 200 and res["resources_id"] == resources["resources_id"], f"get_resources_by_id: {res}")

# Spans: add_otel_span = spans/next + POST /spans (201). The first span moves attempt and rollout to running.
rid, aid = ar["rollout_id"], attempt["attempt_id"]
status, nxt = call("POST", "/spans/next", {"rollout_id": rid, "attempt_id": aid})
check(status == 200 and nxt["sequence_id"] == 1, f"spans/next: {nxt}")
span = {"rollout_id": rid, "attempt_id": aid, "sequence_id": nxt["sequence_id"],
        "trace_id": "0af7651916cd43dd8448eb211c80319c", "span_id": "b7ad6b7169203331", "parent_id": None,
        "name": "openai.chat.completion", "status": {"status_code": "OK", "description": None},
        "attributes": {"prompt_token_ids": [1, 2, 3], "response_token_ids": [4, 5], "gen_ai.response.id": "r1"},
        "events": [], "links": [], "start_time": 1.5, "end_time": 2.5,
        "context": {"trace_id": "0af7651916cd43dd8448eb211c80319c", "span_id": "b7ad6b7169203331",
                    "is_remote": False, "trace_state": {}},
        "parent": None, "resource": {"attributes": {}, "schema_url": ""}}
status, stored = call("POST", "/spans", span)
check(status == 201 and stored["sequence_id"] == 1 and stored["name"] == span["name"], f"add_span: {status} {stored}")
status, again = call("POST", "/spans", span)  # as their client retries when an answer is lost
check(status == 201 and again is None, f"a span sent again is kept once and answered null: {status} {again}")
status, latest = call("GET", f"/rollouts/{rid}/attempts/latest")
check(latest["status"] == "running" and latest["last_heartbeat_time"] is not None, f"a span is a heartbeat: {latest}")
status, got = call("GET", "/rollouts/" + rid)
check(got["status"] == "running" and got["attempt"]["attempt_id"] == aid, f"the rollout runs: {got}")
# The reward span the runner adds for a float result (emit_reward's attributes).
status, nxt = call("POST", "/spans/next", {"rollout_id": rid, "attempt_id": aid})
check(nxt["sequence_id"] == 2, f"the counter counts: {nxt}")
reward = dict(span, sequence_id=nxt["sequence_id"], span_id="c7ad6b7169203332", name="agentlightning.annotation",
              attributes={"agentlightning.reward.0.name": "primary", "agentlightning.reward.0.value": 0.75})
status, _ = call("POST", "/spans", reward)
check(status == 201, f"a reward span: {status}")

# query_spans(rid, attempt_id="latest"): sorted by sequence_id, paginated; the adapter's read.
status, page = call("POST", "/spans/search", {"rollout_id": rid, "attempt_id": "latest", "limit": -1, "offset": 0,
                                              "filter_logic": "and"})
check(status == 200 and page["total"] == 2 and [s["sequence_id"] for s in page["items"]] == [1, 2],
      f"query_spans: {page}")
check(page["items"][0]["attributes"]["prompt_token_ids"] == [1, 2, 3], "token ids come back as lists of ints")
check(page["items"][1]["attributes"]["agentlightning.reward.0.value"] == 0.75, "the reward comes back")
status, page = call("GET", f"/spans?rollout_id={rid}&attempt_id=latest&name=agentlightning.annotation&limit=5")
check(status == 200 and page["total"] == 1 and page["items"][0]["sequence_id"] == 2, f"GET /spans: {page}")
status, page = call("GET", f"/spans?rollout_id={rid}&after_sequence_id=1")  # arclight's extension
check(status == 200 and [s["sequence_id"] for s in page["items"]] == [2], f"after_sequence_id: {page}")
status, page = call("POST", "/spans/search", {"rollout_id": rid, "limit": 1, "offset": 1, "name_contains": "annotation",
                                              "filter_logic": "or", "span_id": "b7ad6b7169203331"})
check(page["total"] == 2 and len(page["items"]) == 1 and page["limit"] == 1 and page["offset"] == 1,
      f"spans: filter_logic or, paging: {page}")

# The runner ends the attempt: succeeded sets end_time and moves the rollout; the worker is idle again.
status, ended = call("POST", f"/rollouts/{rid}/attempts/{aid}", {"status": "succeeded"})
check(status == 200 and ended["status"] == "succeeded" and ended["end_time"] is not None, f"update_attempt: {ended}")
status, waited = call("POST", "/waits/rollouts", {"rollout_ids": [rid, second["rollout_id"], "ro-unknown"],
                                                  "timeout": 0.1})
check(status == 200 and [r["rollout_id"] for r in waited] == [rid] and waited[0]["status"] == "succeeded",
      f"wait_for_rollouts: finished ones only, unknown ids ignored: {waited}")
status, worker = call("GET", "/workers/Worker-0")
check(worker["status"] == "idle", f"the worker is idle: {worker}")

# A failed attempt requeues when its status is in retry_condition and attempts remain (requeuing), else fails.
status, taken = call("POST", "/queues/rollouts/dequeue", {"limit": 1, "worker_id": "Worker-1"})
check(len(taken) == 1 and taken[0]["rollout_id"] == second["rollout_id"], f"the second rollout: {taken}")
status, _ = call("POST", f"/rollouts/{second['rollout_id']}/attempts/latest", {"status": "failed"})
status, got = call("GET", "/rollouts/" + second["rollout_id"])
check(got["status"] == "requeuing", f"a failed attempt requeues: {got}")
status, retry = call("POST", f"/rollouts/{second['rollout_id']}/attempts", {"worker_id": "Worker-1"})
check(status == 201 and retry["attempt"]["sequence_id"] == 2, f"start_attempt: 201, attempt 2: {status} {retry}")
status, page = call("POST", f"/rollouts/{second['rollout_id']}/attempts/search", {"limit": -1, "offset": 0})
check(page["total"] == 2 and [a["sequence_id"] for a in page["items"]] == [1, 2], f"query_attempts: {page}")

# OTLP/HTTP: what the runners' tracers send (protobuf, encoded here by hand from OTLP's field numbers), the rollout
# and attempt as resource attributes; sequence ids come from the rollout's counter unless a span brings one.
def otlp_span(span_id, name, extra=()):
    body = field(1, bytes(range(16))) + field(2, bytes([span_id] * 8)) + field(5, name.encode())
    body += fixed64(7, 1_700_000_000_000_000_000) + fixed64(8, 1_700_000_001_000_000_000)
    for key, value in extra:
        body += field(9, key_value(key, value))
    return field(2, body)


resource = field(1, field(1, key_value("agentlightning.rollout_id", second["rollout_id"])) +
                 field(1, key_value("agentlightning.attempt_id", retry["attempt"]["attempt_id"])))
export = field(1, resource + field(2, otlp_span(1, "litellm_request") + otlp_span(2, "raw_gen_ai_request") +
                                      otlp_span(3, "tool", [("agentlightning.span_sequence_id", 7)])))
request = urllib.request.Request(sys.argv[1].rstrip("/") + "/v1/traces", data=export, method="POST",
                                 headers={"Content-Type": "application/x-protobuf"})
with urllib.request.urlopen(request, timeout=30) as response:
    check(response.status == 200 and response.headers["Content-Type"] == "application/x-protobuf",
          f"OTLP export: {response.status} {response.headers['Content-Type']}")
status, page = call("POST", "/spans/search", {"rollout_id": second["rollout_id"], "attempt_id": "latest"})
check([(s["name"], s["sequence_id"]) for s in page["items"]] ==
      [("litellm_request", 1), ("raw_gen_ai_request", 2), ("tool", 7)], f"OTLP spans in the store: {page}")
check(page["items"][0]["trace_id"] == bytes(range(16)).hex() and page["items"][0]["start_time"] == 1_700_000_000.0,
      f"OTLP ids and times: {page['items'][0]}")
status, nxt = call("POST", "/spans/next", {"rollout_id": second["rollout_id"], "attempt_id": "latest"})
check(nxt["sequence_id"] == 8, f"the counter follows the largest id: {nxt}")

# start_rollout: 201, preparing with attempt 1, not queued.
status, started = call("POST", "/rollouts", {"input": "direct", "mode": "test", "resources_id": None, "config": None,
                                             "metadata": None, "worker_id": "Worker-2"})
check(status == 201 and started["status"] == "preparing" and started["attempt"]["sequence_id"] == 1,
      f"start_rollout: {status} {started}")
status, none = call("POST", "/queues/rollouts/dequeue", {"limit": 5, "worker_id": "Worker-2"})
check(status == 200 and none == [], f"an empty queue: [] ({none})")

# query_rollouts: status_in, sorting, paging; GET with repeated keys. (The OTLP spans moved the second one to running.)
status, page = call("POST", "/rollouts/search", {"status_in": ["succeeded", "running", "preparing"], "limit": -1, "offset": 0,
                                                 "sort_by": "rollout_id", "sort_order": "desc", "filter_logic": "and"})
check(page["total"] == 3, f"query_rollouts status_in: {page}")
status, page = call("GET", "/rollouts?status_in=succeeded&status_in=running&status_in=preparing&limit=2")
check(page["total"] == 3 and len(page["items"]) == 2, f"GET /rollouts with repeated keys: {page}")
check(all(("attempt" in r) for r in page["items"]), "attempted rollouts carry their attempt")
for bad in ({"limit": 0}, {"limit": -2}, {"offset": -1}, {"sort_by": "nope"}, {"sort_order": "up"},
            {"filter_logic": "xor"}):
    status, body = call("POST", "/rollouts/search", bad)
    check(status == 400 and isinstance(body["detail"], str), f"{bad}: 400 with a detail string, got {status} {body}")

# update_rollout: partial; null status or config is 400; cancelling ends it.
status, body = call("POST", "/rollouts/" + started["rollout_id"], {"status": None})
check(status == 400, f"status null: {status}")
status, body = call("POST", "/rollouts/" + started["rollout_id"], {"config": None})
check(status == 400, f"config null: {status}")
status, body = call("POST", "/rollouts/" + started["rollout_id"], {"metadata": {"note": "x"}, "mode": "val"})
check(status == 200 and body["metadata"] == {"note": "x"} and body["mode"] == "val", f"update_rollout: {body}")
status, body = call("POST", "/rollouts/" + started["rollout_id"], {"status": "cancelled"})
check(status == 200 and body["status"] == "cancelled" and body["end_time"] is not None, f"cancel: {body}")

# update_attempt with null: 400; a body that does not validate: 422 with pydantic's list of errors.
status, body = call("POST", f"/rollouts/{second['rollout_id']}/attempts/latest", {"worker_id": None})
check(status == 400, f"update_attempt worker_id null: {status}")
status, body = call("POST", "/queues/rollouts/enqueue", {"rollouts": [{"input": 1, "mode": "sideways"}]})
check(status == 422 and isinstance(body["detail"], list) and body["detail"][0]["msg"], f"422: {status} {body}")

# Resources: the upsert bumps the version; latest; a paginated GET query.
status, v2 = call("POST", "/resources/" + resources["resources_id"], {"main_llm": {"resource_type": "llm",
                                                                                   "endpoint": "http://llm2/v1",
                                                                                   "model": "m2"}})
check(status == 200 and v2["version"] == 2 and v2["update_time"] >= resources["update_time"], f"update_resources: {v2}")
status, latest = call("GET", "/resources/latest")
check(latest["resources"]["main_llm"]["model"] == "m2", f"get_latest_resources: {latest}")
status, page = call("GET", "/resources?limit=1&offset=0&sort_by=version&sort_order=desc")
check(page["total"] == 2 and page["items"][0]["version"] == 2, f"query_resources: {page}")

# Workers, statistics.
status, page = call("POST", "/workers/search", {"filter_logic": "and", "worker_id_contains": "Worker-"})
check(page["total"] == 3, f"query_workers: {page}")
status, stats = call("GET", "/statistics")
check(isinstance(stats, dict) and stats["total_rollouts"] == 3 and stats["total_spans"] == 5, f"statistics: {stats}")

# Without the token there is nothing here.
root = sys.argv[1].rstrip("/").rsplit("/", 1)[0]
status, body = call("GET", "/health", base=root + "/v1/agl")
check(status == 404, f"no token: {status}")

print(f"agl_client: {'FAILED ' + str(len(failures)) if failures else 'all checks passed'}")
sys.exit(1 if failures else 0)
