#include "sampling.hpp"

#include <limits>

namespace arclight::model {

Draw draw_next(torch::Tensor logits, const Sampling& s, at::Generator& generator) {
  if (s.temperature <= 0) return {logits.argmax(-1, true), torch::log_softmax(logits, -1)};
  logits = logits / s.temperature;
  const float minus_infinity = -std::numeric_limits<float>::infinity();
  if (s.top_k > 0 && s.top_k < logits.size(-1)) {
    auto kth = std::get<0>(logits.topk(s.top_k, -1)).narrow(-1, s.top_k - 1, 1);
    logits = logits.masked_fill(logits < kth, minus_infinity);
  }
  if (s.top_p < 1.0) {
    // Keep the most likely tokens until their probability reaches top_p (the first one always).
    auto [sorted, order] = logits.sort(-1, /*descending=*/true);
    const auto probabilities = sorted.softmax(-1);
    const auto before = probabilities.cumsum(-1) - probabilities;
    logits = logits.scatter(-1, order, sorted.masked_fill(before >= s.top_p, minus_infinity));
  }
  auto logp = torch::log_softmax(logits, -1);
  return {torch::multinomial(logp.exp(), 1, false, generator), logp};
}

}  // namespace arclight::model
