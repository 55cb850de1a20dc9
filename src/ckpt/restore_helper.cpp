#include "restore_helper.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <utility>

namespace arclight::ckpt {

RestoreHelper::RestoreHelper() : thread_([this] { run(); }) {}

RestoreHelper::~RestoreHelper() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    jobs_.clear();
  }
  posted_.notify_all();
  thread_.join();
}

void RestoreHelper::fault_in(const void* begin, std::size_t bytes) {
#ifdef MADV_POPULATE_WRITE
  if (bytes == 0) return;
  static const std::uintptr_t page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto from = reinterpret_cast<std::uintptr_t>(begin) & ~(page - 1);
  const auto until = reinterpret_cast<std::uintptr_t>(begin) + bytes;
  // A hint: on a kernel without it (before 5.14) the reads fault the pages in themselves.
  post([from, until] { ::madvise(reinterpret_cast<void*>(from), until - from, MADV_POPULATE_WRITE); });
#else
  (void)begin, (void)bytes;
#endif
}

void RestoreHelper::post(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failure_) return;
    jobs_.push_back(std::move(job));
  }
  posted_.notify_one();
}

bool RestoreHelper::failed() {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_ != nullptr;
}

void RestoreHelper::finish() {
  std::unique_lock<std::mutex> lock(mutex_);
  drained_.wait(lock, [this] { return jobs_.empty() && !busy_; });
  if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
}

void RestoreHelper::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    posted_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
    if (stopping_) return;
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    busy_ = true;
    lock.unlock();
    std::exception_ptr failed;
    try {
      job();
    } catch (...) {
      failed = std::current_exception();
    }
    lock.lock();
    busy_ = false;
    if (failed) {
      failure_ = failed;
      jobs_.clear();
    }
    if (jobs_.empty()) drained_.notify_all();
  }
}

}  // namespace arclight::ckpt
