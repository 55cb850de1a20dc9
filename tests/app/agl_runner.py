#!/usr/bin/env python3
"""An Agent Lightning v0.3 runner, as its LightningStoreClient and runner loop behave (../shared/agl-v0.3-interfaces.md,
sections 1 and 4), written from that document with the standard library only (the test machines have no PyPI): what
arclight must serve so that an unchanged Agent Lightning script started by `agent.name = "agl"` works.

- as the runner role of a managed store (AGL_CURRENT_ROLE=runner, AGL_MANAGED_STORE unset or true; false would mean
  the script's own store, which arclight never sees) connects to f"http://{AGL_SERVER_HOST}:{AGL_SERVER_PORT}" (user
  info in the host goes as basic auth, as aiohttp sends it);
- worker "Worker-0": heartbeats with update_worker, dequeues one rollout at a time, sleeps poll_interval when none;
- per rollout: get_resources_by_id(resources_id) (else the latest), the first LLM resource; a proxy_llm's endpoint
  http://h:p/v1 becomes http://h:p/rollout/{rid}/attempt/{aid}/v1 with its api_key;
- the rollout (the guess game through /v1/completions) is traced (its span exported over OTLP to /v1/traces) and
  returns a float: a reward span (agentlightning.annotation) through spans/next and POST /spans; then update_attempt
  succeeded (failed when the rollout raised).

AGL_TEST_LOG: a file where the first resources seen are written (JSON) for the test to check.
AGL_TEST_FAULTS: a directory; the first process to claim "hang" in it hangs on its first rollout, the first to claim
"crash" exits with code 3 on its first (the faults of issue 14: the runner must tell these processes apart although
every one calls itself Worker-0).
"""
import base64
import http.client
import json
import math
import os
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "serve"))
from otlp_wire import field, fixed64, key_value  # noqa: E402 (OTLP's protobuf by hand, shared with agl_client.py)

POLL_INTERVAL = float(os.environ.get("AGL_TEST_POLL_INTERVAL", "5"))  # Agent Lightning's: 5 s


class Http:
    """JSON over one kept-alive connection to a base URL; the URL's user info or a bearer key authenticates."""

    def __init__(self, url, api_key=None):
        parts = urllib.parse.urlsplit(url)
        self.host, self.port, self.prefix = parts.hostname, parts.port, parts.path.rstrip("/")
        self.headers = {"Content-Type": "application/json"}
        if parts.password is not None:
            pair = f"{urllib.parse.unquote(parts.username or '')}:{urllib.parse.unquote(parts.password)}"
            self.headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        if api_key:
            self.headers["Authorization"] = "Bearer " + api_key
        self.connection = None

    def call(self, method, path, body=None, content_type="application/json"):
        """JSON in (or bytes of `content_type`), the answer of that type out (JSON decoded)."""
        data = None if body is None else body if isinstance(body, bytes) else json.dumps(body).encode()
        headers = dict(self.headers, **{"Content-Type": content_type})
        for attempt in range(3):
            try:
                if self.connection is None:
                    self.connection = http.client.HTTPConnection(self.host, self.port, timeout=120)
                self.connection.request(method, self.prefix + path, data, headers)
                response = self.connection.getresponse()
                text = response.read()
                if response.getheader("Content-Type") != content_type:
                    raise RuntimeError(f"{method} {path}: Content-Type {response.getheader('Content-Type')}")
                if content_type != "application/json":
                    return text
                if response.status >= 400:
                    raise RuntimeError(f"{method} {path}: {response.status} {text[:200]!r}")
                return json.loads(text)
            except (http.client.HTTPException, ConnectionError):
                self.connection = None
                if attempt == 2:
                    raise


class StoreClient:
    """The calls of LightningStoreClient that the runner makes."""

    def __init__(self, root):
        self.http = Http(root)
        self.api = "/v1/agl"

    def dequeue_rollout(self, worker_id):
        got = self.http.call("POST", self.api + "/queues/rollouts/dequeue", {"limit": 1, "worker_id": worker_id})
        return got[0] if got else None

    def update_worker(self, worker_id, stats):
        return self.http.call("POST", f"{self.api}/workers/{worker_id}", {"heartbeat_stats": stats})

    def get_resources_by_id(self, resources_id):
        return self.http.call("GET", f"{self.api}/resources/{resources_id}")

    def get_latest_resources(self):
        return self.http.call("GET", self.api + "/resources/latest")

    def add_otel_span(self, rollout_id, attempt_id, span):
        sequence = self.http.call("POST", self.api + "/spans/next", {"rollout_id": rollout_id, "attempt_id": attempt_id})
        span["sequence_id"] = sequence["sequence_id"]
        return self.http.call("POST", self.api + "/spans", span)

    def update_attempt(self, rollout_id, attempt_id, status):
        return self.http.call("POST", f"{self.api}/rollouts/{rollout_id}/attempts/{attempt_id}", {"status": status})


def otlp_export(rollout_id, attempt_id, name):
    """An ExportTraceServiceRequest of one span, as the agent's tracer sends it (OTLP's field numbers): the rollout
    and attempt as resource attributes."""
    now = time.time_ns()
    span = field(1, os.urandom(16)) + field(2, os.urandom(8)) + field(5, name.encode()) + fixed64(7, now) + fixed64(8, now)
    resource = (field(1, key_value("agentlightning.rollout_id", rollout_id)) +
                field(1, key_value("agentlightning.attempt_id", attempt_id)))
    return field(1, field(1, resource) + field(2, field(2, span)))


