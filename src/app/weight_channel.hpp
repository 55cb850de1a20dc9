#pragma once
// How new policy versions reach a runner (app-private): each trainer step publishes, runners
// poll between episodes.
#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "arclight/comm/gpu.hpp"
#include "arclight/core/config.hpp"
#include "arclight/core/layout.hpp"
#include "arclight/model/policy.hpp"

namespace arclight::app {

// A LoRA run keeps the base model each rank read from model.path for the whole run (only the adapters train and
// travel), so every rank of `comm` must have read the one its rank 0 did: node-local copies of a model can differ.
// Collective on `comm`; its rank 0 throws a UsageError naming the `role` ranks whose base differs (one message: its
// end of the job ends theirs). Nothing without LoRA.
void check_same_base_model(MPI_Comm comm, const model::Policy& policy, const char* role);

class WeightChannel {
 public:
  virtual ~WeightChannel() = default;
  // Called once by the rank's trainer or runner with its policy, before anything else.
  virtual void attach(const model::Policy&) {}
  // Trainer side. Every trainer calls publish with its policy after each step; stop once at the end. A
  // trainer whose weights go nowhere (not the leader, in a split layout) copies nothing.
  virtual void publish(std::int64_t version, const model::Policy& policy) = 0;
  virtual void stop() = 0;
  // Runner side, between episodes: loads a newer version into the policy if one has come.
  // Returns false once training is over.
  virtual bool poll(model::Policy& policy, std::uint64_t& version) = 0;
  // Runner side: whether poll would load a new version or end (an endpoint drains its responses first).
  virtual bool arrived(std::uint64_t version) = 0;
};

// Split layouts: the trainer leader sends [version (int64)][floats] to the runners on their own
// communicator (not through rank 0). Normally by broadcast (MPI's, fast at any scale), which the
// runners keep posted; each runner acknowledges a version as soon as it has come and posts the next receive into a
// second buffer at once (it loads the newest between batches of episodes, and looks for versions during a batch too:
// arrived()), so that a batch longer than hung_seconds holds nothing back. A broadcast waits for
// every runner, so one that hangs (stopped, its node frozen) would hold every later version back:
// a runner that has not acknowledged a version `hung_seconds` after it was sent, or a broadcast
// the leader cannot finish in that time, turns the channel to point-to-point sends, one per runner
// (costlier for the leader, but nobody waits for a runner that hangs), and a runner that does not
// take a point-to-point version in that time is fenced: named in the log, sent nothing more but a
// note that ends its part should it ever wake. The store requeues its work; the job goes on.
// Both sides are this class: a trainer other than the leader (no sync communicator) does nothing.
// `compression` (comm.compression) bf16 or fp16 sends each weight in 16 bits, rounded to nearest even: half the
// bytes, and runners sample with the rounded weights (the trainers keep theirs in full).
// `nccl_device` >= 0 (weights_over_nccl: the leader and every runner on a GPU of their own): the broadcasts carry the
// version alone, and its weights follow in GPU memory over NCCL, from the leader's device buffer into each runner's.
// A runner joins that broadcast when it sees the version between episodes and loads it at a later look once it has
// come (its generation goes on meanwhile); the leader's next publish waits for the broadcast's end with the
// acknowledgements. Turning to point to point aborts NCCL and goes on over MPI for good.
class SplitWeights : public WeightChannel {
 public:
  SplitWeights(MPI_Comm sync, bool leader, double hung_seconds, Compression compression = Compression::none,
               int nccl_device = -1);
  void attach(const model::Policy& policy) override;
  void publish(std::int64_t version, const model::Policy& policy) override;
  void stop() override;
  bool poll(model::Policy& policy, std::uint64_t& version) override;
  bool arrived(std::uint64_t version) override;
  // The leader: whether it still broadcasts (no runner was late with a version). For tests.
  bool broadcasting() const { return mode_ == Mode::broadcast; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Runner {
    int rank = 0;        // in sync
    int world_rank = 0;  // for the log
    std::int64_t acknowledged = -1;
    std::vector<MPI_Request> sends;  // point to point
    bool fenced = false;
  };
  // ---- the leader ----
  void settle();
  void send(std::int64_t version);
  bool wait_until(Clock::time_point deadline, const std::function<bool()>& done);
  bool sends_complete(Runner& runner);
  void take_acknowledgements();
  void turn_to_point_to_point();
  void send_to(Runner& runner);
  void complete_or_fence(Clock::time_point deadline);
  void fence(Runner& runner);
  void abandon_buffer();
  Clock::duration hung_after() const {  // run.hung_rank_seconds
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(hung_seconds_));
  }
  void leave_nccl();
  bool over_nccl() const { return device_broadcast_ != nullptr; }
  // ---- a runner ----
  void post_receive();
  void post_control();
  bool end_here();
  bool control_note_arrived();
  void acknowledge(std::int64_t version);
  void take_in();
  void take_point_to_point();
  std::int64_t received_version() const;

