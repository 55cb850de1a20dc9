#pragma once
// How a rank waits on MPI without taking a core from the ranks that compute.
//
// Open MPI's shared-memory transport has no blocking wait: MPI_Wait, MPI_Recv and MPI_Mprobe
// poll, and where ranks outnumber cores (mpirun --oversubscribe) every empty poll calls
// sched_yield, which the kernel bills as system time; a rank that waits seconds that way burns
// its share of a core. So a rank never blocks inside MPI while it may wait long: it tests, and
// between tests it first spins (while it has a core of its own) or yields (which hands the core
// straight to the rank it waits for, when it has not) for a short while, so that a quick answer
// costs no latency, then sleeps, each sleep twice the last, up to max_sleep: a long wait costs
// about one wake-up per max_sleep. A rank awaiting the next message waits as for a reply while
// messages come in a burst (the wait before was young): a server's clients answer soon then.
#include <mpi.h>

#include <chrono>
#include <string>
#include <vector>

namespace arclight::comm {

// What MpiRuntime found on this node: `ranks` of the job there, which may run on `cpus` CPUs; a wait spins only where
// each rank has a CPU. Before (or without) it: the launcher's count of ranks (OMPI_COMM_WORLD_LOCAL_SIZE) against the
// node's CPUs.
void set_node_share(int cpus, int ranks);

class IdleBackoff {
 public:
  // What the rank waits for: the reply to what it sent (soon: worth yielding for, on an
  // oversubscribed node), or whatever comes next (a server's requests, a trainer's next batch:
  // not worth a core's worth of yields).
  enum class Awaiting { reply, next_message };
  // How long a wait spins (a core of its own), or how many times it yields (none), before it
  // sleeps: a yield that hands the core over lasts until the other rank's time slice ends.
  static constexpr std::chrono::microseconds spin_time{2000};
  static constexpr int yields = 200;
  // Then sleeps, short ones while a reply is young (a busy peer answers soon), then longer ones.
  static constexpr std::chrono::microseconds first_sleep{50}, young{3000}, max_sleep{1000};
  explicit IdleBackoff(Awaiting awaiting);
  // One empty poll: spin or yield while the wait is young, else sleep a little longer than last time.
  void idle();
  // Something arrived: the next wait starts afresh.
  void reset();

 private:
  bool yield_;  // rather than spin: this node has more ranks than cores
  bool reply_;  // awaiting a reply
  bool waiting_ = false;
  bool burst_ = false;  // the wait before this one was young
  int yielded_ = 0;
  std::chrono::steady_clock::time_point since_;
  std::chrono::microseconds sleep_ = first_sleep;
};

// Takes one message of `tag` from `source` (or MPI_ANY_SOURCE) if one has arrived: its bytes
// into `bytes` (resized; its capacity is reused) and its sender into `from`. Never blocks.
bool try_receive(MPI_Comm comm, int source, int tag, std::string& bytes, int* from = nullptr);

// Completes every request, sleeping between tests as for a reply.
void wait_all(std::vector<MPI_Request>& requests);

}  // namespace arclight::comm
