#include "arclight/app/training.hpp"
#include "arclight/app/run_report.hpp"
#include "arclight/app/usage.hpp"
#include "arclight/ckpt/checkpoint.hpp"
#include "arclight/core/version.hpp"

#include <chrono>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <limits>
#include <random>
#include <sstream>
#include <atomic>
#include <csignal>
#include <mutex>
#include <thread>
#include <tuple>

#include "arclight/agent/agent.hpp"
#include "arclight/agent/episode_batcher.hpp"
#include "arclight/algo/adapter.hpp"
#include "arclight/algo/advantages.hpp"
#include "arclight/algo/trainer.hpp"
#include "arclight/comm/large_messages.hpp"
#include "arclight/comm/reducer.hpp"
#include "arclight/comm/store_service.hpp"
#include "arclight/comm/waiting.hpp"
#include "arclight/core/crc32c.hpp"
#include "arclight/core/error.hpp"
#include "arclight/core/log.hpp"
#include "arclight/store/memory_store.hpp"
#include "arclight/store/span_batcher.hpp"

namespace arclight::app {
namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

constexpr int tag_train = 201;
constexpr int tag_stats = 202;
constexpr int tag_state = 203;
enum : std::uint32_t { work_train = 1, work_stop = 2, work_save = 3, work_restore = 4, work_begin = 5 };

// A runner's policy version before the first weights reach it: it samples nothing until then,
// so that a resumed run never samples with freshly initialised weights.
constexpr std::uint64_t no_version = std::numeric_limits<std::uint64_t>::max();

// Set by SIGUSR1 or SIGTERM (Slurm's warning before pre-emption or the time limit): rank 0
// checkpoints at the next step boundary and ends the job with exit_requeue.
std::atomic<bool> stop_requested{false};
extern "C" void request_stop(int) { stop_requested = true; }

// The compute time of this rank (<run.dir>/usage.json).
ComputeClock compute_clock;

std::string checkpoint_dir_of(const Config& config) {
  return config.checkpoint.dir.empty() ? (std::filesystem::path(config.run.dir) / "checkpoints").string()
                                       : config.checkpoint.dir;
}

// Writes checkpoint versions on a thread of its own, one at a time, while training goes on.
// A parallel write is collective: a rank that fails cannot leave the others waiting, so a
// failure ends the job with one message.
class BackgroundWriter {
 public:
  ~BackgroundWriter() { wait(); }
  void start(std::function<void()> write) {
    wait();
    thread_ = std::thread([write = std::move(write)] {
      try {
        write();
      } catch (const std::exception& e) {
        log::error("checkpoint: ", e.what());
        MPI_Abort(MPI_COMM_WORLD, exit_failure);
      }
    });
  }
  void wait() {
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::thread thread_;
};

store::RolloutConfig rollout_config(const RolloutDefaults& d) {
  store::RolloutConfig c;
  c.timeout_seconds = d.timeout_seconds;
  c.unresponsive_seconds = d.unresponsive_seconds;
  c.max_attempts = static_cast<std::uint32_t>(d.max_attempts);
  for (const std::string& name : d.retry_condition) c.retry_condition |= store::bit(*store::parse_attempt_status(name));
  return c;
}

std::uint32_t checksum(const std::vector<float>& weights) { return crc32c(weights.data(), weights.size() * sizeof(float)); }

// The communicators of a training job.
struct Channels {
  comm::Communicator control;   // the store's requests and replies
  comm::Communicator work;      // coordinator <-> trainers: batches and their figures
  comm::Communicator trainers;  // gradients (trainers only)
  comm::Communicator sync;      // weights: the trainer leader and the runners
  comm::Communicator checkpoint;  // rank 0 and the trainers: they write each version together
};

Channels open_channels(const Layout& layout, int rank) {
  Channels ch;
  ch.control = comm::Communicator::duplicate(MPI_COMM_WORLD);
  ch.work = comm::Communicator::duplicate(MPI_COMM_WORLD);
  const RankRole& role = layout.roles[rank];
  ch.trainers = comm::Communicator::split(MPI_COMM_WORLD, role.trainer ? 1 : MPI_UNDEFINED, rank);
  const bool colocated = role.runner && role.trainer;
  const bool in_sync = !colocated && (role.runner || rank == layout.trainer_leader());
  ch.sync = comm::Communicator::split(MPI_COMM_WORLD, in_sync ? 1 : MPI_UNDEFINED, rank);  // the leader is its rank 0
  ch.checkpoint = comm::Communicator::split(MPI_COMM_WORLD, rank == 0 || role.trainer ? 1 : MPI_UNDEFINED, rank);
  return ch;
}

// How new policy versions reach a runner: each trainer step publishes, runners poll between episodes.
class WeightChannel {
 public:
  virtual ~WeightChannel() = default;
  // Called once by the rank's trainer or runner with its policy, before anything else.
  virtual void attach(const model::Policy&) {}
  // Trainer side. Every trainer calls publish after each step; stop once at the end.
  virtual void publish(std::int64_t version, const std::vector<float>& weights) = 0;
  virtual void stop() = 0;
  // Runner side, between episodes: loads a newer version into the policy if one has come.
  // Returns false once training is over.
  virtual bool poll(model::Policy& policy, std::uint64_t& version) = 0;
};

// Split layouts: the trainer leader broadcasts [version (int64)][floats] to the runners on
// their own communicator (not through rank 0); runners keep an MPI_Ibcast posted. A
// negative version ends training.
class BroadcastWeights : public WeightChannel {
 public:
  // A rank outside the sync communicator (a trainer other than the leader) neither sends nor receives.
  // The buffer is sized by attach() from the rank's own policy: no second copy of the model is built.
  BroadcastWeights(MPI_Comm sync, bool root) : sync_(sync), root_(root && sync != MPI_COMM_NULL) {}
  void attach(const model::Policy& policy) override {
    if (sync_ == MPI_COMM_NULL) return;
    bytes_.resize(sizeof(std::int64_t) + policy.parameter_count() * sizeof(float));
    if (!root_) post();
  }
  void publish(std::int64_t version, const std::vector<float>& weights) override {
    if (!root_) return;  // other trainers hold the same weights; the leader speaks for them
    fill(version, weights);
    send();
  }
  void stop() override {
    if (!root_) return;
    fill(-1, {});
    send();
  }
  bool poll(model::Policy& policy, std::uint64_t& version) override {
    if (sync_ == MPI_COMM_NULL) return true;
    int arrived = 0;
    MPI_Testall(static_cast<int>(pending_.size()), pending_.data(), &arrived, MPI_STATUSES_IGNORE);
    if (!arrived) return true;
    std::int64_t v;
    std::memcpy(&v, bytes_.data(), sizeof v);
    if (v < 0) return false;
    policy.load_flat_parameters(reinterpret_cast<const float*>(bytes_.data() + sizeof v), policy.parameter_count());
    version = static_cast<std::uint64_t>(v);
    post();
    return true;
  }

