#!/usr/bin/env python3
"""The guess task played by an outside agent, mirroring arclight's built-in `guess` agent token for token.

Run by every runner rank as `agent.command` (configs/workstation_external.toml). Python's standard library only:
it takes rollouts from the runner's task interface (a subset of Agent Lightning v0.3's store API), asks the runner's
OpenAI-compatible endpoint for each guess with its prompt as token ids (/v1/completions), and reports a reward after
each guess (Agent Lightning's reward span) and the episode's figures, then ends the attempt.

Environment (set by the runner): OPENAI_BASE_URL, OPENAI_API_KEY, ARCLIGHT_STORE_URL, ARCLIGHT_WORKER_ID.
A task is a JSON object: {"secret": 17, "n": 31, "max_turns": 8}.
"""
import http.client
import json
import math
import os
import sys
import threading
import time
import urllib.parse

BASE_URL = os.environ["OPENAI_BASE_URL"]
STORE_URL = os.environ["ARCLIGHT_STORE_URL"]
API_KEY = os.environ["OPENAI_API_KEY"]
WORKER = os.environ.get("ARCLIGHT_WORKER_ID", "guess-agent")
EPISODES_AT_ONCE = int(os.environ.get("GUESS_EPISODES_AT_ONCE", "32"))


class Client:
    """JSON over one kept-alive HTTP connection (a thread's own)."""

    def __init__(self, url):
        parts = urllib.parse.urlsplit(url)
        self.host, self.port, self.prefix = parts.hostname, parts.port, parts.path.rstrip("/")
        self.connection = None

    def post(self, path, body):
        data = json.dumps(body).encode()
        headers = {"Authorization": "Bearer " + API_KEY, "Content-Type": "application/json"}
        for attempt in range(3):
            try:
                if self.connection is None:
                    self.connection = http.client.HTTPConnection(self.host, self.port, timeout=120)
                self.connection.request("POST", self.prefix + path, data, headers)
                response = self.connection.getresponse()
                text = response.read()
                if response.status >= 400:
                    raise RuntimeError(f"POST {path}: {response.status} {text[:200]!r}")
                return json.loads(text)
            except (http.client.HTTPException, ConnectionError):
                self.connection = None  # the server closed a kept-alive connection: open a new one
                if attempt == 2:
                    raise


def span(rollout, attempt, name, attributes):
    now = time.time()
    return {"rollout_id": rollout, "attempt_id": attempt, "sequence_id": 0, "trace_id": os.urandom(16).hex(),
            "span_id": os.urandom(8).hex(), "parent_id": None, "name": name,
            "status": {"status_code": "OK", "description": None}, "attributes": attributes, "events": [],
            "links": [], "start_time": now, "end_time": now, "context": None, "parent": None,
            "resource": {"attributes": {}, "schema_url": ""}}


def reward_span(rollout, attempt, value):
    return span(rollout, attempt, "agentlightning.annotation",
                {"agentlightning.reward.0.name": "primary", "agentlightning.reward.0.value": value})


def play(llm, store, rollout):
    """One episode. Tokens as the built-in agent's: 0 BOS, 1..n the numbers, n+1 higher, n+2 lower, n+3 correct.
    Reward after each guess: the bits of the interval it removed; the correct guess adds 1."""
    rid, aid = rollout["rollout_id"], rollout["attempt"]["attempt_id"]
    task = rollout["input"]
    secret, n, max_turns = task["secret"], task["n"], task["max_turns"]
    temperature = 1.0 if rollout.get("mode") == "train" else 0.0
    tokens, lo, hi, success, turn = [0], 1, n, False, 0
    while turn < max_turns and not success:
        answer = llm.post(f"/rollout/{rid}/attempt/{aid}/v1/completions",
                          {"model": "policy", "prompt": tokens, "max_tokens": 1, "temperature": temperature})
        guess = answer["choices"][0]["token_ids"][0]
        old_size = hi - lo + 1
        turn += 1
        if guess == secret:
            feedback, reward, success = n + 3, math.log2(old_size) + 1.0, True
        elif 1 <= guess <= n:
            if guess < secret:
                feedback, lo = n + 1, max(lo, guess + 1)
            else:
                feedback, hi = n + 2, min(hi, guess - 1)
            reward = math.log2(old_size / (hi - lo + 1))
        else:  # not a number: the episode ends, unsolved
            store.post("/v1/agl/spans", reward_span(rid, aid, 0.0))
            break
        store.post("/v1/agl/spans", reward_span(rid, aid, reward))
        tokens += [guess, feedback]
    store.post("/v1/agl/spans", span(rid, aid, "result", {"success": 1.0 if success else 0.0, "guesses": float(turn)}))
    store.post(f"/v1/agl/rollouts/{rid}/attempts/{aid}", {"status": "succeeded"})


def episodes():
    """One episode after another; the process runs several of these at once. All take work under the process's
    worker id: the runner fails the attempts of a worker that dies."""
    llm, store = Client(BASE_URL.removesuffix("/v1")), Client(STORE_URL)
    while True:
        got = store.post("/v1/agl/queues/rollouts/dequeue", {"limit": 1, "worker_id": WORKER})
        for rollout in got:
            try:
                play(llm, store, rollout)
            except Exception as error:  # the episode fails; the rollout's retry rule decides what follows
                print(f"episode of {rollout['rollout_id']} failed: {error}", file=sys.stderr, flush=True)
                rid, aid = rollout["rollout_id"], rollout["attempt"]["attempt_id"]
                store.post(f"/v1/agl/rollouts/{rid}/attempts/{aid}", {"status": "failed"})


def main():
    threads = [threading.Thread(target=episodes, daemon=True) for i in range(EPISODES_AT_ONCE)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


if __name__ == "__main__":
    main()
