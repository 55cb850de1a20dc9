// Checkpoint costs, in one run: the blocking copy against memcpy of the same bytes, a full
// write with fsync (bench/checkpoint.sh compares it with dd conv=fsync and torch.save), and
// a restore, and an incremental version's size. Usage: bench_checkpoint DIR PARAMETERS [ROUNDS],
// or bench_checkpoint --restore FILE (seconds to restore it), or under mpirun
// bench_checkpoint --parallel DIR PARAMETERS ROUNDS (rank 0 writes meta, the others the
// tensors, as in training; seconds of the best full write on rank 0), or under mpirun
// bench_checkpoint --restore-shared FILE (seconds for the ranks to restore it together, each
// reading its share: ckpt::read_model_shared).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <filesystem>
#include <string>

#include "arclight/ckpt/checkpoint.hpp"

using namespace arclight;
using Clock = std::chrono::steady_clock;
static double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Twenty equal tensors of weights and AdamW moments.
ckpt::Checkpoint model_state(std::size_t n) {
  ckpt::Checkpoint c;
  c.parameters.assign(n, 0.5f);
  for (std::size_t i = 0; i < n; i += 4096) c.parameters[i] = float(i);
  c.exp_avg.assign(n, 0.25f);
  c.exp_avg_sq.assign(n, 0.125f);
  for (int i = 0; i < 20; ++i) c.tensors.push_back({"t" + std::to_string(i), n / 20 + (i == 19 ? n % 20 : 0)});
  c.optimizer_steps.assign(20, 1);
  return c;
}

int parallel(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const std::string dir = argv[2];
  const ckpt::Checkpoint whole = model_state(std::strtoull(argv[3], nullptr, 10));
  ckpt::WriteOptions options;
  options.comm = MPI_COMM_WORLD;
  options.part.all_tensors = false;
  options.part.meta_and_store = rank == 0;
  options.part.model_index = rank == 1;
  if (rank > 0)
    options.part.tensors = ckpt::partition_tensors(whole.tensors, size - 1)[static_cast<std::size_t>(rank - 1)];
  const ckpt::Checkpoint c = rank == 0 ? whole : ckpt::pack_tensors(whole, options.part.tensors);
  double best = 1e30;
  for (int r = 1; r <= std::atoi(argv[4]); ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    auto t = Clock::now();
    ckpt::write_checkpoint(dir, r, c, options);
    MPI_Barrier(MPI_COMM_WORLD);
    best = std::min(best, since(t));
  }
  if (rank == 0) std::printf("%.6g\n", best);
  MPI_Finalize();
  return 0;
}

int restore_shared(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Barrier(MPI_COMM_WORLD);
  auto t = Clock::now();
  ckpt::SharedReadFigures figures;
  ckpt::Checkpoint back = ckpt::read_model_shared(argv[2], MPI_COMM_WORLD, &figures);
  MPI_Barrier(MPI_COMM_WORLD);
  const double seconds = since(t);
  std::fprintf(stderr, "rank %d: its share read in %.4f s (%.1f MB), broadcast %.4f s\n", rank, figures.read_seconds,
               figures.bytes_read / 1e6, figures.broadcast_seconds);
  if (rank == 0) std::printf("%.6g\n", seconds);
  MPI_Finalize();
  return back.parameters.empty() ? 1 : 0;
}

