#pragma once
#include <cstdint>
#include <vector>

namespace arclight::algo {

// One training sequence: a whole trajectory, or one policy call.
struct Sample {
  std::vector<std::int32_t> tokens;
  std::vector<std::uint8_t> action_mask;  // 1 where the policy produced the token: trained on
  std::vector<float> behaviour_logprobs;  // per token; meaningful where action_mask is 1
  std::vector<float> advantages;          // per token; meaningful where action_mask is 1
  std::uint64_t policy_version = 0;       // the version that produced it
};

}  // namespace arclight::algo
