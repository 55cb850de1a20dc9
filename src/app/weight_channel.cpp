#include "weight_channel.hpp"

#include <algorithm>
#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "arclight/comm/channels.hpp"
#include "arclight/comm/large_messages.hpp"
#include "arclight/comm/gpu.hpp"
#include "arclight/comm/waiting.hpp"
#include "arclight/core/error.hpp"
#include "arclight/core/log.hpp"

namespace arclight::app {

namespace {
// Messages of a version alone, without weights (static: a send reads them after the call returns).
constexpr std::int64_t end_of_training = -1;
constexpr std::int64_t fenced_note = -2;          // control
constexpr std::int64_t point_to_point_note = -3;  // control: no more broadcasts

std::size_t packed_bytes(Compression compression, std::size_t count) {
  return count * (compression == Compression::none ? sizeof(float) : sizeof(std::uint16_t));
}

std::string ranks_of(const std::vector<int>& ranks) {
  std::string text = ranks.size() > 1 ? "runner ranks " : "runner rank ";
  for (std::size_t i = 0; i < ranks.size(); ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text;
}
}  // namespace

void check_same_base_model(MPI_Comm comm, const model::Policy& policy, const char* role) {
  if (policy.config().lora_rank == 0) return;
  const std::optional<std::uint32_t> crc = policy.base_crc32c();
  int world = 0, size = 0, me = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world);
  MPI_Comm_size(comm, &size);
  MPI_Comm_rank(comm, &me);
  const std::int64_t mine[2] = {crc ? std::int64_t{*crc} : -1, world};
  std::vector<std::int64_t> all(2 * static_cast<std::size_t>(size));
  MPI_Gather(mine, 2, MPI_INT64_T, all.data(), 2, MPI_INT64_T, 0, comm);
  if (me != 0) return;
  std::string differ;
  for (int r = 1; r < size; ++r)
    if (all[2 * r] != all[0]) differ += log::concat(differ.empty() ? "" : ", ", all[2 * r + 1]);
  if (!differ.empty())
    throw UsageError(log::concat(role, " rank(s) ", differ, " read another base model from model.path than rank ",
                                 all[1],
                                 " (the CRC-32C of its tensors differs); a LoRA run keeps each rank's base for ",
                                 "the whole run: give every node the same model files"));
}

SplitWeights::SplitWeights(MPI_Comm sync, bool leader, double hung_seconds, Compression compression, int nccl_device)
    : sync_(sync),
      leader_(leader && sync != MPI_COMM_NULL),
      hung_seconds_(hung_seconds),
      compression_(compression),
      nccl_device_(nccl_device) {
  if (!leader_) return;
  MPI_Group sync_group, world_group;
  MPI_Comm_group(sync, &sync_group);
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  int size = 0;
  MPI_Comm_size(sync, &size);
  for (int r = 1; r < size; ++r) {  // the leader is the sync root (the lowest rank)
    int world = 0;
    MPI_Group_translate_ranks(sync_group, 1, &r, world_group, &world);
    Runner runner;
    runner.rank = r;
    runner.world_rank = world;
    runners_.push_back(std::move(runner));
  }
  MPI_Group_free(&sync_group);
  MPI_Group_free(&world_group);
}

void SplitWeights::attach(const model::Policy& policy) {
  if (sync_ == MPI_COMM_NULL) return;
  check_same_base_model(sync_, policy, "runner");  // the leader (the sync root) and the runners
  weight_bytes_ = packed_bytes(compression_, policy.parameter_count());
  if (nccl_device_ >= 0) {
    device_weights_ = std::make_unique<comm::DeviceFloats>(nccl_device_, (weight_bytes_ + 3) / sizeof(float));
    device_broadcast_ = comm::make_nccl_broadcast(sync_, nccl_device_);  // collective: the leader and the runners
  }
  bytes_.resize(sizeof(std::int64_t) + (over_nccl() ? 0 : weight_bytes_));
  if (leader_) return;
  post_receive();
  post_control();
}

// ---- the leader ----

void SplitWeights::publish(std::int64_t version, const model::Policy& policy) {
  if (!leader_) return;  // other trainers hold the same weights; the leader speaks for them
  settle();
  std::memcpy(bytes_.data(), &version, sizeof version);
  const std::size_t count = policy.parameter_count();
  if (weight_bytes_ != packed_bytes(compression_, count))
    throw Error(log::concat("policy version ", version, " has ", count, " parameters; the runners await ",
                            weight_bytes_, " bytes"));
  // Straight from the parameters into the buffer the runners get: no other copy of the model.
  if (over_nccl())
    policy.store_parameters(device_weights_->data(), nccl_device_, compression_);
  else
    policy.store_parameters(bytes_.data() + sizeof version, -1, compression_);
  send(version);
  if (std::all_of(runners_.begin(), runners_.end(), [](const Runner& r) { return r.fenced; }))
    throw Error(
        "every runner hangs and is fenced: none is left to run rollouts; ending the job, to be requeued (it "
        "resumes from its last checkpoint)",
        exit_requeue);
}

void SplitWeights::stop() {
  if (!leader_) return;
  settle();
  std::memcpy(bytes_.data(), &end_of_training, sizeof end_of_training);  // broadcast: every runner has one posted
  send(end_of_training);
}

// Every runner has taken the last version, or is fenced (or `hung_seconds` have passed here, and the channel turned to
// point to point). Counted from now, not from the send: a broadcast moves only while the leader calls MPI, which its
// training step (longer than hung_seconds on a big model) may not do.
void SplitWeights::settle() {
  if (mode_ != Mode::broadcast || sent_version_ < 0) return;  // point to point: send() waited already
  const auto taken = [this] {
    take_acknowledgements();
    return std::all_of(runners_.begin(), runners_.end(),
                       [this](const Runner& r) { return r.fenced || r.acknowledged == sent_version_; }) &&
           (!device_pending_ || device_broadcast_->finished());
  };
  if (wait_until(Clock::now() + hung_after(), taken)) {
    device_pending_ = false;
    return;
  }
  turn_to_point_to_point();
}

// Sends bytes_ (or the end) to every runner not fenced, and completes the leader's part within hung_seconds.
void SplitWeights::send(std::int64_t version) {
  sent_version_ = version;
  const auto deadline = Clock::now() + hung_after();
  if (mode_ == Mode::point_to_point) {
    for (Runner& r : runners_)
      if (!r.fenced) send_to(r);
    complete_or_fence(deadline);
    return;
  }
  broadcast_ = comm::ibcast_large(bytes_.data(), bytes_.size(), 0, sync_);
  if (over_nccl() && version >= 0) {
    // The version goes by MPI; its weights follow over NCCL as each runner sees it (between its episodes): the
    // trainer's next step overlaps, and settle() waits for the broadcast's end.
    device_broadcast_->start(device_weights_->data(), weight_bytes_);
    device_pending_ = true;
  }
  const bool done = wait_until(deadline, [this] {
    int complete = 0;
    MPI_Testall(static_cast<int>(broadcast_.size()), broadcast_.data(), &complete, MPI_STATUSES_IGNORE);
    return complete != 0;
  });
  if (!done) turn_to_point_to_point();  // a runner on the broadcast's way does not take it
}

bool SplitWeights::wait_until(Clock::time_point deadline, const std::function<bool()>& done) {
  comm::IdleBackoff backoff(comm::IdleBackoff::Awaiting::reply);
  for (;;) {
    if (done()) return true;
    if (Clock::now() >= deadline) return false;
    backoff.idle();
  }
}

void SplitWeights::take_acknowledgements() {
  std::string message;
  int from = 0;
  while (comm::try_receive(sync_, MPI_ANY_SOURCE, comm::tag_weights_ack, message, &from)) {
    std::int64_t version = -1;
    if (message.size() == sizeof version) std::memcpy(&version, message.data(), sizeof version);
    for (Runner& r : runners_)
      if (r.rank == from) r.acknowledged = std::max(r.acknowledged, version);
  }
}

// A broadcast waits for every runner: from now on each runner is sent its versions on its own.
// The version under way goes to those that have not acknowledged it.
void SplitWeights::turn_to_point_to_point() {
  take_acknowledgements();
  std::vector<int> late;
  for (const Runner& r : runners_)
    if (!r.fenced && r.acknowledged != sent_version_) late.push_back(r.world_rank);
  log::warn(ranks_of(late), late.size() > 1 ? " have" : " has", " not taken ",
            sent_version_ >= 0 ? log::concat("policy version ", sent_version_) : std::string("the end of training"),
            " within ", hung_seconds_,
            " s (run.hung_rank_seconds): the trainer leader sends each runner its versions on its own from now on, "
            "rather than by broadcast, and fences a runner that does not take one in time");
  // A broadcast not finished may never finish (MPI cannot cancel it): it keeps its buffer. One the leader
  // finished (its requests null: the runners' acknowledgements are late) reads the buffer no more.
  const bool unfinished =
      std::any_of(broadcast_.begin(), broadcast_.end(), [](MPI_Request r) { return r != MPI_REQUEST_NULL; });
  broadcast_.clear();
  if (unfinished) abandon_buffer();
  mode_ = Mode::point_to_point;
  for (Runner& r : runners_) {
    if (r.fenced) continue;
    MPI_Request note;
    MPI_Isend(&point_to_point_note, sizeof point_to_point_note, MPI_BYTE, r.rank, comm::tag_weights_control, sync_,
              &note);
    MPI_Request_free(&note);
  }
  // After the notes: a runner whose NCCL broadcast fails at the abort finds the note that explains it.
  if (over_nccl()) leave_nccl();
  for (Runner& r : runners_)
    if (!r.fenced && r.acknowledged != sent_version_) send_to(r);
  complete_or_fence(Clock::now() + hung_after());
}

void SplitWeights::send_to(Runner& runner) {
  if (sent_version_ < 0)
    runner.sends = comm::isend_large(&end_of_training, sizeof end_of_training, runner.rank, comm::tag_weights, sync_);
  else
    runner.sends = comm::isend_large(bytes_.data(), bytes_.size(), runner.rank, comm::tag_weights, sync_);
}

bool SplitWeights::sends_complete(Runner& runner) {
  if (runner.sends.empty()) return true;
  int complete = 0;
  MPI_Testall(static_cast<int>(runner.sends.size()), runner.sends.data(), &complete, MPI_STATUSES_IGNORE);
  if (complete) runner.sends.clear();
  return complete != 0;
}

void SplitWeights::complete_or_fence(Clock::time_point deadline) {
  wait_until(deadline, [this] {
    bool all = true;
    for (Runner& r : runners_) all = sends_complete(r) && all;
    return all;
  });
  bool fenced_some = false;
  for (Runner& r : runners_)
    if (!r.sends.empty()) {
      fence(r);
      fenced_some = true;
    }
  if (fenced_some && sent_version_ >= 0) abandon_buffer();
}

void SplitWeights::fence(Runner& runner) {
  log::warn("runner rank ", runner.world_rank, " has not taken ",
            sent_version_ >= 0 ? log::concat("policy version ", sent_version_) : std::string("the end of training"),
            " within ", hung_seconds_,
            " s (run.hung_rank_seconds): it hangs (stopped, or its node frozen). Fenced: it gets no more weights, "
            "the store requeues its work, and the job goes on with the other runners");
  for (MPI_Request& send : runner.sends) MPI_Request_free(&send);  // MPI cannot take them back; never waited for
  runner.sends.clear();
  MPI_Request note;  // should it wake, this ends its part
  MPI_Isend(&fenced_note, sizeof fenced_note, MPI_BYTE, runner.rank, comm::tag_weights_control, sync_, &note);
  MPI_Request_free(&note);
  runner.fenced = true;
}

// Point to point from now on, over MPI with the whole version in bytes_: the NCCL broadcast is aborted (a runner that
// hangs would never join one). The leader's version under way comes from the device; the device buffer is kept, as
// aborted kernels may still touch it.
void SplitWeights::leave_nccl() {
  device_broadcast_->abort();
  device_broadcast_.reset();
  device_pending_ = false;
  bytes_.resize(sizeof(std::int64_t) + weight_bytes_);
  if (leader_) device_weights_->download_bytes(bytes_.data() + sizeof(std::int64_t), weight_bytes_);
}

// Operations that may never finish still read (or write) the buffer: it stays theirs, and a copy goes on.
void SplitWeights::abandon_buffer() {
  abandoned_.push_back(std::move(bytes_));
  bytes_ = abandoned_.back();
}

// ---- a runner ----

void SplitWeights::post_receive() {
  receives_ = mode_ == Mode::broadcast ? comm::ibcast_large(bytes_.data(), bytes_.size(), 0, sync_)
                                       : comm::irecv_large(bytes_.data(), bytes_.size(), 0, comm::tag_weights, sync_);
}

void SplitWeights::post_control() {
  control_arrived_ = false;
  MPI_Irecv(&control_message_, sizeof control_message_, MPI_BYTE, 0, comm::tag_weights_control, sync_, &control_);
}

std::int64_t SplitWeights::received_version() const {
  std::int64_t v;
  std::memcpy(&v, bytes_.data(), sizeof v);
  return v;
}

bool SplitWeights::arrived(std::uint64_t) {
  if (sync_ == MPI_COMM_NULL || leader_) return false;
  if (ended_) return true;
  if (control_note_arrived()) {
    if (control_message_ != point_to_point_note) return true;  // fenced: poll() ends this runner's part
    take_point_to_point();
  }
  // Completed requests become MPI_REQUEST_NULL, which tests complete again: poll() still finds them.
  int first = 0;
  MPI_Test(&receives_[0], &first, MPI_STATUS_IGNORE);
  if (!first) return !held_.empty();
  if (mode_ == Mode::point_to_point && received_version() < 0) return true;  // a version alone: nothing follows
  int complete = 0;
  MPI_Testall(static_cast<int>(receives_.size()), receives_.data(), &complete, MPI_STATUSES_IGNORE);
  if (!complete) return !held_.empty();
  const std::int64_t v = received_version();
  if (over_nccl() && v >= 0) {
    if (!device_pending_) {  // the version has come: its weights follow over NCCL
      device_broadcast_->start(device_weights_->data(), weight_bytes_);
      device_pending_ = true;
    }
    try {
      if (!device_broadcast_->finished()) return false;
    } catch (const Error&) {
      // The leader aborts NCCL where it turns to point to point (another runner hangs), and its note is on the way:
      // taken here, for poll() would take any note that has come for a fence. Without one in time, the error is the
      // job's.
      const auto deadline = Clock::now() + hung_after();
      if (!wait_until(deadline, [this] { return control_note_arrived(); })) throw;
      if (control_message_ != point_to_point_note) return true;  // fenced
      take_point_to_point();
      return !held_.empty();
    }
  }
  if (v >= 0) {
    acknowledge(v);
    if (!over_nccl()) take_in();
  }
  return true;
}

// The leader sends each runner its versions on its own from now on (another runner hangs): taken at once, in a batch
// of episodes too, so that the leader's next send to this runner completes. The broadcast posted for the next version
// will not come (MPI cannot cancel it): it keeps its buffer.
void SplitWeights::take_point_to_point() {
  receives_.clear();
  abandoned_.push_back(std::move(bytes_));
  bytes_.assign(sizeof(std::int64_t) + weight_bytes_, 0);
  if (over_nccl()) leave_nccl();
  mode_ = Mode::point_to_point;
  post_receive();
  post_control();
}

// The version that has come is held for poll() to load, and the next one's receive goes into the other buffer at once:
// versions keep coming while the runner is in a batch of episodes, the leader's sends complete, and an older version
// held and not loaded yet is dropped for the newer one (its buffer takes the next).
void SplitWeights::take_in() {
  std::vector<char> next = held_.empty() ? std::exchange(spare_, {}) : std::exchange(held_, {});
  held_ = std::exchange(bytes_, std::move(next));
  bytes_.resize(held_.size());
  post_receive();
}

// A version that has come is acknowledged at once, loaded or not: the leader waits for acknowledgements before its
// next broadcast, and a runner loads between batches of episodes, which may take longer than run.hung_rank_seconds.
void SplitWeights::acknowledge(std::int64_t version) {
  if (mode_ != Mode::broadcast || version <= acknowledged_) return;
  if (acknowledgement_ != MPI_REQUEST_NULL) MPI_Wait(&acknowledgement_, MPI_STATUS_IGNORE);  // 8 bytes: long sent
  acknowledged_ = version;
  MPI_Isend(&acknowledged_, sizeof acknowledged_, MPI_BYTE, 0, comm::tag_weights_ack, sync_, &acknowledgement_);
}

bool SplitWeights::control_note_arrived() {
  if (!control_arrived_) {
    int flag = 0;
    MPI_Test(&control_, &flag, MPI_STATUS_IGNORE);
    control_arrived_ = flag != 0;
  }
  return control_arrived_;
}

bool SplitWeights::poll(model::Policy& policy, std::uint64_t& version) {
  if (sync_ == MPI_COMM_NULL || leader_) return true;
  if (!arrived(version)) return true;
  if (ended_) return false;
  if (control_arrived_) {  // fenced (arrived() takes the turn to point to point)
    log::warn(
        "this runner took a policy version later than run.hung_rank_seconds allows and was fenced by the "
        "trainer leader: it leaves the job, which goes on without it");
    return end_here();
  }
  if (!held_.empty()) {  // over MPI: the newest version that came, its next already posted
    std::int64_t v = 0;
    std::memcpy(&v, held_.data(), sizeof v);
    policy.load_parameters(held_.data() + sizeof v, -1, compression_);
    version = static_cast<std::uint64_t>(v);
    spare_ = std::exchange(held_, {});
    return true;
  }
  const std::int64_t v = received_version();
  if (v < 0) return end_here();
  policy.load_parameters(device_weights_->data(), nccl_device_, compression_);  // over NCCL
  device_pending_ = false;
  version = static_cast<std::uint64_t>(v);
  post_receive();
  return true;
}

// Training is over for this runner: what it has posted and will not be matched is cancelled (a
// broadcast cannot be: one posted before a fence stays, harmlessly).
bool SplitWeights::end_here() {
  if (mode_ == Mode::point_to_point)
    for (MPI_Request& r : receives_)
      if (r != MPI_REQUEST_NULL) {
        MPI_Cancel(&r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
      }
  receives_.clear();
  if (!control_arrived_) {
    MPI_Cancel(&control_);
    MPI_Wait(&control_, MPI_STATUS_IGNORE);
  }
  if (acknowledgement_ != MPI_REQUEST_NULL) MPI_Wait(&acknowledgement_, MPI_STATUS_IGNORE);
  if (device_pending_) device_broadcast_->abort();  // a broadcast that will not come
  ended_ = true;
  return false;
}

bool weights_over_nccl(const Layout& layout, const std::vector<std::string>& hosts,
                       const std::vector<std::string>& gpus, bool nccl_built) {
  std::vector<int> ranks = layout.runners();
  ranks.push_back(layout.trainer_leader());
  std::set<std::pair<std::string, std::string>> taken;
  for (const int r : ranks)
    if (layout.roles[r].runner && layout.roles[r].trainer) return false;  // colocated: the weights stay in the rank
  for (const int r : ranks)
    if (gpus.at(r).empty() || !taken.emplace(hosts.at(r), gpus.at(r)).second) return false;
  return nccl_built && !layout.runners().empty();
}

void SharedWeights::publish(std::int64_t version, const model::Policy& policy) {
  std::lock_guard<std::mutex> lock(mutex_);
  version_ = version;
  weights_.resize(policy.parameter_count());  // its room kept for the next step
  policy.store_parameters(weights_.data(), -1, Compression::none);
}

void SharedWeights::stop() {
  std::lock_guard<std::mutex> lock(mutex_);
  stopped_ = true;
}

bool SharedWeights::arrived(std::uint64_t version) {
  std::lock_guard<std::mutex> lock(mutex_);
  return stopped_ || (version_ >= 0 && static_cast<std::uint64_t>(version_) != version);
}

bool SharedWeights::poll(model::Policy& policy, std::uint64_t& version) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (version_ >= 0 && static_cast<std::uint64_t>(version_) != version) {
    policy.load_flat_parameters(weights_.data(), weights_.size());
    version = static_cast<std::uint64_t>(version_);
  }
  return !stopped_;
}

}  // namespace arclight::app
