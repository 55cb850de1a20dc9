#pragma once
// What a runner's HTTP endpoint needs from the runner rank besides generation: tracing policy calls into the
// attempts it runs, and the small task interface its agent processes use (a strict subset of Agent Lightning
// v0.3's store API). The app implements both on the runner's loop thread (which owns MPI); HTTP threads call them.
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "arclight/store/types.hpp"

namespace arclight::serve {

// A policy call made under /rollout/{rid}/attempt/{aid}/v1/... or with x-rollout-id and x-attempt-id.
struct TracedCall {
  store::RolloutId rollout_id = 0;
  store::AttemptId attempt_id = 0;
  std::vector<std::int32_t> prompt, response;
  std::vector<float> logprobs;  // each response token's before top-p (StreamedToken), at the temperature (1 if greedy)
  double temperature = 1.0;     // the request's (below 1e-5: greedy)
  std::uint64_t policy_version = 0;
};

class CallTracer {
 public:
  virtual ~CallTracer() = default;
  // Whether this runner runs that attempt now (else the endpoint answers 404 before generating).
  virtual bool running_here(store::RolloutId rollout, store::AttemptId attempt) = 0;
  virtual void record(TracedCall call) = 0;  // becomes an "llm" span of the attempt
};

class TaskBackend {
 public:
  virtual ~TaskBackend() = default;
  // Up to `limit` rollouts for `worker_id`, each with a new attempt; waits up to wait_seconds for one to come.
  // `caller`: the request's Basic authentication user ("" without), which runners set to each agent process's worker
  // id: the process they go to, whose death or hang fails them, where `worker_id` is a name the agent chose.
  // `client_gone` (HttpRequest::client_gone): true once the asking client has closed its connection; what
  // is taken for a client gone would wait in vain for it.
  virtual std::vector<store::AttemptedRollout> dequeue(const std::string& worker_id, const std::string& caller,
                                                       std::size_t limit, double wait_seconds,
                                                       const std::function<bool()>& client_gone) = 0;
  // A span of an attempt this runner runs (a reward, an episode's result); false if it runs no such attempt.
  virtual bool add_span(store::Span span) = 0;
  // The attempt's end (succeeded or failed) or a heartbeat (running); nullopt if this runner runs no such attempt.
  virtual std::optional<store::Attempt> update_attempt(store::RolloutId rollout, store::AttemptId attempt,
                                                       store::AttemptStatus status) = 0;
  // A worker's heartbeat (Agent Lightning's update_worker): for the process `caller` names when it is one of this
  // runner's, as dequeue; it keeps that worker's attempt alive.
  virtual store::Worker heartbeat(const std::string& worker_id, const std::string& caller) = 0;
};

}  // namespace arclight::serve
