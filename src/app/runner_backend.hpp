#pragma once
// What a runner of outside agents keeps for its endpoint (app-private): the attempts its agents hold (AttemptBook),
// and the store side of the endpoint's traced calls and task interface (RunnerBackend), which HTTP threads call.
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "arclight/serve/runner_api.hpp"
#include "arclight/store/span_batcher.hpp"
#include "roles.hpp"

namespace arclight::app {

using AttemptKey = std::pair<store::RolloutId, store::AttemptId>;

// The attempts this rank's agents hold, and which worker holds each: a dead or hung worker's attempts fail.
class AttemptBook {
 public:
  // Its episode's clock starts when the agent gets it (start_clocks), after the wait for its policy version.
  void hold(const store::AttemptedRollout& ar, const std::string& worker);
  bool holds(store::RolloutId r, store::AttemptId a);
  // The attempt of rollout `r` held here (a rollout runs one attempt at a time), if any: what "latest" names.
  std::optional<store::AttemptId> held_attempt_of(store::RolloutId r);
  bool release(store::RolloutId r, store::AttemptId a);
  // Releases and returns the attempts `worker` took before `ended_at`: those after are its restart's (the same id).
  std::vector<AttemptKey> release_worker(const std::string& worker, Stopwatch::time_point ended_at);
  // The episode's clock of each starts now: the wait for their policy version is not the agent's time. Attempts
  // handed over together have as many episodes' time.
  void start_clocks(const std::vector<store::AttemptedRollout>& attempts);
  struct Held {
    std::string worker;
    Stopwatch::time_point taken;  // from the store
    Stopwatch::time_point since;  // the episode's start: handed to the agent
    std::size_t handed_with = 1;  // the attempts handed over together (one dequeue): the agent may play them in turn
  };
  // Releases and returns the attempts held longer than `seconds` for each attempt handed over with them.
  std::vector<std::pair<AttemptKey, Held>> release_older_than(double seconds);

 private:
  template <class Predicate>
  std::vector<std::pair<AttemptKey, Held>> release_if(Predicate matches);

  std::mutex mutex_;
  std::map<AttemptKey, Held> held_;
};

// Ends the attempts as failed (the rollout's retry rule decides what follows), after the spans buffered before them.
void fail_attempts(store::SpanBatcher& spans, const std::vector<AttemptKey>& attempts);

// What the endpoint's traced calls and the task interface do to the store, on HTTP threads.
class RunnerBackend : public serve::TaskBackend, public serve::CallTracer {
 public:
  // `worker_prefix`: what the worker ids of this runner's agent processes begin with ("runner-<rank>-w").
  RunnerBackend(store::Store& store, store::SpanBatcher& spans, AttemptBook& book,
                const std::atomic<std::uint64_t>& version, std::string worker_prefix)
      : store_(store), spans_(spans), book_(book), version_(version), worker_prefix_(std::move(worker_prefix)) {}

  std::vector<store::AttemptedRollout> dequeue(const std::string& worker_id, const std::string& caller,
                                               std::size_t limit, double wait_seconds,
                                               const std::function<bool()>& client_gone) override;
  bool add_span(store::Span span) override;
  std::optional<store::Attempt> update_attempt(store::RolloutId rollout, store::AttemptId attempt,
                                               store::AttemptStatus status) override;
  store::Worker heartbeat(const std::string& worker_id, const std::string& caller) override;
  bool running_here(store::RolloutId rollout, store::AttemptId attempt) override;
  void record(serve::TracedCall call) override;

 private:
  // A rollout runs with the policy version it was enqueued under, or a newer one (the broadcast may be on its way);
  // no longer than its client is there, and at most version_wait_seconds: then on what the runner has.
  static constexpr int version_wait_seconds = 20;
  void wait_for_version(const std::vector<store::AttemptedRollout>& got, const std::function<bool()>& gone);
  // The process that asks: its credentials' user when that is one of this runner's workers (an agent of its own may
  // send any, or none), else the name it gives. The store knows the worker by it: Agent Lightning's runners all name
  // themselves Worker-0, and one worker record's heartbeats kept only the attempt taken last alive, job-wide.
  const std::string& holder_of(const std::string& worker_id, const std::string& caller) const;

  store::Store& store_;
  store::SpanBatcher& spans_;
  AttemptBook& book_;
  const std::atomic<std::uint64_t>& version_;
  const std::string worker_prefix_;  // "runner-<rank>-w"
  RequiredVersions required_{store_};
};

}  // namespace arclight::app
