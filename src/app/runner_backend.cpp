#include "runner_backend.hpp"

#include <chrono>
#include <thread>

#include "arclight/algo/adapter.hpp"
#include "arclight/core/log.hpp"
#include "arclight/model/policy.hpp"

namespace arclight::app {

template <class Predicate>
std::vector<std::pair<AttemptKey, AttemptBook::Held>> AttemptBook::release_if(Predicate matches) {
  std::vector<std::pair<AttemptKey, Held>> released;
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = held_.begin(); it != held_.end();) {
    if (!matches(it->second)) {
      ++it;
      continue;
    }
    released.emplace_back(it->first, it->second);
    it = held_.erase(it);
  }
  return released;
}

void AttemptBook::hold(const store::AttemptedRollout& ar, const std::string& worker) {
  std::lock_guard<std::mutex> lock(mutex_);
  held_[{ar.rollout.id, ar.attempt.id}] = {worker, Stopwatch::now(), Stopwatch::time_point::max(), 1};
}

bool AttemptBook::holds(store::RolloutId r, store::AttemptId a) {
  std::lock_guard<std::mutex> lock(mutex_);
  return held_.count({r, a}) > 0;
}

std::optional<store::AttemptId> AttemptBook::held_attempt_of(store::RolloutId r) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = held_.lower_bound({r, 0});
  if (it == held_.end() || it->first.first != r) return std::nullopt;
  return it->first.second;
}

bool AttemptBook::release(store::RolloutId r, store::AttemptId a) {
  std::lock_guard<std::mutex> lock(mutex_);
  return held_.erase({r, a}) > 0;
}

std::vector<AttemptKey> AttemptBook::release_worker(const std::string& worker, Stopwatch::time_point ended_at) {
  std::vector<AttemptKey> keys;
  for (const auto& released : release_if([&](const Held& h) { return h.worker == worker && h.taken <= ended_at; }))
    keys.push_back(released.first);
  return keys;
}

void AttemptBook::start_clocks(const std::vector<store::AttemptedRollout>& attempts) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto now = Stopwatch::now();
  for (const auto& ar : attempts)
    if (const auto it = held_.find({ar.rollout.id, ar.attempt.id}); it != held_.end()) {
      it->second.since = now;
      it->second.handed_with = attempts.size();
    }
}

std::vector<std::pair<AttemptKey, AttemptBook::Held>> AttemptBook::release_older_than(double seconds) {
  return release_if([&](const Held& h) { return seconds_since(h.since) > seconds * double(h.handed_with); });
}

void fail_attempts(store::SpanBatcher& spans, const std::vector<AttemptKey>& attempts) {
  if (attempts.empty()) return;
  std::vector<store::AttemptReport> reports;
  for (const auto& [rollout, attempt] : attempts) {
    store::AttemptReport report{rollout, attempt, {}};
    report.update.status = store::AttemptStatus::failed;
    reports.push_back(report);
  }
  spans.end_attempts(reports);
}

