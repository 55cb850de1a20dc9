#pragma once
#include <string>
#include <vector>

#include "arclight/store/types.hpp"

namespace arclight::store {

// The rollout store. MemoryStore holds it on rank 0; the MPI client on the
// other ranks implements the same interface, so a caller cannot tell which it has.
// Refusals throw StoreError.
class Store {
 public:
  virtual ~Store() = default;

  // ---- the queue ----
  virtual std::vector<Rollout> enqueue(std::vector<NewRollout> rollouts) = 0;
  // Up to max_count rollouts, first in first out over queuing and requeuing; each gets a new attempt.
  virtual std::vector<AttemptedRollout> dequeue(const std::string& worker_id, std::size_t max_count) = 0;
  // A rollout that skips the queue: created with its first attempt already started.
  virtual AttemptedRollout start_rollout(NewRollout rollout, const std::string& worker_id) = 0;
  // A manual retry: a new attempt of a rollout that has not ended.
  virtual AttemptedRollout start_attempt(RolloutId rollout_id, const std::string& worker_id) = 0;

  // ---- spans and updates ----
  // Stores spans and returns their sequence ids, in order; 0 for a span that was refused
  // (its attempt timed out or ended, its rollout ended, or they do not exist) or kept already: a span whose
  // span id its attempt holds is a client's retry, kept once (Agent Lightning's rule).
  // A span is a heartbeat of its attempt; the first moves a preparing attempt to running
  // and revives an unresponsive one.
  virtual std::vector<std::uint64_t> add_spans(std::vector<Span> spans) = 0;
  // Stores one span and returns its sequence id, or 0 when its attempt holds its span id already; throws
  // StoreError, saying why, when it is refused.
  virtual std::uint64_t add_span(Span span) = 0;
  // Reserves the next sequence id of a rollout's counter (for a span to come, or a policy call
  // whose spans share it); throws StoreError when there is no such rollout.
  virtual std::uint64_t next_sequence_id(RolloutId rollout_id) = 0;
  virtual Attempt update_attempt(RolloutId rollout_id, AttemptId attempt_id, const AttemptUpdate& update) = 0;
  // Many update_attempt calls in order, as one request (a runner ends a batch of episodes at
  // once): a refused report leaves the others standing and says why in its outcome.
  virtual std::vector<ReportOutcome> update_attempts(const std::vector<AttemptReport>& reports);
  // add_spans, then update_attempts, as one request: a runner ends a batch of episodes with the spans still to send,
  // which never arrive after their attempts' ends.
  virtual AttemptsEnded end_attempts(std::vector<Span> spans, const std::vector<AttemptReport>& ends);
  virtual Rollout update_rollout(RolloutId rollout_id, const RolloutUpdate& update) = 0;

  // ---- queries ----
  virtual Page<Rollout> query_rollouts(const RolloutFilter& filter, Paging paging) = 0;
  // Attempts in id order (so a rollout's come in sequence).
  virtual Page<Attempt> query_attempts(const AttemptFilter& filter, Paging paging) = 0;
  virtual Attempt get_latest_attempt(RolloutId rollout_id) = 0;
  virtual Page<Span> query_spans(const SpanFilter& filter, Paging paging) = 0;

  // ---- resources: immutable, versioned by name ----
  virtual ResourcesVersion add_resources(const std::string& name, std::string content) = 0;     // a new name
  virtual ResourcesVersion update_resources(const std::string& name, std::string content) = 0;  // its next version
  virtual ResourcesVersion get_resources(ResourcesId id) = 0;
  // Versions by id, in the order asked, with their content (those that left rank 0's memory read back from the
  // checkpoint in one pass, where one get_resources each walks its history each); an id not held is not_found.
  virtual std::vector<ResourcesVersion> get_resources(const std::vector<ResourcesId>& ids) = 0;
  // Every version held, in id order, without its content; one lost with a damaged checkpoint segment is left out.
  virtual std::vector<ResourcesVersion> list_resources() = 0;
  // The newest version of `name`, or of any name when `name` is empty.
  virtual ResourcesVersion get_latest_resources(const std::string& name) = 0;

  // Waits until every rollout in `ids` has ended or `timeout_seconds` passed;
  // returns those that have ended.
  virtual std::vector<Rollout> wait_for_rollouts(const std::vector<RolloutId>& ids, double timeout_seconds) = 0;

  // ---- workers ----
  virtual Worker heartbeat(const std::string& worker_id) = 0;
  virtual std::vector<Worker> query_workers() = 0;
  virtual Statistics statistics() = 0;

  // ---- conveniences, in terms of the above ----
  Rollout enqueue(NewRollout rollout) { return enqueue(std::vector<NewRollout>{std::move(rollout)}).front(); }
  std::optional<AttemptedRollout> dequeue(const std::string& worker_id) {
    auto got = dequeue(worker_id, 1);
    if (got.empty()) return std::nullopt;
    return std::move(got.front());
  }
  Rollout cancel(RolloutId rollout_id) {
    RolloutUpdate u;
    u.status = RolloutStatus::cancelled;
    return update_rollout(rollout_id, u);
  }
  Rollout get_rollout(RolloutId rollout_id);
  // Every attempt of one rollout, first to latest.
  std::vector<Attempt> query_attempts(RolloutId rollout_id) {
    AttemptFilter filter;
    filter.rollout_id = rollout_id;
    return query_attempts(filter, {}).items;
  }
};

}  // namespace arclight::store