  enum class Mode { broadcast, point_to_point };
  MPI_Comm sync_;
  bool leader_;
  double hung_seconds_;
  Compression compression_;
  int nccl_device_;
  Mode mode_ = Mode::broadcast;
  std::size_t weight_bytes_ = 0;  // the weights, packed as compression_ says
  std::vector<char> bytes_;       // [version (int64)][weights, unless they go over NCCL]
  // Over NCCL: the weights in GPU memory (declared first: the communicator goes before its buffer), the broadcast,
  // and whether one is under way.
  std::unique_ptr<comm::DeviceFloats> device_weights_;
  std::unique_ptr<comm::DeviceBroadcast> device_broadcast_;
  bool device_pending_ = false;
  // Buffers that abandoned operations may still read or write (MPI cannot take a send or a
  // broadcast back): kept to the end.
  std::vector<std::vector<char>> abandoned_;
  // The leader.
  std::vector<Runner> runners_;
  std::vector<MPI_Request> broadcast_;
  std::int64_t sent_version_ = -1;
  // A runner.
  std::vector<MPI_Request> receives_;  // the next version: a broadcast, or point-to-point chunks
  // Over MPI: the newest version that has come and is not loaded yet (empty: none), and a free buffer for the next.
  std::vector<char> held_, spare_;
  MPI_Request control_ = MPI_REQUEST_NULL;
  std::int64_t control_message_ = 0;
  bool control_arrived_ = false;
  MPI_Request acknowledgement_ = MPI_REQUEST_NULL;
  std::int64_t acknowledged_ = -1;
  bool ended_ = false;
};

// Whether the trainer leader sends a split layout's runners their weights over NCCL: NCCL compiled in (`nccl_built`),
// and the leader and every runner on a GPU of their own (NCCL takes one rank per GPU). `hosts` names each rank's host
// as NCCL tells hosts apart (NCCL_HOSTID where set, else the host name), `gpus` its GPU's PCI bus id (empty: the
// CPU; not CUDA's device number, which CUDA_VISIBLE_DEVICES may make 0 on every rank), by world rank. Otherwise MPI
// carries them, from host memory.
bool weights_over_nccl(const Layout& layout, const std::vector<std::string>& hosts,
                       const std::vector<std::string>& gpus, bool nccl_built);

// Colocated layouts: a rank's trainer thread hands its weights to the runner thread of the
// same rank (every trainer holds the same weights after a step).
class SharedWeights : public WeightChannel {
 public:
  void publish(std::int64_t version, const model::Policy& policy) override;
  void stop() override;
  bool poll(model::Policy& policy, std::uint64_t& version) override;
  bool arrived(std::uint64_t version) override;

 private:
  std::mutex mutex_;
  std::int64_t version_ = -1;
  std::vector<float> weights_;
  bool stopped_ = false;
};

}  // namespace arclight::app
