// The runner rank of outside agents (agent.name = "external" or "agl"): the user's agent processes run beside it and
// talk to its HTTP endpoint: OpenAI-compatible generation (continuous batching over this rank's policy) and a task
// interface (Agent Lightning's store API: dequeue, spans and the end of an attempt go through this runner, which
// keeps the attempts its agents hold) through which they take rollouts, report rewards and end attempts. With "agl",
// the endpoint serves the rest of that API too, over this rank's store client, so that Agent Lightning's own runner
// (LightningStoreClient) works against it unchanged, and its policy versions read as a proxy_llm resource naming
// this endpoint. The loop thread owns the policy and the weight channel; HTTP threads use the store client
// (thread-safe).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "arclight/agent/agent.hpp"
#include "arclight/agent/agent_processes.hpp"
#include "arclight/algo/adapter.hpp"
#include "arclight/core/error.hpp"
#include "arclight/core/log.hpp"
#include "arclight/model/policy.hpp"
#include "arclight/serve/runner_api.hpp"
#include "arclight/serve/store_routes.hpp"
#include "arclight/serve/task_routes.hpp"
#include "arclight/store/span_batcher.hpp"
#include "endpoint.hpp"
#include "generation_engine.hpp"
#include "roles.hpp"
#include "weight_channel.hpp"

namespace arclight::app {
namespace {

// Agent Lightning's runners (agent.name = "agl") also get the store's API and their environment.
bool agl_agents(const Config& config) { return config.agent.name == "agl"; }

// The worker ids of a runner's agent processes are this and "-w<i>": "runner-3-w0".
std::string worker_id_prefix(int rank) { return log::concat("runner-", rank); }

using AttemptKey = std::pair<store::RolloutId, store::AttemptId>;

// The attempts this rank's agents hold, and which worker holds each: a dead or hung worker's attempts fail.
class AttemptBook {
 public:
  void hold(const store::AttemptedRollout& ar, const std::string& worker) {
    std::lock_guard<std::mutex> lock(mutex_);
    // Its episode's clock starts when the agent gets it (start_clocks), after the wait for its policy version.
    held_[{ar.rollout.id, ar.attempt.id}] = {worker, Stopwatch::now(), Stopwatch::time_point::max()};
  }
  bool holds(store::RolloutId r, store::AttemptId a) {
    std::lock_guard<std::mutex> lock(mutex_);
    return held_.count({r, a}) > 0;
  }
  // The attempt of rollout `r` held here (a rollout runs one attempt at a time), if any: what "latest" names.
  std::optional<store::AttemptId> held_attempt_of(store::RolloutId r) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = held_.lower_bound({r, 0});
    if (it == held_.end() || it->first.first != r) return std::nullopt;
    return it->first.second;
  }
  bool release(store::RolloutId r, store::AttemptId a) {
    std::lock_guard<std::mutex> lock(mutex_);
    return held_.erase({r, a}) > 0;
  }
  // Releases and returns the attempts `worker` took before `ended_at`: those after are its restart's (the same id).
  std::vector<AttemptKey> release_worker(const std::string& worker, Stopwatch::time_point ended_at) {
    std::vector<AttemptKey> keys;
    for (const auto& released : release_if([&](const Held& h) { return h.worker == worker && h.taken <= ended_at; }))
      keys.push_back(released.first);
    return keys;
  }
  // The episode's clock of each starts now: the wait for their policy version is not the agent's time.
  void start_clocks(const std::vector<store::AttemptedRollout>& attempts) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& ar : attempts)
      if (const auto it = held_.find({ar.rollout.id, ar.attempt.id}); it != held_.end())
        it->second.since = Stopwatch::now();
  }
  // Releases and returns the attempts held longer than `seconds`, with their workers.
  std::vector<std::pair<AttemptKey, std::string>> release_older_than(double seconds) {
    return release_if([&](const Held& h) { return seconds_since(h.since) > seconds; });
  }

 private:
  struct Held {
    std::string worker;
    Stopwatch::time_point taken;  // from the store
    Stopwatch::time_point since;  // the episode's start: handed to the agent
  };
  template <class Predicate>
  std::vector<std::pair<AttemptKey, std::string>> release_if(Predicate matches) {
    std::vector<std::pair<AttemptKey, std::string>> released;
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = held_.begin(); it != held_.end();) {
      if (!matches(it->second)) {
        ++it;
        continue;
      }
      released.emplace_back(it->first, it->second.worker);
      it = held_.erase(it);
    }
    return released;
  }
  std::mutex mutex_;
  std::map<AttemptKey, Held> held_;
};

// What the endpoint's traced calls and the task interface do to the store, on HTTP threads.
class RunnerBackend : public serve::TaskBackend, public serve::CallTracer {
 public:
  RunnerBackend(store::Store& store, store::SpanBatcher& spans, AttemptBook& book,
                const std::atomic<std::uint64_t>& version, std::string worker_prefix)
      : store_(store), spans_(spans), book_(book), version_(version), worker_prefix_(std::move(worker_prefix)) {}

