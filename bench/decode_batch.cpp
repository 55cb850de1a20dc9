// Continuous batching against lockstep generation: tokens/s of N ragged prompts (lengths 4 .. 19) decoded together by
// DecodeBatch, and of N equal prompts (of about their mean length) by Policy::generate; same policy, same new tokens.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "arclight/model/compute_threads.hpp"
#include "arclight/model/decode_batch.hpp"
#include "workstation_policy.hpp"

using namespace arclight;

namespace {

template <typename Run>
double best_seconds(Run run) {
  run();  // warm-up
  double best = 1e30;
  for (int r = 0; r < 3; ++r) {
    const auto t = std::chrono::steady_clock::now();
    run();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const int sequences = argc > 1 ? std::atoi(argv[1]) : 64;
  const int new_tokens = argc > 2 ? std::atoi(argv[2]) : 56;
  model::set_compute_threads(1);
  model::Policy policy(workstation_policy(20 + new_tokens), 35, 1);
  const auto continuous = best_seconds([&] {
    model::DecodeBatch batch(policy, sequences);
    for (int s = 0; s < sequences; ++s) {
      model::SequenceRequest r;
      for (int t = 0; t < 4 + s % 16; ++t) r.prompt.push_back(t % 35);
      r.max_new_tokens = new_tokens;
      batch.add(std::move(r));
    }
    while (!batch.idle()) batch.step();
  });
  const std::vector<std::vector<std::int32_t>> equal(sequences, std::vector<std::int32_t>(12, 3));
  const auto lockstep = best_seconds([&] { policy.generate(equal, new_tokens, {}); });
  const double tokens = double(sequences) * new_tokens;
  std::printf(
      "%d sequences, %d new tokens each: %.0f tokens/s ragged via DecodeBatch, %.0f equal via generate: %.2fx\n",
      sequences, new_tokens, tokens / continuous, tokens / lockstep, lockstep / continuous);
  std::printf("{\"decode_batch_tokens_per_s\": %.0f, \"generate_tokens_per_s\": %.0f, \"ratio\": %.3f}\n",
              tokens / continuous, tokens / lockstep, lockstep / continuous);
  return 0;
}
