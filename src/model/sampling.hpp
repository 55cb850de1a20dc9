#pragma once
// Drawing the next token from a forward's logits, one function for Policy::generate and DecodeBatch: both report
// log-probs under the distribution the token was drawn from. Private to the model module.
#include <torch/types.h>

#include "arclight/model/policy.hpp"

namespace arclight::model {

struct Draw {
  torch::Tensor tokens;    // [B, 1] int64
  torch::Tensor logprobs;  // [B, vocab] float32: the distribution they were drawn from
  // [B, vocab]: the model's distribution at the sampling's temperature (logprob_temperature), before top-k and top-p;
  // what training compares the policy's with. The same tensor as logprobs when neither cut anything.
  torch::Tensor untruncated;
  torch::Tensor chosen() const { return logprobs.gather(1, tokens); }  // [B, 1]: the drawn tokens' log-probs
  torch::Tensor chosen_untruncated() const { return untruncated.gather(1, tokens); }
};

// One token per row of logits [B, vocab]: the most likely for greedy (below greedy_below; the distribution is the
// model's own), else drawn from `generator` after temperature, top-k and top-p.
Draw draw_next(torch::Tensor logits, const Sampling& sampling, at::Generator& generator);

}  // namespace arclight::model
