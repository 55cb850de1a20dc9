#pragma once
// RoPE's frequencies and the decoder's cos and sin tables, as each architecture's scaling makes them (private to the
// model module).
#include <torch/types.h>

#include <utility>

#include "arclight/model/architecture.hpp"

namespace arclight::model {

// RoPE's inverse frequencies, [head_dim / 2] float32: theta^(-2i / head_dim), rescaled as Llama 3.1 does when the
// architecture says llama3 (transformers' _compute_llama3_parameters), divided by the factor when linear, blended
// between kept and divided by the factor when yarn (whose attention_factor scales the tables, not these).
torch::Tensor rope_inverse_frequencies(const Architecture& a);

// cos and sin of each position's angles, [max_seq, head_dim / 2] float32, times YaRN's attention_factor.
std::pair<torch::Tensor, torch::Tensor> rope_tables(const Architecture& a);

}  // namespace arclight::model
