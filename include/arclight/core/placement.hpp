#pragma once
#include <functional>
#include <optional>

namespace arclight {

// Where a rank computes: its GPU (or the CPU) and how many CPU threads it may use.
struct Placement {
  int local_rank = 0;              // rank among the ranks on this node
  int local_size = 1;              // ranks on this node
  int device = -1;                 // CUDA device ordinal, or -1 for the CPU
  int threads = 1;                 // LibTorch / BLAS threads for this rank
  bool weights_over_nccl = false;  // split layouts: the trainer leader sends the runners their weights over NCCL
};

using EnvLookup = std::function<const char*(const char*)>;

// The node-local rank from the launcher: OMPI_COMM_WORLD_LOCAL_RANK (mpirun),
// then SLURM_LOCALID (srun); nullopt when neither is set or parses.
std::optional<int> local_rank_from_env(const EnvLookup& getenv);

// The device of a rank: local_rank modulo the GPUs it sees, or -1 with none.
int device_for_local_rank(int local_rank, int gpu_count);

// The cores one rank owns: the node's cores shared among its ranks, at least 1.
int threads_for_rank(int node_cores, int local_size);

}  // namespace arclight
