// The runner rank: takes rollouts from the store, runs their episodes as a batch with the
// newest policy version it has, writes their spans, and reports how each ended.
#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <memory>
#include <thread>

#include "arclight/agent/agent.hpp"
#include "arclight/agent/episode_batcher.hpp"
#include "arclight/algo/adapter.hpp"
#include "arclight/comm/work_protocol.hpp"
#include "arclight/core/log.hpp"
#include "arclight/model/policy.hpp"
#include "arclight/store/span_batcher.hpp"
#include "roles.hpp"
#include "weight_channel.hpp"

namespace arclight::app {
namespace {

// Writes an episode's record as spans of its attempt; its policy calls sample with `sampling`.
class StoreTracer : public agent::Tracer {
 public:
  StoreTracer(store::SpanBatcher& batcher, const store::AttemptedRollout& ar, const model::Sampling& sampling)
      : batcher_(batcher), ar_(ar), temperature_(model::logprob_temperature(sampling.temperature)) {}
  void llm_call(const std::vector<std::int32_t>& prompt, const agent::LlmResponse& r) override {
    store::Span s = span(algo::span_names::llm);
    s.attributes = {{"prompt_ids", store::TokenIds(prompt)},
                    {"response_ids", store::TokenIds(r.tokens)},
                    {"logprobs", store::Floats(r.logprobs)},
                    {"temperature", temperature_},
                    {"policy_version", double(r.policy_version)}};
    batcher_.add(std::move(s));
  }
  void reward(double value, int step) override {
    store::Span s = span(algo::span_names::reward);
    s.attributes = {{"reward", value}, {"step", double(step)}};
    batcher_.add(std::move(s));
  }
  void result(const std::map<std::string, double>& metrics) override {
    store::Span s = span(algo::span_names::result);
    for (const auto& [k, v] : metrics) s.attributes.push_back({k, v});
    batcher_.add(std::move(s));
  }

 private:
  store::Span span(const char* name) {
    store::Span s;
    s.rollout_id = ar_.rollout.id;
    s.attempt_id = ar_.attempt.id;
    s.name = name;
    s.status = store::SpanStatus::ok;
    return s;
  }
  store::SpanBatcher& batcher_;
  const store::AttemptedRollout& ar_;
  const double temperature_;  // the log-probs' (model::logprob_temperature)
};

// The sampling seed of a batch of episodes: from the run's seed and its first rollout and
// attempt, so that the same rollouts sample the same tokens in a resumed run, and nothing of
// a runner's random state needs saving.
std::uint64_t batch_seed(std::uint64_t seed, const store::AttemptedRollout& first) {
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ull ^ (first.rollout.id << 8) ^ first.attempt.sequence_id;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;  // splitmix64's finaliser
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

class Runner {
 public:
  Runner(const Config& config, store::Store& store, WeightChannel& weights, int rank, int device, ComputeClock& compute)
      : config_(config),
        store_(store),
        weights_(weights),
        compute_(compute),
        spans_(store, config.runner.span_batch, config.runner.span_flush_seconds),
        agent_(agent::make_agent(config.agent)),
        policy_(policy_on(device, config.model, agent_->vocab_size(), config.run.seed)),
        batcher_(policy_, train_sampling_, 0),
        me_("runner-" + std::to_string(rank)) {
    weights_.attach(policy_);
    // A version that comes during a batch of episodes is taken in (and acknowledged) at once, loaded after the batch:
    // a batch longer than run.hung_rank_seconds is not a hung runner.
    batcher_.set_between_calls([this] { weights_.arrived(version_); });
  }

  void run() {
    for (;;) {
      // Between episodes only: a new policy version, or the end.
      if (!weights_.poll(policy_, version_)) return;
      if (version_ == no_version) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        continue;
      }
      std::vector<store::AttemptedRollout> got =
          store_.dequeue(me_, static_cast<std::size_t>(config_.runner.episodes_in_flight));
      if (got.empty()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        continue;
      }
      if (!catch_up_with(got)) return;
      batcher_.set_policy_version(version_);
      for (store::Mode mode : {store::Mode::train, store::Mode::val}) run_batch(got, mode);
    }
  }

 private:
  // Samples with the policy version a rollout was enqueued under, or a newer one: never older
  // (the broadcast of a new version may still be on its way). False once training is over.
  bool catch_up_with(const std::vector<store::AttemptedRollout>& got) {
    const std::uint64_t needed = required_.of(got);
    while (version_ < needed) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      if (!weights_.poll(policy_, version_)) return false;
    }
    return true;
  }

