#!/usr/bin/python3
"""The PyTorch side of `scripts/bench.sh model` (Debian's python3-torch).

  model_bench.py write DIR
      writes a random Llama of about 100 M parameters in Hugging Face layout (config.json, model.safetensors,
      float32) to DIR and prints {"parameters": N, "weight_bytes": B} (the tensors' bytes).
  model_bench.py generate DIR BATCH PROMPT NEW THREADS
      loads DIR and times a straightforward PyTorch generation loop with a KV cache (the keys and values of each
      layer grown by torch.cat, as transformers' DynamicCache does; repeat_kv; greedy) on BATCH prompts of PROMPT
      tokens, NEW new tokens, THREADS threads: best of 3 after a warm-up. Prints {"tokens_per_s": ...,
      "first_row": [...]} (the first row's tokens, to compare with arclight's).

  model_bench.py write-qwen2 DIR
      writes a random model of Qwen2.5-0.5B's shape (494 M parameters, tied embeddings, q/k/v biases) in bfloat16
      (scripts/gpu_check.sh's generation figure, issue 16).
  model_bench.py transformers DIR BATCH PROMPT NEW
      times transformers' own generate (greedy, KV cache, bfloat16) on CUDA device 0 on the same prompts: best of 3
      after a warm-up. Needs transformers and a GPU (the GPU machine has both).

The prompts are the same formula on both sides: token (31 r + 7 i + 3) mod vocab at row r, position i.
"""
import json
import math
import os
import struct
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "model"))
from hf_reference import inverse_frequencies, random_weights, repeat_kv, rms_norm, rotate_half, save_model  # noqa: E402

CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 16000, "hidden_size": 768,
    "intermediate_size": 2048, "num_hidden_layers": 12, "num_attention_heads": 12, "num_key_value_heads": 4,
    "max_position_embeddings": 2048, "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "bos_token_id": 1,
    "eos_token_id": 2, "tie_word_embeddings": False,
}


def write(directory):
    torch.manual_seed(13)
    weights = random_weights(CONFIG)
    save_model(directory, CONFIG, weights, bf16=False, shards=1)
    print(json.dumps({"parameters": sum(t.numel() for t in weights.values()),
                      "weight_bytes": sum(4 * t.numel() for t in weights.values())}))


QWEN2_0_5B = {
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "vocab_size": 151936, "hidden_size": 896,
    "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2,
    "max_position_embeddings": 32768, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "bos_token_id": 151643,
    "eos_token_id": 151643, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
}


def write_qwen2(directory):
    torch.manual_seed(13)
    weights = random_weights(QWEN2_0_5B)
    weights["model.embed_tokens.weight"] *= 0.05  # tied: as the lm_head too, logits of a sane size
    save_model(directory, QWEN2_0_5B, weights, bf16=True, shards=1)
    print(json.dumps({"parameters": sum(t.numel() for t in weights.values()),
                      "weight_bytes": sum(2 * t.numel() for t in weights.values())}))


def transformers_generate(directory, batch, length, new_tokens):
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(directory, dtype=torch.bfloat16).to("cuda").eval()
    with open(os.path.join(directory, "config.json")) as f:
        ids = prompts(json.load(f), batch, length).to("cuda")

    def run(n):
        return model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=n,
                              min_new_tokens=n, do_sample=False, use_cache=True, pad_token_id=0)

    with torch.inference_mode():
        run(2)  # warm-up
        best, tokens = math.inf, None
        for _ in range(3):
            torch.cuda.synchronize()
            t = time.perf_counter()
            tokens = run(new_tokens)
            torch.cuda.synchronize()
            best = min(best, time.perf_counter() - t)
    print(json.dumps({"tokens_per_s": batch * new_tokens / best, "first_row": tokens[0, length:].tolist()}))


def load(directory):
    with open(os.path.join(directory, "config.json")) as f:
        c = json.load(f)
    path = os.path.join(directory, "model.safetensors")
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    data = np.fromfile(path, dtype=np.uint8, offset=8 + n)
    w = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        begin, end = e["data_offsets"]
        w[name] = torch.from_numpy(data[begin:end].view("<f4").reshape(e["shape"]).copy())
    return c, w


