#pragma once
// The model configurations the model tests share: a small scratch decoder, and Hugging Face directories of random
// weights.
#include <random>
#include <string>

#include "arclight/core/config.hpp"
#include "tiny_hf_model.hpp"

inline arclight::ModelConfig small(arclight::Positions positions = arclight::Positions::rotary) {
  arclight::ModelConfig c;
  c.d_model = 32;
  c.n_layers = 2;
  c.n_heads = 4;
  c.d_ff = 64;
  c.max_seq = 24;
  c.positions = positions;
  return c;
}

inline arclight::ModelConfig hf_model(const TempDir& dir) {
  arclight::ModelConfig c;
  c.source = arclight::ModelSource::hf;
  c.path = dir.dir();
  c.max_seq = 32;
  return c;
}

// Every element drawn from N(0, 0.3²), the same for the same config.
inline void write_random_hf_model(const TempDir& dir, const std::string& config_json) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0, 0.3f);
  write_tiny_hf_model(dir, config_json, [&](std::size_t, std::size_t) { return normal(rng); });
}
