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
// prompt_ids, response_ids, logprobs, policy_version, and temperature: the one the log-probs were taken at
inline constexpr const char* llm = "llm";
inline constexpr const char* reward = "reward";  // reward, step
inline constexpr const char* result = "result";  // the episode's figures, each a number
// Agent Lightning's reward span, as outside agents send it (agentlightning.reward.0.value; the older forms too, see
// read_trajectory): the reward of the latest policy call before it that has none yet.
inline constexpr const char* agl_annotation = "agentlightning.annotation";
inline constexpr const char* agl_reward = "agentlightning.reward";  // the older explicit reward span: `reward`
}  // namespace span_names

struct Trajectory {
  struct Call {
    std::vector<std::int32_t> prompt, response;
    std::vector<float> logprobs;
    float temperature = 1;  // of the log-probs (before top-k and top-p)
    std::uint64_t policy_version = 0;
  };
  std::vector<Call> calls;                // in order
  std::vector<double> rewards;            // per call; a call without a reward span gets 0
  std::map<std::string, double> metrics;  // from the result span
  std::uint64_t oldest_version() const;
};

// Reads one attempt's spans (in sequence order). Throws DecodeError for a span that lacks
// what its name promises, or an llm span whose temperature is not a number of at least model::greedy_below; one
// without a temperature (written before spans recorded it) had `unrecorded_temperature`, grpo.temperature. Agent
// Lightning's rewards are read as its get_reward_value reads them, from a span of any name other than the three above:
// dimension 0 of agentlightning.reward.N.{name,value} (emit_reward puts the primary dimension first; the others are not
// trained on); else agentops.task.output / agentops.entity.output holding the JSON {"type": "reward", "value": x}; else
// the attribute `reward` on a span named agentlightning.reward (the explicit reward span of v0.2, which v0.3's
// LlmProxyTraceToTriplet still reads) or agentlightning.annotation. Each goes to the latest policy call before it that
// has no such reward yet, as its LlmProxyTraceToTriplet matches them
// ("first occurrence" by sequence); one with no such call is dropped. Agent Lightning's own LLM-call spans
// (openai.chat.completion ...) are not calls here: arclight's endpoint records every call it serves as an `llm` span,
// with the log-probs and the policy version that training needs and theirs lack.
Trajectory read_trajectory(const std::vector<store::Span>& spans, double unrecorded_temperature);
// Whether the trainers' forward takes each call: its token ids below `vocab_size`, its prompt and response together
// at most `max_seq` tokens. Throws DecodeError naming the first that does not (an outside agent's span is one
// rollout left out, never the job ended by the trainer it reaches).
void check_fits_model(const Trajectory& t, int vocab_size, int max_seq);

// One sequence for the whole trajectory: the last call's prompt and response, where every
// call's response tokens are actions and the environment's tokens are masked out. Each
// call's tokens get that call's advantage. Throws when a prompt does not extend the previous one.
Sample trajectory_sample(const Trajectory& trajectory, const std::vector<double>& call_advantages);
// One sample per policy call (transition level).
std::vector<Sample> transition_samples(const Trajectory& trajectory, const std::vector<double>& call_advantages);
// What a step trains on of one episode: its trajectory sample when `one_sequence`, else its transition samples; an
// episode that is not one sequence (a chat whose later prompts were made again from text: tokenized another way, or
// by a template that drops earlier reasoning) gives its transition samples too, and the reason in `not_one_sequence`.
// A call that produced nothing gives no sample.
std::vector<Sample> episode_samples(const Trajectory& trajectory, const std::vector<double>& call_advantages,
                                    bool one_sequence, std::string* not_one_sequence = nullptr);

// Action tokens in samples: what the loss averages over (position 0 is never predicted).
double action_tokens(const std::vector<Sample>& samples);

// The step's samples split among `trainers`, as near equal in tokens as a greedy pass makes them: longest first, each
// to the trainer with the fewest tokens so far (the largest shard within 4/3 of the best split's). Each trainer's
// backward ends in the all-reduce, which waits for the one with the most; a split by count gave one trainer all the
// long trajectories. Indices into samples, in their order within a shard; a trainer may get none. Throws
// std::invalid_argument for no trainers.
std::vector<std::vector<std::size_t>> token_balanced_shards(const std::vector<Sample>& samples, std::size_t trainers);

// The samples of one training step, as the coordinator sends them to a trainer.
std::string encode_samples(const std::vector<Sample>& samples);
std::vector<Sample> decode_samples(std::string_view bytes);  // throws DecodeError

}  // namespace arclight::algo
