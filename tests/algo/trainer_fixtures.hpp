#pragma once
// What the trainer tests train: a small scratch model, and random GRPO samples.
#include <random>
#include <vector>

#include "arclight/algo/sample.hpp"
#include "arclight/core/config.hpp"

inline arclight::ModelConfig trainer_test_model() {
  arclight::ModelConfig mc;
  mc.d_model = 32;
  mc.n_heads = 4;
  mc.d_ff = 64;
  mc.max_seq = 16;
  return mc;
}

// Unequal lengths (padding, uneven token counts per shard), actions on odd positions, behaviour log-probs and
// advantages drawn from `step`.

inline std::vector<arclight::algo::Sample> make_batch(int count, int vocab, int step) {
  std::mt19937 rng(1234 + step);
  std::vector<arclight::algo::Sample> batch;
  for (int i = 0; i < count; ++i) {
    arclight::algo::Sample s;
    const int length = 4 + i % 5;  // unequal lengths: padding and uneven token counts per shard
    for (int t = 0; t < length; ++t) {
      s.tokens.push_back(static_cast<std::int32_t>(rng() % vocab));
      s.action_mask.push_back(t > 0 && t % 2 == 1);
      s.behaviour_logprobs.push_back(-1.0f - 0.1f * (rng() % 10));
      s.temperatures.push_back(t % 3 == 0 ? 0.7f : 1.0f);                // an agent's own temperature on some calls
      s.advantages.push_back((static_cast<int>(rng() % 7) - 3) / 3.0f);  // unsigned, -3 wrapped to ~1.4e9
    }
    batch.push_back(s);
  }
  return batch;
}
