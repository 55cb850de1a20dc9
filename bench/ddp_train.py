"""The PyTorch DDP (gloo) twin of bench/train_step.cpp: the same transformer, batch and loss.

Run by bench/train.sh: python3 ddp_train.py RANK WORLD PORT BATCH LENGTH STEPS; rank 0 prints
the median step time. Loopback only."""
import math
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d, heads, ff):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, ff), nn.Linear(ff, d)

    def forward(self, x, mask):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        att = torch.softmax(att.masked_fill(mask, float("-inf")), -1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Policy(nn.Module):
    def __init__(self, vocab, d, layers, heads, ff, max_seq):
        super().__init__()
        self.embed, self.position = nn.Embedding(vocab, d), nn.Embedding(max_seq, d)
        self.blocks = nn.ModuleList(Block(d, heads, ff) for _ in range(layers))
        self.ln_f, self.head = nn.LayerNorm(d), nn.Linear(d, vocab)

    def forward(self, tokens):
        t = tokens.shape[1]
        x = self.embed(tokens) + self.position(torch.arange(t))
        mask = torch.ones(t, t, dtype=torch.bool).triu(1)
        for block in self.blocks:
            x = block(x, mask)
        return self.head(self.ln_f(x))


def grpo_loss(logits, tokens, mask, old_logp, adv, clip=0.2):
    logp = torch.log_softmax(logits[:, :-1], -1).gather(-1, tokens[:, 1:, None]).squeeze(-1)
    m, old, a = mask[:, 1:], old_logp[:, 1:], adv[:, 1:]
    ratio = torch.exp(logp - old)
    surrogate = torch.min(ratio * a, ratio.clamp(1 - clip, 1 + clip) * a)
    return -(surrogate * m).sum() / m.sum().clamp_min(1)


def main():
    rank, world, port, batch, length, steps = (int(a) for a in sys.argv[1:7])
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(1)
    model = nn.parallel.DistributedDataParallel(Policy(35, 64, 2, 4, 256, length))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    g = torch.Generator().manual_seed(rank)
    n = batch // world
    tokens = torch.randint(0, 35, (n, length), generator=g)
    mask = (torch.arange(length) % 2 == 1).float().expand(n, length)
    old_logp = torch.full((n, length), -3.5)
    adv = torch.randint(-1, 2, (n, length), generator=g).float()
    times = []
    for i in range(steps + 2):
        dist.barrier()
        t = time.perf_counter()
        opt.zero_grad()
        grpo_loss(model(tokens), tokens, mask, old_logp, adv).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        dist.barrier()
        if i >= 2:
            times.append(time.perf_counter() - t)
    if rank == 0:
        print(f"{sorted(times)[len(times) // 2]:.6f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
