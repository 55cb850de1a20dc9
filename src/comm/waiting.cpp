#include "arclight/comm/waiting.hpp"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <thread>

namespace arclight::comm {

namespace {
std::atomic<int> node_cpus{0}, node_ranks{0};

// Whether this node runs more of the job's ranks than they have CPUs.
bool oversubscribed() {
  if (node_cpus.load() > 0) return node_ranks.load() > node_cpus.load();
  const char* local_size = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const int ranks_on_node = local_size ? std::atoi(local_size) : 1;
  return ranks_on_node > static_cast<int>(std::thread::hardware_concurrency());
}
}  // namespace

void set_node_share(int cpus, int ranks) {
  node_ranks = ranks;
  node_cpus = cpus;
}

// Spinning helps only a rank with a core to itself; on an oversubscribed node it takes the
// core from the rank it waits for, and yielding gives it to that rank.
IdleBackoff::IdleBackoff(Awaiting awaiting) : yield_(oversubscribed()), reply_(awaiting == Awaiting::reply) {}

void IdleBackoff::idle() {
  const auto now = std::chrono::steady_clock::now();
  if (!waiting_) {
    waiting_ = true;
    since_ = now;
    sleep_ = first_sleep;
    yielded_ = 0;
  }
  if (!yield_ && now - since_ < spin_time) return;  // spinning costs nobody else a core
  if (yield_ && (reply_ || burst_) && yielded_++ < yields) {
    sched_yield();
    return;
  }
  std::this_thread::sleep_for(sleep_);
  // Each wake-up costs a few microseconds of system time: sleep longer and longer, but while a
  // reply is young it may come any moment.
  if (!reply_ || now - since_ >= young) sleep_ = std::min(sleep_ * 2, max_sleep);
}

void IdleBackoff::reset() {
  burst_ = !waiting_ || std::chrono::steady_clock::now() - since_ < young;
  waiting_ = false;
}

bool try_receive(MPI_Comm comm, int source, int tag, std::string& bytes, int* from) {
  int flag = 0;
  MPI_Message message;
  MPI_Status status;
  MPI_Improbe(source, tag, comm, &flag, &message, &status);
  if (!flag) return false;
  int count = 0;
  MPI_Get_count(&status, MPI_BYTE, &count);
  bytes.resize(static_cast<std::size_t>(count));
  MPI_Mrecv(bytes.data(), count, MPI_BYTE, &message, MPI_STATUS_IGNORE);
  if (from) *from = status.MPI_SOURCE;
  return true;
}

void wait_all(std::vector<MPI_Request>& requests) {
  IdleBackoff backoff(IdleBackoff::Awaiting::reply);
  for (;;) {
    int done = 0;
    MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE);
    if (done) return;
    backoff.idle();
  }
}

}  // namespace arclight::comm
