#!/usr/bin/env python3
r"""Math problems answered in one chat completion and rewarded by the final \boxed{} answer: the GRPO recipe most
RL work on LLMs starts from (Qwen2.5-Math on GSM8K or MATH, as DeepSeekMath, SimpleRL-Zoo and Dr. GRPO train it).

Run by every runner rank as `agent.command` (configs/qwen2.5_math_1.5b.toml). Python's standard library only. The
problem goes alone as the user message: the model's chat template adds its own system prompt (Qwen2.5-Math's asks
to reason step by step and to put the answer in \boxed{}). The reward is 1 when the last \boxed{...} of the answer
equals the task's answer, else 0: as numbers where both read as one (1,000 = 1000 = 1000.0; \frac{1}{2} = 1/2 =
0.5), else as text without spaces, $ signs and a \text{...} around it.

A task is a JSON object as GSM8K's and MATH's files hold them: {"question": ..., "answer": 42} (GSM8K's answer text
is read for the number after its "####") or {"problem": ..., "solution": "... \boxed{...}"}.

Usage: math_agent.py [--max-tokens N] (default 1024: the answer's budget, reasoning included)
"""
import os
import re
import sys
from fractions import Fraction

from agent_client import llm_path, reward_span, run_episodes, span


def last_boxed(text):
    r"""The content of the last \boxed{...} (or \fbox{...}) in `text`, its braces matched; None where there is none
    or it is cut off before its closing brace."""
    start = max(text.rfind("\\boxed{"), text.rfind("\\fbox{"))
    if start < 0:
        return None
    begin = text.index("{", start) + 1
    depth = 1
    for at in range(begin, len(text)):
        depth += {"{": 1, "}": -1}.get(text[at], 0)
        if depth == 0:
            return text[begin:at]
    return None


def expected_answer(task):
    if "solution" in task:
        return last_boxed(task["solution"])
    answer = str(task["answer"])
    return answer.split("####")[-1] if "####" in answer else answer


def cleaned(answer):
    text = re.sub(r"\s+", "", answer).replace("\\$", "").replace("$", "").replace("\\!", "").rstrip(".")
    whole_text = re.fullmatch(r"\\text\{(.*)\}", text)
    return whole_text.group(1) if whole_text else text


def as_number(text):
    """A Fraction where the text is a number (thousands separated by commas, a decimal, a/b, \\frac{a}{b}), else None."""
    text = re.sub(r"^(-?)\\[dt]?frac\{(\d+)\}\{(\d+)\}$", r"\1\2/\3", text)
    if re.fullmatch(r"-?\d{1,3}(,\d{3})+(\.\d+)?", text):
        text = text.replace(",", "")
    if not re.fullmatch(r"-?(\d+(\.\d*)?|\.\d+)(/\d+)?", text):
        return None
    try:
        return Fraction(text)
    except ZeroDivisionError:
        return None


def same_answer(given, expected):
    given, expected = cleaned(given), cleaned(expected)
    given_number, expected_number = as_number(given), as_number(expected)
    if given_number is not None and expected_number is not None:
        return given_number == expected_number
    return given == expected


def player(max_tokens):
    def play(llm, store, rollout):
        rid, aid = rollout["rollout_id"], rollout["attempt"]["attempt_id"]
        task = rollout["input"]
        question = task["question"] if "question" in task else task["problem"]
        temperature = 1.0 if rollout.get("mode") == "train" else 0.0
        reply = llm.post(llm_path(rollout, "chat/completions"),
                         {"model": "policy", "messages": [{"role": "user", "content": question}],
                          "max_tokens": max_tokens, "temperature": temperature})
        boxed = last_boxed(reply["choices"][0]["message"].get("content") or "")
        expected = expected_answer(task)
        solved = boxed is not None and expected is not None and same_answer(boxed, expected)
        store.post("/v1/agl/spans", reward_span(rid, aid, 1.0 if solved else 0.0))
        store.post("/v1/agl/spans", span(rid, aid, "result", {
            "success": 1.0 if solved else 0.0, "boxed": 0.0 if boxed is None else 1.0,
            "tokens": float(reply["usage"]["completion_tokens"])}))
    return play


if __name__ == "__main__":
    max_tokens = 1024
    if len(sys.argv) == 3 and sys.argv[1] == "--max-tokens" and sys.argv[2].isdigit():
        max_tokens = int(sys.argv[2])
    elif len(sys.argv) != 1:
        sys.exit("usage: math_agent.py [--max-tokens N]")
    run_episodes(player(max_tokens), int(os.environ.get("MATH_EPISODES_AT_ONCE", "8")))
