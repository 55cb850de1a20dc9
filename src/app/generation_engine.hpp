#pragma once
// The policy behind an OpenAI-compatible endpoint (app-private): requests from HTTP threads join a continuous batch
// (model::DecodeBatch) that the thread owning the policy steps. New weights are loaded only between responses:
// drain() lets the live sequences, and the rest of a response some of whose choices are live, finish on the old
// version while new responses wait, then resume() admits them again, so no response mixes two policy versions.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "arclight/model/decode_batch.hpp"
#include "arclight/serve/generator.hpp"

namespace arclight::app {

class GenerationEngine : public serve::Generator {
 public:
  // Starts drained: nothing is answered before the first resume() names the weights' version.
  GenerationEngine(model::Policy& policy, int rows);

  // Any thread. Throws UsageError for a request the model cannot answer, serve::HttpError 503 once closed.
  std::vector<std::shared_ptr<serve::GenerationStream>> submit_group(
      std::vector<serve::GenerationRequest> requests) override;

  // The owning thread only. One decode step for every live sequence, after admitting waiting requests (unless
  // draining) and dropping cancelled ones; false when there was nothing to do. A step that throws (out of memory)
  // ends the requests in the batch with its error and the engine serves on with an empty batch.
  bool step();
  void drain() { draining_ = true; }
  bool drained() const { return draining_ && !admitting_ && batch_->idle(); }
  void resume(std::uint64_t policy_version);
  // Ends every waiting and live request with an error (the job ends); their readers stop waiting, and later requests
  // are refused.
  void close(const std::string& why);
  // Waits up to `seconds` for a request to arrive (the owner's idle sleep).
  void wait_for_work(double seconds);
  std::uint64_t tokens_generated() const { return tokens_; }

 private:
  // A request of a response (its group: a response's requests wait side by side).
  struct Waiting {
    serve::GenerationRequest request;
    std::shared_ptr<serve::GenerationStream> stream;
    std::uint64_t group;
  };
  void check(const serve::GenerationRequest& request) const;
  model::SequenceRequest sequence_of(serve::GenerationRequest request) const;
  void admit();
  void drop_cancelled();
  void deliver(const model::SequenceToken& token);
  void fail_batch(const std::string& why);

  model::Policy& policy_;
  std::unique_ptr<model::DecodeBatch> batch_;  // a new one after a step that failed
  const int rows_, vocab_, max_seq_;
  std::mutex mutex_;                   // guards waiting_ and closed_
  std::optional<std::string> closed_;  // why, once closed: later requests are refused (503)
  std::condition_variable arrived_;
  std::deque<Waiting> waiting_;
  std::uint64_t groups_ = 0;  // responses submitted
  // The response some of whose requests are live and the rest wait for rows: admitted while draining too.
  std::optional<std::uint64_t> admitting_;
  std::map<std::uint64_t, std::shared_ptr<serve::GenerationStream>> live_;  // by DecodeBatch sequence
  std::uint64_t version_ = 0, tokens_ = 0;
  bool draining_ = true;
};

}  // namespace arclight::app
