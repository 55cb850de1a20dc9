// The MPI gradient reducer against one raw MPI_Allreduce of the same bytes, in one run.
// Gradients: a model-like mix of buffers (many 1 MB matrices, small biases) totalling N MB.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "arclight/comm/reducer.hpp"

using namespace arclight;

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 5;
  std::string json = "{";
  for (std::size_t megabytes : {25u, 100u}) {
    const std::size_t total = megabytes * (1u << 20) / sizeof(float);
    // As the policy lays its gradients out: views of one flat buffer.
    std::vector<float> storage(total, 1.0f);
    std::vector<FloatBuffer> buffers;
    std::size_t placed = 0;
    while (placed < total) {
      std::size_t n = std::min<std::size_t>(buffers.size() % 4 == 3 ? 1024 : (1u << 18),
                                            total - placed);  // 1 MB matrices, 4 KB biases
      buffers.push_back({storage.data() + placed, n});
      placed += n;
    }
    std::vector<float> flat(total, 1.0f);

    comm::MpiReducer reducer(MPI_COMM_WORLD, comm::ReducerConfig{});
    reducer.all_reduce(buffers);  // warm-up: plans buckets, touches memory
    MPI_Allreduce(MPI_IN_PLACE, flat.data(), static_cast<int>(total), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double ours = 1e30, raw = 1e30;
    for (int r = 0; r < repeats; ++r) {
      MPI_Barrier(MPI_COMM_WORLD);
      double t = MPI_Wtime();
      MPI_Allreduce(MPI_IN_PLACE, flat.data(), static_cast<int>(total), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      raw = std::min(raw, MPI_Wtime() - t);
      MPI_Barrier(MPI_COMM_WORLD);
      t = MPI_Wtime();
      reducer.all_reduce(buffers);
      ours = std::min(ours, MPI_Wtime() - t);
    }
    const double bytes = double(total) * sizeof(float);
    if (rank == 0) {
      std::printf(
          "%zu MiB (%.1f MB) in %zu buffers over %d ranks: reducer %.1f MB/s, raw MPI_Allreduce %.1f MB/s, ratio "
          "%.3f\n",
          megabytes, bytes / 1e6, buffers.size(), size, bytes / ours / 1e6, bytes / raw / 1e6, raw / ours);
      char part[200];
      std::snprintf(part, sizeof part,
                    "%s\"mb%zu_reducer_MBps\": %.1f, \"mb%zu_raw_MBps\": %.1f, \"mb%zu_ratio\": %.3f",
                    json.size() > 1 ? ", " : "", megabytes, bytes / ours / 1e6, megabytes, bytes / raw / 1e6, megabytes,
                    raw / ours);
      json += part;
    }
  }
  if (rank == 0) std::printf("%s}\n", json.c_str());
  MPI_Finalize();
  return 0;
}
