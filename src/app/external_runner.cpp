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
#include "runner_backend.hpp"
#include "roles.hpp"
#include "weight_channel.hpp"

namespace arclight::app {
namespace {

// Agent Lightning's runners (agent.name = "agl") also get the store's API and their environment.
bool agl_agents(const Config& config) { return config.agent.name == "agl"; }

// The worker ids of a runner's agent processes are this and "-w<i>": "runner-3-w0".
std::string worker_id_prefix(int rank) { return log::concat("runner-", rank); }

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
    serve::ServedModel model = served_model(config, text_, policy_);
    const std::string model_name = model.name;
    serve::add_openai_routes(server_, engine_, std::move(model), &backend_);
    serve::add_task_routes(server_, backend_);  // first: they take dequeue, spans and attempt ends from the rest
    const std::string url = log::concat("http://", serve::url_host(config.runner.http_host, true), ":", server_.bind());
    if (agl_agents(config)) {
      serve::StoreRouteOptions store_options;
      store_options.policy_llm = serve::PolicyLlm{url + "/v1", model_name, secret, config.grpo.temperature};
      // The store client takes one request at a time: a long wait would hold every agent's dequeue and spans.
      store_options.max_wait_seconds = 0.1;  // Agent Lightning's client asks for no more
      store_options.rollout_defaults = rollout_config(config.rollout);
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
                                          "@", serve::url_host(config.runner.http_host, true)));
      o.environment.push_back(log::concat("AGL_SERVER_PORT=", port));
      o.environment.push_back("AGL_CURRENT_ROLE=runner");
      o.environment.push_back("AGL_MANAGED_STORE=1");
    }
    o.worker_id_prefix = worker_id_prefix(rank);
    o.log_prefix = log::concat("[rank ", rank, " agent {w}] ");
    o.hidden = {secret};  // Agent Lightning's client logs its server's URL, user info and all, when a request fails
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
      fail_attempts(spans_, held);
    }
    // By worker: its timed-out attempts fail together, and it is killed once, only if its process is the one that
    // took them (a kill per attempt hit its restart, which held nothing, when the store calls took longer than the
    // restart's backoff).
    std::map<std::string, std::pair<std::vector<AttemptKey>, Stopwatch::time_point>> timed_out;
    for (const auto& [key, held] : book_.release_older_than(config_.agent.episode_timeout_seconds)) {
      auto& [keys, newest] = timed_out[held.worker];  // newest from the clock's epoch: before any taken
      keys.push_back(key);
      newest = std::max(newest, held.taken);
    }
    for (const auto& [worker, attempts] : timed_out) {
      fail_attempts(spans_, attempts.first);
      const bool restarted = processes_->kill_worker(worker, attempts.second);
      log::warn("runner ", rank_, ": agent ", worker, " held rollout ", attempts.first.front().first,
                attempts.first.size() > 1 ? log::concat(" (and ", attempts.first.size() - 1, " more)") : "",
                " longer than ", config_.agent.episode_timeout_seconds, " s; ",
                restarted ? "restarting it"
                          : "its attempt fails (no process of this runner that took it has that worker id)");
    }
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
