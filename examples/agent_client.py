"""What an outside agent needs to train inside an arclight job, in Python's standard library: the runner's endpoints
from the environment, JSON over kept-alive HTTP, Agent Lightning spans (rewards, figures), and the loop that takes
rollouts and ends their attempts. Copy it beside your agent, or use any OpenAI client and Agent Lightning's
LightningStoreClient instead: the routes are theirs.

Environment (set by the runner rank): OPENAI_BASE_URL (the OpenAI-compatible endpoint, .../v1), OPENAI_API_KEY (the
job's secret), ARCLIGHT_STORE_URL (the task interface, a subset of Agent Lightning v0.3's store API under /v1/agl),
ARCLIGHT_WORKER_ID (this process's worker id).
"""
import http.client
import json
import os
import select
import sys
import threading
import time
import urllib.parse

BASE_URL = os.environ["OPENAI_BASE_URL"]
STORE_URL = os.environ["ARCLIGHT_STORE_URL"]
API_KEY = os.environ["OPENAI_API_KEY"]
WORKER = os.environ.get("ARCLIGHT_WORKER_ID", "agent")


class Client:
    """JSON over one kept-alive HTTP connection (a thread's own)."""

    # Requests that act each time they are taken, never sent twice: a dequeue hands out rollouts, a completion records
    # a call of the attempt. A span (its id) or an attempt's end taken twice is kept once: sent again after a failure.
    ONCE = ("/dequeue", "/completions")

    def __init__(self, url, timeout=120):
        parts = urllib.parse.urlsplit(url)
        self.host, self.port, self.prefix = parts.hostname, parts.port, parts.path.rstrip("/")
        self.timeout = timeout  # seconds a request may take
        self.connection = None

    def close(self):
        if self.connection is not None:
            self.connection.close()  # a request cut off (a timeout) must not leave the server answering into it
        self.connection = None

    def connected(self):
        """The kept-alive connection, or a new one where the server closed it while it was idle (its socket then reads
        the end): a request sent into a closed connection is lost, and one that acts could not be sent again."""
        if self.connection is not None and self.connection.sock is not None:
            readable = select.poll()  # poll, not select: a descriptor past 1024 is fine
            readable.register(self.connection.sock, select.POLLIN)
            if readable.poll(0):
                self.close()
        if self.connection is None:
            self.connection = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        return self.connection

    def post(self, path, body):
        data = json.dumps(body).encode()
        headers = {"Authorization": "Bearer " + API_KEY, "Content-Type": "application/json"}
        again = not path.endswith(self.ONCE)
        for attempt in range(3):
            try:
                connection = self.connected()
                connection.request("POST", self.prefix + path, data, headers)
                response = connection.getresponse()
                text = response.read()
            except (OSError, http.client.HTTPException):  # a timeout, no server, a connection cut, an answer cut short
                self.close()
                if attempt == 2 or not again:
                    raise
                time.sleep(0.5 * (attempt + 1))
                continue
            if response.status >= 500 and again and attempt < 2:  # the runner busy (503) or failing for now
                time.sleep(0.5 * (attempt + 1))
                continue
            if response.status >= 400:
                raise RuntimeError(f"POST {path}: {response.status} {text[:200]!r}")
            return json.loads(text)


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


def llm_path(rollout, route):
    """The endpoint's route for a call traced into the rollout's attempt (Agent Lightning's proxy convention)."""
    return f"/rollout/{rollout['rollout_id']}/attempt/{rollout['attempt']['attempt_id']}/v1/{route}"


def end_attempt(store, rollout, status):
    store.post(f"/v1/agl/rollouts/{rollout['rollout_id']}/attempts/{rollout['attempt']['attempt_id']}",
               {"status": status})


def run_episodes(play, at_once, llm_timeout=120):
    """Runs `play(llm, store, rollout)` for every rollout this worker takes, `at_once` episodes at a time, forever. An
    episode that raises fails its attempt (the rollout's retry rule decides what follows); no error ends a thread.
    `llm_timeout`: the seconds one call of the model may take (a long answer on CPUs takes minutes)."""
    def episodes():
        llm, store = Client(BASE_URL.removesuffix("/v1"), llm_timeout), Client(STORE_URL)
        pause = 0.5
        while True:  # all threads take work under the process's worker id: the runner fails a dead worker's attempts
            try:
                rollouts = store.post("/v1/agl/queues/rollouts/dequeue", {"limit": 1, "worker_id": WORKER})
                pause = 0.5
            except Exception as error:  # the runner busy (503) or going away: wait, then ask again
                print(f"taking work failed: {error}; again in {pause:.1f} s", file=sys.stderr, flush=True)
                time.sleep(pause)
                pause = min(2 * pause, 10.0)
                continue
            for rollout in rollouts:
                try:
                    play(llm, store, rollout)
                    status = "succeeded"
                except Exception as error:
                    print(f"episode of {rollout['rollout_id']} failed: {error}", file=sys.stderr, flush=True)
                    status = "failed"
                try:
                    end_attempt(store, rollout, status)
                except Exception as error:  # 404: the runner ended it already (its timeout); it is not retried here
                    print(f"ending the attempt of {rollout['rollout_id']} failed: {error}", file=sys.stderr,
                          flush=True)

    threads = [threading.Thread(target=episodes, daemon=True) for _ in range(at_once)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
