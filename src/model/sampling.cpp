#include "sampling.hpp"

#include <limits>

namespace arclight::model {

namespace {

// One token per row of log-probs [B, vocab], by inverting the cumulative distribution at a uniform draw. The draws come
// from a CPU generator whatever the logits' device (a number per row and step), so a seed draws the same numbers on a
// CPU and on a GPU, and a policy needs no generator of its device. The first token whose cumulative probability
// exceeds u times the total: never one of probability zero.
torch::Tensor draw_from(const torch::Tensor& logp, at::Generator& generator) {
  const auto cumulative = logp.exp().to(torch::kDouble).cumsum(-1);
  const auto total = cumulative.narrow(-1, cumulative.size(-1) - 1, 1);
  const auto u = torch::rand({logp.size(0), 1}, generator, torch::kDouble).to(logp.device());
  return torch::searchsorted(cumulative, u * total, /*out_int32=*/false, /*right=*/true).clamp_max(logp.size(-1) - 1);
}

}  // namespace

Draw draw_next(torch::Tensor logits, const Sampling& s, at::Generator& generator) {
  if (s.temperature < greedy_below) {
    auto logp = torch::log_softmax(logits, -1);
    return {logits.argmax(-1, true), logp, logp};
  }
  logits = logits / s.temperature;
  const auto untruncated = torch::log_softmax(logits, -1);
  const float minus_infinity = -std::numeric_limits<float>::infinity();
  bool truncated = false;
  if (s.top_k > 0 && s.top_k < logits.size(-1)) {
    auto kth = std::get<0>(logits.topk(s.top_k, -1)).narrow(-1, s.top_k - 1, 1);
    logits = logits.masked_fill(logits < kth, minus_infinity);
    truncated = true;
  }
  if (s.top_p < 1.0) {
    // Keep the most likely tokens until their probability reaches top_p (the first one always).
    auto [sorted, order] = logits.sort(-1, /*descending=*/true);
    const auto probabilities = sorted.softmax(-1);
    const auto before = probabilities.cumsum(-1) - probabilities;
    // The first column is never dropped: a top_p that rounds to 0 in float (below ~1e-45) would drop every token.
    auto drop = before >= s.top_p;
    drop.narrow(-1, 0, 1).fill_(false);
    logits = logits.scatter(-1, order, sorted.masked_fill(drop, minus_infinity));
    truncated = true;
  }
  auto logp = truncated ? torch::log_softmax(logits, -1) : untruncated;
  return {draw_from(logp, generator), logp, untruncated};
}

}  // namespace arclight::model
