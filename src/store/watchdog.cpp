// The store's watchdog thread: check_health every interval.
#include <algorithm>
#include <chrono>

#include "arclight/store/memory_store.hpp"

namespace arclight::store {

double watchdog_interval(const RolloutConfig& config) {
  double shortest = 4.0;
  for (double limit : {config.timeout_seconds, config.unresponsive_seconds})
    if (limit > 0) shortest = std::min(shortest, limit);
  return std::clamp(shortest / 4, 0.01, 1.0);
}

Watchdog::Watchdog(MemoryStore& store, double interval_seconds) : store_(store) {
  thread_ = std::thread([this, interval_seconds] {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!wake_.wait_for(lock, std::chrono::duration<double>(interval_seconds), [this] { return stop_; })) {
      lock.unlock();
      store_.check_health();
      lock.lock();
    }
  });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

}  // namespace arclight::store