 private:
  void fill(std::int64_t version, const std::vector<float>& weights) {
    std::memcpy(bytes_.data(), &version, sizeof version);
    if (!weights.empty()) std::memcpy(bytes_.data() + sizeof version, weights.data(), weights.size() * sizeof(float));
  }
  void post() { pending_ = comm::ibcast_large(bytes_.data(), bytes_.size(), 0, sync_); }
  void send() {
    post();
    comm::wait_all(pending_);
  }
  MPI_Comm sync_;
  bool root_;
  std::vector<char> bytes_;
  std::vector<MPI_Request> pending_;  // one broadcast, in chunks
};

// Colocated layouts: a rank's trainer thread hands its weights to the runner thread of the
// same rank (every trainer holds the same weights after a step).
class SharedWeights : public WeightChannel {
 public:
  void publish(std::int64_t version, const std::vector<float>& weights) override {
    std::lock_guard<std::mutex> lock(mutex_);
    version_ = version;
    weights_ = weights;
  }
  void stop() override {
    std::lock_guard<std::mutex> lock(mutex_);
    stopped_ = true;
  }
  bool poll(model::Policy& policy, std::uint64_t& version) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (version_ >= 0 && static_cast<std::uint64_t>(version_) != version) {
      policy.load_flat_parameters(weights_.data(), weights_.size());
      version = static_cast<std::uint64_t>(version_);
    }
    return !stopped_;
  }

