#pragma once
// How new policy versions reach a runner (app-private): each trainer step publishes, runners
// poll between episodes.
#include <mpi.h>

#include <cstdint>
#include <mutex>
#include <vector>

#include "arclight/model/policy.hpp"

namespace arclight::app {

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
  // Runner side: whether poll would load a new version or end (an endpoint drains its responses first).
  virtual bool arrived(std::uint64_t version) = 0;
};

// Split layouts: the trainer leader broadcasts [version (int64)][floats] to the runners on
// their own communicator (not through rank 0); runners keep an MPI_Ibcast posted. A
// negative version ends training.
class BroadcastWeights : public WeightChannel {
 public:
  // A rank outside the sync communicator (a trainer other than the leader) neither sends nor receives.
  // The buffer is sized by attach() from the rank's own policy: no second copy of the model is built.
  BroadcastWeights(MPI_Comm sync, bool root) : sync_(sync), root_(root && sync != MPI_COMM_NULL) {}
  void attach(const model::Policy& policy) override;
  void publish(std::int64_t version, const std::vector<float>& weights) override;
  void stop() override;
  bool poll(model::Policy& policy, std::uint64_t& version) override;
  bool arrived(std::uint64_t version) override;

 private:
  void fill(std::int64_t version, const std::vector<float>& weights);
  void post();
  void send();
  MPI_Comm sync_;
  bool root_;
  std::vector<char> bytes_;
  std::vector<MPI_Request> pending_;  // one broadcast, in chunks
};

// Colocated layouts: a rank's trainer thread hands its weights to the runner thread of the
// same rank (every trainer holds the same weights after a step).
class SharedWeights : public WeightChannel {
 public:
  void publish(std::int64_t version, const std::vector<float>& weights) override;
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
