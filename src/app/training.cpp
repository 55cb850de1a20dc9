// The training job wired together: each rank's channels, its role (coordinator.cpp,
// runner.cpp, trainer_rank.cpp) and how its weights arrive (weight_channel.hpp).
#include "arclight/app/training.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <mpi.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <thread>
#include <vector>

#include "arclight/agent/agent.hpp"
#include "arclight/app/run.hpp"
#include "arclight/ckpt/checkpoint.hpp"
#include "arclight/comm/gpu.hpp"
#include "arclight/comm/pulse.hpp"
#include "arclight/comm/store_service.hpp"
#include "arclight/core/error.hpp"
#include "arclight/core/log.hpp"
#include "arclight/core/version.hpp"
#include "arclight/model/architecture.hpp"
#include "arclight/text/chat_template.hpp"
#include "endpoint.hpp"
#include "roles.hpp"
#include "weight_channel.hpp"

namespace arclight::app {
namespace {

// The compute time of this rank (<run.dir>/usage.json).
ComputeClock compute_clock;

// The runner of the configured agent: built in, or outside processes behind an endpoint.
void run_runner_of(const Config& config, store::Store& store, WeightChannel& weights, int rank, int device,
                   const std::string& secret) {
  if (agent::runs_outside(config.agent.name))
    run_external_runner(config, store, weights, rank, device, compute_clock, secret);
  else
    run_runner(config, store, weights, rank, device, compute_clock);
}

// The job's secret, the bearer token of every endpoint it opens: random on rank 0, handed to every rank.
std::string share_job_secret(int rank) {
  char secret[33] = {};
  if (rank == 0) {
    unsigned char bytes[16];
    const int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || read(fd, bytes, sizeof bytes) != static_cast<ssize_t>(sizeof bytes))
      throw Error(log::concat("cannot read /dev/urandom for the job's secret: ", std::strerror(errno)));
    close(fd);
    for (int i = 0; i < 16; ++i) std::snprintf(secret + 2 * i, 3, "%02x", bytes[i]);
  }
  MPI_Bcast(secret, 32, MPI_CHAR, 0, MPI_COMM_WORLD);
  return std::string(secret, 32);
}

// `weights_device`: the device whose memory the weights come to or go from over NCCL, or -1 (over MPI).
int run_worker(const Config& config, const comm::Channels& ch, const Layout& layout, int rank, int device,
               int weights_device, const std::string& secret, comm::StartupWatch& startup) {
  // One store client per rank (it is thread-safe): each rank says bye once.
  comm::RemoteStore store(ch.control.get(), 0, config.comm.store_timeout_seconds);
  // Signs of life until the bye; the last rank also watches rank 0's, one rank naming it when it hangs.
  const bool watches_rank_0 = rank == layout.world_size() - 1;
  const comm::PulseSender pulse(
      ch.control.get(), 0, watches_rank_0 ? config.run.hung_rank_seconds : 0, [](double silent) {
        log::error(hung_rank_message("rank 0 (coordinator)", static_cast<int>(silent),
                                     ", and every rank waits for it; ending the job, to be requeued"));
        MPI_Abort(MPI_COMM_WORLD, exit_requeue);
      });
  startup.end();
  const RankRole& role = layout.roles[rank];
  if (role.runner && role.trainer) {
    // Colocated: a trainer thread and a runner thread share the rank and hand weights over in memory.
    SharedWeights weights;
    std::exception_ptr trainer_error;
    std::thread trainer([&] {
      try {
        run_trainer(config, ch, layout, rank, device, store, weights, compute_clock);
      } catch (...) {
        trainer_error = std::current_exception();
        weights.stop();
      }
    });
    try {
      run_runner_of(config, store, weights, rank, device, secret);
    } catch (...) {
      // The trainer thread still uses the communicators, the weights and the store client: unwinding would destroy
      // them under it (a runner whose agent keeps dying ended so, in MPI_ERR_COMM or a crash instead of its message).
      end_job_now(std::current_exception());
    }
    trainer.join();
    if (trainer_error) std::rethrow_exception(trainer_error);
    return exit_ok;
  }
  SplitWeights weights(ch.sync.get(), rank == layout.trainer_leader(), config.run.hung_rank_seconds,
                       config.comm.compression, weights_device);
  try {
    if (role.trainer)
      run_trainer(config, ch, layout, rank, device, store, weights, compute_clock);
    else
      run_runner_of(config, store, weights, rank, device, secret);
  } catch (...) {
    // Not unwound: the weights' receives are still posted into their buffers, and the store client's bye and the
    // pulses would drive MPI on into freed memory.
    end_job_now(std::current_exception());
  }
  return exit_ok;
}

}  // namespace

int report_failure(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    log::error(e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    log::error("unexpected: ", e.what());
  } catch (...) {
    log::error("unexpected: an exception that is not a std::exception");
  }
  return exit_failure;
}

