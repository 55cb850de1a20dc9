#include "arclight/core/placement.hpp"

#include <cerrno>
#include <cstdlib>

namespace arclight {

std::optional<int> local_rank_from_env(const EnvLookup& getenv) {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"}) {
    const char* value = getenv(name);
    if (value == nullptr || *value == '\0') continue;
    char* end = nullptr;
    errno = 0;
    long parsed = std::strtol(value, &end, 10);
    if (*end == '\0' && errno == 0 && parsed >= 0 && parsed < 1 << 20) return static_cast<int>(parsed);
  }
  return std::nullopt;
}

int device_for_local_rank(int local_rank, int gpu_count) {
  if (gpu_count <= 0 || local_rank < 0) return -1;
  return local_rank % gpu_count;
}

int threads_for_rank(int node_cores, int local_size) {
  if (local_size < 1) local_size = 1;
  int threads = node_cores / local_size;
  return threads < 1 ? 1 : threads;
}

}  // namespace arclight
