#!/usr/bin/python3
"""PyTorch's own twin of `bench_train_step BATCH LENGTH STEPS HF_DIR DEVICE DTYPE` (scripts/gpu_check.sh): one
training step of a Hugging Face model with transformers on CUDA device 0, float32 master weights and the forward
in DTYPE under autocast, the GRPO loss of bench/ddp_train.py (the same shapes: every second token an action,
behaviour log-probs -3.5, advantages in {-1, 0, 1}), gradient clipping at 1, AdamW. Prints the median step seconds
after two warm-up steps. Needs transformers and a GPU (the GPU machine has both). arclight's step also computes the
figures it logs (the entropy over the vocabulary, the clip fraction), which this one leaves out: a little less work
here.

Usage: train_step_hf.py DIR BATCH LENGTH STEPS DTYPE
"""
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ddp_train import grpo_loss  # noqa: E402


def main():
    directory, batch, length, steps, dtype = sys.argv[1], *map(int, sys.argv[2:5]), sys.argv[5]
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32).to("cuda").train()
    compute = {"bfloat16": torch.bfloat16, "float32": torch.float32}[dtype]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, model.config.vocab_size, (batch, length), generator=g).cuda()
    mask = (torch.arange(length) % 2 == 1).float().expand(batch, length).cuda()
    old_logp = torch.full((batch, length), -3.5).cuda()
    adv = torch.randint(-1, 2, (batch, length), generator=g).float().cuda()
    times = []
    for i in range(steps + 2):
        torch.cuda.synchronize()
        t = time.perf_counter()
        opt.zero_grad()
        with torch.autocast("cuda", dtype=compute, enabled=compute != torch.float32):
            logits = model(input_ids=tokens).logits
        grpo_loss(logits.float(), tokens, mask, old_logp, adv).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        torch.cuda.synchronize()
        if i >= 2:
            times.append(time.perf_counter() - t)
    print(f"{sorted(times)[len(times) // 2]:.6f}")


if __name__ == "__main__":
    main()
