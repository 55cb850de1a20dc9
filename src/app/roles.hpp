#pragma once
// The roles of a training job's ranks (app-private): each role's entry point, and what they share.
#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "arclight/app/usage.hpp"
#include "arclight/comm/channels.hpp"
#include "arclight/core/config.hpp"
#include "arclight/core/layout.hpp"
#include "arclight/core/log.hpp"
#include "arclight/model/policy.hpp"
#include "arclight/store/store.hpp"

namespace arclight::app {

class WeightChannel;

using Stopwatch = std::chrono::steady_clock;
inline double seconds_since(Stopwatch::time_point t) {
  return std::chrono::duration<double>(Stopwatch::now() - t).count();
}

// The one message of a rank whose pulses stopped (comm/pulse.hpp), and what follows from it.
inline std::string hung_rank_message(const std::string& who, double silent_seconds, const std::string& so) {
  return log::concat(who, " has sent no sign of life for ", silent_seconds,
                     " s (run.hung_rank_seconds): it hangs (stopped, or its node frozen)", so);
}

inline std::string checkpoint_dir_of(const Config& config) {
  return config.checkpoint.dir.empty() ? (std::filesystem::path(config.run.dir) / "checkpoints").string()
                                       : config.checkpoint.dir;
}

// Writes checkpoint versions on a thread of its own, one at a time, while training goes on.
// A parallel write is collective: a rank that fails cannot leave the others waiting, so a
// failure ends the job (MPI_Abort) with one message.
class BackgroundWriter {
 public:
  ~BackgroundWriter() { wait(); }
  // `what` names the write in the one message a failure ends the job with.
  void start(const std::string& what, std::function<void()> write);
  void wait() {
    if (thread_.joinable()) thread_.join();
  }
  // Whether a write is under way (wait() would block).
  bool busy() const { return thread_.joinable() && !finished_; }
  // Since the write under way (or the last one) began.
  double seconds_running() const { return seconds_since(started_); }

 private:
  Stopwatch::time_point started_{};
  std::thread thread_;
  std::atomic<bool> finished_{true};
};

// A runner's policy version before the first weights reach it: it samples nothing until then, so that a resumed run
// never samples with freshly initialised weights.
inline constexpr std::uint64_t no_version = std::numeric_limits<std::uint64_t>::max();

// runner.cpp: the policy version each rollout needs: that of the resources it was enqueued under (0: none named),
// read from the store once per resources id. Thread-safe.
class RequiredVersions {
 public:
  explicit RequiredVersions(store::Store& store) : store_(store) {}
  std::uint64_t of(const std::vector<store::AttemptedRollout>& rollouts);  // the newest any of them needs

 private:
  store::Store& store_;
  std::mutex mutex_;
  std::map<store::ResourcesId, std::uint64_t> versions_;
};

// The job's rollout.* as the store's config of a rollout enqueued without one.
inline store::RolloutConfig rollout_config(const RolloutDefaults& d) {
  store::RolloutConfig c;
  c.timeout_seconds = d.timeout_seconds;
  c.unresponsive_seconds = d.unresponsive_seconds;
  c.max_attempts = static_cast<std::uint32_t>(d.max_attempts);
  for (const std::string& name : d.retry_condition) c.retry_condition |= store::bit(*store::parse_attempt_status(name));
  return c;
}

// In each role, `device` is where the rank's policy computes: a CUDA device ordinal, or -1 for the CPU.
inline model::Policy policy_on(int device, const ModelConfig& model, int vocab_size, std::uint64_t seed) {
  model::Policy policy(model, vocab_size, seed);
  policy.place_on(device);
  return policy;
}

// runner.cpp: takes rollouts from the store, runs their episodes with the newest policy it has,
// and writes their spans; returns when the weight channel says training is over.
void run_runner(const Config& config, store::Store& store, WeightChannel& weights, int rank, int device,
                ComputeClock& compute);

// external_runner.cpp: a runner whose episodes are outside agent processes (agent.name = "external"), served by an
// OpenAI-compatible endpoint that needs `secret` (the job's bearer token); returns as run_runner does.
void run_external_runner(const Config& config, store::Store& store, WeightChannel& weights, int rank, int device,
                         ComputeClock& compute, const std::string& secret);

// trainer_rank.cpp: serves the coordinator's requests (train, save, restore, begin) until it says stop.
void run_trainer(const Config& config, const comm::Channels& ch, const Layout& layout, int rank, int device,
                 store::Store& store, WeightChannel& weights, ComputeClock& compute);

// trainer_rank.cpp: how a trainer all-reduces gradients: "nccl" for a policy on a GPU (with NCCL compiled in), else
// "mpi"; "none" for a lone trainer.
std::string gradient_transport(int trainers, int device);

// trainer_rank.cpp: checks, collectively over the trainers, that each all-reduces over the same transport (`mine`,
// gradient_transport's): one trainer without its GPU (a driver fault, a node without GPUs) would build an MPI reducer
// among NCCL ones, and their collectives would never match (a hang). Throws UsageError on every trainer if not.
void check_same_gradient_transport(MPI_Comm trainers, const std::string& mine);

// trainer_rank.cpp: why the trainers' gradients cannot go over NCCL though they live on GPUs, or "": NCCL not built in
// (the MPI reducer takes host memory only), or two trainers on one GPU (NCCL takes one rank per GPU). `hosts` and
// `gpus` by world rank, as weights_over_nccl takes them. Rank 0 says it at start-up, not the first step's all-reduce.
std::string gradients_on_gpus_problem(const Layout& layout, const std::vector<std::string>& hosts,
                                      const std::vector<std::string>& gpus, bool nccl_built);

// Ends the job at once with the error's message and exit code (MPI_Abort), as the program's top level would: for an
// error on a thread whose rank has another thread still using what unwinding would destroy (communicators, the store
// client). `error` holds an Error, another std::exception, or anything.
[[noreturn]] void end_job_now(const std::exception_ptr& error);
// Logs what ended a command (an Error's own message, anything else as unexpected) and returns its exit code.
int report_failure(const std::exception_ptr& error);

// coordinator.cpp: rank 0, the store and the algorithm; the store over HTTP too with store.http (its
// token: the job's secret). Returns exit_ok, or exit_requeue after a signal asked the job to stop at a checkpoint.
int run_coordinator(const Config& config, const comm::Channels& ch, const Layout& layout, const std::string& resume,
                    const std::string& effective_config, const std::string& secret);

}  // namespace arclight::app