int main(int argc, char** argv) {
  if (argc == 5 && std::string(argv[1]) == "--parallel") return parallel(argc, argv);
  if (argc == 3 && std::string(argv[1]) == "--restore-shared") return restore_shared(argc, argv);
  if (argc == 3 && std::string(argv[1]) == "--restore") {  // seconds to restore one version
    auto t = Clock::now();
    ckpt::Checkpoint back = ckpt::read_checkpoint(argv[2]);
    std::printf("%.6g\n", since(t));
    return back.parameters.empty() ? 1 : 0;
  }
  const std::string dir = argc > 1 ? argv[1] : "/tmp/arclight_bench_ckpt";
  const std::size_t n = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 8u << 20;
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 3;
  // The trainer's live state: weights and AdamW's two moments.
  std::vector<float> weights(n, 0.5f), m(n, 0.25f), v(n, 0.125f);
  for (std::size_t i = 0; i < n; i += 4096) weights[i] = float(i);
  const double bytes = 3.0 * n * sizeof(float);

  // Blocking part: copy the state into the checkpoint's host buffers, against raw memcpy.
  // Periodic checkpoints reuse their buffers, so the copy is timed into warm ones.
  ckpt::Checkpoint c;
  c.parameters.assign(n, 0.f);
  c.exp_avg.assign(n, 0.f);
  c.exp_avg_sq.assign(n, 0.f);
  auto t = Clock::now();
  c.parameters.assign(weights.begin(), weights.end());
  c.exp_avg.assign(m.begin(), m.end());
  c.exp_avg_sq.assign(v.begin(), v.end());
  // In twenty tensors, as a model's: a parallel restore shares them out.
  for (int i = 0; i < 20; ++i) c.tensors.push_back({"t" + std::to_string(i), n / 20 + (i == 19 ? n % 20 : 0)});
  c.optimizer_steps.assign(20, 1);
  const double blocking = since(t);
  std::vector<float> a(n), b(n), d(n);
  t = Clock::now();
  std::memcpy(a.data(), weights.data(), n * sizeof(float));
  std::memcpy(b.data(), m.data(), n * sizeof(float));
  std::memcpy(d.data(), v.data(), n * sizeof(float));
  const double memcpy_seconds = since(t);

  // Full writes with fsync, best of `rounds` (the file system's state makes single runs noisy;
  // bench/checkpoint.sh times dd and torch.save the same way).
  std::filesystem::create_directories(dir);
  double write_seconds = 1e30, read_seconds = 1e30;
  std::string path;
  for (int r = 1; r <= rounds; ++r) {
    c.step = r;  // a version file holds the step its name says
    t = Clock::now();
    path = ckpt::write_checkpoint(dir, r, c);
    write_seconds = std::min(write_seconds, since(t));
    t = Clock::now();
    ckpt::Checkpoint back = ckpt::read_checkpoint(path);
    read_seconds = std::min(read_seconds, since(t));
    if (!std::equal(back.parameters.begin(), back.parameters.end(), weights.begin(), weights.end())) {
      std::fprintf(stderr, "restore differs\n");
      return 1;
    }
  }

  // Incremental: a frozen base. Twenty tensors, of which only the last trains (5% of the
  // parameters, as when only the last blocks or an adapter train): the next version writes
  // that tensor and its moments, and links to the rest.
  ckpt::Checkpoint frozen = model_state(n);
  ckpt::WriteOptions incremental;
  incremental.full_every = 10;
  const std::string inc_dir = dir + "/incremental";
  frozen.step = 1;
  const std::string full_path = ckpt::write_checkpoint(inc_dir, 1, frozen, incremental);
  for (std::size_t i = n - frozen.tensors.back().size; i < n; ++i) {
    frozen.parameters[i] += 1e-3f;
    frozen.exp_avg[i] += 1e-4f;
    frozen.exp_avg_sq[i] += 1e-6f;
  }
  frozen.optimizer_steps.back() = 2;
  frozen.step = 2;
  const std::string inc_path = ckpt::write_checkpoint(inc_dir, 2, frozen, incremental);
  if (ckpt::read_checkpoint(inc_path).parameters != frozen.parameters) {
    std::fprintf(stderr, "incremental restore differs\n");
    return 1;
  }
  const double full_bytes = double(std::filesystem::file_size(full_path));
  const double inc_bytes = double(std::filesystem::file_size(inc_path));

  std::printf(
      "state %.0f MB: blocking copy %.3f s vs memcpy %.3f s; write+fsync %.3f s (%.0f MB/s, best of %d); "
      "restore %.3f s; incremental version (5%% trains) %.1f MB of %.1f MB\n",
      bytes / 1e6, blocking, memcpy_seconds, write_seconds, bytes / write_seconds / 1e6, rounds, read_seconds,
      inc_bytes / 1e6, full_bytes / 1e6);
  std::printf(
      "{\"bytes\": %.0f, \"blocking_s\": %.6g, \"memcpy_s\": %.6g, \"write_s\": %.6g, \"restore_s\": %.6g, "
      "\"incremental_ratio\": %.4f, \"incremental_bytes\": %.0f, \"full_bytes\": %.0f, \"file\": \"%s\"}\n",
      bytes, blocking, memcpy_seconds, write_seconds, read_seconds, inc_bytes / full_bytes, inc_bytes, full_bytes,
      path.c_str());
  return 0;
}
