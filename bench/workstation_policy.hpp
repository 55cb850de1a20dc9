#pragma once
// The workstation policy's shape (configs/workstation.toml's model) with room for max_seq tokens, for the
// generation benchmarks.
#include "arclight/core/config.hpp"

inline arclight::ModelConfig workstation_policy(int max_seq) {
  arclight::ModelConfig mc;
  mc.d_model = 64;
  mc.n_layers = 2;
  mc.n_heads = 4;
  mc.d_ff = 256;
  mc.max_seq = max_seq;
  return mc;
}