def prompts(c, batch, length):
    return torch.tensor([[(31 * r + 7 * i + 3) % c["vocab_size"] for i in range(length)] for r in range(batch)])


def forward(c, w, ids, cache, rope):
    """ids [B, T] at positions len(cache) .. ; cache: a list of (keys, values) per layer, grown here."""
    heads, kv_heads, eps = c["num_attention_heads"], c["num_key_value_heads"], c["rms_norm_eps"]
    head_dim = c["hidden_size"] // heads
    b, t = ids.shape
    start = cache[0][0].shape[2] if cache else 0
    cos, sin = rope[0][start:start + t][None, None], rope[1][start:start + t][None, None]
    mask = None
    if t > 1:
        mask = torch.full((t, start + t), float("-inf")).triu(start + 1)
    x = w["model.embed_tokens.weight"][ids]
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        q = (h @ w[p + "self_attn.q_proj.weight"].T).view(b, t, heads, head_dim).transpose(1, 2)
        k = (h @ w[p + "self_attn.k_proj.weight"].T).view(b, t, kv_heads, head_dim).transpose(1, 2)
        v = (h @ w[p + "self_attn.v_proj.weight"].T).view(b, t, kv_heads, head_dim).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        if len(cache) > i:
            k, v = torch.cat([cache[i][0], k], 2), torch.cat([cache[i][1], v], 2)
            cache[i] = (k, v)
        else:
            cache.append((k, v))
        k, v = repeat_kv(k, heads // kv_heads), repeat_kv(v, heads // kv_heads)
        scores = torch.matmul(q, k.transpose(2, 3)) * head_dim ** -0.5
        if mask is not None:
            scores = scores + mask
        probabilities = torch.softmax(scores, dim=-1, dtype=torch.float32)
        out = torch.matmul(probabilities, v).transpose(1, 2).reshape(b, t, -1)
        x = x + out @ w[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        gated = torch.nn.functional.silu(h @ w[p + "mlp.gate_proj.weight"].T) * (h @ w[p + "mlp.up_proj.weight"].T)
        x = x + gated @ w[p + "mlp.down_proj.weight"].T
    x = rms_norm(x, w["model.norm.weight"], eps)
    return x @ w["lm_head.weight"].T


def generate(c, w, ids, new_tokens, rope):
    """Greedy, with the log-prob of each token (as arclight returns them)."""
    cache, out, logprobs = [], [], []
    logits = forward(c, w, ids, cache, rope)
    for step in range(new_tokens):
        logp = torch.log_softmax(logits[:, -1], -1)
        token = logp.argmax(-1, keepdim=True)
        out.append(token)
        logprobs.append(logp.gather(1, token))
        if step + 1 < new_tokens:
            logits = forward(c, w, token, cache, rope)
    return torch.cat(out, 1)


def bench(directory, batch, length, new_tokens, threads):
    torch.set_num_threads(threads)
    c, w = load(directory)
    head_dim = c["hidden_size"] // c["num_attention_heads"]
    angles = torch.outer(torch.arange(length + new_tokens).float(), inverse_frequencies(c, head_dim))
    emb = torch.cat((angles, angles), -1)
    rope = (emb.cos(), emb.sin())
    ids = prompts(c, batch, length)
    with torch.inference_mode():
        generate(c, w, ids, 2, rope)  # warm-up
        best, tokens = math.inf, None
        for _ in range(3):
            t = time.perf_counter()
            tokens = generate(c, w, ids, new_tokens, rope)
            best = min(best, time.perf_counter() - t)
    print(json.dumps({"tokens_per_s": batch * new_tokens / best, "first_row": tokens[0].tolist()}))


def main():
    if sys.argv[1] == "write":
        write(sys.argv[2])
    elif sys.argv[1] == "write-qwen2":
        write_qwen2(sys.argv[2])
    elif sys.argv[1] == "transformers":
        transformers_generate(sys.argv[2], *map(int, sys.argv[3:6]))
    else:
        bench(sys.argv[2], *map(int, sys.argv[3:7]))


if __name__ == "__main__":
    main()
