#pragma once
// How new policy versions reach a runner (app-private): each trainer step publishes, runners
// poll between episodes.
#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

#include "arclight/core/config.hpp"
#include "arclight/model/policy.hpp"

namespace arclight::app {

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
// runners keep posted; each runner acknowledges the versions it loads. A broadcast waits for
// every runner, so one that hangs (stopped, its node frozen) would hold every later version back:
// a runner that has not acknowledged a version `hung_seconds` after it was sent, or a broadcast
// the leader cannot finish in that time, turns the channel to point-to-point sends, one per runner
// (costlier for the leader, but nobody waits for a runner that hangs), and a runner that does not
// take a point-to-point version in that time is fenced: named in the log, sent nothing more but a
// note that ends its part should it ever wake. The store requeues its work; the job goes on.
// Both sides are this class: a trainer other than the leader (no sync communicator) does nothing.
// `compression` (comm.compression) bf16 or fp16 sends each weight in 16 bits, rounded to nearest even: half the
// bytes, and runners sample with the rounded weights (the trainers keep theirs in full).
class SplitWeights : public WeightChannel {
 public:
  SplitWeights(MPI_Comm sync, bool leader, double hung_seconds, Compression compression = Compression::none);
  void attach(const model::Policy& policy) override;
  void publish(std::int64_t version, const model::Policy& policy) override;
  void stop() override;
  bool poll(model::Policy& policy, std::uint64_t& version) override;
  bool arrived(std::uint64_t version) override;

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
  // ---- a runner ----
  void post_receive();
  void post_control();
  bool end_here();
  std::int64_t received_version() const;

  enum class Mode { broadcast, point_to_point };
  MPI_Comm sync_;
  bool leader_;
  double hung_seconds_;
  Compression compression_;
  Mode mode_ = Mode::broadcast;
  std::vector<char> bytes_;      // [version (int64)][weights, packed as compression_ says]
  std::vector<float> unpacked_;  // a runner's weights out of 16-bit ones
  // Buffers that abandoned operations may still read or write (MPI cannot take a send or a
  // broadcast back): kept to the end.
  std::vector<std::vector<char>> abandoned_;
  // The leader.
  std::vector<Runner> runners_;
  std::vector<MPI_Request> broadcast_;
  std::int64_t sent_version_ = -1;
  Clock::time_point sent_at_;
  // A runner.
  std::vector<MPI_Request> receives_;  // the next version: a broadcast, or point-to-point chunks
  MPI_Request control_ = MPI_REQUEST_NULL;
  std::int64_t control_message_ = 0;
  bool control_arrived_ = false;
  MPI_Request acknowledgement_ = MPI_REQUEST_NULL;
  std::int64_t acknowledged_ = -1;
  bool ended_ = false;
};

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
