#include "arclight/comm/waiting.hpp"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

namespace arclight::comm {

namespace {
// Whether this node runs more ranks than it has cores; the rank count comes from the launcher.
bool oversubscribed() {
  static const bool answer = [] {
    const char* local_size = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    const int ranks_on_node = local_size ? std::atoi(local_size) : 1;
    return ranks_on_node > static_cast<int>(std::thread::hardware_concurrency());
  }();
  return answer;
}
}  // namespace

// Spinning helps only a rank with a core to itself; on an oversubscribed node it takes the
// core from the rank it waits for, and yielding gives it to that rank.
IdleBackoff::IdleBackoff() : spin_polls_(oversubscribed() ? 0 : 2000), yield_polls_(oversubscribed() ? 0 : 0) {}

void IdleBackoff::idle() {
  ++idle_polls_;
  if (idle_polls_ <= spin_polls_) return;
  if (idle_polls_ <= spin_polls_ + yield_polls_) {
    sched_yield();
    return;
  }
  std::this_thread::sleep_for(sleep_);
  sleep_ = std::min(sleep_ * 2, max_sleep);
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

void wait_all(std::vector<MPI_Request>& requests, IdleBackoff& backoff) {
  backoff.reset();
  for (;;) {
    int done = 0;
    MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE);
    if (done) return;
    backoff.idle();
  }
}

void wait_all(std::vector<MPI_Request>& requests) {
  IdleBackoff backoff;
  wait_all(requests, backoff);
}

}  // namespace arclight::comm
