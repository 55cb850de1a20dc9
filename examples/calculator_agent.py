#!/usr/bin/env python3
"""A multi-turn, tool-using agent over chat completions: arithmetic word problems with a calculator tool.

Run by every runner rank as `agent.command` (configs/calculator_external.toml). Python's standard library only. For
each rollout it asks the runner's OpenAI-compatible endpoint (under /rollout/{rid}/attempt/{aid}/v1, so every call
is traced into that attempt), runs the calculator for each tool call the model makes and sends the result back as a
`tool` message, until the model answers in text or the turns run out. The reward (Agent Lightning's reward span) is
1 when the last answer holds the right number, else 0.1 for each well-formed call of the calculator (a string
expression), at most 0.5. Thinking is off (chat_template_kwargs: a Qwen3 would spend its few tokens a turn inside a
<think> it never closes; other templates ignore the switch).

A task is a JSON object: {"question": "...", "answer": 42}.
"""
import ast
import json
import operator
import os
import re

from agent_client import llm_path, reward_span, run_episodes, span

MAX_TURNS = 4
TOOLS = [{
    "type": "function",
    "function": {
        "name": "calculator",
        "description": "Evaluate an arithmetic expression with + - * / and parentheses.",
        "parameters": {"type": "object", "properties": {"expression": {"type": "string"}},
                       "required": ["expression"]},
    },
}]
OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
             ast.USub: operator.neg}


def calculate(expression):
    """The tool: arithmetic only (an AST walk, never eval)."""
    def value(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
            return OPERATORS[type(node.op)](value(node.left), value(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in OPERATORS:
            return OPERATORS[type(node.op)](value(node.operand))
        raise ValueError("not arithmetic")
    try:
        return str(value(ast.parse(expression, mode="eval").body))
    except Exception as error:  # any expression the model writes: its error goes back to the model, not up
        return f"error: {error}"


def play(llm, store, rollout):
    rid, aid = rollout["rollout_id"], rollout["attempt"]["attempt_id"]
    task = rollout["input"]
    temperature = 1.0 if rollout.get("mode") == "train" else 0.0
    messages = [{"role": "system", "content": "Use the calculator, then answer with the number."},
                {"role": "user", "content": task["question"]}]
    reward, answer, turns = 0.0, "", 0
    for _ in range(MAX_TURNS):
        turns += 1
        reply = llm.post(llm_path(rollout, "chat/completions"),
                         {"model": "policy", "messages": messages, "tools": TOOLS, "max_tokens": 48,
                          "temperature": temperature, "chat_template_kwargs": {"enable_thinking": False}})
        message = reply["choices"][0]["message"]
        messages.append({"role": "assistant", "content": message.get("content") or "",
                         **({"tool_calls": message["tool_calls"]} if message.get("tool_calls") else {})})
        if not message.get("tool_calls"):
            answer = message.get("content") or ""
            break
        for call in message["tool_calls"]:
            try:
                expression = json.loads(call["function"]["arguments"]).get("expression")
            except (ValueError, AttributeError):
                expression = None
            well_formed = call["function"].get("name") == "calculator" and isinstance(expression, str)
            reward += 0.1 if well_formed else 0.0
            result = calculate(expression) if well_formed else "error: call calculator with a string expression"
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
    numbers = re.findall(r"-?\d+(?:\.\d+)?", answer)
    solved = bool(numbers) and float(numbers[-1]) == float(task["answer"])
    reward = 1.0 if solved else min(reward, 0.5)
    store.post("/v1/agl/spans", reward_span(rid, aid, reward))
    store.post("/v1/agl/spans", span(rid, aid, "result", {"solved": 1.0 if solved else 0.0,
                                                         "turns": float(turns)}))


if __name__ == "__main__":
    run_episodes(play, int(os.environ.get("CALCULATOR_EPISODES_AT_ONCE", "8")))