  // Runs the rollouts of one mode (train samples, validation is greedy) as one batch of episodes.
  void run_batch(const std::vector<store::AttemptedRollout>& got, store::Mode mode) {
    std::vector<const store::AttemptedRollout*> these;
    for (const auto& ar : got)
      if ((ar.rollout.mode == store::Mode::train) == (mode == store::Mode::train)) these.push_back(&ar);
    if (these.empty()) return;
    const model::Sampling& sampling = mode == store::Mode::train ? train_sampling_ : greedy_;
    batcher_.set_sampling(sampling);
    std::vector<std::unique_ptr<StoreTracer>> tracers;
    std::vector<std::function<void(agent::Llm&)>> episodes;
    for (const store::AttemptedRollout* ar : these) {
      tracers.push_back(std::make_unique<StoreTracer>(spans_, *ar, sampling));
      StoreTracer* tracer = tracers.back().get();
      episodes.push_back([this, ar, tracer](agent::Llm& llm) {
        agent::TracedLlm traced(llm, *tracer, config_.agent.max_policy_calls, config_.agent.episode_timeout_seconds);
        agent_->run(ar->rollout.input, traced, *tracer);
      });
    }
    policy_.seed_sampling(batch_seed(config_.run.seed, *these.front()));
    std::vector<std::exception_ptr> errors;
    {
      ComputeClock::Section computing(compute_);
      errors = batcher_.run(episodes);
    }
    report_ends(these, errors);
  }

  // Every episode's end, in one request with the spans still to send.
  void report_ends(const std::vector<const store::AttemptedRollout*>& these,
                   const std::vector<std::exception_ptr>& errors) {
    std::vector<store::AttemptReport> ends(these.size());
    for (std::size_t i = 0; i < these.size(); ++i) {
      ends[i].rollout_id = these[i]->rollout.id;
      ends[i].attempt_id = these[i]->attempt.id;
      ends[i].update.status = errors[i] ? store::AttemptStatus::failed : store::AttemptStatus::succeeded;
      if (errors[i]) {
        try {
          std::rethrow_exception(errors[i]);
        } catch (const std::exception& e) {
          log::debug("episode of rollout ", these[i]->rollout.id, " failed: ", e.what());
        }
      }
    }
    for (const store::ReportOutcome& outcome : spans_.end_attempts(ends))
      if (!outcome.attempt) log::debug("late report refused: ", outcome.refusal);  // the rollout moved on without it
  }

  const Config& config_;
  store::Store& store_;
  WeightChannel& weights_;
  ComputeClock& compute_;
  store::SpanBatcher spans_;
  std::unique_ptr<agent::Agent> agent_;
  model::Policy policy_;
  const model::Sampling train_sampling_{config_.grpo.temperature, 0}, greedy_{0.0};
  agent::EpisodeBatcher batcher_;
  const std::string me_;
  RequiredVersions required_{store_};
  std::uint64_t version_ = no_version;
};

}  // namespace

std::uint64_t RequiredVersions::of(const std::vector<store::AttemptedRollout>& rollouts) {
  std::uint64_t needed = 0;
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& ar : rollouts) {
    const store::ResourcesId id = ar.rollout.resources_id;
    if (id == 0) continue;
    auto it = versions_.find(id);
    if (it == versions_.end()) {
      // Resources that are not a policy version (an HTTP client's, through the store API) need none.
      std::uint64_t version = 0;
      try {
        version = comm::work::decode_policy_resource(store_.get_resources(id).content).version;
      } catch (const DecodeError& e) {
        log::debug("rollout resources ", id, " name no policy version: ", e.what());
      } catch (const store::StoreError& e) {
        // Lost with a damaged checkpoint segment: the weights restored with the run are newer than any it named.
        if (e.code() != store::StoreError::not_found) throw;
        log::warn("rollout resources ", id, " are gone (", e.what(), "): sampled with the weights at hand");
      }
      it = versions_.emplace(id, version).first;
    }
    needed = std::max(needed, it->second);
  }
  return needed;
}

void run_runner(const Config& config, store::Store& store, WeightChannel& weights, int rank, int device,
                ComputeClock& compute) {
  Runner(config, store, weights, rank, device, compute).run();
}

}  // namespace arclight::app
