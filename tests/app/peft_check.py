"""Checks a PEFT adapter directory written by `arclight export --peft` as PEFT reads one.

Usage: peft_check.py BASE_MODEL_DIR ADAPTER_DIR MERGED_MODEL_DIR

Written from PEFT's documented layout, not from arclight's code: adapter_config.json (peft_type LORA, r, lora_alpha,
target_modules, use_rslora) and adapter_model.safetensors with "base_model.model.<module>.lora_A.weight" (r x in) and
".lora_B.weight" (out x r) for every Linear whose name ends in a target module. PEFT merges a Linear as
W + (B @ A) * lora_alpha / r; the result must equal `arclight export --merge-lora`'s weights.
"""
import json
import os
import struct
import sys

import torch

DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    body = data[8 + length:]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        raw = bytearray(body[begin:end])
        tensors[name] = torch.frombuffer(raw, dtype=DTYPES[info["dtype"]]).reshape(info["shape"]).float()
    return tensors


def read_model(directory):
    index = os.path.join(directory, "model.safetensors.index.json")
    if not os.path.exists(index):
        return read_safetensors(os.path.join(directory, "model.safetensors"))
    tensors = {}
    for shard in sorted(set(json.load(open(index))["weight_map"].values())):
        tensors.update(read_safetensors(os.path.join(directory, shard)))
    return tensors


def main(base_dir, adapter_dir, merged_dir):
    config = json.load(open(os.path.join(adapter_dir, "adapter_config.json")))
    assert config["peft_type"] == "LORA", config
    # PEFT finds the base model by this path from wherever it runs: absolute, naming the model trained.
    base_path = config["base_model_name_or_path"]
    assert os.path.isabs(base_path) and os.path.samefile(base_path, base_dir), base_path
    assert not config.get("use_rslora") and not config.get("use_dora"), config
    scaling = config["lora_alpha"] / config["r"]
    adapter = read_safetensors(os.path.join(adapter_dir, "adapter_model.safetensors"))
    base, merged = read_model(base_dir), read_model(merged_dir)
    targeted = [name[:-len(".weight")] for name, t in base.items()
                if t.dim() == 2 and name.endswith(".weight") and
                name[:-len(".weight")].split(".")[-1] in config["target_modules"]]
    expected_keys = {f"base_model.model.{m}.lora_{ab}.weight" for m in targeted for ab in "AB"}
    assert set(adapter) == expected_keys, sorted(set(adapter) ^ expected_keys)[:4]
    worst, moved = 0.0, 0
    for name, weight in base.items():
        want = weight
        module = name[:-len(".weight")]
        if module in targeted:
            a = adapter[f"base_model.model.{module}.lora_A.weight"]
            b = adapter[f"base_model.model.{module}.lora_B.weight"]
            assert a.shape == (config["r"], weight.shape[1]) and b.shape == (weight.shape[0], config["r"]), name
            want = weight + (b @ a) * scaling
            moved += int(b.abs().max() > 0)
        diff = (merged[name] - want).abs().max().item()
        worst = max(worst, diff / max(want.abs().max().item(), 1e-30))
    assert moved > 0, "every lora_B is zero: the adapters never trained"
    assert worst < 1e-5, f"merged weights differ from PEFT's merge by {worst} (relative)"
    print(f"peft adapter: {len(targeted)} modules ({moved} trained), r {config['r']}, alpha {config['lora_alpha']}, "
          f"max relative difference to the merged export {worst:.2e}")


if __name__ == "__main__":
    main(*sys.argv[1:4])
