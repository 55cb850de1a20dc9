#pragma once
// How a rank waits on MPI without taking a core from the ranks that compute.
//
// Open MPI's shared-memory transport has no blocking wait: MPI_Wait, MPI_Recv and MPI_Mprobe
// poll, and where ranks outnumber cores (mpirun --oversubscribe) every empty poll calls
// sched_yield, which the kernel bills as system time; a rank that waits seconds that way burns
// its share of a core. So a rank never blocks inside MPI while it may wait long: it tests, and
// between tests it spins while it has a core of its own (or yields a few times when it has
// not, which hands the core straight to the rank it waits for), then sleeps, each sleep twice
// the last, up to max_sleep. A short wait costs no latency; a long one about one wake-up per
// max_sleep.
#include <mpi.h>

#include <chrono>
#include <string>
#include <vector>

namespace arclight::comm {

class IdleBackoff {
 public:
  static constexpr std::chrono::microseconds first_sleep{50}, max_sleep{1000};
  IdleBackoff();
  // One empty poll: spin, or sleep a little longer than last time.
  void idle();
  // Something arrived: the next wait starts short again.
  void reset() {
    idle_polls_ = 0;
    sleep_ = first_sleep;
  }

 private:
  int spin_polls_, yield_polls_;
  int idle_polls_ = 0;
  std::chrono::microseconds sleep_ = first_sleep;
};

// Takes one message of `tag` from `source` (or MPI_ANY_SOURCE) if one has arrived: its bytes
// into `bytes` (resized; its capacity is reused) and its sender into `from`. Never blocks.
bool try_receive(MPI_Comm comm, int source, int tag, std::string& bytes, int* from = nullptr);

// Completes every request, sleeping between tests as above.
void wait_all(std::vector<MPI_Request>& requests);
void wait_all(std::vector<MPI_Request>& requests, IdleBackoff& backoff);

}  // namespace arclight::comm
