#pragma once
// Where a rank's CPU time goes, for <run.dir>/usage.json (scripts/bench.sh demo reads it).
#include <mutex>
#include <string>

#include "arclight/comm/mpi_runtime.hpp"
#include "arclight/core/layout.hpp"

namespace arclight::app {

// The CPU time a rank spends generating (a runner's forward passes) or training (a trainer's
// steps), the compute of the run: the CPU time of the thread that does it, so that a rank's
// waiting, store traffic and other threads are not counted. (Pool threads of LibTorch, when a
// rank has more than one, are not counted either: an undercount.)
class ComputeClock {
 public:
  class Section {
   public:
    explicit Section(ComputeClock& clock);
    ~Section();
    Section(const Section&) = delete;
    Section& operator=(const Section&) = delete;

   private:
    ComputeClock& clock_;
    double started_;
  };
  double seconds();

 private:
  std::mutex mutex_;
  double total_ = 0;
};

// This process's user and system CPU seconds so far, every thread's.
struct ProcessCpu {
  double user = 0, system = 0;
  static ProcessCpu now();
};

// Collective: every rank's role and its user, system and compute (`compute_seconds`) CPU
// seconds since `since` (the start of training: the wall time's window too), and the CPU
// seconds before it (loading LibTorch, MPI's start), and its peak resident memory, gathered by
// rank 0 into the JSON file `path` with the window's wall time and the node's cores.
void write_usage(const comm::MpiRuntime& mpi, const Layout& layout, const ProcessCpu& since, double compute_seconds,
                 double wall_seconds, const std::string& path);

}  // namespace arclight::app