  std::vector<store::AttemptedRollout> dequeue(const std::string& worker_id, const std::string& caller,
                                               std::size_t limit, double wait_seconds) override {
    // The process that asks: its credentials' user when that is one of this runner's workers (an agent of its own
    // may send any, or none), else the name it gives.
    const std::string& holder = caller.rfind(worker_prefix_, 0) == 0 ? caller : worker_id;
    const auto deadline = Stopwatch::now() + std::chrono::duration<double>(wait_seconds);
    for (;;) {
      std::vector<store::AttemptedRollout> got = store_.dequeue(worker_id, limit);
      if (!got.empty()) {
        // Held first: while they wait for their version, their worker's death or their timeout still fails them.
        for (const auto& ar : got) book_.hold(ar, holder);
        wait_for_version(got);
        book_.start_clocks(got);
        return got;
      }
      if (Stopwatch::now() >= deadline) return got;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  bool add_span(store::Span span) override {
    if (!book_.holds(span.rollout_id, span.attempt_id)) return false;
    spans_.add(std::move(span));
    return true;
  }

  std::optional<store::Attempt> update_attempt(store::RolloutId rollout, store::AttemptId attempt,
                                               store::AttemptStatus status) override {
    if (attempt == store::latest_attempt) {  // .../attempts/latest, which Agent Lightning's interface allows
      const auto held = book_.held_attempt_of(rollout);
      if (!held) return std::nullopt;
      attempt = *held;
    }
    if (!book_.holds(rollout, attempt)) return std::nullopt;
    const bool ends = status == store::AttemptStatus::succeeded || status == store::AttemptStatus::failed;
    if (ends) book_.release(rollout, attempt);
    store::AttemptReport report{rollout, attempt, {}};
    report.update.status = status;
    // An end takes the episode's spans along, ahead of it.
    const store::ReportOutcome outcome =
        (ends ? spans_.end_attempts({report}) : store_.update_attempts({report})).at(0);
    if (!outcome.attempt) log::debug("agent's report refused: ", outcome.refusal);  // e.g. the attempt timed out
    return outcome.attempt;
  }

  bool running_here(store::RolloutId rollout, store::AttemptId attempt) override {
    return book_.holds(rollout, attempt);
  }

  void record(serve::TracedCall call) override {
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

 private:
  // A rollout runs with the policy version it was enqueued under, or a newer one (the broadcast may be on its way).
  void wait_for_version(const std::vector<store::AttemptedRollout>& got) {
    const std::uint64_t needed = required_.of(got);
    const auto deadline = Stopwatch::now() + std::chrono::seconds(60);
    while (version_ == no_version || version_ < needed) {
      if (Stopwatch::now() >= deadline) {  // handed out all the same: rank 0 drops what lags beyond max_staleness
        log::warn("policy version ", needed, " has not reached this runner in 60 s (it serves ",
                  version_ == no_version ? std::string("none") : std::to_string(version_.load()),
                  "): its rollouts start on what it has");
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  store::Store& store_;
  store::SpanBatcher& spans_;
  AttemptBook& book_;
  const std::atomic<std::uint64_t>& version_;
  const std::string worker_prefix_;  // "runner-<rank>-w"
  RequiredVersions required_{store_};
};

class ExternalRunner {
 public:
  ExternalRunner(const Config& config, store::Store& store, WeightChannel& weights, int rank, int device,
                 ComputeClock& compute, const std::string& secret)
      : config_(config),
        store_(store),
        weights_(weights),
        compute_(compute),
        rank_(rank),
        spans_(store, config.runner.span_batch, config.runner.span_flush_seconds),
        policy_(policy_on(device, config.model, agent::make_agent(config.agent)->vocab_size(), config.run.seed)),
        engine_(policy_, config.runner.decode_rows),
        text_(served_text(config.model)),
        backend_(store, spans_, book_, published_version_, worker_id_prefix(rank) + "-w"),
        server_(endpoint_options(config, secret)) {
    weights_.attach(policy_);
    // Requests without a seed draw from the policy's generator: a stream of this rank's own, new at every start. Seeded
    // from run.seed, every runner drew the same numbers, and members of one GRPO group on two runners got the same
    // answers (their batches depend on timing: not reproducible anyway).
    std::random_device entropy;
    policy_.seed_sampling((std::uint64_t{entropy()} << 32 | entropy()) + static_cast<std::uint64_t>(rank));
    serve::ServedModel model = served_model(config.model, text_, policy_);
    const std::string model_name = model.name;
    serve::add_openai_routes(server_, engine_, std::move(model), &backend_);
    serve::add_task_routes(server_, backend_);  // first: they take dequeue, spans and attempt ends from the rest
    const std::string url = log::concat("http://", config.runner.http_host, ":", server_.bind());
    if (agl_agents(config)) {
      serve::StoreRouteOptions store_options;
      store_options.policy_llm = serve::PolicyLlm{url + "/v1", model_name, secret, config.grpo.temperature};
      // The store client takes one request at a time: a long wait would hold every agent's dequeue and spans.
      store_options.max_wait_seconds = 0.1;  // Agent Lightning's client asks for no more
      serve::add_store_routes(server_, store, store_options);
    }
    server_.start();
    log::info("runner ", rank, ": agents' endpoint at ", url, "/v1");
    processes_ = std::make_unique<agent::AgentProcesses>(process_options(config, rank, url, server_.port(), secret));
    processes_->start();
  }

  ~ExternalRunner() {
    engine_.close("the runner is stopping");
    processes_.reset();  // ends the agents first: they are the endpoint's clients
    server_.stop();
  }

  void run() {
    for (;;) {
      if (!follow_weights()) return;
      supervise();
      bool worked;
      {
        ComputeClock::Section computing(compute_);
        worked = engine_.step();
      }
      if (!worked) engine_.wait_for_work(0.002);
    }
  }

 private:
  static agent::AgentProcessOptions process_options(const Config& config, int rank, const std::string& url, int port,
                                                    const std::string& secret) {
    agent::AgentProcessOptions o;
    o.argv = config.agent.command;
    o.workers = config.agent.workers;
    o.environment = {"OPENAI_BASE_URL=" + url + "/v1", "OPENAI_API_KEY=" + secret, "ARCLIGHT_STORE_URL=" + url};
    if (agl_agents(config)) {
      // Agent Lightning's runner role with a managed store connects to f"http://{AGL_SERVER_HOST}:{AGL_SERVER_PORT}"
      // (with AGL_MANAGED_STORE=0 it would use the script's own store instead); the secret rides in the host's user
      // info, which its HTTP clients (aiohttp, requests) send as basic auth.
      // The user name is the process's worker id: its requests say which process sent them.
      o.environment.push_back(log::concat("AGL_SERVER_HOST=", agent::AgentProcesses::worker_id_placeholder, ":", secret,
                                          "@", config.runner.http_host));
      o.environment.push_back(log::concat("AGL_SERVER_PORT=", port));
      o.environment.push_back("AGL_CURRENT_ROLE=runner");
      o.environment.push_back("AGL_MANAGED_STORE=1");
    }
    o.worker_id_prefix = worker_id_prefix(rank);
    o.log_prefix = log::concat("[rank ", rank, " agent {w}] ");
    return o;
  }

  // A new version waits until every response under way has ended on the old one. False once training is over.
  bool follow_weights() {
    if (!weights_.arrived(version_)) return true;
    engine_.drain();
    if (!engine_.drained()) return true;
    if (!weights_.poll(policy_, version_)) return false;
    engine_.resume(version_);
    published_version_ = version_;
    return true;
  }

  // Dead agents' attempts fail (the rollout's retry rule decides what follows); an attempt held longer than an
  // episode may take fails too, and its agent is restarted: it hangs.
  void supervise() {
    for (const agent::WorkerExit& exit : processes_->poll()) {
      const std::vector<AttemptKey> held = book_.release_worker(exit.worker_id, exit.ended_at);
      if (!held.empty())
        log::warn("runner ", rank_, ": agent ", exit.worker_id, " ", exit.describe(), " holding ", held.size(),
                  held.size() == 1 ? " attempt, which fails" : " attempts, which fail");
      fail(held);
    }
    for (const auto& [key, worker] : book_.release_older_than(config_.agent.episode_timeout_seconds)) {
      fail({key});
      const bool restarted = processes_->kill_worker(worker);
      log::warn("runner ", rank_, ": agent ", worker, " held rollout ", key.first, " longer than ",
                config_.agent.episode_timeout_seconds, " s; ",
                restarted ? "restarting it" : "its attempt fails (no process of this runner has that worker id)");
    }
  }

  void fail(const std::vector<AttemptKey>& attempts) {
    if (attempts.empty()) return;
    std::vector<store::AttemptReport> reports;
    for (const auto& [rollout, attempt] : attempts) {
      store::AttemptReport report{rollout, attempt, {}};
      report.update.status = store::AttemptStatus::failed;
      reports.push_back(report);
    }
    spans_.end_attempts(reports);
  }

  const Config& config_;
  store::Store& store_;
  WeightChannel& weights_;
  ComputeClock& compute_;
  const int rank_;
  store::SpanBatcher spans_;
  model::Policy policy_;
  GenerationEngine engine_;
  ServedText text_;
  AttemptBook book_;
  std::atomic<std::uint64_t> published_version_{no_version};
  RunnerBackend backend_;
  serve::HttpServer server_;
  std::unique_ptr<agent::AgentProcesses> processes_;
  std::uint64_t version_ = no_version;
};

}  // namespace

void run_external_runner(const Config& config, store::Store& store, WeightChannel& weights, int rank, int device,
                         ComputeClock& compute, const std::string& secret) {
  ExternalRunner(config, store, weights, rank, device, compute, secret).run();
}

}  // namespace arclight::app
