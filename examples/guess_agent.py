#!/usr/bin/env python3
"""The guess task played by an outside agent, mirroring arclight's built-in `guess` agent token for token.

Run by every runner rank as `agent.command` (configs/workstation_external.toml). It asks the runner's endpoint for
each guess with its prompt as token ids (/v1/completions), reports a reward after each guess (Agent Lightning's
reward span) and the episode's figures. A task is a JSON object: {"secret": 17, "n": 31, "max_turns": 8}.
"""
import math
import os

from agent_client import llm_path, reward_span, run_episodes, span


def play(llm, store, rollout):
    """Tokens as the built-in agent's: 0 BOS, 1..n the numbers, n+1 higher, n+2 lower, n+3 correct. Reward after each
    guess: the bits of the interval it removed; the correct guess adds 1."""
    rid, aid = rollout["rollout_id"], rollout["attempt"]["attempt_id"]
    task = rollout["input"]
    secret, n, max_turns = task["secret"], task["n"], task["max_turns"]
    temperature = 1.0 if rollout.get("mode") == "train" else 0.0  # validation is greedy
    tokens, lo, hi, success, turn = [0], 1, n, False, 0
    while turn < max_turns and not success:
        answer = llm.post(llm_path(rollout, "completions"),
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


if __name__ == "__main__":
    run_episodes(play, int(os.environ.get("GUESS_EPISODES_AT_ONCE", "32")))
