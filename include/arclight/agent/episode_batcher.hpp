#pragma once
// Runs many episodes at once and batches their policy calls into one forward pass:
// each episode runs on a thread of its own (kept from run to run) and blocks in generate(); when every live
// episode is waiting, the batcher serves all their calls together, grouped by prompt
// length. One episode at a time would leave the hardware idle. A batch's rows are in episode
// order, whatever order the threads arrived in: with a seeded policy, the same episodes
// sample the same tokens.
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "arclight/agent/agent.hpp"
#include "arclight/model/policy.hpp"

namespace arclight::agent {

class EpisodeBatcher {
 public:
  EpisodeBatcher(model::Policy& policy, model::Sampling sampling, std::uint64_t policy_version);
  ~EpisodeBatcher();
  EpisodeBatcher(const EpisodeBatcher&) = delete;
  EpisodeBatcher& operator=(const EpisodeBatcher&) = delete;

  // Runs every episode to its end, each given an Llm backed by the shared policy.
  // An episode's exception is caught and returned in its slot (nullptr: it ended normally).
  std::vector<std::exception_ptr> run(const std::vector<std::function<void(Llm&)>>& episodes);

  // Between runs only: the policy's weights and version change together.
  void set_policy_version(std::uint64_t version) { version_ = version; }
  void set_sampling(const model::Sampling& sampling) { sampling_ = sampling; }
  std::uint64_t policy_calls() const { return calls_; }
  std::uint64_t batches() const { return batches_; }  // generate calls on the policy

 private:
  struct Request {
    std::size_t episode;
    const std::vector<std::int32_t>* prompt;
    int max_new_tokens;
    LlmResponse response;
    std::exception_ptr error;  // the forward pass failed: the episode sees the exception
    bool done = false;
  };
  class Handle;
  LlmResponse submit(std::size_t episode, const std::vector<std::int32_t>& prompt, int max_new_tokens);
  void serve(std::vector<Request*>& batch);
  void work();  // an episode thread: runs jobs until the batcher closes
  // Under mutex_: every live episode waits for the policy (or none is left).
  bool batch_ready() const { return live_ == 0 || static_cast<int>(pending_.size()) == live_; }

  model::Policy& policy_;
  model::Sampling sampling_;
  std::uint64_t version_;
  std::mutex mutex_;
  std::condition_variable to_batcher_;
  std::vector<Request*> pending_;
  std::vector<std::condition_variable> answered_;  // by episode: its request was served
  int live_ = 0;
  std::deque<std::function<void()>> jobs_;  // episodes no thread has taken yet
  std::condition_variable to_workers_;
  bool closing_ = false;
  std::vector<std::thread> workers_;  // last: joined before the rest goes
  std::uint64_t calls_ = 0, batches_ = 0;
};

}  // namespace arclight::agent
