#include "arclight/model/policy.hpp"

#include "arclight/core/error.hpp"

#include <boost/test/unit_test.hpp>
#include <torch/torch.h>

#include <cmath>
#include <map>

using namespace arclight;
using namespace arclight::model;

namespace {
ModelConfig small(Positions positions = Positions::rotary) {
  ModelConfig c;
  c.d_model = 32;
  c.n_layers = 2;
  c.n_heads = 4;
  c.d_ff = 64;
  c.max_seq = 24;
  c.positions = positions;
  return c;
}

std::vector<std::vector<std::int32_t>> prompts(int batch, int length, int vocab) {
  std::vector<std::vector<std::int32_t>> out(batch);
  for (int b = 0; b < batch; ++b)
    for (int t = 0; t < length; ++t) out[b].push_back((b * 7 + t * 3) % vocab);
  return out;
}

// Log-probs of `generated` under a full forward of prompt + generated at temperature `temperature`.
std::vector<float> full_forward_logprobs(Policy& policy, const std::vector<std::int32_t>& prompt,
                                         const std::vector<std::int32_t>& generated, double temperature) {
  std::vector<std::int64_t> seq(prompt.begin(), prompt.end());
  seq.insert(seq.end(), generated.begin(), generated.end());
  auto tokens = torch::tensor(seq, torch::kLong).unsqueeze(0);
  torch::NoGradGuard no_grad;
  auto logp = torch::log_softmax(policy.logits(tokens)[0] / temperature, -1);
  std::vector<float> out;
  for (std::size_t i = 0; i < generated.size(); ++i)
    out.push_back(logp[prompt.size() - 1 + i][generated[i]].item<float>());
  return out;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(policy)

BOOST_AUTO_TEST_CASE(the_kv_cache_equals_a_full_forward) {
  for (const Positions positions : {Positions::rotary, Positions::learned}) {
    Policy policy(small(positions), 20, 7);
    auto p = prompts(5, 6, 20);
    policy.seed_sampling(99);
    auto cached = policy.generate(p, 10, {0.9, 0});
    policy.seed_sampling(99);
    auto full = policy.generate(p, 10, {0.9, 0}, false);
    for (std::size_t r = 0; r < p.size(); ++r) {
      BOOST_TEST(cached[r].tokens == full[r].tokens, name_of(positions));
      for (int i = 0; i < 10; ++i)
        BOOST_TEST(cached[r].logprobs[i] == full[r].logprobs[i], boost::test_tools::tolerance(1e-4f));
    }
  }
}

BOOST_AUTO_TEST_CASE(returned_logprobs_match_a_full_forward) {
  Policy policy(small(), 20, 3);
  auto p = prompts(4, 5, 20);
  const double temperature = 0.7;
  auto gen = policy.generate(p, 8, {temperature, 0});
  for (std::size_t r = 0; r < p.size(); ++r) {
    BOOST_REQUIRE(gen[r].tokens.size() == 8u);
    auto expected = full_forward_logprobs(policy, p[r], gen[r].tokens, temperature);
    for (int i = 0; i < 8; ++i) {
      BOOST_TEST(gen[r].logprobs[i] == expected[i], boost::test_tools::tolerance(1e-4f));
      BOOST_TEST(gen[r].logprobs[i] <= 0.f);
    }
  }
}

BOOST_AUTO_TEST_CASE(top_1_is_greedy) {
  Policy policy(small(), 20, 5);
  auto p = prompts(3, 4, 20);
  auto gen = policy.generate(p, 6, {1.0, 1});
  for (std::size_t r = 0; r < p.size(); ++r) {
    std::vector<std::int64_t> seq(p[r].begin(), p[r].end());
    for (int i = 0; i < 6; ++i) {
      torch::NoGradGuard no_grad;
      auto logits = policy.logits(torch::tensor(seq, torch::kLong).unsqueeze(0))[0][-1];
      BOOST_TEST(gen[r].tokens[i] == logits.argmax().item<std::int64_t>());
      BOOST_TEST(gen[r].logprobs[i] == 0.f, boost::test_tools::tolerance(1e-6f));
      seq.push_back(gen[r].tokens[i]);
    }
  }
}

BOOST_AUTO_TEST_CASE(samples_follow_their_logprobs) {
  Policy policy(small(), 6, 11);
  auto p = std::vector<std::vector<std::int32_t>>(4000, std::vector<std::int32_t>{1, 2, 3});
  auto gen = policy.generate(p, 1, {1.5, 0});
  std::map<int, int> counts;
  std::map<int, float> logprob;
  for (const auto& g : gen) {
    ++counts[g.tokens[0]];
    logprob[g.tokens[0]] = g.logprobs[0];
  }
  for (const auto& [token, n] : counts) {
    double expected = std::exp(logprob[token]) * 4000;
    BOOST_TEST(std::abs(n - expected) < 5 * std::sqrt(expected) + 5,
               "token " << token << ": " << n << " vs " << expected);
  }
}

BOOST_AUTO_TEST_CASE(same_seed_same_weights_and_flat_round_trip) {
  Policy a(small(), 20, 42), b(small(), 20, 42), c(small(), 20, 43);
  BOOST_TEST(a.flat_parameters() == b.flat_parameters());
  BOOST_TEST(a.flat_parameters() != c.flat_parameters());
  auto w = a.flat_parameters();
  BOOST_TEST(w.size() == a.parameter_count());
  c.load_flat_parameters(w.data(), w.size());
  BOOST_TEST(c.flat_parameters() == w);
  std::size_t total = 0;
  for (const FloatBuffer& g : a.gradient_buffers()) total += g.size;
  BOOST_TEST(total == a.parameter_count());
}

BOOST_AUTO_TEST_CASE(gradients_are_adjacent_views_that_backward_fills) {
  Policy policy(small(), 20, 8);
  auto before = policy.gradient_buffers();
  for (std::size_t i = 0; i + 1 < before.size(); ++i)
    BOOST_TEST((before[i].data + before[i].size == before[i + 1].data));
  auto tokens = torch::tensor({{1L, 2L, 3L, 4L}});
  policy.logits(tokens).sum().backward();
  auto after = policy.gradient_buffers();
  double norm = 0;
  for (std::size_t i = 0; i < after.size(); ++i) {
    BOOST_TEST((after[i].data == before[i].data));
    for (std::size_t k = 0; k < after[i].size; ++k) norm += std::abs(after[i].data[k]);
  }
  BOOST_TEST(norm > 0);
}

BOOST_AUTO_TEST_CASE(bad_shapes_are_refused) {
  ModelConfig odd = small();
  odd.n_heads = 3;
  BOOST_CHECK_THROW(Policy(odd, 20, 1), arclight::UsageError);
  Policy policy(small(), 20, 1);
  BOOST_CHECK_THROW(policy.generate({{1, 2}, {1}}, 2, {}), arclight::Error);
  BOOST_CHECK_THROW(policy.generate(prompts(1, 20, 20), 10, {}), arclight::Error);  // past max_seq
}

BOOST_AUTO_TEST_SUITE_END()
