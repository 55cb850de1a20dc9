// Loads a Hugging Face model directory (bench/model_bench.py writes one) and generates from it: load seconds, peak
// RSS (VmHWM) and generated tokens/s with the KV cache, greedy, on the prompts model_bench.py uses; on CUDA device
// DEVICE (-1: the CPU) in compute type DTYPE (float32, bfloat16) when given (scripts/gpu_check.sh).
// usage: bench_model DIR BATCH PROMPT NEW THREADS [DEVICE [DTYPE]]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "arclight/model/compute_threads.hpp"
#include "arclight/model/policy.hpp"

using namespace arclight;

namespace {

// A /proc/self/status figure in bytes ("VmRSS", "VmHWM").
double status_bytes(const std::string& key) {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind(key + ":", 0) == 0) return std::atof(line.c_str() + key.size() + 1) * 1024;
  return 0;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6 || argc > 8) {
    std::fprintf(stderr, "usage: bench_model DIR BATCH PROMPT NEW THREADS [DEVICE [DTYPE]]\n");
    return 2;
  }
  const int device = argc > 6 ? std::atoi(argv[6]) : -1;
  const std::string dtype = argc > 7 ? argv[7] : "float32";
  if (dtype != "float32" && dtype != "bfloat16") {
    std::fprintf(stderr, "bench_model: DTYPE is float32 or bfloat16, not %s\n", dtype.c_str());
    return 2;
  }
  const int batch = std::atoi(argv[2]), length = std::atoi(argv[3]), new_tokens = std::atoi(argv[4]);
  model::set_compute_threads(std::atoi(argv[5]));
  ModelConfig mc;
  mc.source = ModelSource::hf;
  mc.path = argv[1];
  mc.max_seq = length + new_tokens;
  mc.dtype = dtype == "bfloat16" ? ComputeType::bfloat16 : ComputeType::float32;
  const double rss_before = status_bytes("VmRSS"), anon_before = status_bytes("RssAnon");
  const auto start = std::chrono::steady_clock::now();
  model::Policy policy(mc, 0, 1);
  policy.place_on(device);
  const double load_s = seconds_since(start);
  const double load_peak = status_bytes("VmHWM");
  const int vocab = policy.vocab_size();
  std::vector<std::vector<std::int32_t>> prompts(batch, std::vector<std::int32_t>(length));
  for (int r = 0; r < batch; ++r)
    for (int i = 0; i < length; ++i) prompts[r][i] = (31 * r + 7 * i + 3) % vocab;
  model::Sampling greedy;
  greedy.temperature = 0;
  policy.generate(prompts, 2, greedy);  // warm-up
  double best = 1e30;
  std::vector<model::Generation> out;
  for (int r = 0; r < 3; ++r) {
    const auto t = std::chrono::steady_clock::now();
    out = policy.generate(prompts, new_tokens, greedy);
    best = std::min(best, seconds_since(t));
  }
  std::string first_row;
  for (auto token : out[0].tokens) first_row += (first_row.empty() ? "" : ", ") + std::to_string(token);
  std::printf(
      "{\"parameters\": %zu, \"load_s\": %.3f, \"rss_before_load\": %.0f, \"anon_rss_before_load\": %.0f, "
      "\"load_peak_rss\": %.0f, "
      "\"peak_rss\": %.0f, \"tokens_per_s\": %.2f, \"device\": %d, \"dtype\": \"%s\", \"first_row\": [%s]}\n",
      policy.parameter_count(), load_s, rss_before, anon_before, load_peak, status_bytes("VmHWM"),
      double(batch) * new_tokens / best, device, dtype.c_str(), first_row.c_str());
  return 0;
}
