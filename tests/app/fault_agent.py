#!/usr/bin/env python3
"""An outside agent that misbehaves, for tests/app/external_agent_test.sh. It plays the guess task as
examples/guess_agent.py does, and each worker (by the index at the end of ARCLIGHT_WORKER_ID) adds one fault:
  w0  crashes (os._exit) in the middle of its 4th episode, after sending the endpoint garbage it must refuse (4xx),
      in its first two lives (a worker that always crashes trips the runner's restart limit, which ends the job)
  w1  ends its 2nd episode of every life as succeeded with a reward but no policy call (it makes no sample: the
      coordinator leaves it out), and hangs (sleeps for ever) in the middle of its 6th episode, in its first life
  w2  never asks for work
Worker 1 also ends its attempts through .../attempts/latest, as Agent Lightning's interface allows.
Lives are counted in files under $FAULT_AGENT_STATE.
Every refusal that is not a 4xx JSON error is reported on stderr as "UNEXPECTED", which the test looks for."""
import http.client
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))
import agent_client  # noqa: E402
import guess_agent  # noqa: E402
from agent_client import API_KEY, BASE_URL, llm_path, reward_span, run_episodes  # noqa: E402

WORKER_INDEX = int(os.environ["ARCLIGHT_WORKER_ID"].rsplit("w", 1)[1])
episodes_played = 0
counter = threading.Lock()


def this_life():
    """How many times this worker has started, this start included."""
    with open(os.path.join(os.environ["FAULT_AGENT_STATE"], f"lives-{WORKER_INDEX}"), "a+") as f:
        f.write("x")
        f.seek(0)
        return len(f.read())


LIFE = this_life()


def send_garbage(rollout):
    """Malformed bodies and wrong types: each must be a 4xx with a JSON error, and nothing else may change."""
    host, port = BASE_URL.split("//")[1].split("/")[0].split(":")
    bodies = [b"{not json", b'{"prompt": "x", "max_tokens": "many"}', b'{"prompt": [999999], "max_tokens": 1}',
              b'{"messages": 7}', b"\xff\xfe"]
    for body in bodies:
        connection = http.client.HTTPConnection(host, int(port), timeout=30)
        connection.request("POST", llm_path(rollout, "completions"), body,
                           {"Authorization": "Bearer " + API_KEY, "Content-Type": "application/json"})
        response = connection.getresponse()
        text = response.read()
        try:
            error = json.loads(text)["error"]["message"]
        except (ValueError, KeyError, TypeError):
            error = None
        if not 400 <= response.status < 500 or not error:
            print(f"UNEXPECTED answer to garbage {body!r}: {response.status} {text[:200]!r}", file=sys.stderr,
                  flush=True)
        connection.close()


def play(llm, store, rollout):
    global episodes_played
    with counter:  # the process's episodes run on several threads
        episodes_played += 1
        episode = episodes_played
    if WORKER_INDEX == 0 and episode == 4 and LIFE <= 2:
        send_garbage(rollout)
        llm.post(llm_path(rollout, "completions"), {"prompt": [0], "max_tokens": 1})  # a call in flight, then:
        os._exit(3)
    if WORKER_INDEX == 1 and episode == 2:
        store.post("/v1/agl/spans", reward_span(rollout["rollout_id"], rollout["attempt"]["attempt_id"], 1.0))
        return
    if WORKER_INDEX == 1 and episode == 6 and LIFE == 1:
        time.sleep(10_000)
    guess_agent.play(llm, store, rollout)


def end_latest_attempt(store, rollout, status):
    try:
        store.post(f"/v1/agl/rollouts/{rollout['rollout_id']}/attempts/latest", {"status": status})
    except RuntimeError as error:
        print(f"UNEXPECTED answer to ending attempts/latest: {error}", file=sys.stderr, flush=True)
        raise


if __name__ == "__main__":
    if WORKER_INDEX == 1:
        agent_client.end_attempt = end_latest_attempt  # what run_episodes ends each episode with
    if WORKER_INDEX == 2:
        time.sleep(10_000)
    run_episodes(play, 4)
