#include "arclight/model/policy.hpp"

#include "arclight/core/error.hpp"
#include "arclight/model/hf_model.hpp"
#include "../temp_dir.hpp"
#include "tiny_hf_model.hpp"

#include <boost/test/unit_test.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>

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

BOOST_AUTO_TEST_CASE(temperature_zero_is_greedy_with_the_models_own_logprobs) {
  Policy policy(small(), 20, 5);
  auto p = prompts(3, 4, 20);
  model::Sampling greedy;
  greedy.temperature = 0;
  auto gen = policy.generate(p, 5, greedy);
  for (std::size_t r = 0; r < p.size(); ++r) {
    std::vector<std::int32_t> argmax;
    std::vector<std::int64_t> seq(p[r].begin(), p[r].end());
    for (int i = 0; i < 5; ++i) {
      torch::NoGradGuard no_grad;
      auto logp = torch::log_softmax(policy.logits(torch::tensor(seq, torch::kLong).unsqueeze(0))[0][-1], -1);
      const auto best = logp.argmax().item<std::int64_t>();
      BOOST_TEST(gen[r].tokens[i] == best);
      BOOST_TEST(gen[r].logprobs[i] == logp[best].item<float>(), boost::test_tools::tolerance(1e-4f));
      seq.push_back(gen[r].tokens[i]);
    }
  }
}

BOOST_AUTO_TEST_CASE(top_p_draws_only_from_the_nucleus_renormalised) {
  Policy policy(small(), 12, 13);
  const std::vector<std::int32_t> prompt{1, 2, 3};
  torch::NoGradGuard no_grad;
  const auto probs = torch::softmax(policy.logits(torch::tensor({1L, 2L, 3L}).unsqueeze(0))[0][-1], -1);
  const auto [sorted, order] = probs.sort(-1, true);
  // The nucleus for top_p = 0.6: the most likely tokens until their mass reaches 0.6.
  std::set<std::int64_t> nucleus;
  double mass = 0;
  for (int i = 0; i < sorted.size(0) && mass < 0.6; ++i) {
    nucleus.insert(order[i].item<std::int64_t>());
    mass += sorted[i].item<double>();
  }
  BOOST_REQUIRE(nucleus.size() < 12u);
  model::Sampling top_p;
  top_p.top_p = 0.6;
  auto gen = policy.generate(std::vector<std::vector<std::int32_t>>(2000, prompt), 1, top_p);
  std::set<std::int64_t> drawn;
  for (const auto& g : gen) {
    drawn.insert(g.tokens[0]);
    BOOST_TEST(nucleus.count(g.tokens[0]) == 1u, "token " << g.tokens[0] << " outside the nucleus");
    BOOST_TEST(g.logprobs[0] == std::log(probs[g.tokens[0]].item<double>() / mass), boost::test_tools::tolerance(1e-4));
  }
  BOOST_TEST(drawn.size() == nucleus.size());
}

BOOST_AUTO_TEST_CASE(a_row_ends_at_its_first_stop_token_and_the_others_go_on) {
  Policy policy(small(), 20, 5);
  auto p = prompts(4, 4, 20);
  model::Sampling greedy;
  greedy.temperature = 0;
  const auto free_run = policy.generate(p, 10, greedy);
  const std::int32_t stop = free_run[0].tokens[2];  // row 0 draws it third
  const auto stopped = policy.generate(p, 10, greedy, true, {stop});
  int rows_that_stopped = 0;
  for (std::size_t r = 0; r < p.size(); ++r) {
    const auto& all = free_run[r].tokens;
    const auto first = std::find(all.begin(), all.end(), stop);
    const std::vector<std::int32_t> expected(all.begin(), first == all.end() ? all.end() : first + 1);
    BOOST_TEST(stopped[r].tokens == expected);
    BOOST_TEST(stopped[r].logprobs.size() == expected.size());
    BOOST_TEST(stopped[r].stopped == (first != all.end()));
    rows_that_stopped += stopped[r].stopped;
  }
  BOOST_TEST(rows_that_stopped >= 1);
}

ModelConfig hf_model(const TempDir& dir) {
  ModelConfig c;
  c.source = ModelSource::hf;
  c.path = dir.dir();
  c.max_seq = 32;
  return c;
}

BOOST_AUTO_TEST_CASE(a_hugging_face_model_loads_by_transformers_names) {
  TempDir dir;
  write_tiny_qwen3(dir);
  Policy policy(hf_model(dir), 10, 1);
  const auto expected = expected_tensors(read_hf_config(dir.dir()));
  auto names = policy.parameter_names();
  BOOST_TEST(policy.vocab_size() == 40);
  BOOST_TEST(names.size() == expected.size());
  const auto parameters = policy.parameters();
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const auto at = std::find(names.begin(), names.end(), expected[i].name);
    BOOST_REQUIRE_MESSAGE(at != names.end(), expected[i].name << " is not a parameter");
    const auto& p = parameters[at - names.begin()];
    BOOST_TEST(std::vector<std::int64_t>(p.sizes().begin(), p.sizes().end()) == expected[i].shape);
    BOOST_TEST(p.min().item<float>() == float(i));  // its own values, not another tensor's
    BOOST_TEST(p.max().item<float>() == float(i));
  }
}

BOOST_AUTO_TEST_CASE(a_hugging_face_model_that_does_not_fit_is_refused) {
  TempDir dir;
  write_tiny_qwen3(dir, true);
  BOOST_CHECK_THROW(Policy(hf_model(dir), 10, 1), ModelFileError);
  TempDir whole;
  write_tiny_qwen3(whole);
  BOOST_CHECK_THROW(Policy(hf_model(whole), 41, 1), UsageError);  // the agent's vocabulary is larger
  ModelConfig too_long = hf_model(whole);
  too_long.max_seq = 129;
  BOOST_CHECK_THROW(Policy(too_long, 10, 1), UsageError);
  ModelConfig no_path = hf_model(whole);
  no_path.path.clear();
  BOOST_CHECK_THROW(Policy(no_path, 10, 1), UsageError);
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