void end_job_now(const std::exception_ptr& error) {
  MPI_Abort(MPI_COMM_WORLD, report_failure(error));
  std::abort();  // MPI_Abort does not return
}

void check_training_config(const Config& config) {
  auto agent = agent::make_agent(config.agent);
  // Without a CUDA LibTorch and a GPU in sight the ranks compute on CPUs, where LibTorch has no float16 products.
  if (config.model.dtype == ComputeType::float16 && (!build_info().torch_cuda || comm::visible_gpu_count() == 0))
    throw UsageError("model.dtype = float16 needs GPUs (a CUDA build, GPUs visible); on CPUs use bfloat16 or float32");
  const model::Architecture architecture = model::architecture_of(config.model, agent->vocab_size());
  chat_template_of(config.model);
  if (config.runner.reasoning_parser != "none") reasoning_parser_of(config.runner, served_chat_template(config.model));
  model::lora_of(config.model);
  if (config.grpo.train_blocks > architecture.num_layers)
    throw UsageError(log::concat("grpo.train_blocks = ", config.grpo.train_blocks, " exceeds the model's ",
                                 architecture.num_layers, " layers"));
  if (config.model.max_seq < agent->max_sequence())
    throw UsageError(log::concat("model.max_seq = ", config.model.max_seq, " is shorter than a ", agent->name(),
                                 " episode (", agent->max_sequence(), " tokens)"));
}

namespace {

// One job at a time in run.dir and in checkpoint.dir, before anything there is moved aside:
// rank 0 holds the locks until its process ends. A second job is refused (exit 2), naming
// the holder's host and PID.
void lock_job_directories(const Config& config) {
  namespace fs = std::filesystem;
  static std::vector<std::unique_ptr<ckpt::DirectoryLock>> locks;
  locks.clear();  // a process that starts again takes them anew
  const std::string checkpoints = checkpoint_dir_of(config);
  std::error_code ec;
  fs::create_directories(config.run.dir, ec);
  const double wait = config.run.lock_wait_seconds;
  locks.push_back(std::make_unique<ckpt::DirectoryLock>(config.run.dir, "run.dir", wait, stop_signal_received));
  if (!fs::equivalent(config.run.dir, checkpoints, ec))
    locks.push_back(std::make_unique<ckpt::DirectoryLock>(checkpoints, "checkpoint.dir", wait, stop_signal_received));
}

}  // namespace

std::string chat_template_of(const ModelConfig& model) {
  if (model.source != ModelSource::hf) return {};
  std::error_code unreadable;  // a path too long or a loop: the loader says so
  if (model.chat_template.empty() && !std::filesystem::exists(model.path + "/tokenizer_config.json", unreadable) &&
      !unreadable)
    return {};
  return text::load_chat_template(model.path, model.chat_template).name;
}

void check_checkpoint_dir(const Config& config) {
  namespace fs = std::filesystem;
  const std::string dir = checkpoint_dir_of(config);
  const auto refuse = [&](const std::string& why) {
    throw UsageError("checkpoint.dir " + dir + " cannot hold checkpoints: " + why);
  };
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec)) refuse("it is not a directory");
  fs::create_directories(dir, ec);
  std::error_code status;  // a name too long, a loop of links, a parent not searchable: one message, not an abort
  if (!fs::is_directory(dir, status))
    refuse(ec ? "cannot create it (" + ec.message() + ")" : status ? status.message() : "it is not a directory");
  // Permission bits do not tell (root, read-only mounts, ACLs): create a file, as a checkpoint will.
  const std::string probe = (fs::path(dir) / (".arclight_probe_" + std::to_string(getpid()))).string();
  const int fd = open(probe.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0600);
  if (fd < 0) refuse(log::concat("it is not writable (", std::strerror(errno), ")"));
  close(fd);
  unlink(probe.c_str());
  lock_job_directories(config);
}

int run_training(const comm::MpiRuntime& mpi, const Config& config, const Layout& layout, const Placement& placement,
                 const std::string& resume, const std::string& effective_config, comm::StartupWatch& startup) {
  const auto start = Stopwatch::now();
  const ProcessCpu cpu_at_start = ProcessCpu::now();
  const int rank = mpi.rank();
  const comm::Channels ch = comm::open_channels(layout, rank);
  const std::string secret = share_job_secret(rank);
  if (rank == 0) startup.end();  // the coordinator watches the control channel's pulses from here
  const int code = rank == 0 ? run_coordinator(config, ch, layout, resume, effective_config, secret)
                             : run_worker(config, ch, layout, rank, placement.device,
                                          placement.weights_over_nccl ? placement.device : -1, secret, startup);
  write_usage(mpi, layout, cpu_at_start, compute_clock.seconds(), seconds_since(start),
              (std::filesystem::path(config.run.dir) / "usage.json").string());
  return code;
}

}  // namespace arclight::app
