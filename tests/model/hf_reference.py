#!/usr/bin/python3
"""Tiny random Hugging Face models of each architecture arclight reads, and their reference outputs.

For each of Llama (with llama3 RoPE scaling), Qwen2 (q/k/v biases, tied embeddings), Qwen3 (q/k norms, head_dim
apart from hidden_size / heads, attention_bias: biases on q, k, v and o, YaRN RoPE scaling)
(the llama3 scaling of the first keeps one RoPE frequency, slows two and blends one), Mistral (a sliding window shorter than the prompts, bfloat16 weights in two
shards), Gemma 2 (Gemma's norms, embeddings and GeGLU, the window on every other layer from the first, attention
scores and logits soft-capped at caps low enough to bite) and Gemma 3 (norms as offsets from 1 and around attention
and the MLP, scaled embeddings, GeGLU, a query_pre_attn_scalar apart from head_dim, a window on every other layer
with its own RoPE base, linear RoPE scaling on the others; also as the text model of a
Gemma3ForConditionalGeneration, OUT/gemma3_multimodal) and Gemma 1 (Gemma's norms, embeddings and GeGLU, one key
head, head_dim apart from hidden_size / heads; no norms after attention and the MLP, no window, no caps), writes
OUT/<name>/ with config.json and safetensors weights, and OUT/<name>/reference.json with:
  prompts         token ids of several lengths
  logits          [prompt][position][vocab], float32, from a full forward
  logits_bf16     the same, computed in bfloat16 (the weights rounded to it)
  greedy          [prompt] -> the next `new_tokens` greedy tokens (each step a full forward, no cache)
  greedy_logprobs [prompt] -> each greedy token's log-softmax

The forward is plain PyTorch written from transformers' modeling_{llama,qwen2,qwen3,mistral,gemma,gemma2,gemma3}.py (eager attention:
RMSNorm in float32, rotate_half RoPE, repeat_kv, softmax in float32), so the check needs neither transformers nor
safetensors: the files are written byte by byte after the safetensors specification.

usage: hf_reference.py OUT_DIR
"""
import json
import math
import os
import struct
import sys

import torch

torch.manual_seed(20261130)

ARCHITECTURES = {
    "llama": {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 96, "hidden_size": 32,
        "intermediate_size": 48, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
        "max_position_embeddings": 256, "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "bos_token_id": 1,
        "eos_token_id": 2, "tie_word_embeddings": False,
        "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 64},
    },
    "qwen2": {
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "vocab_size": 80, "hidden_size": 32,
        "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 1,
        "max_position_embeddings": 512, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "tie_word_embeddings": True,
        "use_sliding_window": False, "sliding_window": None, "eos_token_id": 3, "bos_token_id": None,
    },
    "qwen3": {
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 72, "hidden_size": 24,
        "intermediate_size": 40, "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 10, "max_position_embeddings": 16384, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
        "tie_word_embeddings": True, "attention_bias": True, "eos_token_id": 5,
        # Qwen3's long context: of 5 frequency pairs, 2 kept, 1 blended, 2 interpolated; cos and sin scaled by 1.139
        "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096},
    },
    "mistral": {
        "architectures": ["MistralForCausalLM"], "model_type": "mistral", "vocab_size": 64, "hidden_size": 32,
        "intermediate_size": 56, "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2,
        "max_position_embeddings": 1024, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "sliding_window": 4,
        "tie_word_embeddings": False,
    },
    "gemma2": {
        "architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", "vocab_size": 90, "hidden_size": 32,
        "intermediate_size": 40, "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 12, "max_position_embeddings": 512, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
        "sliding_window": 4, "query_pre_attn_scalar": 24, "hidden_activation": "gelu_pytorch_tanh",
        "tie_word_embeddings": True, "attn_logit_softcapping": 2.5, "final_logit_softcapping": 5.0,
        "bos_token_id": 2, "eos_token_id": [1, 7], "pad_token_id": 0,
    },
    "gemma3": {
        "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "vocab_size": 88, "hidden_size": 32,
        "intermediate_size": 48, "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 12, "max_position_embeddings": 512, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
        "rope_local_base_freq": 10000.0, "rope_scaling": {"rope_type": "linear", "factor": 4.0},
        "sliding_window": 4, "sliding_window_pattern": 2, "query_pre_attn_scalar": 16,
        "hidden_activation": "gelu_pytorch_tanh", "tie_word_embeddings": True, "attn_logit_softcapping": None,
        "final_logit_softcapping": None, "bos_token_id": 2, "eos_token_id": [1, 6], "pad_token_id": 0,
    },
    # Last, so that the others' random weights and prompts stay as they were before it came.
    "gemma": {
        "architectures": ["GemmaForCausalLM"], "model_type": "gemma", "vocab_size": 84, "hidden_size": 32,
        "intermediate_size": 44, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 1,
        "head_dim": 12, "max_position_embeddings": 512, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
        "hidden_activation": "gelu_pytorch_tanh", "tie_word_embeddings": True, "bos_token_id": 2,
        "eos_token_id": 1, "pad_token_id": 0,
    },
}
STORED_AS_BF16 = {"mistral"}
SHARDS = {"mistral": 2}
PROMPT_LENGTHS = [1, 3, 7, 7, 12]  # two of one length: a batch
NEW_TOKENS = 8


