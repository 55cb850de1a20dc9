#pragma once
#include <mpi.h>

#include <string>
#include <vector>

namespace arclight::comm {

// A communicator of its own for one purpose (the control plane, a group of trainers), freed on destruction.
class Communicator {
 public:
  static Communicator duplicate(MPI_Comm parent);
  static Communicator split(MPI_Comm parent, int color, int key);  // MPI_UNDEFINED gives a null one
  Communicator() = default;
  ~Communicator();
  Communicator(Communicator&& other) noexcept : comm_(other.comm_) { other.comm_ = MPI_COMM_NULL; }
  Communicator& operator=(Communicator&& other) noexcept;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  MPI_Comm get() const { return comm_; }
  explicit operator bool() const { return comm_ != MPI_COMM_NULL; }
  int rank() const;
  int size() const;

 private:
  explicit Communicator(MPI_Comm comm) : comm_(comm) {}
  MPI_Comm comm_ = MPI_COMM_NULL;
};

// Owns MPI for the life of the process: init, the node-local view, collective
// agreement on errors, and ending the whole job from any rank.
class MpiRuntime {
 public:
  MpiRuntime(int& argc, char**& argv);
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  // The CPUs this job's ranks on this node may run on (the union of their affinity masks: a Slurm allocation of part of
  // a node, a launcher's binding), which std::thread::hardware_concurrency, the node's count, does not know.
  int node_cpus() const { return node_cpus_; }

  // Collective over all ranks: each says whether it failed; returns the lowest
  // failing rank, or -1 when none did. Lets exactly one rank report an error
  // that every rank found, and every rank exit with the same code.
  int first_failure(bool failed) const;
  // Collective: rank `root`'s value, on every rank (the exit code the rank that failed chose).
  int broadcast(int value, int root) const;

  // Collective: rank `root` receives every rank's string, in rank order; the others get {}.
  std::vector<std::string> gather(const std::string& mine, int root) const;

  // Ends every rank of the job now with this exit code. Use after logging the one message.
  [[noreturn]] void abort(int exit_code) const;

 private:
  int rank_ = 0;
  int size_ = 1;
  int local_rank_ = 0;
  int local_size_ = 1;
  int node_cpus_ = 1;
};

// Collective over `node` (the ranks of one node): the number of CPUs in the union of their affinity masks.
int cpus_of_ranks(MPI_Comm node);

}  // namespace arclight::comm
