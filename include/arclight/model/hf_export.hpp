#pragma once
// Trained weights out as a Hugging Face model directory that transformers and vLLM load: the source model's
// config.json, generation_config.json and tokenizer files copied, the weights as safetensors (one file, or shards of
// at most max_shard_bytes with model.safetensors.index.json). No LibTorch: the weights arrive as float32 buffers.
#include <cstdint>
#include <string>
#include <vector>

#include "arclight/model/architecture.hpp"
#include "arclight/model/safetensors.hpp"

namespace arclight::model {

struct NamedWeights {
  std::string name;  // transformers' state-dict name
  const float* data = nullptr;
  std::size_t size = 0;
};

struct ExportOptions {
  std::uint64_t max_shard_bytes = 5'000'000'000;  // transformers' default max_shard_size, "5GB"
  // The weights' type: "float32", "bfloat16" or "float16", written into config.json's dtype and torch_dtype keys,
  // those it has (torch_dtype where it has neither); empty: the source's (a run trained in float32 on a bfloat16 model
  // is rounded).
  std::string dtype;
};

struct ExportReport {
  std::vector<std::string> files;  // every file written, by name
  std::uint64_t weight_bytes = 0;
  DType dtype = DType::f32;
};

// Writes `weights` (each checked against the tensors config.json implies: every one there, with its element count)
// into `out_dir`, in the dtype config.json's torch_dtype names (float32, bfloat16 rounded to nearest even, float16;
// float32 when absent), with the source directory's config and tokenizer files. `out_dir` must not exist or be
// empty; the files appear under a temporary name first and the directory is renamed into place when complete.
// Throws ModelFileError (source directory, weights that do not fit) or Error (I/O).
ExportReport export_hf(const std::string& source_model_dir, const std::vector<NamedWeights>& weights,
                       const std::string& out_dir, const ExportOptions& options = {});

// A LoRA run's adapters as PEFT saves them, which PEFT's PeftModel.from_pretrained and vLLM's LoRA loading read:
// adapter_config.json (peft_type LORA, r, lora_alpha, target_modules as module names, base_model_name_or_path) and
// adapter_model.safetensors with the tensors named "base_model.model.<name>" in float32 (lossless: adapters train in
// float32 here). `adapters` must be exactly the lora_A / lora_B of every target projection of every layer of the source
// model, each sized by it (A: rank x in, B: out x rank). The directory appears whole, as export_hf's does.
ExportReport export_peft_adapter(const std::string& source_model_dir, const LoraSpec& lora,
                                 const std::vector<NamedWeights>& adapters, const std::string& out_dir);

// float32 -> bfloat16 / float16 bits, rounding to nearest even (NaN stays NaN), as torch's .to() does.
std::uint16_t to_bfloat16(float value);
std::uint16_t to_float16(float value);

}  // namespace arclight::model
