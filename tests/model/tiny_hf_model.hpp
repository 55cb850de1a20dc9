#pragma once
// Tiny Hugging Face model directories for the model tests: config.json as given and every tensor the config implies
// as float32 safetensors, each element's value chosen by the caller.
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "../temp_dir.hpp"
#include "arclight/model/hf_model.hpp"

// Qwen3: q/k norms, grouped-query attention, head_dim apart from hidden / heads, tied embeddings.
inline const std::string tiny_qwen3_config = R"({"architectures": ["Qwen3ForCausalLM"], "vocab_size": 40,
    "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 8, "tie_word_embeddings": true, "max_position_embeddings": 128})";

// value(tensor index in expected_tensors, element index); the first tensor is left out when drop_first_tensor.
inline void write_tiny_hf_model(const TempDir& dir, const std::string& config_json,
                                const std::function<float(std::size_t, std::size_t)>& value,
                                bool drop_first_tensor = false) {
  using namespace arclight::model;
  std::ofstream(dir.file("config.json")) << config_json;
  const auto expected = expected_tensors(read_hf_config(dir.dir()));
  std::vector<std::vector<float>> values(expected.size());
  std::vector<TensorToWrite> tensors;
  for (std::size_t t = 0; t < expected.size(); ++t) {
    std::size_t n = 1;
    for (auto d : expected[t].shape) n *= static_cast<std::size_t>(d);
    for (std::size_t i = 0; i < n; ++i) values[t].push_back(value(t, i));
    if (t > 0 || !drop_first_tensor)
      tensors.push_back({expected[t].name, DType::f32, expected[t].shape, values[t].data(), n * sizeof(float)});
  }
  write_safetensors(dir.file("model.safetensors"), tensors);
}

// Every tensor holds its index in expected_tensors.
inline void write_tiny_qwen3(const TempDir& dir, bool drop_first_tensor = false) {
  write_tiny_hf_model(
      dir, tiny_qwen3_config, [](std::size_t t, std::size_t) { return static_cast<float>(t); }, drop_first_tensor);
}