def reward_span(rollout_id, attempt_id, value):
    """emit_reward's span."""
    now = time.time()
    return {"rollout_id": rollout_id, "attempt_id": attempt_id, "sequence_id": 0, "trace_id": os.urandom(16).hex(),
            "span_id": os.urandom(8).hex(), "parent_id": None, "name": "agentlightning.annotation",
            "status": {"status_code": "OK", "description": None},
            "attributes": {"agentlightning.reward.0.name": "primary", "agentlightning.reward.0.value": value},
            "events": [], "links": [], "start_time": now, "end_time": now, "context": None, "parent": None,
            "resource": {"attributes": {}, "schema_url": ""}}


def llm_of(resources, rollout_id, attempt_id):
    """The first LLM resource; a proxy_llm is bound to the rollout's attempt (_strip_proxy_helper)."""
    for resource in resources.values():
        if resource.get("resource_type") == "llm":
            return resource["endpoint"], resource
        if resource.get("resource_type") == "proxy_llm":
            endpoint = resource["endpoint"]
            assert endpoint.endswith("/v1"), endpoint
            return f"{endpoint[:-3]}/rollout/{rollout_id}/attempt/{attempt_id}/v1", resource
    raise RuntimeError(f"no LLM resource in {sorted(resources)}")


def guess_rollout(task, llm_url, llm, mode):
    """The guess game (tokens as arclight's built-in agent: 0 BOS, 1..n the numbers, n+1 higher, n+2 lower, n+3
    correct); returns the bits of the interval the guesses removed, +1 when solved."""
    client = Http(llm_url, llm.get("api_key"))
    temperature = llm.get("sampling_parameters", {}).get("temperature", 1.0) if mode == "train" else 0.0
    secret, n, max_turns = task["secret"], task["n"], task["max_turns"]
    tokens, lo, hi, total = [0], 1, n, 0.0
    for _ in range(max_turns):
        answer = client.call("POST", "/completions", {"model": llm["model"], "prompt": tokens, "max_tokens": 1,
                                                      "temperature": temperature})
        guess = answer["choices"][0]["token_ids"][0]
        old_size = hi - lo + 1
        if guess == secret:
            return total + math.log2(old_size) + 1.0
        if not 1 <= guess <= n:
            return total
        if guess < secret:
            feedback, lo = n + 1, max(lo, guess + 1)
        else:
            feedback, hi = n + 2, min(hi, guess - 1)
        total += math.log2(old_size / (hi - lo + 1))
        tokens += [guess, feedback]
    return total


def claim_fault(claimed=[]):
    """The fault this process plays on its first rollout, if it is the first to claim one; None after that."""
    if claimed or not os.environ.get("AGL_TEST_FAULTS"):
        return None
    claimed.append(True)
    for fault in ("hang", "crash"):
        try:
            os.close(os.open(os.path.join(os.environ["AGL_TEST_FAULTS"], fault), os.O_CREAT | os.O_EXCL))
            return fault
        except FileExistsError:
            pass
    return None


def main():
    assert os.environ.get("AGL_CURRENT_ROLE") == "runner", os.environ.get("AGL_CURRENT_ROLE")
    if os.environ.get("AGL_MANAGED_STORE", "1").lower() in ("0", "false", "no", "off"):
        sys.exit("AGL_MANAGED_STORE is false: the runner would use the script's own store, not the one at AGL_SERVER_*")
    root = f"http://{os.environ.get('AGL_SERVER_HOST', 'localhost')}:{int(os.environ.get('AGL_SERVER_PORT', 4747))}"
    store, worker = StoreClient(root), "Worker-0"
    store.http.call("GET", "/v1/agl/health")

    def heartbeat():
        beats = StoreClient(root)
        while True:
            beats.update_worker(worker, {"timestamp": time.time(), "host": os.uname().nodename})
            time.sleep(10)

    threading.Thread(target=heartbeat, daemon=True).start()
    logged = False
    while True:
        rollout = store.dequeue_rollout(worker)
        if rollout is None:
            time.sleep(POLL_INTERVAL)
            continue
        rid, aid = rollout["rollout_id"], rollout["attempt"]["attempt_id"]
        fault = claim_fault()
        if fault == "hang":
            time.sleep(3600)
        elif fault == "crash":
            os._exit(3)
        update = (store.get_resources_by_id(rollout["resources_id"]) if rollout.get("resources_id")
                  else store.get_latest_resources())
        if not logged and os.environ.get("AGL_TEST_LOG"):
            with open(os.environ["AGL_TEST_LOG"] + f".{os.getpid()}", "w") as f:
                json.dump({"root": root, "resources": update}, f)
            logged = True
        try:
            llm_url, llm = llm_of(update["resources"], rid, aid)
            reward = guess_rollout(rollout["input"], llm_url, llm, rollout.get("mode"))
            store.http.call("POST", "/v1/traces", otlp_export(rid, aid, "agent.rollout"), "application/x-protobuf")
            store.add_otel_span(rid, aid, reward_span(rid, aid, reward))
            store.update_attempt(rid, aid, "succeeded")
        except Exception as error:
            print(f"rollout {rid} failed: {error}", file=sys.stderr, flush=True)
            store.update_attempt(rid, aid, "failed")


if __name__ == "__main__":
    main()
