#pragma once
// What the HTTP endpoint needs from the policy, without LibTorch: a Generator takes token ids and answers with a
// stream of tokens. The app implements it over model::DecodeBatch (continuous batching) on the thread that owns the
// policy; HTTP threads submit and read streams.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace arclight::serve {

struct GenerationRequest {
  std::vector<std::int32_t> prompt;
  int max_tokens = 16;
  double temperature = 1.0;  // 0: greedy
  double top_p = 1.0;
  int top_k = 0;                          // 0: the whole vocabulary
  std::vector<std::int32_t> stop_tokens;  // generation ends after drawing one of these
  std::optional<std::uint64_t> seed;
  int top_logprobs = 0;  // 0..20
};

struct StreamedToken {
  std::int32_t id = 0;
  float logprob = 0;  // under the distribution it was drawn from (temperature, top-p)
  // At the temperature, before top-p: what a trace records, what training compares the policy's log-probs with
  float untruncated_logprob = 0;
  std::vector<std::pair<std::int32_t, float>> top;  // most likely first
};

enum class Finish : std::uint8_t { running, stop, length, cancelled, error };

// One request's answer. The engine pushes tokens and finishes it once; a reader pulls. Thread-safe.
class GenerationStream {
 public:
  // Engine side. The policy version is that of every token of the stream (a stream never mixes versions).
  void push(StreamedToken token, std::uint64_t policy_version);
  void finish(Finish reason, std::string error = "");
  // Reader side: waits up to `timeout` for new tokens and moves them into `out`. False once the stream is finished
  // and every token has been read.
  bool next(std::vector<StreamedToken>& out, std::chrono::milliseconds timeout);
  // The reader gives up (client gone, stop string matched): the engine drops the sequence at its next step.
  void cancel();
  bool cancelled() const;
  Finish finish_reason() const;
  std::string error() const;
  std::uint64_t policy_version() const;

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<StreamedToken> pending_;
  Finish finish_ = Finish::running;
  std::string error_;
  std::uint64_t version_ = 0;
  bool cancelled_ = false;
};

class Generator {
 public:
  virtual ~Generator() = default;
  // Thread-safe. The requests of one response (its n choices, its prompts), answered under one policy version, one
  // stream each in their order. Throws, taking none, UsageError for a request it cannot run (a prompt that leaves no
  // room to answer, a token outside the vocabulary): the endpoint answers 400; HttpError for one it will not (a
  // generator closed: 503).
  virtual std::vector<std::shared_ptr<GenerationStream>> submit_group(std::vector<GenerationRequest> requests) = 0;
  // A response of one request.
  std::shared_ptr<GenerationStream> submit(GenerationRequest request);
};

}  // namespace arclight::serve
