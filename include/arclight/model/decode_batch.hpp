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
  std::optional<std::uint64_t> seed;      // the same seed and prompt draw the same tokens, whatever else runs
  int top_logprobs = 0;                   // also report the N most likely tokens at each position (0..20)
};

enum class FinishReason : std::uint8_t { none, stop, length };  // none: still running

struct SequenceToken {
  std::uint64_t sequence = 0;  // what add() returned
  std::int32_t token = 0;
  float logprob = 0;                                // under the distribution it was drawn from (as Policy::generate)
  std::vector<std::pair<std::int32_t, float>> top;  // the top_logprobs most likely, most likely first
  FinishReason finish = FinishReason::none;         // set on the sequence's last token
};

class DecodeBatch {
 public:
  // Room for max_sequences at once, each up to the model's max_seq tokens.
  DecodeBatch(Policy& policy, int max_sequences);
  ~DecodeBatch();
  DecodeBatch(const DecodeBatch&) = delete;
  DecodeBatch& operator=(const DecodeBatch&) = delete;

  // Queues a sequence; it joins at the next step(). Throws UsageError for an empty prompt, a token outside the
  // vocabulary, or a prompt that leaves no room for one new token.
  std::uint64_t add(SequenceRequest request);
  void cancel(std::uint64_t sequence);  // drops it (queued or live); no more tokens from it

  // One token for every live sequence (a newly joined one gets its first), at most one event per sequence.
  std::vector<SequenceToken> step();

  std::size_t live() const;    // joined and not finished
  std::size_t queued() const;  // added, waiting for a free row
  bool idle() const { return live() == 0 && queued() == 0; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace arclight::model