 private:
  std::mutex mutex_;
  std::int64_t version_ = -1;
  std::vector<float> weights_;
  bool stopped_ = false;
};

// ---- runner ---------------------------------------------------------------------------------

// Writes an episode's record as spans of its attempt.
class StoreTracer : public agent::Tracer {
 public:
  StoreTracer(store::SpanBatcher& batcher, const store::AttemptedRollout& ar) : batcher_(batcher), ar_(ar) {}
  void llm_call(const std::vector<std::int32_t>& prompt, const agent::LlmResponse& r) override {
    store::Span s = span(algo::span_names::llm);
    s.attributes = {{"prompt_ids", store::TokenIds(prompt)},
                    {"response_ids", store::TokenIds(r.tokens)},
                    {"logprobs", store::Floats(r.logprobs)},
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
};

// The policy version a rollout was enqueued under: the "version=N" of its resources (0: none named).
std::uint64_t required_version(store::Store& store, store::ResourcesId id, std::map<store::ResourcesId, std::uint64_t>& known) {
  if (id == 0) return 0;
  auto it = known.find(id);
  if (it != known.end()) return it->second;
  const std::string content = store.get_resources(id).content;
  const auto at = content.find("version=");
  const std::uint64_t version = at == std::string::npos ? 0 : std::strtoull(content.c_str() + at + 8, nullptr, 10);
  return known[id] = version;
}

// The sampling seed of a batch of episodes: from the run's seed and its first rollout and
// attempt, so that the same rollouts sample the same tokens in a resumed run, and nothing of
// a runner's random state needs saving.
std::uint64_t batch_seed(std::uint64_t seed, const store::AttemptedRollout& first) {
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ull ^ (first.rollout.id << 8) ^ first.attempt.sequence_id;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;  // splitmix64's finaliser
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

void run_runner(const Config& config, store::Store& store, WeightChannel& weights, int rank) {
  store::SpanBatcher spans(store, config.runner.span_batch, config.runner.span_flush_seconds);
  auto agent = agent::make_agent(config.agent);
  model::Policy policy(config.model, agent->vocab_size(), config.run.seed);
  weights.attach(policy);
  const model::Sampling train_sampling{config.grpo.temperature, 0}, greedy{1.0, 1};
  agent::EpisodeBatcher batcher(policy, train_sampling, 0);
  const std::string me = "runner-" + std::to_string(rank);
  std::map<store::ResourcesId, std::uint64_t> versions;  // of the policy resources rollouts name

  std::uint64_t version = no_version;
  for (;;) {
    // Between episodes only: a new policy version, or the end.
    if (!weights.poll(policy, version)) break;
    if (version == no_version) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    std::vector<store::AttemptedRollout> got = store.dequeue(me, static_cast<std::size_t>(config.runner.episodes_in_flight));
    if (got.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      continue;
    }
    // Sample with the policy version a rollout was enqueued under, or a newer one: never older
    // (the broadcast of a new version may still be on its way).
    std::uint64_t needed = 0;
    for (const auto& ar : got) needed = std::max(needed, required_version(store, ar.rollout.resources_id, versions));
    bool training_over = false;
    while (version < needed && !training_over) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      training_over = !weights.poll(policy, version);
    }
    if (training_over) break;
    batcher.set_policy_version(version);
    for (store::Mode mode : {store::Mode::train, store::Mode::val}) {
      std::vector<const store::AttemptedRollout*> these;
      for (const auto& ar : got)
        if ((ar.rollout.mode == store::Mode::train) == (mode == store::Mode::train)) these.push_back(&ar);
      if (these.empty()) continue;
      batcher.set_sampling(mode == store::Mode::train ? train_sampling : greedy);
      std::vector<std::unique_ptr<StoreTracer>> tracers;
      std::vector<std::function<void(agent::Llm&)>> episodes;
      for (const store::AttemptedRollout* ar : these) {
        tracers.push_back(std::make_unique<StoreTracer>(spans, *ar));
        StoreTracer* tracer = tracers.back().get();
        episodes.push_back([&, ar, tracer](agent::Llm& llm) {
          agent::TracedLlm traced(llm, *tracer, config.agent.max_policy_calls, config.agent.episode_timeout_seconds);
          agent->run(ar->rollout.input, traced, *tracer);
        });
      }
      policy.seed_sampling(batch_seed(config.run.seed, *these.front()));
      std::vector<std::exception_ptr> errors;
      {
        ComputeClock::Section computing(compute_clock);
        errors = batcher.run(episodes);
      }
      spans.flush();
      // Every episode's end, in one request.
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
      for (const store::ReportOutcome& outcome : store.update_attempts(ends))
        if (!outcome.attempt) log::debug("late report refused: ", outcome.refusal);  // the rollout moved on without it
    }
  }
}

// ---- trainer ---------------------------------------------------------------------------------

// A saved model fits this one when its tensors have the same names and sizes, in order.
void check_fits(const ckpt::Checkpoint& saved, const std::vector<ckpt::TensorInfo>& mine, const std::string& path) {
  bool fits = saved.tensors.size() == mine.size();
  for (std::size_t i = 0; fits && i < mine.size(); ++i)
    fits = saved.tensors[i].name == mine[i].name && saved.tensors[i].size == mine[i].size;
  if (fits) return;
  std::string why = log::concat(saved.tensors.size(), " tensors against ", mine.size());
  for (std::size_t i = 0; i < std::min(mine.size(), saved.tensors.size()); ++i)
    if (saved.tensors[i].name != mine[i].name || saved.tensors[i].size != mine[i].size) {
      why = log::concat("its ", saved.tensors[i].name, " has ", saved.tensors[i].size, " values, this model's ",
                        mine[i].name, " ", mine[i].size);
      break;
    }
  throw UsageError(log::concat(path, " holds another model (", why, "): resume with the configuration that saved it"));
}

void run_trainer(const Config& config, const Channels& ch, const Layout& layout, int rank, store::Store& store,
                 WeightChannel& weights) {
  auto agent = agent::make_agent(config.agent);
  model::Policy policy(config.model, agent->vocab_size(), config.run.seed);
  weights.attach(policy);
  std::unique_ptr<GradientReducer> reducer;
  if (ch.trainers.size() > 1) {
    comm::ReducerConfig rc;
    rc.bucket_bytes = static_cast<std::size_t>(config.comm.bucket_mb * (1 << 20));
    rc.first_bucket_bytes = static_cast<std::size_t>(config.comm.first_bucket_mb * (1 << 20));
    rc.compression = config.comm.compression;
    reducer = std::make_unique<comm::MpiReducer>(ch.trainers.get(), rc);
  }
  algo::Trainer trainer(policy, config.grpo, reducer.get());
  const bool leader = rank == layout.trainer_leader();
  if (leader) {
    try {
      store.get_latest_resources("policy");  // a resumed run: rank 0 restored the versions
    } catch (const store::StoreError&) {
      store.add_resources("policy", "version=0 checksum=" + std::to_string(checksum(policy.flat_parameters())));
    }
  }
  comm::IdleBackoff backoff(comm::IdleBackoff::Awaiting::next_message);
  std::int64_t version = 0;
  // This trainer's share of every checkpoint: a run of tensors (parallel HDF5, one file).
  std::vector<ckpt::TensorInfo> tensors;
  {
    const std::vector<std::string> names = policy.parameter_names();
    const std::vector<FloatBuffer> buffers = policy.parameter_buffers();
    for (std::size_t i = 0; i < names.size(); ++i) tensors.push_back({names[i], buffers[i].size});
  }
  const std::vector<int> all_trainers = layout.trainers();
  const auto me = std::find(all_trainers.begin(), all_trainers.end(), rank) - all_trainers.begin();
  ckpt::WriteOptions save_options;
  save_options.full_every = config.checkpoint.full_every;
  save_options.comm = ch.checkpoint.get();
  save_options.part.meta_and_store = false;
  save_options.part.model_index = leader;
  save_options.part.all_tensors = false;
  save_options.part.tensors = ckpt::partition_tensors(tensors, static_cast<int>(all_trainers.size()))[me];
  BackgroundWriter writer;
  std::string message;
  for (;;) {
    if (!comm::try_receive(ch.work.get(), 0, tag_train, message)) {
      backoff.idle();
      continue;
    }
    backoff.reset();
    ByteReader in(message);
    const std::uint32_t kind = in.u32();
    if (kind == work_stop) {
      weights.stop();  // tell the runners
      writer.wait();
      break;
    }
    if (kind == work_save) {
      // The blocking part: this trainer's share of the state, copied to host memory; then rank 0
      // hears that training may go on.
      const std::int64_t step = in.i64();
      auto snapshot = std::make_shared<ckpt::Checkpoint>();
      snapshot->tensors = tensors;
      const std::vector<FloatBuffer> live = policy.parameter_buffers();
      for (std::size_t i : save_options.part.tensors)
        snapshot->parameters.insert(snapshot->parameters.end(), live[i].data, live[i].data + live[i].size);
      algo::OptimizerState optimizer = trainer.optimizer_state_of(save_options.part.tensors);
      snapshot->exp_avg = std::move(optimizer.exp_avg);
      snapshot->exp_avg_sq = std::move(optimizer.exp_avg_sq);
      snapshot->optimizer_steps = std::move(optimizer.steps);
      MPI_Send(nullptr, 0, MPI_BYTE, 0, tag_state, ch.work.get());
      writer.start([&config, &save_options, step, snapshot] {
        ckpt::write_checkpoint(checkpoint_dir_of(config), step, *snapshot, save_options);
      });
      continue;
    }
    if (kind == work_begin) {  // a fresh run: the runners start from these weights
      weights.publish(version, policy.flat_parameters());
      MPI_Send(nullptr, 0, MPI_BYTE, 0, tag_state, ch.work.get());
      continue;
    }
    if (kind == work_restore) {
      // Every trainer reads the saved weights and optimizer state from the version itself (a
      // shared file system, as for writing): rank 0 does not send the model to each of them.
      // What goes wrong goes to rank 0, which reports it once.
      std::string failure;
      try {
        const std::string path(in.bytes());
        ckpt::Checkpoint saved = ckpt::read_checkpoint(path, ckpt::Contents::model);
        check_fits(saved, tensors, path);
        version = saved.policy_version;
        policy.load_flat_parameters(saved.parameters.data(), saved.parameters.size());
        trainer.load_optimizer_state({std::move(saved.exp_avg), std::move(saved.exp_avg_sq), std::move(saved.optimizer_steps)});
        weights.publish(version, saved.parameters);
      } catch (const Error& e) {
        failure = e.what();
      }
      MPI_Send(failure.data(), static_cast<int>(failure.size()), MPI_BYTE, 0, tag_state, ch.work.get());
      continue;
    }
    const double total_tokens = in.f64();
    std::vector<algo::Sample> shard = algo::decode_samples(in.raw(in.remaining()));
    auto t0 = Clock::now();
    algo::TrainStats stats;
    {
      ComputeClock::Section computing(compute_clock);
      stats = trainer.step(shard, total_tokens);
    }
    const double train_seconds = seconds_since(t0);
    ++version;
    auto t1 = Clock::now();
    std::vector<float> new_weights = policy.flat_parameters();
    if (leader) store.update_resources("policy", log::concat("version=", version, " checksum=", checksum(new_weights)));
    weights.publish(version, new_weights);
    const double sync_seconds = seconds_since(t1);
    double figures[] = {stats.loss, stats.policy_loss, stats.kl, stats.entropy, stats.clip_fraction, stats.grad_norm,
                        stats.action_tokens, train_seconds, sync_seconds};
    MPI_Send(figures, sizeof figures, MPI_BYTE, 0, tag_stats, ch.work.get());
  }
}

// ---- coordinator ---------------------------------------------------------------------------

struct EpisodeFigures {
  double reward = 0, success = 0, tokens = 0;
  std::map<std::string, double> metrics;  // sums over episodes
  int episodes = 0, failed = 0, retries = 0;
};

class Coordinator {
 public:
  Coordinator(const Config& config, const Channels& ch, const Layout& layout, std::string resume,
              std::string effective_config)
      : config_(config), ch_(ch), layout_(layout), store_(clock_, rollout_config(config.rollout)),
        watchdog_(store_, store::watchdog_interval(store_.default_config())), server_(ch.control.get(), store_),
        agent_(agent::make_agent(config.agent)), rng_(config.run.seed), resume_(std::move(resume)),
        effective_config_(std::move(effective_config)),
        checkpoint_dir_(checkpoint_dir_of(config)) {}

  // Returns exit_ok, or exit_requeue when a signal asked the job to stop after a checkpoint.
  int run() {
    std::optional<ckpt::Checkpoint> restored = restore();
    RunReport report(config_.run.dir, config_.run.steps, config_.run.progress,
                     restored ? &restored->metrics_jsonl : nullptr);
    auto reference = agent_->reference_figures();
    const int first_step = restored ? static_cast<int>(restored->step) + 1 : 1;
    report.note(log::concat(restored ? "resuming " : "training ", agent_->name(), " from step ", first_step, " to ",
                            config_.run.steps, "; metrics in ", report.metrics_path(), ", TensorBoard events in ",
                            report.events_path(), ", checkpoints in ", checkpoint_dir_));
    const auto start = Clock::now();
    last_checkpoint_ = start;
    const double elapsed_before = restored ? elapsed_in(restored->metrics_jsonl) : 0.0;
    std::vector<store::RolloutId> next;
    if (restored && !restored->untrained_rollouts.empty()) {
      // The step's rollouts were enqueued (and perhaps run) before the save: they go on from
      // the store as it was, requeued where they had not ended, and are trained on once.
      for (std::int64_t id : restored->untrained_rollouts) next.push_back(static_cast<store::RolloutId>(id));
    } else if (first_step <= config_.run.steps) {
      next = enqueue_step();
    }
    for (int step = first_step; step <= config_.run.steps; ++step) {
      auto t0 = Clock::now();
      std::vector<store::RolloutId> current = std::move(next);
      wait_for(current);
      // With staleness allowed, the next step's rollouts run while this one trains.
      if (config_.grpo.max_staleness > 0 && step < config_.run.steps) next = enqueue_step();
      const double rollout_seconds = seconds_since(t0);
      EpisodeFigures fig;
      double staleness = 0;
      std::vector<store::RolloutId> trained_on;
      std::vector<algo::Sample> samples = build_samples(current, fig, staleness, trained_on);
      double stats[9] = {0};
      train(samples, stats);
      record_trained(step, trained_on);
      const double step_seconds = seconds_since(t0);
      ++version_;

      const double n = std::max(1, fig.episodes);
      std::vector<Figure> figures{
          {"version", double(version_), 0},
          {"reward", fig.reward / n, 3},
          {"success", fig.success / n, 3},
          {"rollouts", double(fig.episodes), 0},
          {"rollouts_per_s", fig.episodes / std::max(1e-9, step_seconds), 1},
          {"tokens_per_s", fig.tokens / std::max(1e-9, step_seconds), 1},
          {"loss", stats[0], 4},
          {"grad_norm", stats[5], 3},
          {"entropy", stats[3], 3},
          {"staleness", staleness, 2},
          {"failed", double(fig.failed), 0},
          {"retries", double(fig.retries), 0},
          {"time_rollout", rollout_seconds, 2},
          {"time_train", stats[7], 2},
          {"time_sync", stats[8], 2},
          {"elapsed", elapsed_before + seconds_since(start), 1},
      };
      if (config_.grpo.validate_every > 0 && (step % config_.grpo.validate_every == 0 || step == config_.run.steps)) {
        EpisodeFigures val = validate();
        const double vn = std::max(1, val.episodes);
        figures.push_back({"val_success", val.success / vn, 3});
        for (const auto& [k, v] : val.metrics)
          if (k != "success" && k[0] != '_')
            figures.push_back({"val_" + k, k == "guesses" ? v / std::max(1.0, val.metrics["_solved"]) : v / vn, 3});
        for (const auto& [k, v] : reference) figures.push_back({k, v, 3});
      }
      // A checkpoint at the step boundary: every N steps, every T minutes, on a signal, and at the end.
      const bool stop_now = stop_requested.load();
      const bool due = (config_.checkpoint.every_steps > 0 && step % config_.checkpoint.every_steps == 0) ||
                       (config_.checkpoint.every_minutes > 0 &&
                        seconds_since(last_checkpoint_) >= 60 * config_.checkpoint.every_minutes) ||
                       stop_now || step == config_.run.steps;
      std::optional<ckpt::Checkpoint> snapshot;
      if (due) {
        auto t = Clock::now();
        snapshot = capture(step, next);  // the blocking part: the state, copied to host memory
        figures.push_back({"checkpoint_seconds", seconds_since(t), 3});
        last_checkpoint_ = Clock::now();
      }
      report.step(step, figures, elapsed_before + seconds_since(start));
      if (snapshot) {
        snapshot->metrics_jsonl = report.history();
        write_in_background(step, std::move(*snapshot));
      }
      if (stop_now) {
        report.note(log::concat("stopping after step ", step, " on a signal; checkpoint in ", checkpoint_dir_,
                                "; run again with --resume auto"));
        writer_.wait();
        return exit_requeue;
      }
      if (config_.grpo.max_staleness == 0 && step < config_.run.steps) next = enqueue_step();
    }
    writer_.wait();
    return exit_ok;
  }

  void shut_down() {
    writer_.wait();
    std::string stop;
    ByteWriter w(stop);
    w.u32(work_stop);
    for (int t : layout_.trainers()) MPI_Send(stop.data(), static_cast<int>(stop.size()), MPI_BYTE, t, tag_train, ch_.work.get());
    server_.serve_until_all_done();
  }

 private:
  // Restores the newest (or the given) version, or tells the trainers that the run starts
  // fresh; either way they publish the weights the runners start from. The checkpoint
  // directory changes (LATEST, versions set aside) only once every trainer has its state.
  std::optional<ckpt::Checkpoint> restore() {
    std::optional<ckpt::Checkpoint> restored = load();
    // The trainers read the weights and moments from the version themselves.
    std::string message;
    ByteWriter w(message);
    if (restored) {
      w.u32(work_restore);
      w.bytes(restored_path_);
    } else {
      w.u32(work_begin);
    }
    // Any number of trainers (elastic restart): each takes the whole state. The store keeps
    // being served meanwhile: a trainer may be waiting on it before it reads this.
    std::vector<MPI_Request> sends = tell_trainers(message);
    for (const std::string& failure : answers_of_trainers(sends))
      if (!failure.empty()) throw UsageError(failure);  // one message, from rank 0; the directory is as it was
    commit_resume(restored ? &*restored : nullptr);
    return restored;
  }

  // The version to resume from (its model checked, not kept: the trainers read it
  // themselves), restored into the store and the task generator; nullopt for a fresh run.
  std::optional<ckpt::Checkpoint> load() {
    namespace fs = std::filesystem;
    if (resume_.empty()) return std::nullopt;
    // A version restores when its store and random state read back too; otherwise the one before is tried.
    auto accept = [this](const std::string& path, ckpt::Checkpoint& c) { restore_state(path, c); };
    std::optional<std::pair<std::string, ckpt::Checkpoint>> found;
    if (resume_ == "auto") {
      found = ckpt::load_latest(checkpoint_dir_, accept, ckpt::Contents::no_tensor_data);
      if (!found) {
        log::info("no checkpoint in ", checkpoint_dir_, ": starting fresh");
        return std::nullopt;
      }
    } else {
      found = std::make_pair(resume_, ckpt::read_checkpoint(resume_, ckpt::Contents::no_tensor_data));
      accept(found->first, found->second);
    }
    ckpt::Checkpoint& c = found->second;
    check_same_model(found->first, c.config_toml);
    log::info("resuming from ", found->first, ": step ", c.step, ", policy version ", c.policy_version);
    std::error_code ec;
    const fs::path here = fs::path(checkpoint_dir_) / fs::path(found->first).filename();
    resumed_in_place_ = fs::equivalent(found->first, here, ec);
    restored_path_ = resumed_in_place_ ? here.string() : found->first;
    version_ = static_cast<std::uint64_t>(c.policy_version);
    return std::move(c);
  }

  // A version continues only the model that saved it: every model.* setting the same (the
  // trainers check the tensors' shapes too). Bad input otherwise, before anything changes.
  void check_same_model(const std::string& path, const std::string& saved_config) const {
    auto model_lines = [](const std::string& toml) {
      std::vector<std::string> lines;
      std::istringstream in(toml);
      for (std::string line; std::getline(in, line);)
        if (line.rfind("model.", 0) == 0) lines.push_back(line);
      return lines;
    };
    const std::vector<std::string> saved = model_lines(saved_config), mine = model_lines(effective_config_);
    if (saved == mine) return;
    std::string differ;
    for (const std::string& line : saved)
      if (std::find(mine.begin(), mine.end(), line) == mine.end()) differ += (differ.empty() ? "" : ", ") + line;
    throw UsageError(path + " holds another model (saved with " + differ +
                     "): resume with the configuration that saved it");
  }

  // Once every trainer has its state: one timeline from here on. A version resumed from in
  // this run's checkpoint directory becomes LATEST, and the next version adds to its logs; a
  // version named by --resume PATH sets later ones aside (else --resume auto would go back to
  // them). A fresh run, or one resumed from another directory, sets an old directory aside.
  void commit_resume(const ckpt::Checkpoint* restored) {
    if (restored && resumed_in_place_) {
      if (resume_ != "auto") {
        const std::string set_aside = ckpt::supersede_newer_versions(checkpoint_dir_, restored->step);
        if (!set_aside.empty()) log::warn("versions after the one resumed from are set aside: ", set_aside);
      }
      ckpt::set_latest(checkpoint_dir_, std::filesystem::path(restored_path_).filename().string());
      std::tie(logs_.history, logs_.spans) = store_.log_lengths();
      logs_.history_bytes = restored->store_history.size();
      logs_.span_bytes = restored->span_log.size();
      return;
    }
    const std::string moved = ckpt::supersede_directory(checkpoint_dir_);
    if (!moved.empty())
      log::warn(restored ? "resuming from another directory" : "a fresh run", ": the versions in ", checkpoint_dir_,
                " are set aside in ", moved, restored ? "" : " (run with --resume auto to continue them)");
  }

  // Rebuilds the store and the task generator from a version; CorruptCheckpoint (and an
  // empty store) when they do not read back.
  void restore_state(const std::string& path, const ckpt::Checkpoint& c) {
    std::mt19937_64 rng;
    std::istringstream text(c.coordinator_rng);
    text >> rng;
    if (!text) throw ckpt::CorruptCheckpoint(path + ": the coordinator's random state does not read back");
    std::vector<store::RolloutId> requeued;
    try {
      requeued = store_.import_state(c.store_tables, c.store_history, c.span_log);
    } catch (const DecodeError& e) {
      throw ckpt::CorruptCheckpoint(path + ": the store does not read back: " + e.what());
    }
    for (std::int64_t id : c.untrained_rollouts) {
      bool known = id > 0;
      try {
        known = known && store_.get_rollout(static_cast<store::RolloutId>(id)).mode == store::Mode::train;
      } catch (const store::StoreError&) {
        known = false;
      }
      if (!known) {
        store_.clear();
        throw ckpt::CorruptCheckpoint(path + ": untrained rollout " + std::to_string(id) + " is not a training rollout of its store");
      }
    }
    if (!requeued.empty()) log::info(requeued.size(), " rollouts that had not ended at the save are requeued");
    rng_ = rng;
  }

  // Sends `message` (which must outlive the requests) to every trainer.
  std::vector<MPI_Request> tell_trainers(const std::string& message) {
    const std::vector<int> trainers = layout_.trainers();
    std::vector<MPI_Request> sends(trainers.size());
    for (std::size_t k = 0; k < trainers.size(); ++k)
      MPI_Isend(message.data(), static_cast<int>(message.size()), MPI_BYTE, trainers[k], tag_train, ch_.work.get(),
                &sends[k]);
    return sends;
  }

  // Every trainer's answer (tag_state) to what tell_trainers sent, serving the store meanwhile.
  std::vector<std::string> answers_of_trainers(std::vector<MPI_Request>& sends) {
    std::vector<std::string> replies;
    std::string reply;
    while (replies.size() < sends.size()) {
      if (comm::try_receive(ch_.work.get(), MPI_ANY_SOURCE, tag_state, reply)) replies.push_back(reply);
      else serve_a_little();
    }
    comm::wait_all(sends);
    return replies;
  }

  // The blocking part of a checkpoint: every trainer copies its state to host memory (and
  // then writes its share of the file in the background); rank 0 copies the store.
  ckpt::Checkpoint capture(int step, const std::vector<store::RolloutId>& untrained) {
    std::string request;
    ByteWriter w(request);
    w.u32(work_save);
    w.i64(step);
    std::vector<MPI_Request> sends = tell_trainers(request);
    ckpt::Checkpoint c;
    c.step = step;
    c.policy_version = static_cast<std::int64_t>(version_);
    c.config_toml = effective_config_;
    c.arclight_version = std::string(build_info().version) + " " + build_info().git_hash;
    c.created = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    std::ostringstream rng;
    rng << rng_;
    c.coordinator_rng = rng.str();
    // One consistent snapshot of the store; of its append-only parts only what came since the
    // last version (LATEST holds the rest). The trainers copy their shares meanwhile.
    store::MemoryStore::Snapshot snapshot = store_.export_state(logs_.history, logs_.spans);
    c.store_tables = std::move(snapshot.tables);
    c.store_history = std::move(snapshot.history);
    c.span_log = std::move(snapshot.span_log);
    c.store_history_offset = logs_.history_bytes;
    c.span_log_offset = logs_.span_bytes;
    logs_.history = snapshot.history_end;
    logs_.spans = snapshot.span_log_end;
    logs_.history_bytes += c.store_history.size();
    logs_.span_bytes += c.span_log.size();
    for (store::RolloutId id : untrained) c.untrained_rollouts.push_back(static_cast<std::int64_t>(id));
    answers_of_trainers(sends);  // they answer once they have copied
    return c;
  }

  // Rank 0's share of the version (meta, store, metrics) goes with the trainers' shards into
  // one file; rank 0 commits it. Training goes on meanwhile; one write at a time.
  void write_in_background(int step, ckpt::Checkpoint c) {
    ckpt::WriteOptions options;
    options.full_every = config_.checkpoint.full_every;
    options.comm = ch_.checkpoint.get();
    options.part.model_index = false;
    options.part.all_tensors = false;
    // Should LATEST not hold the logs' earlier parts after all, the whole logs up to this version.
    const std::size_t history_end = logs_.history, spans_end = logs_.spans;
    options.whole_log = [this, history_end, spans_end](const std::string& path) {
      return path == "/store/history" ? store_.export_history(0, history_end) : store_.export_span_log(0, spans_end);
    };
    if (config_.faults.kill_in_checkpoint == step)
      options.before_close = [] {
        log::warn("fault drill: rank 0 is killed in the middle of a checkpoint write (faults.kill_in_checkpoint)");
        std::raise(SIGKILL);
      };
    writer_.start([this, step, options, c = std::move(c)] {
      auto t = Clock::now();
      std::string path = ckpt::write_checkpoint(checkpoint_dir_, step, c, options);
      for (const std::string& old : ckpt::apply_retention(checkpoint_dir_, config_.checkpoint.keep))
        log::debug("retention removed ", old);
      log::debug("checkpoint ", path, " written in ", seconds_since(t), " s");
    });
  }

  // Which rollouts each step trained on, as versions of the store's "trained" resource: a
  // ledger in the store that travels with its checkpoints.
  void record_trained(int step, const std::vector<store::RolloutId>& ids) {
    std::string entry = "step=" + std::to_string(step) + " rollouts=";
    for (std::size_t i = 0; i < ids.size(); ++i) entry += (i ? "," : "") + std::to_string(ids[i]);
    bool started = true;  // by an earlier step, perhaps of the run that saved the checkpoint
    try {
      store_.get_latest_resources("trained");
    } catch (const store::StoreError&) {
      started = false;
    }
    if (started) store_.update_resources("trained", std::move(entry));
    else store_.add_resources("trained", std::move(entry));
  }

  // The elapsed seconds of the last row in a metrics history.
  static double elapsed_in(const std::string& history) {
    auto at = history.rfind("\"elapsed\":");
    return at == std::string::npos ? 0.0 : std::atof(history.c_str() + at + 10);
  }

  // The latest policy resources: rollouts name them, and runners sample with that version or newer.
  store::ResourcesId current_policy() {
    try {
      return store_.get_latest_resources("policy").id;
    } catch (const store::StoreError&) {
      return 0;  // the leader has not published version 0 yet: any first weights do
    }
  }

  std::vector<store::RolloutId> enqueue_step() {
    std::vector<store::NewRollout> batch;
    const store::ResourcesId policy = current_policy();
    for (int t = 0; t < config_.grpo.tasks_per_step; ++t) {
      std::string task = agent_->make_task(rng_);
      for (int g = 0; g < config_.grpo.group_size; ++g) {
        store::NewRollout r;
        r.input = task;
        r.mode = store::Mode::train;
        r.resources_id = policy;
        r.metadata = std::to_string(t);  // the GRPO group within its step
        batch.push_back(std::move(r));
      }
    }
    std::vector<store::RolloutId> ids;
    for (const store::Rollout& r : store_.enqueue(std::move(batch))) ids.push_back(r.id);
    return ids;
  }

  // Serves the store until every rollout in ids has ended. Rollouts end by a request, or by the
  // watchdog (a timeout): they are counted after requests and at least every 10 ms.
  void wait_for(const std::vector<store::RolloutId>& ids) {
    auto counted = Clock::time_point{};
    for (;;) {
      if (serve_a_little() > 0 || seconds_since(counted) > 0.01) {
        if (store_.wait_for_rollouts(ids, 0.0).size() == ids.size()) return;
        counted = Clock::now();
      }
    }
  }

  // Answers the store's requests that have come; waits a little (IdleBackoff) when none had.
  std::size_t serve_a_little() {
    const std::size_t served = server_.poll();
    if (served > 0) backoff_.reset();
    else backoff_.idle();
    return served;
  }

  std::vector<store::Span> spans_of(store::RolloutId id) {
    store::SpanFilter f;
    f.rollout_id = id;
    f.attempt_id = store::latest_attempt;
    return store_.query_spans(f, {}).items;
  }

  std::vector<algo::Sample> build_samples(const std::vector<store::RolloutId>& ids, EpisodeFigures& fig, double& staleness,
                                         std::vector<store::RolloutId>& trained_on) {
    std::map<std::string, std::vector<algo::Trajectory>> groups;
    int stale = 0;
    std::vector<double> lags;
    for (const store::Rollout& r : store_.query_rollouts(store::RolloutFilter{0, ids, std::nullopt}, {}).items) {
      fig.retries += static_cast<int>(r.attempt_count) - 1;
      if (r.status != store::RolloutStatus::succeeded) {
        ++fig.failed;
        continue;
      }
      algo::Trajectory t = algo::read_trajectory(spans_of(r.id));
      add_figures(t, fig);
      const double lag = double(version_) - double(t.oldest_version());
      lags.push_back(lag);
      if (lag > config_.grpo.max_staleness) {
        ++stale;
        continue;
      }
      groups[r.metadata].push_back(std::move(t));
      trained_on.push_back(r.id);
    }
    staleness = lags.empty() ? 0 : *std::max_element(lags.begin(), lags.end());
    if (stale) log::debug(stale, " rollouts past max_staleness were not trained on");
    std::vector<algo::Sample> samples;
    const bool per_step = config_.grpo.advantage == "per_step";
    for (auto& [group, trajectories] : groups) {
      std::vector<std::vector<double>> rewards;
      for (const auto& t : trajectories) rewards.push_back(t.rewards);
      auto advantages = algo::group_advantages(rewards, per_step, config_.grpo.gamma);
      for (std::size_t i = 0; i < trajectories.size(); ++i) {
        std::vector<double> per_call = advantages[i];
        per_call.resize(trajectories[i].calls.size(), per_call.empty() ? 0.0 : per_call.back());
        if (config_.grpo.samples == "transition") {
          for (algo::Sample& s : algo::transition_samples(trajectories[i], per_call)) samples.push_back(std::move(s));
        } else {
          samples.push_back(algo::trajectory_sample(trajectories[i], per_call));
        }
      }
    }
    return samples;
  }

  static void add_figures(const algo::Trajectory& t, EpisodeFigures& fig) {
    ++fig.episodes;
    for (double r : t.rewards) fig.reward += r;
    for (const auto& c : t.calls) fig.tokens += double(c.response.size());
    auto it = t.metrics.find("success");
    const double success = it == t.metrics.end() ? 0.0 : it->second;
    fig.success += success;
    for (const auto& [k, v] : t.metrics) fig.metrics[k] += k == "guesses" ? v * success : v;
    fig.metrics["_solved"] += success;
  }

  void train(const std::vector<algo::Sample>& samples, double stats[9]) {
    const std::vector<int> trainers = layout_.trainers();
    std::vector<std::vector<algo::Sample>> shards(trainers.size());
    for (std::size_t i = 0; i < samples.size(); ++i) shards[i % trainers.size()].push_back(samples[i]);
    const double total = algo::action_tokens(samples);
    std::vector<std::string> messages(trainers.size());
    std::vector<MPI_Request> sends(trainers.size());
    for (std::size_t k = 0; k < trainers.size(); ++k) {
      ByteWriter w(messages[k]);
      w.u32(work_train);
      w.f64(total);
      messages[k] += algo::encode_samples(shards[k]);
      MPI_Isend(messages[k].data(), static_cast<int>(messages[k].size()), MPI_BYTE, trainers[k], tag_train, ch_.work.get(),
                &sends[k]);
    }
    // Every trainer's figures: the loss terms are already weighted by their shard's share, so they add up.
    std::size_t received = 0;
    std::string reply;
    int source = 0;
    while (received < trainers.size()) {
      if (comm::try_receive(ch_.work.get(), MPI_ANY_SOURCE, tag_stats, reply, &source)) {
        double figures[9];
        if (reply.size() != sizeof figures) throw Error(log::concat("trainer ", source, " sent figures of ", reply.size(), " bytes"));
        std::memcpy(figures, reply.data(), sizeof figures);
        for (int i : {0, 1, 2, 3, 4}) stats[i] += figures[i];
        if (source == layout_.trainer_leader()) {
          stats[5] = figures[5];
          stats[7] = figures[7];
          stats[8] = figures[8];
        }
        ++received;
        continue;
      }
      serve_a_little();  // runners may be busy with stale-allowed rollouts
    }
    comm::wait_all(sends);
  }

  EpisodeFigures validate() {
    std::vector<store::NewRollout> batch;
    const store::ResourcesId policy = current_policy();
    for (const std::string& task : agent_->validation_tasks()) {
      store::NewRollout r;
      r.input = task;
      r.mode = store::Mode::val;
      r.resources_id = policy;
      batch.push_back(std::move(r));
    }
    std::vector<store::RolloutId> ids;
    for (const store::Rollout& r : store_.enqueue(std::move(batch))) ids.push_back(r.id);
    wait_for(ids);
    EpisodeFigures fig;
    for (store::RolloutId id : ids) {
      if (store_.get_rollout(id).status != store::RolloutStatus::succeeded) {
        ++fig.failed;
        ++fig.episodes;
        continue;
      }
      add_figures(algo::read_trajectory(spans_of(id)), fig);
    }
    return fig;
  }

  const Config& config_;
  const Channels& ch_;
  const Layout& layout_;
  SystemClock clock_;
  store::MemoryStore store_;
  store::Watchdog watchdog_;
  comm::StoreServer server_;
  comm::IdleBackoff backoff_{comm::IdleBackoff::Awaiting::next_message};
  std::unique_ptr<agent::Agent> agent_;
  std::mt19937_64 rng_;
  std::uint64_t version_ = 0;
  std::string resume_;
  std::string effective_config_;
  std::string checkpoint_dir_;
  Clock::time_point last_checkpoint_;
  std::string restored_path_;     // the version resumed from
  bool resumed_in_place_ = false;  // from a version in this run's checkpoint directory
  // How much of the store's append-only logs LATEST holds: entries and bytes.
  struct {
    std::size_t history = 0, spans = 0;
    std::uint64_t history_bytes = 0, span_bytes = 0;
  } logs_;
  BackgroundWriter writer_;  // last: joined before the store it reads is gone
};

}  // namespace

void check_training_config(const Config& config) {
  auto agent = agent::make_agent(config.agent);
  if (config.model.d_model % config.model.n_heads != 0 || (config.model.d_model / config.model.n_heads) % 2 != 0)
    throw UsageError(log::concat("model.d_model = ", config.model.d_model, " must split into model.n_heads = ",
                                 config.model.n_heads, " heads of an even size"));
  if (config.grpo.train_blocks > config.model.n_layers)
    throw UsageError(log::concat("grpo.train_blocks = ", config.grpo.train_blocks, " exceeds model.n_layers = ",
                                 config.model.n_layers));
  if (config.model.max_seq < agent->max_sequence())
    throw UsageError(log::concat("model.max_seq = ", config.model.max_seq, " is shorter than a ", agent->name(),
                                 " episode (", agent->max_sequence(), " tokens)"));
}

namespace {
int run_coordinator(const Config& config, const Channels& ch, const Layout& layout, const std::string& resume,
                    const std::string& effective_config) {
  Coordinator coordinator(config, ch, layout, resume, effective_config);
  const int code = coordinator.run();
  coordinator.shut_down();
  return code;
}

int run_worker(const Config& config, const Channels& ch, const Layout& layout, int rank) {
  // One store client per rank (it is thread-safe): each rank says bye once.
  comm::RemoteStore store(ch.control.get(), 0);
  const RankRole& role = layout.roles[rank];
  if (role.runner && role.trainer) {
    // Colocated: a trainer thread and a runner thread share the rank and hand weights over in memory.
    SharedWeights weights;
    std::exception_ptr trainer_error;
    std::thread trainer([&] {
      try {
        run_trainer(config, ch, layout, rank, store, weights);
      } catch (...) {
        trainer_error = std::current_exception();
        weights.stop();
      }
    });
    try {
      run_runner(config, store, weights, rank);
    } catch (...) {
      trainer.detach();  // the error ends the whole job (MPI_Abort) right after this
      throw;
    }
    trainer.join();
    if (trainer_error) std::rethrow_exception(trainer_error);
    return exit_ok;
  }
  BroadcastWeights weights(ch.sync.get(), rank == layout.trainer_leader());
  if (role.trainer) run_trainer(config, ch, layout, rank, store, weights);
  else run_runner(config, store, weights, rank);
  return exit_ok;
}

}  // namespace

int run_training(const comm::MpiRuntime& mpi, const Config& config, const Layout& layout, const Placement&,
                 const std::string& resume, const std::string& effective_config) {
  std::signal(SIGUSR1, request_stop);
  std::signal(SIGTERM, request_stop);
  const auto start = Clock::now();
  const int rank = mpi.rank();
  Channels ch = open_channels(layout, rank);
  const int code = rank == 0 ? run_coordinator(config, ch, layout, resume, effective_config)
                             : run_worker(config, ch, layout, rank);
  write_usage(mpi, layout, compute_clock.seconds(), seconds_since(start),
              (std::filesystem::path(config.run.dir) / "usage.json").string());
  return code;
}

}  // namespace arclight::app
