#include "weight_channel.hpp"

#include <cstring>

#include "arclight/comm/large_messages.hpp"
#include "arclight/comm/waiting.hpp"

namespace arclight::app {

void BroadcastWeights::attach(const model::Policy& policy) {
  if (sync_ == MPI_COMM_NULL) return;
  bytes_.resize(sizeof(std::int64_t) + policy.parameter_count() * sizeof(float));
  if (!root_) post();
}

void BroadcastWeights::publish(std::int64_t version, const std::vector<float>& weights) {
  if (!root_) return;  // other trainers hold the same weights; the leader speaks for them
  fill(version, weights);
  send();
}

void BroadcastWeights::stop() {
  if (!root_) return;
  fill(-1, {});
  send();
}

bool BroadcastWeights::arrived(std::uint64_t) {
  if (sync_ == MPI_COMM_NULL) return false;
  // Completed requests become MPI_REQUEST_NULL, which tests complete again: poll() still finds them.
  int complete = 0;
  MPI_Testall(static_cast<int>(pending_.size()), pending_.data(), &complete, MPI_STATUSES_IGNORE);
  return complete != 0;
}

bool BroadcastWeights::poll(model::Policy& policy, std::uint64_t& version) {
  if (sync_ == MPI_COMM_NULL) return true;
  if (!arrived(version)) return true;
  std::int64_t v;
  std::memcpy(&v, bytes_.data(), sizeof v);
  if (v < 0) return false;
  policy.load_flat_parameters(reinterpret_cast<const float*>(bytes_.data() + sizeof v), policy.parameter_count());
  version = static_cast<std::uint64_t>(v);
  post();
  return true;
}

void BroadcastWeights::fill(std::int64_t version, const std::vector<float>& weights) {
  std::memcpy(bytes_.data(), &version, sizeof version);
  if (!weights.empty()) std::memcpy(bytes_.data() + sizeof version, weights.data(), weights.size() * sizeof(float));
}

void BroadcastWeights::post() { pending_ = comm::ibcast_large(bytes_.data(), bytes_.size(), 0, sync_); }

void BroadcastWeights::send() {
  post();
  comm::wait_all(pending_);
}

void SharedWeights::publish(std::int64_t version, const std::vector<float>& weights) {
  std::lock_guard<std::mutex> lock(mutex_);
  version_ = version;
  weights_ = weights;
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