def shape_facts(c):
    head_dim = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
    return head_dim, c["num_attention_heads"] * head_dim, c["num_key_value_heads"] * head_dim


def is_gemma(c):
    return c["model_type"] in ("gemma", "gemma2", "gemma3_text")


def has_sandwich_norms(c):
    """Gemma 2's and 3's norms after attention and the MLP, besides those before them."""
    return c["model_type"] in ("gemma2", "gemma3_text")


def qkv_bias(c):
    return c["model_type"] == "qwen2" or bool(c.get("attention_bias", False))


def random_weights(c):
    head_dim, q_width, kv_width = shape_facts(c)
    h, f = c["hidden_size"], c["intermediate_size"]
    w = {"model.embed_tokens.weight": torch.randn(c["vocab_size"], h),
         "model.norm.weight": 1 + 0.1 * torch.randn(h)}
    if not c["tie_word_embeddings"]:
        w["lm_head.weight"] = 0.3 * torch.randn(c["vocab_size"], h)
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        shapes = {"self_attn.q_proj.weight": (q_width, h), "self_attn.k_proj.weight": (kv_width, h),
                  "self_attn.v_proj.weight": (kv_width, h), "self_attn.o_proj.weight": (h, q_width),
                  "mlp.gate_proj.weight": (f, h), "mlp.up_proj.weight": (f, h), "mlp.down_proj.weight": (h, f)}
        for name, shape in shapes.items():
            w[p + name] = torch.randn(*shape) / math.sqrt(shape[1])
        if qkv_bias(c):
            for n, width in (("q", q_width), ("k", kv_width), ("v", kv_width)):
                w[p + f"self_attn.{n}_proj.bias"] = 0.2 * torch.randn(width)
        if c.get("attention_bias", False):  # Llama's and Qwen3's: o_proj too (Qwen2's q/k/v biases are its own)
            w[p + "self_attn.o_proj.bias"] = 0.2 * torch.randn(h)
        one = 0 if is_gemma(c) else 1  # Gemma's norms hold their offset from 1
        if c["model_type"] in ("qwen3", "gemma3_text"):
            w[p + "self_attn.q_norm.weight"] = one + 0.1 * torch.randn(head_dim)
            w[p + "self_attn.k_norm.weight"] = one + 0.1 * torch.randn(head_dim)
        norms = ["input_layernorm", "post_attention_layernorm"]
        if has_sandwich_norms(c):
            norms += ["pre_feedforward_layernorm", "post_feedforward_layernorm"]
        for norm in norms:
            w[p + norm + ".weight"] = one + 0.1 * torch.randn(h)
    if is_gemma(c):
        w["model.norm.weight"] -= 1
        # Gemma scales its (tied) embeddings by sqrt(hidden): unit ones would outweigh every layer, and each greedy
        # token would repeat the last, whatever the attention saw.
        w["model.embed_tokens.weight"] *= 0.1
        if not has_sandwich_norms(c):  # Gemma 1 adds each layer's output unnormed: the embeddings weigh more
            w["model.embed_tokens.weight"] *= 0.3
    return w


