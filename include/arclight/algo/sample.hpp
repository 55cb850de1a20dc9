#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace arclight::algo {

// One training sequence: a whole trajectory, or one policy call.
struct Sample {
  std::vector<std::int32_t> tokens;
  std::vector<std::uint8_t> action_mask;  // 1 where the policy produced the token: trained on
  std::vector<float> behaviour_logprobs;  // per token; meaningful where action_mask is 1
  // Per token: the sampling temperature its behaviour log-prob was taken at; the loss takes the policy's at it too.
  // Meaningful where action_mask is 1 (1 elsewhere).
  std::vector<float> temperatures;
  std::vector<float> advantages;     // per token; meaningful where action_mask is 1
  std::uint64_t policy_version = 0;  // the version that produced it

  bool sizes_agree() const {  // one value per token in each per-token vector
    const std::size_t n = tokens.size();
    return action_mask.size() == n && behaviour_logprobs.size() == n && temperatures.size() == n &&
           advantages.size() == n;
  }
};

}  // namespace arclight::algo
