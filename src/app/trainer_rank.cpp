// The trainer rank: serves the coordinator's requests on the work communicator (train a
// shard, save or restore its share of a checkpoint, begin training, stop), one function each.
#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <thread>
#include <variant>

#include "arclight/agent/agent.hpp"
#include "arclight/algo/trainer.hpp"
#include "arclight/ckpt/checkpoint.hpp"
#include "arclight/comm/gpu.hpp"
#include "arclight/comm/reducer.hpp"
#include "arclight/comm/waiting.hpp"
#include "arclight/comm/work_protocol.hpp"
#include "arclight/core/crc32c.hpp"
#include "arclight/core/error.hpp"
#include "arclight/core/log.hpp"
#include "arclight/model/policy.hpp"
#include "roles.hpp"
#include "weight_channel.hpp"

namespace arclight::app {
namespace {

// crc32c of the flat float weights, tensor by tensor.
std::uint32_t checksum(const model::Policy& policy) {
  std::uint32_t crc = 0;
  policy.for_each_parameter(
      [&crc](const float* data, std::size_t size) { crc = crc32c_extend(crc, data, size * sizeof(float)); });
  return crc;
}

// A saved model fits this one when its tensors have the same names and sizes, in order.
void check_fits(const ckpt::Checkpoint& saved, const std::vector<ckpt::TensorInfo>& mine,
                std::optional<std::uint32_t> my_base_crc32c, const std::string& path) {
  if (saved.base_crc32c && my_base_crc32c && saved.base_crc32c != my_base_crc32c)
    throw UsageError(path + " holds LoRA adapters of another base model than model.path holds now (its tensors' " +
                     "CRC-32C differs from the one the run read): resume with the base model the run started from");
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

std::unique_ptr<GradientReducer> make_reducer(const Config& config, const comm::Communicator& trainers, int device) {
  const std::string transport = gradient_transport(trainers.size(), device);
  if (transport == "none") return nullptr;
  check_same_gradient_transport(trainers.get(), transport);
  if (transport == "nccl") {
    if (config.comm.compression != Compression::none && trainers.rank() == 0)
      log::info(
          "comm.compression applies to the weights sent to the runners; NCCL all-reduces the gradients in "
          "float32 (comm.bucket_mb and comm.compression shape the MPI reducer only)");
    return comm::make_nccl_reducer(trainers.get(), device);
  }
  comm::ReducerConfig rc;
  rc.bucket_bytes = static_cast<std::size_t>(config.comm.bucket_mb * (1 << 20));
  rc.first_bucket_bytes = static_cast<std::size_t>(config.comm.first_bucket_mb * (1 << 20));
  rc.compression = config.comm.compression;
  return std::make_unique<comm::MpiReducer>(trainers.get(), rc);
}

class TrainerRank {
 public:
  TrainerRank(const Config& config, const comm::Channels& ch, const Layout& layout, int rank, int device,
              store::Store& store, WeightChannel& weights, ComputeClock& compute)
      : config_(config),
        ch_(ch),
        store_(store),
        weights_(weights),
        compute_(compute),
        leader_(rank == layout.trainer_leader()),
        agent_(agent::make_agent(config.agent)),
        policy_(policy_on(device, config.model, agent_->vocab_size(), config.run.seed)),
        reducer_(make_reducer(config, ch.trainers, device)),
        trainer_(policy_, config.grpo, reducer_.get()) {
    // Trainers that read one base restore and refuse a version alike (check_fits): a refusal that some trainers
    // reach while others go on to a collective would hang them.
    check_same_base_model(ch.trainers.get(), policy_, "trainer");
    weights_.attach(policy_);
    const std::vector<std::string> names = policy_.parameter_names();
    const std::vector<FloatBuffer> buffers = policy_.parameter_buffers();
    for (std::size_t i = 0; i < names.size(); ++i) tensors_.push_back({names[i], buffers[i].size});
    // This trainer's share of every checkpoint: a run of tensors (parallel HDF5, one file).
    const std::vector<int> all_trainers = layout.trainers();
    const auto me = std::find(all_trainers.begin(), all_trainers.end(), rank) - all_trainers.begin();
    save_options_.full_every = config.checkpoint.full_every;
    save_options_.comm = ch.checkpoint.get();
    save_options_.part.meta_and_store = false;
    save_options_.part.model_index = leader_;
    save_options_.part.all_tensors = false;
    save_options_.part.tensors = ckpt::partition_tensors(tensors_, static_cast<int>(all_trainers.size()))[me];
  }

  void run() {
    comm::IdleBackoff backoff(comm::IdleBackoff::Awaiting::next_message);
    std::string message;
    for (;;) {
      if (!comm::try_receive(ch_.work.get(), 0, comm::tag_work, message)) {
        backoff.idle();
        continue;
      }
      backoff.reset();
      const comm::work::Request request = comm::work::decode_request(message);
      if (std::holds_alternative<comm::work::Stop>(request)) return stop();
      std::visit([this](const auto& r) { serve(r); }, request);
    }
  }

 private:
  // Version 0 of the policy resource, unless rank 0 restored the versions of a resumed run.
  void announce_first_version() {
    try {
      const store::ResourcesVersion latest = store_.get_latest_resources(store::policy_resources);
      // Resumed: the weights restored (each trainer its share, the rest over MPI or NCCL, on the CPU or straight into
      // GPU memory) must be the ones that version was trained to, whose checksum the store kept.
      const comm::work::PolicyResource saved = comm::work::decode_policy_resource(latest.content);
      if (saved.version == static_cast<std::uint64_t>(version_)) {
        const std::uint32_t restored = checksum(policy_);
        if (saved.checksum != restored)
          throw Error(log::concat("the weights restored for policy version ", saved.version, " have CRC-32C ", restored,
                                  ", not the ", saved.checksum, " they were trained to"));
        log::info("the weights restored for policy version ", saved.version, " are those it was trained to (CRC-32C ",
                  restored, ")");
      }
    } catch (const store::StoreError& e) {
      if (e.code() != store::StoreError::not_found) throw;  // not "no policy yet": the store's own failure
      store_.add_resources(store::policy_resources,
                           comm::work::encode(comm::work::PolicyResource{0, checksum(policy_)}));
    }
  }

  void answer_state(const std::string& failure = {}) {
    MPI_Send(failure.data(), static_cast<int>(failure.size()), MPI_BYTE, 0, comm::tag_trainer_state, ch_.work.get());
  }

  void stop() {
    weights_.stop();  // tell the runners
    writer_.wait();
  }

  void serve(const comm::work::Stop&) {}  // never reached: run() ends on stop

  // One training step on this trainer's shard; the new weights go to the runners and the
  // figures to rank 0.
  void serve(const comm::work::Train& request) {
    const std::vector<algo::Sample> shard = algo::decode_samples(request.samples);
    const auto t0 = Stopwatch::now();
    algo::TrainStats stats;
    {
      ComputeClock::Section computing(compute_);
      stats = trainer_.step(shard, request.total_tokens);
    }
    comm::work::TrainerFigures figures{stats.loss,
                                       stats.policy_loss,
                                       stats.kl,
                                       stats.entropy,
                                       stats.clip_fraction,
                                       stats.clip_fraction_lower,
                                       stats.grad_norm,
                                       stats.action_tokens,
                                       seconds_since(t0),
                                       0};
    ++version_;
    const auto t1 = Stopwatch::now();
    if (leader_)
      store_.update_resources(store::policy_resources, comm::work::encode(comm::work::PolicyResource{
                                                           static_cast<std::uint64_t>(version_), checksum(policy_)}));
    weights_.publish(version_, policy_);
    figures.sync_seconds = seconds_since(t1);
    const std::string reply = comm::work::encode(figures);
    MPI_Send(reply.data(), static_cast<int>(reply.size()), MPI_BYTE, 0, comm::tag_trainer_figures, ch_.work.get());
  }

  // The blocking part: this trainer's share of the state, copied to host memory; then rank 0
  // hears that training may go on, and the share is written in the background.
  void serve(const comm::work::Save& request) {
    auto snapshot = std::make_shared<ckpt::Checkpoint>();
    snapshot->tensors = tensors_;
    snapshot->parameters = policy_.flat_parameters_of(save_options_.part.tensors);
    algo::OptimizerState optimizer = trainer_.optimizer_state_of(save_options_.part.tensors);
    snapshot->exp_avg = std::move(optimizer.exp_avg);
    snapshot->exp_avg_sq = std::move(optimizer.exp_avg_sq);
    snapshot->optimizer_steps = std::move(optimizer.steps);
    snapshot->base_crc32c = policy_.base_crc32c();
    answer_state();
    writer_.start(log::concat("writing this trainer's share of version ", request.step),
                  [this, step = request.step, snapshot] {
                    ckpt::write_checkpoint(checkpoint_dir_of(config_), step, *snapshot, save_options_);
                  });
  }

  // The trainers read the version together, each byte once: each its share of the weights and
  // optimizer state (a shared file system, as for writing), the shares then broadcast among
  // them (on GPUs over NCCL, in device memory); rank 0 reads none of the model (it imports the store meanwhile).
  // They agree on the outcome, and each answers it: a damaged share makes rank 0 try the version before; what else
  // goes wrong, rank 0 reports once. The runners get the weights at Begin, once rank 0 has the store too.
  void serve(const comm::work::Restore& request) {
    using Outcome = comm::work::Restored::Outcome;
    const auto t = Stopwatch::now();
    comm::work::Restored answer;
    ckpt::SharedReadFigures figures;
    try {
      if (policy_.device() >= 0 && comm::nccl_available()) {  // every trainer alike (check_same_gradient_transport)
        restore_on_device(request.path, figures);
      } else {
        ckpt::Checkpoint saved = ckpt::read_model_shared(request.path, ch_.trainers.get(), &figures);
        // every trainer read the same index and the same base (check_same_base_model): all fail alike
        check_fits(saved, tensors_, policy_.base_crc32c(), request.path);
        version_ = saved.policy_version;
        policy_.load_flat_parameters(saved.parameters.data(), saved.parameters.size());
        trainer_.load_optimizer_state(
            {std::move(saved.exp_avg), std::move(saved.exp_avg_sq), std::move(saved.optimizer_steps)});
      }
    } catch (const ckpt::CorruptCheckpoint& e) {
      answer.outcome = Outcome::damaged, answer.why = e.what();
    } catch (const UsageError& e) {
      answer.outcome = Outcome::unfit, answer.why = e.what();
    } catch (const Error& e) {  // its memory (the shared read's std::bad_alloc), its GPU: not the version's fault
      answer.outcome = Outcome::failed, answer.why = e.what();
    }  // anything else ends this rank (MPI_Abort): a trainer that answered while the others wait in a broadcast hangs
    answer.bytes_read = figures.bytes_read;
    answer.read_seconds = figures.read_seconds;
    answer.broadcast_seconds = figures.broadcast_seconds;
    answer.seconds = seconds_since(t);
    const std::string reply = comm::work::encode(answer);
    MPI_Send(reply.data(), static_cast<int>(reply.size()), MPI_BYTE, 0, comm::tag_trainer_state, ch_.work.get());
  }

  // Each trainer's share goes to its GPU, straight into the policy's parameters and AdamW's moments, and from GPU to
  // GPU over NCCL, tensor by tensor from the trainer that read it: host memory holds a share, the GPU nothing more
  // than the model and its optimizer state. The trainers agree that each placed its share before any broadcast: one
  // that could not (its GPU's memory) would leave the others in a broadcast for ever.
  void restore_on_device(const std::string& path, ckpt::SharedReadFigures& figures) {
    ckpt::ModelShare share = ckpt::read_model_share(path, ch_.trainers.get(), &figures);
    check_fits(share.model, tensors_, policy_.base_crc32c(), path);  // as in serve(Restore): all fail alike
    const auto sent = Stopwatch::now();
    std::unique_ptr<comm::DeviceBroadcast> broadcast;
    const std::vector<FloatBuffer> parameters = policy_.parameter_buffers();
    std::vector<int> owner;  // of each tensor: the trainer whose share holds it
    for (std::size_t i = 0, at = 0, q = 0; i < tensors_.size(); at += tensors_[i++].size) {
      while (q + 1 < share.shares.size() && at >= share.shares[q].at + share.shares[q].count) ++q;
      owner.push_back(static_cast<int>(q));
    }
    const int me = ch_.trainers.rank();
    int failed = 0;
    std::string why;
    algo::Trainer::MomentBuffers moments;
    try {
      broadcast = comm::make_nccl_broadcast(ch_.trainers.get(), policy_.device());
      if (share.moments)
        moments = trainer_.fresh_optimizer_state(share.model.optimizer_steps);
      else
        trainer_.load_optimizer_state({});  // saved before the first step: none
      for (std::size_t i = 0, at = 0; i < tensors_.size(); at += tensors_[i++].size) {
        if (owner[i] != me) continue;
        const std::size_t in_share = at - share.shares[me].at, n = tensors_[i].size;
        comm::copy_to_gpu(parameters[i].data, share.model.parameters.data() + in_share, n);
        if (share.moments && moments.exp_avg[i].size > 0) {
          comm::copy_to_gpu(moments.exp_avg[i].data, share.model.exp_avg.data() + in_share, n);
          comm::copy_to_gpu(moments.exp_avg_sq[i].data, share.model.exp_avg_sq.data() + in_share, n);
        }
      }
    } catch (const std::exception& e) {  // LibTorch's out of memory too: every trainer must reach the agreement
      failed = 1, why = e.what();
    }
    MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, ch_.trainers.get());
    if (failed) throw Error(why.empty() ? "another trainer could not place its share of " + path + " on its GPU" : why);
    // From here a trainer that failed and answered would leave the others in a broadcast for ever: the job ends.
    try {
      for (std::size_t i = 0; i < tensors_.size(); ++i) {
        broadcast->start(parameters[i].data, parameters[i].size * sizeof(float), owner[i]);
        if (share.moments && moments.exp_avg[i].size > 0) {  // frozen tensors alike on every trainer
          broadcast->start(moments.exp_avg[i].data, moments.exp_avg[i].size * sizeof(float), owner[i]);
          broadcast->start(moments.exp_avg_sq[i].data, moments.exp_avg_sq[i].size * sizeof(float), owner[i]);
        }
      }
      broadcast->wait();
    } catch (...) {
      end_job_now(std::current_exception());
    }
    version_ = share.model.policy_version;
    figures.broadcast_seconds = seconds_since(sent);  // with the communicator's set-up and the uploads
  }

  // Training begins (fresh, or from the version restored): the runners start from these weights.
  // Only now does a trainer ask the store anything: until rank 0 has restored it, the store holds
  // requests, and rank 0 awaits the trainers' reads.
  void serve(const comm::work::Begin&) {
    if (leader_) announce_first_version();
    weights_.publish(version_, policy_);
    answer_state();
  }

  const Config& config_;
  const comm::Channels& ch_;
  store::Store& store_;
  WeightChannel& weights_;
  ComputeClock& compute_;
  const bool leader_;
  std::unique_ptr<agent::Agent> agent_;
  model::Policy policy_;
  std::unique_ptr<GradientReducer> reducer_;
  algo::Trainer trainer_;
  std::int64_t version_ = 0;
  std::vector<ckpt::TensorInfo> tensors_;
  ckpt::WriteOptions save_options_;
  BackgroundWriter writer_;  // last: joined before what it writes is gone
};

}  // namespace

std::string gradient_transport(int trainers, int device) {
  if (trainers <= 1) return "none";
  return device >= 0 && comm::nccl_available() ? "nccl" : "mpi";
}

std::string gradients_on_gpus_problem(const Layout& layout, const std::vector<std::string>& hosts,
                                      const std::vector<std::string>& gpus, bool nccl_built) {
  const std::vector<int> trainers = layout.trainers();
  if (trainers.size() < 2) return "";
  std::map<std::pair<std::string, std::string>, int> taken;
  for (const int r : trainers) {
    if (gpus.at(r).empty()) continue;  // on the CPU (a mix is check_same_gradient_transport's to refuse)
    if (!nccl_built)
      return "the trainers' gradients live on GPUs and go over NCCL, which this build lacks (arclight --version): "
             "build "
             "with NCCL, or run the trainers on CPUs (CUDA_VISIBLE_DEVICES=\"\")";
    const auto [other, fresh] = taken.emplace(std::make_pair(hosts.at(r), gpus.at(r)), r);
    if (!fresh)
      return log::concat("trainers ", other->second, " and ", r, " share GPU ", gpus.at(r), " on ", hosts.at(r),
                         ": NCCL takes one rank per GPU; give each trainer a GPU of its own (fewer ranks per node, ",
                         "more GPUs) or run the trainers on CPUs (CUDA_VISIBLE_DEVICES=\"\")");
  }
  return "";
}

void check_same_gradient_transport(MPI_Comm trainers, const std::string& mine) {
  const int over_nccl = mine == "nccl";
  int count = 0, size = 0;
  MPI_Allreduce(&over_nccl, &count, 1, MPI_INT, MPI_SUM, trainers);
  MPI_Comm_size(trainers, &size);
  if (count != 0 && count != size)
    throw UsageError(log::concat(count, " of ", size,
                                 " trainers would all-reduce gradients over NCCL (a GPU each) and the others over MPI "
                                 "(no GPU found; this trainer: ",
                                 mine, "): give every trainer a GPU, or none (CUDA_VISIBLE_DEVICES=\"\")"));
}

void run_trainer(const Config& config, const comm::Channels& ch, const Layout& layout, int rank, int device,
                 store::Store& store, WeightChannel& weights, ComputeClock& compute) {
  const auto t = Stopwatch::now();  // a part of the start-up before a restore (bench/restart.sh)
  TrainerRank trainer(config, ch, layout, rank, device, store, weights, compute);
  log::debug("the policy and its optimizer built in ", seconds_since(t), " s");
  trainer.run();
}

}  // namespace arclight::app