std::vector<store::AttemptedRollout> RunnerBackend::dequeue(const std::string& worker_id, const std::string& caller,
                                                            std::size_t limit, double wait_seconds,
                                                            const std::function<bool()>& client_gone) {
  const std::string& holder = holder_of(worker_id, caller);
  const auto gone = [&] { return client_gone && client_gone(); };
  const auto deadline = Stopwatch::now() + std::chrono::duration<double>(wait_seconds);
  for (;;) {
    if (gone()) return {};  // nothing is taken for a client that would never read it
    std::vector<store::AttemptedRollout> got = store_.dequeue(holder, limit);
    if (!got.empty()) {
      // Held first: while they wait for their version, their worker's death or their timeout still fails them.
      for (const auto& ar : got) book_.hold(ar, holder);
      const auto fail_those_still_held = [&] {
        std::vector<AttemptKey> dropped;
        for (const auto& ar : got)
          if (book_.release(ar.rollout.id, ar.attempt.id)) dropped.emplace_back(ar.rollout.id, ar.attempt.id);
        fail_attempts(spans_, dropped);
        return dropped.size();
      };
      try {
        wait_for_version(got, gone);
      } catch (...) {  // the store did not answer: held with no clock, they would wait for the store's own timeout
        fail_those_still_held();
        throw;
      }
      if (gone()) {
        // The client left while its rollouts came (it died, or gave up waiting): they would be held for it until the
        // episode's timeout, and its restart, which has the same worker id, killed for them.
        const std::size_t failed = fail_those_still_held();
        log::warn("the agent that asked for rollouts (", holder.empty() ? "unnamed" : holder, ") left before it got ",
                  got.size() == 1 ? "it" : "them", ": ", failed, failed == 1 ? " attempt fails" : " attempts fail");
        return {};
      }
      book_.start_clocks(got);
      return got;
    }
    if (Stopwatch::now() >= deadline) return got;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

bool RunnerBackend::add_span(store::Span span) {
  if (!book_.holds(span.rollout_id, span.attempt_id)) return false;
  spans_.add(std::move(span));
  return true;
}

std::optional<store::Attempt> RunnerBackend::update_attempt(store::RolloutId rollout, store::AttemptId attempt,
                                                            store::AttemptStatus status) {
  if (attempt == store::latest_attempt) {  // .../attempts/latest, which Agent Lightning's interface allows
    const auto held = book_.held_attempt_of(rollout);
    if (!held) return std::nullopt;
    attempt = *held;
  }
  const bool ends = status == store::AttemptStatus::succeeded || status == store::AttemptStatus::failed;
  // An end takes the attempt from the book in one step: the main thread may fail it in between (its agent died, it
  // timed out), and both ends went to the store.
  if (ends ? !book_.release(rollout, attempt) : !book_.holds(rollout, attempt)) return std::nullopt;
  store::AttemptReport report{rollout, attempt, {}};
  report.update.status = status;
  // An end takes the episode's spans along, ahead of it.
  const store::ReportOutcome outcome = (ends ? spans_.end_attempts({report}) : store_.update_attempts({report})).at(0);
  if (!outcome.attempt) log::debug("agent's report refused: ", outcome.refusal);  // e.g. the attempt timed out
  return outcome.attempt;
}

store::Worker RunnerBackend::heartbeat(const std::string& worker_id, const std::string& caller) {
  return store_.heartbeat(holder_of(worker_id, caller));
}

const std::string& RunnerBackend::holder_of(const std::string& worker_id, const std::string& caller) const {
  return caller.rfind(worker_prefix_, 0) == 0 ? caller : worker_id;
}

bool RunnerBackend::running_here(store::RolloutId rollout, store::AttemptId attempt) {
  return book_.holds(rollout, attempt);
}

void RunnerBackend::record(serve::TracedCall call) {
  store::Span s;
  s.rollout_id = call.rollout_id;
  s.attempt_id = call.attempt_id;
  s.name = algo::span_names::llm;
  s.status = store::SpanStatus::ok;
  s.attributes = {{"prompt_ids", store::TokenIds(std::move(call.prompt))},
                  {"response_ids", store::TokenIds(std::move(call.response))},
                  {"logprobs", store::Floats(std::move(call.logprobs))},
                  {"temperature", model::logprob_temperature(call.temperature)},
                  {"policy_version", double(call.policy_version)}};
  add_span(std::move(s));
}

void RunnerBackend::wait_for_version(const std::vector<store::AttemptedRollout>& got,
                                     const std::function<bool()>& gone) {
  const std::uint64_t needed = required_.of(got);
  // Shorter than Agent Lightning's client waits for an answer (30 s; it never asks again: the attempt failed when it
  // left) and than the store's default unresponsive_seconds (30 s; the attempt's silence counts from the dequeue).
  const auto deadline = Stopwatch::now() + std::chrono::seconds(version_wait_seconds);
  auto asked = Stopwatch::now();
  while (version_ == no_version || version_ < needed) {
    if (seconds_since(asked) > 0.05) {  // a system call each time: not at every millisecond
      if (gone()) return;
      asked = Stopwatch::now();
    }
    if (Stopwatch::now() >= deadline) {  // handed out all the same: rank 0 drops what lags beyond max_staleness
      log::warn("policy version ", needed, " has not reached this runner in ", version_wait_seconds, " s (it serves ",
                version_ == no_version ? std::string("none") : std::to_string(version_.load()),
                "): its rollouts start on what it has");
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace arclight::app
