// libFuzzer target for config.json's parser (parse_hf_config). Whatever it accepts must hold its promise: sizes
// positive, the kv heads dividing the heads, an even head_dim, token ids inside the vocabulary, and, for a model of
// a bounded number of layers, the expected tensors all of positive dimensions; RoPE scaling of a known kind, its
// factor at least 1 and YaRN's scale of cos and sin positive and finite.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "arclight/model/hf_model.hpp"

using namespace arclight::model;

namespace {

void check(const HfConfig& c) {
  if (c.vocab_size <= 0 || c.hidden_size <= 0 || c.intermediate_size <= 0 || c.num_hidden_layers <= 0 ||
      c.num_attention_heads <= 0 || c.num_key_value_heads <= 0 || c.head_dim <= 0 || c.head_dim % 2 != 0 ||
      c.num_attention_heads % c.num_key_value_heads != 0 || !(c.rms_norm_eps > 0) || !(c.rope_theta > 0))
    std::abort();
  for (int id : c.eos_token_ids)
    if (id < 0 || id >= c.vocab_size) std::abort();
  if (const auto& s = c.rope_scaling) {
    if (s->type != "llama3" && s->type != "linear" && s->type != "yarn") std::abort();
    if (!(s->factor >= 1) || !std::isfinite(s->factor)) std::abort();
    if (s->type != "linear" && s->original_max_position_embeddings <= 0) std::abort();
    if (!(s->beta_fast > 0) || !(s->beta_slow > 0) || !(s->attention_factor > 0) || !std::isfinite(s->attention_factor))
      std::abort();
  }
  if (c.num_hidden_layers > 64) return;  // the tensor list grows with the layers
  for (const ExpectedTensor& t : expected_tensors(c))
    for (std::int64_t d : t.shape)
      if (d <= 0) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    check(parse_hf_config(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz/config.json"));
  } catch (const ModelFileError&) {
    // refused, as it should be; any other exception escapes and libFuzzer reports it
  }
  return 0;
}
