// Rank 0's step loop: enqueue a step's rollouts, serve the store while runners run them, turn
// their spans into samples with advantages, have the trainers train, report, checkpoint.
#include "coordinator.hpp"

#include "arclight/app/run.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <thread>

#include "arclight/algo/advantages.hpp"
#include "arclight/comm/waiting.hpp"
#include "arclight/core/error.hpp"
#include "arclight/core/log.hpp"
#include "arclight/model/hf_model.hpp"
#include "store_archive.hpp"

namespace arclight::app {
namespace {

// Set by SIGUSR1 or SIGTERM: rank 0 checkpoints at the next step boundary and ends the job
// with exit_requeue.
std::atomic<bool> stop_requested{false};
extern "C" void request_stop(int) { stop_requested = true; }

// The elapsed seconds of the last row in a metrics history.
// VmHWM: what `scripts/bench.sh memory` reads.
std::uint64_t peak_resident_bytes() {
  std::ifstream status("/proc/self/status");
  for (std::string key; status >> key;) {
    std::uint64_t kib = 0;
    if (key == "VmHWM:" && status >> kib) return kib << 10;
  }
  return 0;
}

double elapsed_in(const std::string& history) {
  auto at = history.rfind("\"elapsed\":");
  return at == std::string::npos ? 0.0 : std::atof(history.c_str() + at + 10);
}

}  // namespace

void stop_at_next_step_on_signals() {
  std::signal(SIGUSR1, request_stop);
  std::signal(SIGTERM, request_stop);
}

bool stop_signal_received() { return stop_requested.load(); }

int run_coordinator(const Config& config, const comm::Channels& ch, const Layout& layout, const std::string& resume,
                    const std::string& effective_config, const std::string& secret) {
  Coordinator coordinator(config, ch, layout, resume, effective_config, secret);
  const int code = coordinator.run();
  const std::vector<int> hung = coordinator.shut_down();
  if (hung.empty()) return code;
  // A hung process never reaches MPI_Finalize (nor the last collectives), and mpirun waits for
  // it: only an abort ends the job. Its code still says how the run ended.
  std::string ranks;
  for (int r : hung) ranks += log::concat(ranks.empty() ? "" : ", ", r, " (", role_name(layout.roles[r]), ")");
  log::warn("the job ends without rank", hung.size() > 1 ? "s " : " ", ranks, ", which hang",
            hung.size() > 1 ? "" : "s", ": ",
            code == exit_ok ? "the run is done (exit 0)" : "checkpointed on a signal (exit 3: requeue)");
  MPI_Abort(MPI_COMM_WORLD, code);
  return code;
}

Coordinator::Coordinator(const Config& config, const comm::Channels& ch, const Layout& layout, std::string resume,
                         std::string effective_config, std::string secret)
    : config_(config),
      ch_(ch),
      layout_(layout),
      store_(clock_, rollout_config(config.rollout)),
      watchdog_(store_, store::watchdog_interval(store_.default_config())),
      server_(ch.control.get(), store_),
      pulses_(ch.control.get()),
      pulse_to_watcher_(ch.control.get(), layout.world_size() - 1),
      pulses_taken_(Stopwatch::now()),
      agent_(agent::make_agent(config.agent)),
      model_(model::architecture_of(config.model, agent_->vocab_size())),
      rng_(config.run.seed),
      // A version named by path is the user's choice: a symbolic link to it is followed here, where one found in a
      // checkpoint directory is not (ckpt::open_file).
      resume_(resume.empty() || resume == "auto" ? resume : std::filesystem::weakly_canonical(resume).string()),
      effective_config_(std::move(effective_config)),
      model_definition_(config.model.source == ModelSource::hf ? model::definition_digest(config.model.path) : ""),
      checkpoint_dir_(checkpoint_dir_of(config)),
      secret_(std::move(secret)) {}

int Coordinator::run() {
  // Before the restore: a lazy one leaves records in the version, which the store serves from the
  // moment it is restored (runners asking for an older policy version, say).
  archive_ = std::make_shared<CheckpointStoreArchive>(checkpoint_dir_, config_.checkpoint.span_log == "all");
  store_.set_archive(archive_);
  std::optional<ckpt::Checkpoint> restored = restore();
  // Outside clients come once the store holds what it resumed from (a restore fills an empty store).
  if (config_.store.http) store_api_ = std::make_unique<StoreApiServer>(config_, store_, secret_);
  RunReport report(config_.run.dir, config_.run.steps, config_.run.progress,
                   restored ? &restored->metrics_jsonl : nullptr, !restored || restored->damaged_logs.empty());
  const int first_step = restored ? static_cast<int>(restored->step) + 1 : 1;
  report.note(log::concat(restored ? "resuming " : "training ", agent_->name(), " from step ", first_step, " to ",
                          config_.run.steps, "; metrics in ", report.metrics_path(), ", TensorBoard events in ",
                          report.events_path(), ", checkpoints in ", checkpoint_dir_));
  start_ = last_checkpoint_ = Stopwatch::now();
  elapsed_before_ = restored ? elapsed_in(restored->metrics_jsonl) : 0.0;
  if (restored && !restored->untrained_rollouts.empty()) {
    // The step's rollouts were enqueued (and perhaps run) before the save: they go on from
    // the store as it was, requeued where they had not ended, and are trained on once.
    for (std::int64_t id : restored->untrained_rollouts) next_.push_back(static_cast<store::RolloutId>(id));
  } else if (first_step <= config_.run.steps) {
    next_ = enqueue_step();
  }
  restored.reset();     // its logs (the whole span log, the history) are in the store now: not twice in memory
  let_go_of_trained();  // of a resumed run: what the version holds and was trained on
  for (int step = first_step; step <= config_.run.steps; ++step) {
    std::vector<Figure> figures = train_step(step);
    if (config_.grpo.validate_every > 0 && (step % config_.grpo.validate_every == 0 || step == config_.run.steps) &&
        !agent_->validation_tasks().empty())  // an outside agent without validation tasks has none to report
      add_validation(figures);
    const bool stop_now = stop_requested.load();
    std::optional<ckpt::Checkpoint> snapshot;
    if (checkpoint_due(step, stop_now)) {
      const auto t = Stopwatch::now();
      snapshot = capture(step, next_);  // the blocking part: the state, copied to host memory
      figures.push_back({"checkpoint_seconds", seconds_since(t), 3});
      last_checkpoint_ = Stopwatch::now();
    }
    report.step(step, figures, elapsed_before_ + seconds_since(start_));
    if (snapshot) {
      snapshot->metrics_jsonl = report.history();
      write_in_background(step, std::move(*snapshot));
    }
    if (stop_now && step < config_.run.steps) {  // a run that is done exits 0, signal or not
      report.note(log::concat("stopping after step ", step, " on a signal; checkpoint in ", checkpoint_dir_,
                              "; run again with --resume auto"));
      finish_writing();
      return exit_requeue;
    }
    if (config_.grpo.max_staleness == 0 && step < config_.run.steps) next_ = enqueue_step();
  }
  finish_writing();
  const store::Statistics stats = store_.statistics();
  log::info("rank 0's peak resident memory ", peak_resident_bytes() >> 20, " MiB; the store's spans in memory ",
            stats.span_bytes >> 20, " MiB (checkpoint.span_log = \"", config_.checkpoint.span_log, "\")");
  return exit_ok;
}

// Serves the store (and watches for hung ranks) until the version being written is written. A write that does not end
// is a stalled file system: every rank's signs of life go on (threads of their own), and the job waited for Slurm's
// time limit, never requeued.
void Coordinator::finish_writing() {
  const double limit = config_.checkpoint.write_timeout_seconds;
  while (writer_.busy()) {
    serve_a_little();
    if (limit > 0 && writer_.seconds_running() > limit) {
      log::error("checkpoint: the version being written has not been written in ", limit,
                 " s (checkpoint.write_timeout_seconds): the file system stalls; ending the job, to be requeued (it "
                 "resumes from the last version written)");
      MPI_Abort(MPI_COMM_WORLD, exit_requeue);
    }
  }
  writer_.wait();
}

std::vector<int> Coordinator::shut_down() {
  finish_writing();
  const std::string stop = comm::work::encode(comm::work::Stop{});
  for (int t : layout_.trainers())
    MPI_Send(stop.data(), static_cast<int>(stop.size()), MPI_BYTE, t, comm::tag_work, ch_.work.get());
  // A rank that hangs never says bye: wait for the others only.
  server_.serve_until_all_done([&] {
    if (seconds_since(pulses_taken_) < 1.0) return false;
    const std::vector<int> hung = hung_ranks();
    return hung == server_.clients_not_done();
  });
  return server_.clients_not_done();
}

// One step: its rollouts run to their end, their samples trained on. Returns the step's figures.
std::vector<Figure> Coordinator::train_step(int step) {
  const auto t0 = Stopwatch::now();
  std::vector<store::RolloutId> current = std::move(next_);
  next_.clear();
  wait_for(current);
  // With staleness allowed, the next step's rollouts run while this one trains.
  if (config_.grpo.max_staleness > 0 && step < config_.run.steps) next_ = enqueue_step();
  const double rollout_seconds = seconds_since(t0);
  EpisodeFigures fig;
  double staleness = 0;
  std::vector<store::RolloutId> trained_on;
  const std::vector<algo::Sample> samples = build_samples(current, fig, staleness, trained_on);
  const comm::work::TrainerFigures trained = train(samples);
  record_trained(step, trained_on);
  let_go_of_trained();
  const double step_seconds = seconds_since(t0);
  ++version_;
  // Reward over the episodes (a failed rollout has none); success over every rollout that ended (a failure is no
  // success: an agent that times out does not raise it), as validation counts it.
  return {
      {"version", double(version_), 0},
      {"reward", fig.reward / std::max(1, fig.episodes), 3},
      {"success", fig.success / std::max(1, fig.episodes + fig.failed), 3},
      {"rollouts", double(fig.episodes), 0},
      {"rollouts_per_s", fig.episodes / std::max(1e-9, step_seconds), 1},
      {"tokens_per_s", fig.tokens / std::max(1e-9, step_seconds), 1},
      {"loss", trained.loss, 4},
      {"grad_norm", trained.grad_norm, 3},
      {"entropy", trained.entropy, 3},
      {"clip_fraction", trained.clip_fraction, 3},
      {"clip_fraction_lower", trained.clip_fraction_lower, 3},
      {"staleness", staleness, 2},
      {"failed", double(fig.failed), 0},
      {"retries", double(fig.retries), 0},
      {"time_rollout", rollout_seconds, 2},
      {"time_train", trained.train_seconds, 2},
      {"time_sync", trained.sync_seconds, 2},
      {"elapsed", elapsed_before_ + seconds_since(start_), 1},
  };
}

// The validation tasks, run greedily with the newest policy: the agent's figures, and the
// reference figures to read them against.
void Coordinator::add_validation(std::vector<Figure>& figures) {
  const EpisodeFigures val = validate();
  figures.push_back({"val_success", val.success / std::max(1, val.episodes), 3});
  for (const auto& [name, value] : agent_->summarize(val.results))
    if (name != "success") figures.push_back({"val_" + name, value, 3});
  for (const auto& [name, value] : agent_->reference_figures()) figures.push_back({name, value, 3});
}

// The latest policy resources: rollouts name them, and runners sample with that version or newer.
store::ResourcesId Coordinator::current_policy() {
  try {
    return store_.get_latest_resources(store::policy_resources).id;
  } catch (const store::StoreError&) {
    return 0;  // the leader has not published version 0 yet: any first weights do
  }
}

std::vector<store::RolloutId> Coordinator::enqueue_step() {
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
void Coordinator::wait_for(const std::vector<store::RolloutId>& ids) {
  auto counted = Stopwatch::time_point{};
  for (;;) {
    if (serve_a_little() > 0 || seconds_since(counted) > 0.01) {
      if (store_.wait_for_rollouts(ids, 0.0).size() == ids.size()) return;
      counted = Stopwatch::now();
    }
  }
}

// The ranks that have not said bye and have been silent for run.hung_rank_seconds (pulse.hpp).
// A runner is named once (a trainer ends the job: end_if_training_cannot_go_on).
std::vector<int> Coordinator::hung_ranks() {
  pulses_taken_ = Stopwatch::now();
  pulses_.take();
  const std::vector<int> silent = pulses_.silent_for(config_.run.hung_rank_seconds);
  const std::vector<int> here = server_.clients_not_done();
  std::vector<int> hung;
  std::set_intersection(silent.begin(), silent.end(), here.begin(), here.end(), std::back_inserter(hung));
  for (int r : hung) {
    if (layout_.roles[r].trainer || std::find(named_hung_.begin(), named_hung_.end(), r) != named_hung_.end()) continue;
    named_hung_.push_back(r);
    log::warn(hung_rank_message(log::concat("runner rank ", r), config_.run.hung_rank_seconds,
                                "; the job goes on without it"));
  }
  return hung;
}

// A runner of a split layout that hangs is survived (the store requeues its work, the trainer
// leader fences it), unless every runner hangs: then no rollout can end. A trainer is not: the
// others wait for it in every all-reduce. The job ends, to be requeued (it resumes from its last
// checkpoint): here, not by unwinding, which would wait for ever for a checkpoint writer's thread
// that sits in a collective write with the hung trainer.
void Coordinator::end_if_training_cannot_go_on() {
  const std::vector<int> hung = hung_ranks();
  const auto end_job = [&](const std::string& who, const std::string& why) {
    end_job_now(std::make_exception_ptr(
        Error(hung_rank_message(who, config_.run.hung_rank_seconds,
                                log::concat(", and ", why,
                                            "; ending the job, to be requeued (it resumes from its last "
                                            "checkpoint)")),
              exit_requeue)));
  };
  for (int r : hung)
    if (layout_.roles[r].trainer)
      end_job(log::concat("rank ", r, " (", role_name(layout_.roles[r]), ")"), "training cannot go on without it");
  std::vector<int> runners;
  for (int r = 0; r < static_cast<int>(layout_.roles.size()); ++r)
    if (layout_.roles[r].runner) runners.push_back(r);
  if (!runners.empty() && std::includes(hung.begin(), hung.end(), runners.begin(), runners.end()))
    end_job(runners.size() == 1 ? log::concat("the only runner (rank ", runners.front(), ")")
                                : log::concat("every runner (", runners.size(), " ranks)"),
            "no rollout can end without one");
}

// Answers the store's requests that have come; waits a little (IdleBackoff) when none had.
std::size_t Coordinator::serve_a_little() {
  if (seconds_since(pulses_taken_) >= 1.0) end_if_training_cannot_go_on();
  const std::size_t served = server_.poll();
  if (served > 0)
    backoff_.reset();
  else
    backoff_.idle();
  return served;
}

std::vector<store::Span> Coordinator::spans_of(store::RolloutId id) {
  store::SpanFilter f;
  f.rollout_id = id;
  f.attempt_id = store::latest_attempt;
  return store_.query_spans(f, {}).items;
}

std::vector<algo::Sample> Coordinator::build_samples(const std::vector<store::RolloutId>& ids, EpisodeFigures& fig,
                                                     double& staleness, std::vector<store::RolloutId>& trained_on) {
  std::map<std::string, std::vector<algo::Trajectory>> groups;
  int stale = 0, unusable = 0;
  std::string why_unusable;
  std::vector<double> lags;
  for (const store::Rollout& r : store_.query_rollouts(store::RolloutFilter{0, ids, std::nullopt}, {}).items) {
    fig.retries += std::max(0, static_cast<int>(r.attempt_count) - 1);  // one cancelled before its first: none
    if (r.status != store::RolloutStatus::succeeded) {
      ++fig.failed;
      continue;
    }
    // What an outside agent traced may not make an episode (a reward for a call it never made, no call traced at
    // all): that rollout is left out, not the job ended.
    algo::Trajectory t;
    try {
      t = algo::read_trajectory(spans_of(r.id), config_.grpo.temperature);
      if (t.calls.empty()) throw DecodeError("no policy call was traced (a request outside /rollout/.../attempt/?)");
      algo::check_fits_model(t, model_.vocab_size, model_.max_seq);
    } catch (const DecodeError& e) {
      if (unusable++ == 0) why_unusable = log::concat("rollout ", r.id, ": ", e.what());
      ++fig.failed;  // for the figures: it ended without an episode
      continue;
    }
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
  if (unusable) log::warn(unusable, " succeeded rollouts made no episode and were not trained on (", why_unusable, ")");
  return samples_of_groups(groups);
}

// GRPO: each trajectory's advantages relative to its group's, as samples of whole
// trajectories or of single policy calls.
std::vector<algo::Sample> Coordinator::samples_of_groups(
    std::map<std::string, std::vector<algo::Trajectory>>& groups) const {
  std::vector<algo::Sample> samples;
  const bool per_step = config_.grpo.advantage == Advantage::per_step;
  int by_call = 0;
  std::string why_by_call;
  for (auto& [group, trajectories] : groups) {
    std::vector<std::vector<double>> rewards;
    for (const auto& t : trajectories) rewards.push_back(t.rewards);
    auto advantages = algo::group_advantages(rewards, per_step, config_.grpo.gamma);
    for (std::size_t i = 0; i < trajectories.size(); ++i) {
      std::vector<double> per_call = advantages[i];
      per_call.resize(trajectories[i].calls.size(), per_call.empty() ? 0.0 : per_call.back());
      std::string not_one_sequence;
      for (algo::Sample& s : algo::episode_samples(trajectories[i], per_call,
                                                   config_.grpo.samples == SampleUnit::trajectory, &not_one_sequence))
        samples.push_back(std::move(s));
      if (!not_one_sequence.empty() && by_call++ == 0) why_by_call = not_one_sequence;
    }
  }
  if (by_call)
    log::warn(by_call, " episodes were not one token sequence and trained call by call (", why_by_call,
              "); grpo.samples = \"transition\" does so for all");
  return samples;
}

// A reward or success that is not a number (an outside agent's NaN) counts for nothing, as in the advantages.
void Coordinator::add_figures(const algo::Trajectory& t, EpisodeFigures& fig) {
  ++fig.episodes;
  for (double r : t.rewards)
    if (std::isfinite(r)) fig.reward += r;
  for (const auto& c : t.calls) fig.tokens += double(c.response.size());
  auto it = t.metrics.find("success");
  if (it != t.metrics.end() && std::isfinite(it->second)) fig.success += it->second;
}

// Sends every trainer its shard of the samples (balanced by tokens), serves the store meanwhile, and combines
// their figures: the loss terms are already weighted by each shard's share, so they add up.
comm::work::TrainerFigures Coordinator::train(const std::vector<algo::Sample>& samples) {
  const std::vector<int> trainers = layout_.trainers();
  std::vector<std::vector<algo::Sample>> shards(trainers.size());
  const std::vector<std::vector<std::size_t>> by_tokens = algo::token_balanced_shards(samples, trainers.size());
  for (std::size_t k = 0; k < trainers.size(); ++k)
    for (std::size_t i : by_tokens[k]) shards[k].push_back(samples[i]);
  const double total = algo::action_tokens(samples);
  std::vector<std::string> messages(trainers.size());
  std::vector<MPI_Request> sends(trainers.size());
  for (std::size_t k = 0; k < trainers.size(); ++k) {
    messages[k] = comm::work::encode(comm::work::Train{total, algo::encode_samples(shards[k])});
    if (messages[k].size() > std::size_t(std::numeric_limits<int>::max()))  // MPI counts are ints
      throw Error(log::concat("the step's samples for trainer rank ", trainers[k], " are ", messages[k].size() >> 20,
                              " MiB, past MPI's 2 GiB message: more trainers, or fewer or shorter episodes a step, "
                              "bring each trainer's share under it"));
  }
  for (std::size_t k = 0; k < trainers.size(); ++k) {
    MPI_Isend(messages[k].data(), static_cast<int>(messages[k].size()), MPI_BYTE, trainers[k], comm::tag_work,
              ch_.work.get(), &sends[k]);
  }
  comm::work::TrainerFigures sum;
  std::size_t received = 0;
  std::string reply;
  int source = 0;
  try {
    while (received < trainers.size()) {
      if (!comm::try_receive(ch_.work.get(), MPI_ANY_SOURCE, comm::tag_trainer_figures, reply, &source)) {
        serve_a_little();  // runners may be busy with stale-allowed rollouts
        continue;
      }
      comm::work::TrainerFigures f;
      try {
        f = comm::work::decode_figures(reply);
      } catch (const DecodeError& e) {
        throw Error(log::concat("trainer ", source, ": ", e.what()));
      }
      sum.loss += f.loss;
      sum.policy_loss += f.policy_loss;
      sum.kl += f.kl;
      sum.entropy += f.entropy;
      sum.clip_fraction += f.clip_fraction;
      sum.clip_fraction_lower += f.clip_fraction_lower;
      if (source == layout_.trainer_leader()) {
        sum.grad_norm = f.grad_norm;
        sum.train_seconds = f.train_seconds;
        sum.sync_seconds = f.sync_seconds;
      }
      ++received;
    }
  } catch (...) {  // the sends still under way read `messages`: the job ends here, not unwound past them
    end_job_now(std::current_exception());
  }
  comm::wait_all(sends);
  return sum;
}

EpisodeFigures Coordinator::validate() {
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
      fig.results.emplace_back();
      continue;
    }
    algo::Trajectory t;
    try {
      t = algo::read_trajectory(spans_of(id), config_.grpo.temperature);
    } catch (const DecodeError& e) {  // as in training: the rollout counts as failed, the job goes on
      log::warn("validation rollout ", id, " made no episode: ", e.what());
      ++fig.failed;
      ++fig.episodes;
      fig.results.emplace_back();
      continue;
    }
    add_figures(t, fig);
    fig.results.push_back(t.metrics);
  }
  return fig;
}

// Sends `message` (which must outlive the requests) to every trainer.
std::vector<MPI_Request> Coordinator::tell_trainers(const std::string& message) {
  const std::vector<int> trainers = layout_.trainers();
  std::vector<MPI_Request> sends(trainers.size());
  for (std::size_t k = 0; k < trainers.size(); ++k)
    MPI_Isend(message.data(), static_cast<int>(message.size()), MPI_BYTE, trainers[k], comm::tag_work, ch_.work.get(),
              &sends[k]);
  return sends;
}

// Every trainer's answer (tag_trainer_state) to what tell_trainers sent, serving the store meanwhile.
std::vector<std::string> Coordinator::answers_of_trainers(std::vector<MPI_Request>& sends) {
  std::vector<std::string> replies;
  std::string reply;
  try {
    while (replies.size() < sends.size()) {
      if (comm::try_receive(ch_.work.get(), MPI_ANY_SOURCE, comm::tag_trainer_state, reply))
        replies.push_back(reply);
      else if (loading_)  // on the loader thread: the main thread serves the store
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      else
        serve_a_little();
    }
  } catch (...) {  // the sends still under way read the caller's message: the job ends here, not unwound past it
    end_job_now(std::current_exception());
  }
  comm::wait_all(sends);
  return replies;
}

}  // namespace arclight::app
