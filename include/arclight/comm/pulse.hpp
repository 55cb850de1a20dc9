#pragma once
// Signs of life, so that rank 0 tells a rank that hangs (stopped, its node frozen) from one that
// is only busy: every worker rank sends rank 0 an empty message every second from a thread of
// its own, whatever its other threads are doing (a long training step, a long generation); a
// hung process sends nothing. MPI itself cannot tell: a collective or a send to a stopped rank
// just waits.
#include <mpi.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace arclight::comm {

inline constexpr std::chrono::milliseconds pulse_interval{1000};

// A rank's pulse: from construction to destruction, on `comm` (tag_pulse) to rank `to`. Rank 0 pulses one worker
// too (the last rank: under block placement, on another node than rank 0's), which watches it: with `watch_seconds`
// > 0, `on_silent` is called on the pulse's thread once `to` has sent no pulse for that long (rank 0 hangs: a worker
// blocked on it outside a store request would never know).
class PulseSender {
 public:
  PulseSender(MPI_Comm comm, int to, double watch_seconds = 0,
              std::function<void(double silent_seconds)> on_silent = {});
  ~PulseSender();
  PulseSender(const PulseSender&) = delete;
  PulseSender& operator=(const PulseSender&) = delete;

 private:
  void run();
  MPI_Comm comm_;
  int to_;
  double watch_seconds_;
  std::function<void(double)> on_silent_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

// A rank's view of the pulses that come to it on `comm` (rank 0's of every other rank; the last
// rank's of rank 0, through PulseSender): call take() often (every second or so); a rank is silent
// for as long as its pulses had not come at the last take(). Time in which take() was not called
// (the watcher busy elsewhere, or itself stopped) counts against nobody but the first second of it.
class PulseWatch {
 public:
  explicit PulseWatch(MPI_Comm comm);
  void take();
  double silent_seconds(int rank) const;
  // The ranks but 0 silent for at least `seconds`, in rank order (rank 0's watch of the others).
  std::vector<int> silent_for(double seconds) const;

 private:
  using Clock = std::chrono::steady_clock;
  MPI_Comm comm_;
  std::vector<Clock::time_point> heard_;  // by rank
  Clock::time_point last_take_;
  std::string buffer_;
};

// Start-up's pulses: from right after the command line is read until the job's own pulses (on its control
// channel) begin, every worker rank pulses rank 0 on MPI_COMM_WORLD and rank 0 watches on a thread of its own, while
// rank 0 pulses the last rank, which watches it. A rank that hangs there (stopped, its node frozen) would hold every
// other rank in start-up's collectives (the placement's gather, the channels, the secret) forever, where no loop
// looks at pulses: instead, `on_hung` is called on a watching thread with the first rank silent for `hung_seconds`
// (it ends the job).
class StartupWatch {
 public:
  StartupWatch(double hung_seconds, std::function<void(int rank, double silent_seconds)> on_hung);
  ~StartupWatch();
  StartupWatch(const StartupWatch&) = delete;
  StartupWatch& operator=(const StartupWatch&) = delete;
  // Start-up is over on this rank (its own pulses or watch run): stops pulsing or watching. Idempotent.
  void end();

 private:
  void watch();
  double hung_seconds_;
  std::function<void(int, double)> on_hung_;
  std::unique_ptr<PulseSender> sender_;  // to rank 0 (workers), to the last rank (rank 0)
  std::mutex mutex_;                     // rank 0
  std::condition_variable wake_;
  bool ending_ = false;
  std::thread watcher_;
};

}  // namespace arclight::comm
