#pragma once
// A second thread for a restore, which computes the checksums of what was read (and with direct
// reads copies it into place) while the reading thread waits on the disk. A restore fills fresh
// memory, and the kernel zeroes each page on its first touch: here that took as long as reading
// the file, so the helper also faults in the room of reads through HDF5 ahead of them.
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace arclight::ckpt {

class RestoreHelper {
 public:
  RestoreHelper();
  // Drops the jobs not begun and waits for the one under way: the memory they touch may be
  // going away (a read that failed).
  ~RestoreHelper();
  RestoreHelper(const RestoreHelper&) = delete;
  RestoreHelper& operator=(const RestoreHelper&) = delete;

  // Faults in the pages of [begin, begin + bytes), which the reads will fill.
  void fault_in(const void* begin, std::size_t bytes);
  // Runs `job` after those posted before it. A job that throws ends the rest: finish rethrows.
  void post(std::function<void()> job);
  // Whether a job has thrown (the rest are dropped): the reads need not go on.
  bool failed();
  // Waits until every job has run; rethrows the first exception one raised.
  void finish();

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable posted_, drained_;
  std::deque<std::function<void()>> jobs_;
  bool busy_ = false, stopping_ = false;
  std::exception_ptr failure_;
  std::thread thread_;  // last: starts when the rest is ready
};

}  // namespace arclight::ckpt
