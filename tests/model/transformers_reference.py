"""Rewrites the reference outputs of tests/model/hf_reference.py's tiny models with transformers itself: for each
model directory given, the logits of reference.json's prompts from AutoModelForCausalLM (float32, eager attention)
and greedy generations over transformers' own KV cache, so that hf_reference_check compares arclight with the
model's authors' code rather than with a re-implementation of it. Needs transformers (the GPU machine has it:
scripts/gpu_check.sh); prints the largest difference to the plain-PyTorch reference it replaces.

Usage: transformers_reference.py MODEL_DIR...
"""
import json
import os
import sys

import torch
from transformers import AutoModelForCausalLM


def greedy(model, prompt, new_tokens):
    ids, past, tokens, logprobs = torch.tensor([prompt]), None, [], []
    for _ in range(new_tokens):
        out = model(input_ids=ids, past_key_values=past, use_cache=True)
        past = out.past_key_values
        logp = torch.log_softmax(out.logits[0, -1].float(), -1)
        token = int(logp.argmax())
        tokens.append(token)
        logprobs.append(float(logp[token]))
        ids = torch.tensor([[token]])
    return tokens, logprobs


def main(directories):
    for directory in directories:
        path = os.path.join(directory, "reference.json")
        reference = json.load(open(path))
        model = AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32, attn_implementation="eager")
        model.eval()
        worst, changed = 0.0, 0
        with torch.no_grad():
            logits = [model(input_ids=torch.tensor([p])).logits[0].float() for p in reference["prompts"]]
            runs = [greedy(model, p, reference["new_tokens"]) for p in reference["prompts"]]
        for mine, theirs in zip(reference["logits"], logits):
            worst = max(worst, (torch.tensor(mine) - theirs).abs().max().item())
        changed = sum(a != b[0] for a, b in zip(reference["greedy"], runs))
        reference["logits"] = [l.tolist() for l in logits]
        reference["greedy"] = [r[0] for r in runs]
        reference["greedy_logprobs"] = [r[1] for r in runs]
        reference["source"] = "transformers"
        json.dump(reference, open(path, "w"))
        print(f"{os.path.basename(directory)}: transformers vs the plain PyTorch reference: max |logit diff| "
              f"{worst:.2e}, {changed} greedy runs differ")


if __name__ == "__main__":
    main(sys.argv[1:])
