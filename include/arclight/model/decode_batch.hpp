#pragma once
// Continuous batching: sequences join the running decode batch at the next step and leave it when they end, each
// with its own prompt length, sampling, seed and stop tokens. One step advances every live sequence by one token in
// one forward pass over a slot KV cache (a row per sequence, its own length); a new sequence's prompt is prefilled
// into its row first. Not thread-safe: one thread (the runner's loop, or `arclight serve`'s engine) owns it.
// No LibTorch in this header.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "arclight/model/policy.hpp"

namespace arclight::model {

struct SequenceRequest {
  std::vector<std::int32_t> prompt;  // at least one token
  int max_new_tokens = 16;           // at least 1; prompt + max_new_tokens is capped at the model's max_seq
  Sampling sampling;
  std::vector<std::int32_t> stop_tokens;  // the sequence ends with the first of these it draws (included)
  // The same seed and prompt draw the same random numbers whatever else runs; the tokens are the same where the
  // logits are (float32 on the CPU): in a busy batch the prompt is padded and attention spans other rows' lengths,
  // which changes reductions' order, and on a GPU the kernels, within rounding.
  std::optional<std::uint64_t> seed;
  int top_logprobs = 0;  // also report the N most likely tokens at each position (0..20)
};

enum class FinishReason : std::uint8_t { none, stop, length };  // none: still running

struct SequenceToken {
  std::uint64_t sequence = 0;  // what add() returned
  std::int32_t token = 0;
  float logprob = 0;  // under the distribution it was drawn from (as Policy::generate)
  // Under the model's distribution at the sampling's temperature, before top-k and top-p (logprob_temperature): what
  // training compares with. The same as logprob when neither cut anything.
  float untruncated_logprob = 0;
  // The top_logprobs most likely under that distribution, most likely first (-inf: ruled out by top-k / top-p).
  std::vector<std::pair<std::int32_t, float>> top;
  FinishReason finish = FinishReason::none;  // set on the sequence's last token
};

// Refuses (UsageError naming what is wrong) a request no step could serve: DecodeBatch::add's check, which a caller on
// another thread makes first to answer it at once.
void check_request(const SequenceRequest& r, const Architecture& a);

class DecodeBatch {
 public:
  // Room for max_sequences at once, each up to the model's max_seq tokens (the KV cache is allocated here). Decodes
  // with the policy's current weights; unseeded sequences draw from its generator (seed_sampling). The policy must
  // outlive it. UsageError for max_sequences < 1. A prefill holds at most `prefill_scores` attention scores (rows x
  // heads x queries x keys; 2^26, 256 MB in float32): prompts of similar length share one up to it, and a prompt
  // longer than it allows goes in chunks of queries.
  static constexpr std::int64_t default_prefill_scores = std::int64_t{1} << 26;
  DecodeBatch(Policy& policy, int max_sequences, std::int64_t prefill_scores = default_prefill_scores);
  ~DecodeBatch();
  DecodeBatch(const DecodeBatch&) = delete;
  DecodeBatch& operator=(const DecodeBatch&) = delete;

  // Queues a sequence; it joins at the next step() with a free row. Throws UsageError for an empty prompt, a prompt
  // or stop token outside the vocabulary, a prompt that leaves no room for one new token, max_new_tokens < 1,
  // top_logprobs outside 0..20, or a negative temperature or top_k, or top_p outside (0, 1].
  std::uint64_t add(SequenceRequest request);
  void cancel(std::uint64_t sequence);  // drops it (queued or live); no more tokens from it. Unknown/ended: no-op

  // One token for every live sequence (a newly joined one gets its first), at most one event per sequence. The live
  // ones advance first, then queued ones join free rows (one that ends on joining frees its row at once).
  std::vector<SequenceToken> step();

  std::size_t live() const;    // joined and not finished
  std::size_t queued() const;  // added, waiting for a free row
  bool idle() const { return live() == 0 && queued() == 0; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace arclight::model
