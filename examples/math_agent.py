#!/usr/bin/env python3
r"""Math problems answered in one chat completion and rewarded by the final \boxed{} answer: the GRPO recipe most
RL work on LLMs starts from (Qwen2.5-Math on GSM8K or MATH with a rule-based reward, as SimpleRL-Zoo and Dr. GRPO
train it).

Run by every runner rank as `agent.command` (configs/qwen2.5_math_1.5b.toml). Python's standard library only. The
problem goes alone as the user message: the model's chat template adds its own system prompt (Qwen2.5-Math's asks
to reason step by step and to put the answer in \boxed{}); for a model whose template has none (Gemma 3's, Llama's),
--system TEXT sends one before it, and for one whose template takes no system message (Gemma 2's), --instruction TEXT
follows the problem in the user message on a line of its own (as DeepSeek-R1's model card asks of math prompts). The reward is 1 when the last \boxed{...} of the answer
equals the task's answer, else 0: as numbers where both read as one (1,000 = 1000 = 1000.0; \frac{1}{2} = 1/2 =
0.5; "72 dollars", 72\%, $72$, x = 72 all 72), else as text (see cleaned); no symbolic algebra. A task whose answer
cannot be read fails its episode (a data error, said in the agent's log).

A task is a JSON object as GSM8K's and MATH's data hold them: {"question": ..., "answer": 42} (GSM8K's answer text
is read for the number after its "####") or {"problem": ..., "solution": "... \boxed{...}"} (MATH ships a JSON
file a problem: gather them into JSON Lines).

Usage: math_agent.py [--max-tokens N] [--system TEXT] [--instruction TEXT]
  --max-tokens   the answer's budget, reasoning included (default 1024)
  --system       a system message before each problem (default: none, the template's own)
  --instruction  a line after each problem in its user message (default: none)
"""
import os
import re
import sys
from fractions import Fraction

from agent_client import llm_path, reward_span, run_episodes, span


def last_boxed(text):
    r"""The content of the last \boxed{...} (or \fbox{...}) in `text`, its braces matched, or of a \boxed without
    braces up to the next $ (as MATH's solutions write some); None where there is none or it is cut off before its
    closing brace."""
    start = max(text.rfind("\\boxed{"), text.rfind("\\fbox{"))
    bare = text.rfind("\\boxed ")
    if bare > start:
        return text[bare + len("\\boxed "):].split("$")[0].strip()
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
        answer = last_boxed(task["solution"])
        if answer is None:
            raise ValueError("the task's solution has no \\boxed answer")
        return answer
    answer = str(task["answer"])
    return answer.split("####")[-1] if "####" in answer else answer


def cleaned(answer):
    r"""The answer as compared: \text{}, \mbox{}, \textbf{} unwrapped; $, \$, %, degrees, thin spaces and a leading
    "x =" dropped; a unit in words after a number ("72 dollars") dropped; a comma with a space after it, or a space
    between digits, kept apart from thousands separators (two numbers); no spaces; \dfrac and \tfrac as \frac,
    \frac12 as \frac{1}{2}."""
    text = re.sub(r"\\(?:text|textbf|mbox|mathrm)\{([^{}]*)\}", r" \1 ", answer)
    for drop in ("\\$", "$", "\\%", "%", "^\\circ", "^{\\circ}", "\\!", "\\,", "\\;"):  # \, in 1\,000
        text = text.replace(drop, "")
    text = text.replace("{,}", ",").strip().rstrip(".").strip()
    text = re.sub(r"^[a-zA-Z]\s*=\s*", "", text)
    text = re.sub(r"^([-+]?[\d.,]*\d)\s+[a-zA-Z]+(?:\s+[a-zA-Z]+)*$", r"\1", text)
    text = re.sub(r",\s+|(?<=\d)\s+(?=\d)", ";", text)  # "2, 100" and "1 2" are two numbers
    text = re.sub(r"\s+", "", text)
    text = re.sub(r"\\[dt]frac", r"\\frac", text)
    return re.sub(r"\\frac(\d)(\d)", r"\\frac{\1}{\2}", text)


def as_number(text):
    r"""A Fraction where the cleaned text is a number (thousands separated by commas, a decimal, a/b, \frac{a}{b}),
    else None."""
    fraction = re.fullmatch(r"(-?)\\frac\{(-?\d+)\}\{(\d+)\}", text)
    if fraction:
        text = fraction[1] + fraction[2] + "/" + fraction[3]
    if re.fullmatch(r"[-+]?\d{1,3}(,\d{3})+(\.\d+)?", text):
        text = text.replace(",", "")
    if not re.fullmatch(r"[-+]?(\d+(\.\d*)?|\.\d+)(/\d+)?", text):
        return None
    try:
        return Fraction(text)
    except (ValueError, ZeroDivisionError):
        return None


def same_answer(given, expected):
    """Numbers compare as numbers, the rest as cleaned text (no symbolic algebra: x+1 and 1+x differ)."""
    given, expected = cleaned(given), cleaned(expected)
    given_number, expected_number = as_number(given), as_number(expected)
    if given_number is not None and expected_number is not None:
        return given_number == expected_number
    return given == expected


def player(max_tokens, system=None, instruction=None):
    def play(llm, store, rollout):
        rid, aid = rollout["rollout_id"], rollout["attempt"]["attempt_id"]
        task = rollout["input"]
        question = task["question"] if "question" in task else task["problem"]
        expected = expected_answer(task)  # a task without an answer fails before its call
        temperature = 1.0 if rollout.get("mode") == "train" else 0.0
        reply = llm.post(llm_path(rollout, "chat/completions"),
                         {"model": "policy", "messages": ([{"role": "system", "content": system}] if system else []) +
                          [{"role": "user", "content": question + "\n" + instruction if instruction else question}],
                          "max_tokens": max_tokens, "temperature": temperature})
        boxed = last_boxed(reply["choices"][0]["message"].get("content") or "")
        solved = boxed is not None and same_answer(boxed, expected)
        store.post("/v1/agl/spans", reward_span(rid, aid, 1.0 if solved else 0.0))
        store.post("/v1/agl/spans", span(rid, aid, "result", {
            "success": 1.0 if solved else 0.0, "boxed": 0.0 if boxed is None else 1.0,
            "tokens": float(reply["usage"]["completion_tokens"])}))
    return play


def options(args):
    """--max-tokens N, --system TEXT and --instruction TEXT, each at most once: (max_tokens, system, instruction);
    exits with the usage otherwise."""
    given = dict(zip(args[::2], args[1::2]))
    texts = ("--system", "--instruction")
    if len(args) % 2 or len(given) != len(args) // 2 or not set(given) <= {"--max-tokens", *texts} or \
            not given.get("--max-tokens", "1").isdigit() or any(given.get(t) == "" for t in texts):
        sys.exit("usage: math_agent.py [--max-tokens N] [--system TEXT] [--instruction TEXT]")
    return int(given.get("--max-tokens", 1024)), given.get("--system"), given.get("--instruction")


if __name__ == "__main__":
    max_tokens, system, instruction = options(sys.argv[1:])
    # A long answer on CPUs takes minutes: a call may take as long as the config's episode_timeout_seconds.
    run_episodes(player(max_tokens, system, instruction), int(os.environ.get("MATH_EPISODES_AT_ONCE", "8")), llm_timeout=1800)