def write_safetensors(path, tensors, dtype):
    """The format: u64 little-endian header length, the JSON header, the data (little-endian, row-major)."""
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        if dtype == "BF16":  # the upper 16 bits of each float32, which is what the truncated tensor holds exactly
            data = (t.contiguous().view(torch.int32) >> 16).to(torch.int16).numpy().tobytes()
        else:
            data = t.contiguous().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def save_model(directory, c, weights, bf16, shards):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    dtype = "BF16" if bf16 else "F32"
    names = sorted(weights)
    if shards == 1:
        write_safetensors(os.path.join(directory, "model.safetensors"), weights, dtype)
        return
    weight_map = {}
    for s in range(shards):
        file = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: weights[n] for i, n in enumerate(names) if i % shards == s}
        write_safetensors(os.path.join(directory, file), part, dtype)
        weight_map.update({n: file for n in part})
    with open(os.path.join(directory, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f, indent=2)


# ---- the forward, after transformers' modeling code ----

def rms_norm(x, weight, eps):
    h = x.to(torch.float32)
    variance = h.pow(2).mean(-1, keepdim=True)
    return weight * (h * torch.rsqrt(variance + eps)).to(x.dtype)


def gemma_rms_norm(x, weight, eps):
    """Gemma3RMSNorm: (1 + weight) in float32, the product rounded after."""
    h = x.to(torch.float32)
    normed = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return (normed * (1.0 + weight.float())).type_as(x)


def inverse_frequencies(c, head_dim, local=False):
    """Gemma 3's sliding layers (local) take rope_local_base_freq, unscaled (Gemma3TextModel's rotary_emb_local)."""
    base = c["rope_local_base_freq"] if local else c["rope_theta"]
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    s = None if local else c.get("rope_scaling")
    if not s:
        return inv_freq
    if s["rope_type"] == "linear":  # _compute_linear_scaling_rope_parameters
        return inv_freq / s["factor"]
    if s["rope_type"] == "yarn":
        return yarn_inverse_frequencies(c, s, head_dim)
    # modeling_rope_utils._compute_llama3_parameters
    factor, low, high = s["factor"], s["low_freq_factor"], s["high_freq_factor"]
    old_context_len = s["original_max_position_embeddings"]
    low_freq_wavelen, high_freq_wavelen = old_context_len / low, old_context_len / high
    wavelen = 2 * math.pi / inv_freq
    inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth_factor = (old_context_len / wavelen - low) / (high - low)
    smoothed = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
    is_medium = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium, smoothed, inv_freq_llama)


def yarn_inverse_frequencies(c, s, dim):
    """modeling_rope_utils._compute_yarn_parameters as transformers 5 and vLLM read it: the factor given, the ramp's
    bounds from the original context."""
    base, factor = c["rope_theta"], s["factor"]
    original = s.get("original_max_position_embeddings") or c["max_position_embeddings"]
    beta_fast, beta_slow = s.get("beta_fast") or 32, s.get("beta_slow") or 1

    def correction_dim(rotations):
        return (dim * math.log(original / (rotations * 2 * math.pi))) / (2 * math.log(base))
    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if s.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    pos_freqs = base ** (torch.arange(0, dim, 2).to(dtype=torch.float) / dim)
    extrapolation, interpolation = 1.0 / pos_freqs, 1.0 / (factor * pos_freqs)
    extrapolation_factor = 1 - torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
    return interpolation * (1 - extrapolation_factor) + extrapolation * extrapolation_factor


def attention_scaling(c, local):
    """The factor on cos and sin: YaRN's attention_factor, or 0.1 ln(factor) + 1 (mscale's ratio where given)."""
    s = None if local else c.get("rope_scaling")
    if not s or s["rope_type"] != "yarn":
        return 1.0
    if s.get("attention_factor") is not None:
        return s["attention_factor"]

    def get_mscale(scale, mscale=1):
        return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0
    if s.get("mscale") and s.get("mscale_all_dim"):
        return get_mscale(s["factor"], s["mscale"]) / get_mscale(s["factor"], s["mscale_all_dim"])
    return get_mscale(s["factor"])


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def repeat_kv(x, n_rep):
    b, kv, t, d = x.shape
    return x[:, :, None, :, :].expand(b, kv, n_rep, t, d).reshape(b, kv * n_rep, t, d)


def linear(x, w, prefix):
    return torch.nn.functional.linear(x, w[prefix + ".weight"], w.get(prefix + ".bias"))


