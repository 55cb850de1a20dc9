#pragma once
// Signs of life, so that rank 0 tells a rank that hangs (stopped, its node frozen) from one that
// is only busy: every worker rank sends rank 0 an empty message every second from a thread of
// its own, whatever its other threads are doing (a long training step, a long generation); a
// hung process sends nothing. MPI itself cannot tell: a collective or a send to a stopped rank
// just waits.
#include <mpi.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace arclight::comm {

inline constexpr std::chrono::milliseconds pulse_interval{1000};

// A worker rank's pulse: from construction to destruction, on `comm` (tag_pulse) to rank `to`.
class PulseSender {
 public:
  PulseSender(MPI_Comm comm, int to);
  ~PulseSender();
  PulseSender(const PulseSender&) = delete;
  PulseSender& operator=(const PulseSender&) = delete;

 private:
  void run();
  MPI_Comm comm_;
  int to_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

// Rank 0's view of the pulses of every other rank of `comm`: call take() often (every second or
// so); a rank is silent for as long as its pulses have not come. Time in which take() was not
// called (rank 0 busy elsewhere) counts against nobody but the first second of it.
class PulseWatch {
 public:
  explicit PulseWatch(MPI_Comm comm);
  void take();
  double silent_seconds(int rank) const;
  // The ranks silent for at least `seconds`, in rank order.
  std::vector<int> silent_for(double seconds) const;

 private:
  using Clock = std::chrono::steady_clock;
  MPI_Comm comm_;
  std::vector<Clock::time_point> heard_;  // by rank; rank 0's own is never judged
  Clock::time_point last_take_;
  std::string buffer_;
};

}  // namespace arclight::comm
