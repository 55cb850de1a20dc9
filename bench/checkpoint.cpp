// Checkpoint costs, in one run: the blocking copy against memcpy of the same bytes, a full
// write with fsync (bench/checkpoint.sh compares it with dd conv=fsync and torch.save), and
// a restore. Usage: bench_checkpoint DIR PARAMETERS
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "arclight/ckpt/checkpoint.hpp"

using namespace arclight;
using Clock = std::chrono::steady_clock;
static double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : "/tmp/arclight_bench_ckpt";
  const std::size_t n = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 8u << 20;
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
  c.optimizer_steps = {1};
  const double blocking = since(t);
  std::vector<float> a(n), b(n), d(n);
  t = Clock::now();
  std::memcpy(a.data(), weights.data(), n * sizeof(float));
  std::memcpy(b.data(), m.data(), n * sizeof(float));
  std::memcpy(d.data(), v.data(), n * sizeof(float));
  const double memcpy_seconds = since(t);

  std::filesystem::create_directories(dir);
  t = Clock::now();
  const std::string path = ckpt::write_checkpoint(dir, 1, c);
  const double write_seconds = since(t);
  t = Clock::now();
  ckpt::Checkpoint back = ckpt::read_checkpoint(path);
  const double read_seconds = since(t);
  if (back.parameters != weights) {
    std::fprintf(stderr, "restore differs\n");
    return 1;
  }
  std::printf("state %.0f MB: blocking copy %.3f s vs memcpy %.3f s; write+fsync %.3f s (%.0f MB/s); restore %.3f s\n",
              bytes / 1e6, blocking, memcpy_seconds, write_seconds, bytes / write_seconds / 1e6, read_seconds);
  std::printf("{\"bytes\": %.0f, \"blocking_s\": %.4f, \"memcpy_s\": %.4f, \"write_s\": %.4f, \"restore_s\": %.4f, \"file\": \"%s\"}\n",
              bytes, blocking, memcpy_seconds, write_seconds, read_seconds, path.c_str());
  return 0;
}
