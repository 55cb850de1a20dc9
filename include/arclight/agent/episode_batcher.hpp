#pragma once
// Runs many episodes at once and batches their policy calls into one forward pass. Each
// episode runs on a stack of its own (a fiber, Boost.Context) on the caller's thread and is
// suspended in generate(); when every live episode waits, the batcher serves all their calls
// together, grouped by prompt length, and resumes each with its answer. One episode at a time
// would leave the hardware idle; a thread per episode spent more CPU time switching threads
// than computing. A batch's rows are in episode order: with a seeded policy, the same episodes
// sample the same tokens.
#include <functional>
#include <memory>
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

  // Runs every episode to its end, each given an Llm backed by the shared policy. An episode's
  // exception is caught and returned in its slot (nullptr: it ended normally). Episodes must
  // not block on each other: they share the caller's thread.
  std::vector<std::exception_ptr> run(const std::vector<std::function<void(Llm&)>>& episodes);

  // Between runs only: the policy's weights and version change together.
  void set_policy_version(std::uint64_t version) { version_ = version; }
  void set_sampling(const model::Sampling& sampling) { sampling_ = sampling; }
  // Called after each batch of policy calls: a runner keeps its weight channel moving through a long batch.
  void set_between_calls(std::function<void()> between_calls) { between_calls_ = std::move(between_calls); }
  std::uint64_t policy_calls() const { return calls_; }
  std::uint64_t batches() const { return batches_; }  // generate calls on the policy

  struct Episode;    // one episode's fiber and its pending call (episode_batcher.cpp)
  struct StackPool;  // the episodes' stacks, kept from one run to the next

 private:
  void serve(std::vector<Episode*>& waiting);

  model::Policy& policy_;
  model::Sampling sampling_;
  std::uint64_t version_;
  std::uint64_t calls_ = 0, batches_ = 0;
  std::function<void()> between_calls_;
  std::unique_ptr<StackPool> stacks_;
};

}  // namespace arclight::agent
