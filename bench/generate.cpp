// Generation tokens/s with the KV cache against without it, same policy, prompts and seed.
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "arclight/model/compute_threads.hpp"
#include "arclight/model/policy.hpp"
#include "workstation_policy.hpp"

using namespace arclight;

int main(int argc, char** argv) {
  const int batch = argc > 1 ? std::atoi(argv[1]) : 64;
  const int new_tokens = argc > 2 ? std::atoi(argv[2]) : 56;
  model::set_compute_threads(1);
  model::Policy policy(workstation_policy(8 + new_tokens), 35, 1);
  std::vector<std::vector<std::int32_t>> prompts(batch, std::vector<std::int32_t>{0, 1, 2, 3, 4, 5, 6, 7});
  auto rate = [&](bool cache) {
    policy.seed_sampling(7);
    policy.generate(prompts, 2, {}, cache);  // warm-up
    double best = 1e30;
    for (int r = 0; r < 3; ++r) {
      auto t = std::chrono::steady_clock::now();
      policy.generate(prompts, new_tokens, {}, cache);
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count());
    }
    return double(batch) * new_tokens / best;
  };
  const double with = rate(true), without = rate(false);
  std::printf("batch %d, %d new tokens after an 8-token prompt: %.0f tokens/s with the KV cache, %.0f without: %.2fx\n",
              batch, new_tokens, with, without, with / without);
  std::printf("{\"cached_tokens_per_s\": %.0f, \"uncached_tokens_per_s\": %.0f, \"speedup\": %.3f}\n", with, without,
              with / without);
  return 0;
}
