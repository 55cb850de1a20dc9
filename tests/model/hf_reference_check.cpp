// Checks arclight's decoder against tests/model/hf_reference.py's outputs for each model directory given: the logits
// of every prompt from a full forward, and greedy generations (tokens and log-probs) with and without the KV cache,
// one prompt at a time and two prompts of one length in a batch. float32 must agree within 1e-4; bfloat16 compute
// must stay close (it rounds every product) and pick mostly the same tokens. Prints one line of figures per model;
// exits 1 at the first disagreement.
#include <torch/types.h>
#include <torch/utils.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "arclight/model/policy.hpp"

using namespace arclight;
using Tokens = std::vector<std::int32_t>;

namespace {

constexpr double float32_tolerance = 1e-4;
int failures = 0;

void expect(bool ok, const std::string& what) {
  if (ok) return;
  std::fprintf(stderr, "FAIL: %s\n", what.c_str());
  ++failures;
}

int device = -1;  // --device N: the policy computes on CUDA device N (scripts/gpu_check.sh)

model::Policy load(const std::string& dir, ComputeType dtype) {
  ModelConfig config;
  config.source = ModelSource::hf;
  config.path = dir;
  config.dtype = dtype;
  config.max_seq = 64;
  model::Policy policy(config, 1, 7);
  policy.place_on(device);
  return policy;
}

// The largest |logit - reference| over every prompt and position; `scale`, if given, gets the largest |reference|.
double logits_error(model::Policy& policy, const nlohmann::json& reference, double* scale = nullptr,
                    const char* key = "logits") {
  torch::NoGradGuard no_grad;
  double worst = 0;
  for (std::size_t i = 0; i < reference["prompts"].size(); ++i) {
    const auto prompt = reference["prompts"][i].get<std::vector<std::int64_t>>();
    const auto tokens = torch::tensor(prompt, torch::kLong).unsqueeze(0);
    const auto rows = reference[key][i].get<std::vector<std::vector<float>>>();
    std::vector<float> flat;
    for (const auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
    const auto want = torch::tensor(flat).view({static_cast<std::int64_t>(rows.size()), -1});
    const auto got = policy.logits(tokens)[0].cpu();  // from the policy's device, to compare with the reference
    expect(got.sizes() == want.sizes(), "logits of prompt " + std::to_string(i) + " have the wrong shape");
    if (got.sizes() == want.sizes()) worst = std::max(worst, (got - want).abs().max().item<double>());
    if (scale) *scale = std::max(*scale, want.abs().max().item<double>());
  }
  return worst;
}

struct GreedyFigures {
  int tokens = 0, same = 0;
  double worst_logprob = 0;
};

// Greedy continuations of `rows` (prompt indices of one length) in one batch, against the reference.
void check_greedy(model::Policy& policy, const nlohmann::json& reference, const std::vector<std::size_t>& rows,
                  bool use_cache, GreedyFigures& figures) {
  std::vector<Tokens> prompts;
  for (std::size_t r : rows) prompts.push_back(reference["prompts"][r].get<Tokens>());
  model::Sampling greedy;
  greedy.temperature = 0;
  const int n = reference["new_tokens"].get<int>();
  const auto out = policy.generate(prompts, n, greedy, use_cache);
  for (std::size_t k = 0; k < rows.size(); ++k) {
    const auto want = reference["greedy"][rows[k]].get<Tokens>();
    const auto want_logprobs = reference["greedy_logprobs"][rows[k]].get<std::vector<float>>();
    for (std::size_t j = 0; j < want.size() && j < out[k].tokens.size(); ++j) {
      ++figures.tokens;
      if (out[k].tokens[j] != want[j]) continue;
      ++figures.same;
      figures.worst_logprob = std::max(figures.worst_logprob, double(std::abs(out[k].logprobs[j] - want_logprobs[j])));
    }
  }
}

// The prompts grouped by length: each group is one generate batch.
std::map<std::size_t, std::vector<std::size_t>> batches(const nlohmann::json& reference) {
  std::map<std::size_t, std::vector<std::size_t>> by_length;
  for (std::size_t i = 0; i < reference["prompts"].size(); ++i) by_length[reference["prompts"][i].size()].push_back(i);
  return by_length;
}

void check_model(const std::string& dir) {
  std::ifstream in(dir + "/reference.json");
  const nlohmann::json reference = nlohmann::json::parse(in);
  model::Policy policy = load(dir, ComputeType::float32);
  const double error = logits_error(policy, reference);
  expect(error < float32_tolerance, dir + ": float32 logits differ by " + std::to_string(error));
  for (bool use_cache : {true, false}) {
    GreedyFigures g;
    for (const auto& [length, rows] : batches(reference)) check_greedy(policy, reference, rows, use_cache, g);
    expect(g.same == g.tokens, dir + ": greedy tokens differ" + (use_cache ? " with" : " without") + " the cache");
    expect(g.worst_logprob < float32_tolerance,
           dir + ": greedy log-probs differ by " + std::to_string(g.worst_logprob));
    std::printf("%s%s: float32 max |logit diff| %.2e; greedy %s cache: %d/%d tokens equal, max |logprob diff| %.2e\n",
                dir.c_str(), device < 0 ? "" : " (cuda)", error, use_cache ? "with" : "without", g.same, g.tokens,
                g.worst_logprob);
  }
  model::Policy half = load(dir, ComputeType::bfloat16);
  double scale = 0;
  const double bf16_error = logits_error(half, reference, &scale) / scale;
  GreedyFigures g;
  for (const auto& [length, rows] : batches(reference)) check_greedy(half, reference, rows, true, g);
  double bf16_scale = 0;
  const double bf16_forward_error = logits_error(half, reference, &bf16_scale, "logits_bf16") / bf16_scale;
  std::printf(
      "%s: bfloat16 max |logit diff| / max |logit| %.4f (against transformers' forward in bfloat16 %.4f); greedy with "
      "cache %d/%d tokens equal\n",
      dir.c_str(), bf16_error, bf16_forward_error, g.same, g.tokens);
  // bfloat16 keeps 8 significant bits: a few parts in a hundred of the logits' range, after a few layers.
  expect(bf16_error < 0.05, dir + ": bfloat16 logits differ by " + std::to_string(bf16_error) + " of their range");
  // Against transformers' own bfloat16 forward: the same ops, the same roundings; not bit for bit, as a matrix
  // product's summation order (and so a last bit now and then) follows its shape, which a grouped-query product's
  // rows change.
  expect(bf16_forward_error < 0.05,
         dir + ": bfloat16 logits differ from the bfloat16 forward by " + std::to_string(bf16_forward_error));
}

}  // namespace

int main(int argc, char** argv) {
  int first = 1;
  if (argc > 2 && std::string(argv[1]) == "--device") {
    device = std::stoi(argv[2]);
    first = 3;
  }
  if (argc <= first) {
    std::fprintf(stderr, "usage: %s [--device N] MODEL_DIR...\n", argv[0]);
    return 2;
  }
  for (int i = first; i < argc; ++i) check_model(argv[i]);
  return failures ? 1 : 0;
}
