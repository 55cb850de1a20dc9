#include "arclight/comm/mpi_runtime.hpp"

#include <mpi.h>
#include <sched.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "arclight/comm/waiting.hpp"
#include "arclight/core/error.hpp"

namespace arclight::comm {

Communicator Communicator::duplicate(MPI_Comm parent) {
  MPI_Comm comm;
  MPI_Comm_dup(parent, &comm);
  return Communicator(comm);
}

Communicator Communicator::split(MPI_Comm parent, int color, int key) {
  MPI_Comm comm;
  MPI_Comm_split(parent, color, key, &comm);
  return Communicator(comm);
}

Communicator::~Communicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (comm_ != MPI_COMM_NULL && !finalized) MPI_Comm_free(&comm_);
}

Communicator& Communicator::operator=(Communicator&& other) noexcept {
  if (this != &other) {
    Communicator dropped(comm_);
    comm_ = other.comm_;
    other.comm_ = MPI_COMM_NULL;
  }
  return *this;
}

int Communicator::rank() const {
  int r = -1;
  MPI_Comm_rank(comm_, &r);
  return r;
}

int Communicator::size() const {
  int s = 0;
  MPI_Comm_size(comm_, &s);
  return s;
}

int cpus_of_ranks(MPI_Comm node) {
  cpu_set_t mine;
  CPU_ZERO(&mine);
  if (sched_getaffinity(0, sizeof mine, &mine) != 0) {
    const unsigned all = std::thread::hardware_concurrency();
    for (unsigned cpu = 0; cpu < all && cpu < CPU_SETSIZE; ++cpu) CPU_SET(cpu, &mine);
  }
  unsigned long words[sizeof(cpu_set_t) / sizeof(unsigned long)];
  std::memcpy(words, &mine, sizeof words);
  MPI_Allreduce(MPI_IN_PLACE, words, static_cast<int>(std::size(words)), MPI_UNSIGNED_LONG, MPI_BOR, node);
  cpu_set_t all;
  std::memcpy(&all, words, sizeof words);
  const int cpus = CPU_COUNT(&all);
  return cpus > 0 ? cpus : 1;
}

MpiRuntime::MpiRuntime(int& argc, char**& argv) {
  int provided = 0;
  // Checkpoint writers and the store's watchdog run on threads of their own.
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  if (provided < MPI_THREAD_MULTIPLE) {
    if (rank_ == 0)
      std::fprintf(stderr,
                   "arclight: this MPI library does not support MPI_THREAD_MULTIPLE, which the checkpoint "
                   "writers and colocated ranks need\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &local_rank_);
  MPI_Comm_size(node, &local_size_);
  node_cpus_ = cpus_of_ranks(node);
  MPI_Comm_free(&node);
  set_node_share(node_cpus_, local_size_);
}

MpiRuntime::~MpiRuntime() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

int MpiRuntime::first_failure(bool failed) const {
  int mine = failed ? rank_ : size_;
  int first = size_;
  MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return first == size_ ? -1 : first;
}

int MpiRuntime::broadcast(int value, int root) const {
  MPI_Bcast(&value, 1, MPI_INT, root, MPI_COMM_WORLD);
  return value;
}

std::vector<std::string> MpiRuntime::gather(const std::string& mine, int root) const {
  int length = static_cast<int>(mine.size());
  std::vector<int> lengths(rank_ == root ? size_ : 0);
  MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, root, MPI_COMM_WORLD);
  std::vector<int> offsets(lengths.size(), 0);
  int total = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    offsets[i] = total;
    total += lengths[i];
  }
  std::string all(static_cast<size_t>(total), '\0');
  MPI_Gatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, root,
              MPI_COMM_WORLD);
  std::vector<std::string> out;
  for (size_t i = 0; i < lengths.size(); ++i) out.push_back(all.substr(offsets[i], lengths[i]));
  return out;
}

void MpiRuntime::abort(int exit_code) const {
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);  // MPI_Abort does not return; this keeps [[noreturn]] honest
}

}  // namespace arclight::comm
