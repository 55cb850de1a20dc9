#pragma once
// The adapter: an episode's spans become training samples.
#include <map>
#include <string>
#include <vector>

#include "arclight/algo/sample.hpp"
#include "arclight/store/types.hpp"

namespace arclight::algo {

// What runners record, span by span (see the app's tracer): the names and attributes read here.
namespace span_names {
inline constexpr const char* llm = "llm";        // prompt_ids, response_ids, logprobs, policy_version
inline constexpr const char* reward = "reward";  // reward, step
inline constexpr const char* result = "result";  // the episode's figures, each a number
// Agent Lightning's reward span (agentlightning.reward.0.value), as outside agents send it: the reward of the latest
// policy call before it.
inline constexpr const char* agl_annotation = "agentlightning.annotation";
}  // namespace span_names

struct Trajectory {
  struct Call {
    std::vector<std::int32_t> prompt, response;
    std::vector<float> logprobs;
    std::uint64_t policy_version = 0;
  };
  std::vector<Call> calls;                // in order
  std::vector<double> rewards;            // per call; a call without a reward span gets 0
  std::map<std::string, double> metrics;  // from the result span
  std::uint64_t oldest_version() const;
};

// Reads one attempt's spans (in sequence order). Throws DecodeError for a span that lacks
// what its name promises.
Trajectory read_trajectory(const std::vector<store::Span>& spans);

// One sequence for the whole trajectory: the last call's prompt and response, where every
// call's response tokens are actions and the environment's tokens are masked out. Each
// call's tokens get that call's advantage. Throws when a prompt does not extend the previous one.
Sample trajectory_sample(const Trajectory& trajectory, const std::vector<double>& call_advantages);
// One sample per policy call (transition level).
std::vector<Sample> transition_samples(const Trajectory& trajectory, const std::vector<double>& call_advantages);

// Action tokens in samples: what the loss averages over (position 0 is never predicted).
double action_tokens(const std::vector<Sample>& samples);

// The samples of one training step, as the coordinator sends them to a trainer.
std::string encode_samples(const std::vector<Sample>& samples);
std::vector<Sample> decode_samples(std::string_view bytes);  // throws DecodeError

}  // namespace arclight::algo
