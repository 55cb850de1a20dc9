#!/usr/bin/python3
"""The model and PyTorch's side of `scripts/bench.sh long_context`.

  long_context.py write DIR          writes a Llama-shaped Hugging Face model (16 heads of 32 over 4 key heads, 4 layers,
                                     width 256, vocabulary 32,000, float32) into DIR
  long_context.py step DIR LENGTH    three training steps of that model on one sequence of LENGTH tokens in plain
                                     PyTorch (tests/model/hf_reference.py's forward: transformers' eager attention,
                                     whose autograd keeps each layer's [heads, LENGTH, LENGTH] probabilities for the
                                     backward), the GRPO loss of bench/ddp_train.py, AdamW; prints the third's seconds

Debian's python3-torch, one compute thread, as arclight's side runs.
"""
import os
import sys
import time

import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "tests", "model"))
sys.path.insert(0, here)
import hf_reference  # noqa: E402
from ddp_train import grpo_loss  # noqa: E402

CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 32000, "hidden_size": 256,
    "intermediate_size": 512, "num_hidden_layers": 4, "num_attention_heads": 16, "num_key_value_heads": 4,
    "head_dim": 32, "max_position_embeddings": 8192, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
    "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2,
}


def weights():
    torch.manual_seed(20261207)
    return hf_reference.random_weights(CONFIG)


def step(length):
    torch.set_num_threads(1)
    w = {n: t.requires_grad_() for n, t in weights().items()}
    opt = torch.optim.AdamW(list(w.values()), lr=1e-3, weight_decay=0.0)
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, CONFIG["vocab_size"], (1, length), generator=g)
    mask = (torch.arange(length) % 2 == 1).float()[None]
    old_logp = torch.full((1, length), -3.5)
    adv = torch.randint(-1, 2, (1, length), generator=g).float()
    for _ in range(3):  # two warm-up steps, as bench_train_step takes
        start = time.perf_counter()
        opt.zero_grad()
        logits = hf_reference.forward(CONFIG, w, tokens[0].tolist())[None]
        grpo_loss(logits, tokens, mask, old_logp, adv).backward()
        opt.step()
    print(f"{time.perf_counter() - start:.3f}")


def main():
    if sys.argv[1] == "write":
        hf_reference.save_model(sys.argv[2], CONFIG, weights(), False, 1)
    else:
        step(int(sys.argv[3]))


if __name__ == "__main__":
    main()