def forward(c, w, ids, dtype=torch.float32):
    """The logits in float32, computed in `dtype` as transformers' eager attention does (weights, rotary cos/sin and
    the mask in that type; RMSNorm and softmax in float32)."""
    w = {n: t.to(dtype) for n, t in w.items()}
    head_dim, _, _ = shape_facts(c)
    heads, kv_heads, eps = c["num_attention_heads"], c["num_key_value_heads"], c["rms_norm_eps"]
    t = len(ids)
    gemma = is_gemma(c)
    norm = gemma_rms_norm if gemma else rms_norm
    x = w["model.embed_tokens.weight"][torch.tensor(ids)].unsqueeze(0)
    # Gemma3TextScaledWordEmbedding (Gemma 1's and 2's the same): sqrt(hidden) as a float32 tensor, in the weights' type
    if gemma:
        x = x * torch.tensor(c["hidden_size"] ** 0.5).to(dtype)
    positions = torch.arange(t)[None, :].float()

    def rotary(local):
        freqs = (inverse_frequencies(c, head_dim, local)[None, :, None] @ positions[:, None, :]).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        scaling = attention_scaling(c, local)
        return (emb.cos() * scaling).to(dtype).unsqueeze(1), (emb.sin() * scaling).to(dtype).unsqueeze(1)
    q_idx, kv_idx = torch.arange(t)[:, None], torch.arange(t)[None, :]
    causal = kv_idx <= q_idx
    full_mask = torch.zeros(t, t, dtype=dtype).masked_fill(~causal, torch.finfo(dtype).min)
    window = c.get("sliding_window")
    if window:
        in_window = causal & (kv_idx > q_idx - window)
        window_mask = torch.zeros(t, t, dtype=dtype).masked_fill(~in_window, torch.finfo(dtype).min)
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        # Mistral's every layer slides; Qwen's from max_window_layers on (transformers' layer_types).
        # Gemma 3's all but every sliding_window_pattern-th, Gemma 2's every other from the first (their layer_types
        # when none are given).
        slides = window and (c["model_type"] == "mistral" or
                             (c.get("use_sliding_window") and i >= c.get("max_window_layers", 28)) or
                             (gemma and (i + 1) % (c["sliding_window_pattern"] if c["model_type"] == "gemma3_text"
                                                   else 2) != 0))
        mask = window_mask if slides else full_mask
        cos, sin = rotary(local=c["model_type"] == "gemma3_text" and slides)
        h = norm(x, w[p + "input_layernorm.weight"], eps)
        q = linear(h, w, p + "self_attn.q_proj").view(1, t, -1, head_dim)
        k = linear(h, w, p + "self_attn.k_proj").view(1, t, -1, head_dim)
        v = linear(h, w, p + "self_attn.v_proj").view(1, t, -1, head_dim).transpose(1, 2)
        if c["model_type"] in ("qwen3", "gemma3_text"):
            q = norm(q, w[p + "self_attn.q_norm.weight"], eps)
            k = norm(k, w[p + "self_attn.k_norm.weight"], eps)
        q, k = q.transpose(1, 2), k.transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k, v = repeat_kv(k, heads // kv_heads), repeat_kv(v, heads // kv_heads)
        scale = c.get("query_pre_attn_scalar", head_dim) ** -0.5  # Gemma 2's and 3's, else head_dim
        scores = torch.matmul(q, k.transpose(2, 3)) * scale
        if c.get("attn_logit_softcapping"):  # Gemma 2's eager_attention_forward: before the mask
            cap = c["attn_logit_softcapping"]
            scores = torch.tanh(scores / cap) * cap
        scores = scores + mask
        probabilities = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
        out = torch.matmul(probabilities, v).transpose(1, 2).reshape(1, t, -1)
        attended = linear(out, w, p + "self_attn.o_proj")
        if has_sandwich_norms(c):  # Gemma2DecoderLayer, Gemma3DecoderLayer: a norm on attention's output, around MLP
            x = x + norm(attended, w[p + "post_attention_layernorm.weight"], eps)
            h = norm(x, w[p + "pre_feedforward_layernorm.weight"], eps)
            gate = torch.nn.functional.gelu(linear(h, w, p + "mlp.gate_proj"), approximate="tanh")
            x = x + norm(linear(gate * linear(h, w, p + "mlp.up_proj"), w, p + "mlp.down_proj"),
                         w[p + "post_feedforward_layernorm.weight"], eps)
            continue
        x = x + attended
        h = norm(x, w[p + "post_attention_layernorm.weight"], eps)
        gate = linear(h, w, p + "mlp.gate_proj")
        # GemmaMLP: the tanh approximation of GELU; the others' SwiGLU
        gate = torch.nn.functional.gelu(gate, approximate="tanh") if gemma else torch.nn.functional.silu(gate)
        gated = gate * linear(h, w, p + "mlp.up_proj")
        x = x + linear(gated, w, p + "mlp.down_proj")
    x = norm(x, w["model.norm.weight"], eps)
    head = w["model.embed_tokens.weight"] if c["tie_word_embeddings"] else w["lm_head.weight"]
    logits = torch.nn.functional.linear(x, head)[0]
    if c.get("final_logit_softcapping"):  # Gemma2ForCausalLM, in the model's type
        cap = c["final_logit_softcapping"]
        logits = torch.tanh(logits / cap) * cap
    return logits.float()


def greedy(c, w, prompt):
    ids, tokens, logprobs = list(prompt), [], []
    for _ in range(NEW_TOKENS):
        logp = torch.log_softmax(forward(c, w, ids)[-1], -1)
        token = int(logp.argmax())
        tokens.append(token)
        logprobs.append(float(logp[token]))
        ids.append(token)
    return tokens, logprobs


def main():
    out = sys.argv[1]
    for name, c in ARCHITECTURES.items():
        weights = random_weights(c)
        bf16 = name in STORED_AS_BF16
        if bf16:  # the reference computes with exactly the weights the file holds
            weights = {n: t.to(torch.bfloat16).to(torch.float32) for n, t in weights.items()}
        directory = os.path.join(out, name)
        save_model(directory, c, weights, bf16, SHARDS.get(name, 1))
        prompts = [torch.randint(0, c["vocab_size"], (n,)).tolist() for n in PROMPT_LENGTHS]
        with torch.no_grad():
            logits = [forward(c, weights, p).tolist() for p in prompts]
            logits_bf16 = [forward(c, weights, p, torch.bfloat16).tolist() for p in prompts]
            runs = [greedy(c, weights, p) for p in prompts]
        reference = {"prompts": prompts, "logits": logits, "logits_bf16": logits_bf16, "new_tokens": NEW_TOKENS,
                     "greedy": [r[0] for r in runs], "greedy_logprobs": [r[1] for r in runs]}
        with open(os.path.join(directory, "reference.json"), "w") as f:
            json.dump(reference, f)
        print(f"{name}: {sum(t.numel() for t in weights.values())} parameters, "
              f"{'bf16, ' if bf16 else ''}{SHARDS.get(name, 1)} file(s)")
        if name == "gemma3":
            save_multimodal(os.path.join(out, "gemma3_multimodal"), c, weights, reference)


def save_multimodal(directory, c, weights, reference):
    """The same Gemma 3 as the text model of a Gemma3ForConditionalGeneration, as Google's files hold gemma-3-4b-it:
    its config in text_config (the end tokens beside it), its tensors under language_model.model.*, beside a vision
    tower's and a projector's (random, unread), in two shards; the same reference outputs."""
    text = {k: v for k, v in c.items() if k not in ("architectures", "bos_token_id", "eos_token_id", "pad_token_id")}
    config = {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
              "bos_token_id": c["bos_token_id"], "eos_token_id": c["eos_token_id"], "text_config": text,
              "vision_config": {"model_type": "siglip_vision_model"}}
    named = {"language_model." + n: t for n, t in weights.items()}
    named["vision_tower.vision_model.embeddings.patch_embedding.weight"] = torch.randn(4, 3, 2, 2)
    named["multi_modal_projector.mm_input_projection_weight"] = torch.randn(4, c["hidden_size"])
    save_model(directory, config, named, False, 2)
    with open(os.path.join(directory, "reference.json"), "w") as f:
        json.dump(reference, f)
    print(f"gemma3_multimodal: the same, as Gemma3ForConditionalGeneration's text model, 2 file(s)")


if __name__ == "__main__":
    main()
