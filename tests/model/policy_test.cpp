#include "arclight/model/policy.hpp"

#include "arclight/core/error.hpp"
#include "arclight/model/hf_model.hpp"
#include "../temp_dir.hpp"
#include "test_models.hpp"
#include "tiny_hf_model.hpp"

#include <boost/test/unit_test.hpp>
#include <torch/cuda.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <algorithm>
#include <limits>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <thread>

using namespace arclight;
using namespace arclight::model;

namespace {
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
torch::Tensor logits_without_gradient(Policy& policy, const torch::Tensor& tokens) {
  torch::NoGradGuard no_grad;
  return policy.logits(tokens);
}

boost::test_tools::assertion_result cuda_present(boost::unit_test::test_unit_id) {
  boost::test_tools::assertion_result present(torch::cuda::is_available());
  present.message() << "no GPU here (or a LibTorch without CUDA): the policy's CUDA path is not run";
  return present;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(policy)

BOOST_AUTO_TEST_CASE(a_policy_is_built_on_the_cpu_and_moves_only_to_a_gpu_that_is_there) {
  Policy policy(small(), 6, 1);
  BOOST_TEST(policy.device() == -1);
  policy.place_on(-1);
  BOOST_TEST(policy.device() == -1);
  for (const FloatBuffer& b : policy.parameter_buffers()) BOOST_TEST(b.device == -1);
  if (!torch::cuda::is_available()) BOOST_CHECK_THROW(policy.place_on(0), Error);
}

BOOST_AUTO_TEST_CASE(on_a_gpu_the_policy_computes_what_it_computes_on_the_cpu,
                     *boost::unit_test::precondition(cuda_present)) {
  Policy cpu(small(), 6, 3), gpu(small(), 6, 3);
  gpu.place_on(0);
  BOOST_TEST(gpu.device() == 0);
  for (const FloatBuffer& b : gpu.gradient_buffers()) BOOST_TEST(b.device == 0);
  {
    torch::NoGradGuard no_grad;
    const auto tokens = torch::tensor(std::vector<std::int64_t>{1, 2, 3, 4, 5, 0, 1}, torch::kLong).unsqueeze(0);
    BOOST_TEST((cpu.logits(tokens) - gpu.logits(tokens).cpu()).abs().max().item<float>() < 1e-4);
  }
  const auto p = prompts(4, 5, 6);
  for (const double temperature : {0.0, 1.0}) {
    cpu.seed_sampling(9);
    gpu.seed_sampling(9);
    const auto a = cpu.generate(p, 8, {temperature, 0}), b = gpu.generate(p, 8, {temperature, 0});
    for (std::size_t r = 0; r < p.size(); ++r) {
      BOOST_TEST(a[r].tokens == b[r].tokens, "row " << r << " at temperature " << temperature);
      for (std::size_t t = 0; t < a[r].logprobs.size() && t < b[r].logprobs.size(); ++t)
        BOOST_TEST(std::abs(a[r].logprobs[t] - b[r].logprobs[t]) < 1e-4);
    }
  }
  std::vector<float> weights = cpu.flat_parameters();
  for (float& w : weights) w *= 0.5f;
  gpu.load_flat_parameters(weights.data(), weights.size());
  BOOST_TEST(gpu.flat_parameters() == weights);
}

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

// Top-1 draws the most likely token; its log-prob is taken before top-k cut the rest (training compares with it).
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
      BOOST_TEST(gen[r].logprobs[i] == torch::log_softmax(logits, -1).max().item<float>(),
                 boost::test_tools::tolerance(1e-5f));
      BOOST_TEST(gen[r].logprobs[i] < -1e-3f);
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

// The weights' way to the runners: float32 as they are; bf16 rounded to nearest even (checked here bit by bit against
// the rounding written out), fp16 within its half ulp; each loads back as stored.
BOOST_AUTO_TEST_CASE(stored_parameters_load_back_as_stored) {
  Policy a(small(), 20, 42), c(small(), 20, 43);
  const std::vector<float> w = a.flat_parameters();
  std::vector<float> full(w.size());
  a.store_parameters(full.data(), -1, Compression::none);
  BOOST_TEST(full == w);
  c.load_parameters(full.data(), -1, Compression::none);
  BOOST_TEST(c.flat_parameters() == w);

  std::vector<std::uint16_t> half(w.size());
  a.store_parameters(half.data(), -1, Compression::bf16);
  std::size_t wrong = 0, inexact = 0;
  for (std::size_t i = 0; i < w.size(); ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, &w[i], sizeof bits);
    wrong += half[i] != static_cast<std::uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
    inexact += (bits & 0xffff) != 0;
  }
  BOOST_TEST(wrong == 0u);
  BOOST_TEST(inexact > w.size() / 2, "weights that bf16 holds exactly show no rounding");
  c.load_parameters(half.data(), -1, Compression::bf16);
  const std::vector<float> loaded = c.flat_parameters();
  for (std::size_t i = 0; i < w.size(); ++i) {
    const std::uint32_t bits = std::uint32_t{half[i]} << 16;
    float want;
    std::memcpy(&want, &bits, sizeof want);
    wrong += loaded[i] != want;
  }
  BOOST_TEST(wrong == 0u);

  a.store_parameters(half.data(), -1, Compression::fp16);
  c.load_parameters(half.data(), -1, Compression::fp16);
  const std::vector<float> fp16 = c.flat_parameters();
  for (std::size_t i = 0; i < w.size(); ++i)
    wrong += std::abs(fp16[i] - w[i]) > std::max(std::abs(w[i]) * 0x1p-11f, 0x1p-25f);
  BOOST_TEST(wrong == 0u);
  std::vector<std::uint16_t> again(w.size());
  c.store_parameters(again.data(), -1, Compression::fp16);
  BOOST_TEST(again == half);
  // A weight past float16's range is refused, not sent as infinity; bf16 takes it.
  std::vector<float> large = w;
  large[w.size() / 2] = 70000.0f;
  c.load_flat_parameters(large.data(), large.size());
  BOOST_CHECK_EXCEPTION(c.store_parameters(again.data(), -1, Compression::fp16), Error, [](const Error& e) {
    return std::string(e.what()).find("beyond float16's range") != std::string::npos;
  });
  c.store_parameters(again.data(), -1, Compression::bf16);
  large[w.size() / 2] = std::numeric_limits<float>::quiet_NaN();  // diverged: said so, not blamed on the range
  c.load_flat_parameters(large.data(), large.size());
  BOOST_CHECK_EXCEPTION(c.store_parameters(again.data(), -1, Compression::fp16), Error, [](const Error& e) {
    return std::string(e.what()).find("training diverged") != std::string::npos;
  });
}

BOOST_AUTO_TEST_CASE(parameters_stored_in_gpu_memory_are_those_stored_on_the_host,
                     *boost::unit_test::precondition(cuda_present)) {
  Policy cpu(small(), 20, 42), gpu(small(), 20, 42), other(small(), 20, 7);
  gpu.place_on(0);
  other.place_on(0);
  for (const Compression c : {Compression::none, Compression::bf16}) {
    const auto type = c == Compression::none ? torch::kFloat32 : torch::kBFloat16;
    const auto on_gpu = torch::empty({static_cast<std::int64_t>(gpu.parameter_count())},
                                     torch::TensorOptions().dtype(type).device(torch::kCUDA, 0));
    const auto on_host = torch::empty_like(on_gpu, torch::TensorOptions().device(torch::kCPU));
    gpu.store_parameters(on_gpu.data_ptr(), 0, c);
    cpu.store_parameters(on_host.data_ptr(), -1, c);
    BOOST_TEST(torch::equal(on_gpu.cpu(), on_host), name_of(c));
    other.load_parameters(on_gpu.data_ptr(), 0, c);
    std::vector<float> back(gpu.parameter_count());
    other.store_parameters(back.data(), -1, Compression::none);
    BOOST_TEST(torch::equal(torch::from_blob(back.data(), on_host.sizes()), on_host.to(torch::kFloat32)), name_of(c));
  }
}

// A colocated rank builds its trainer's and its runner's policies at once, in two threads: each must still get the
// seed's weights (drawn from LibTorch's global generator, the two interleaved their draws: a trainer's weights then
// differed from the other trainers' for the whole run, and every ratio of the runs it trained on was off).
BOOST_AUTO_TEST_CASE(policies_built_at_once_in_threads_get_their_seeds_weights) {
  const std::vector<float> alone = Policy(small(), 20, 42).flat_parameters();
  std::vector<std::vector<float>> built(8);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < built.size(); ++i)
    threads.emplace_back([&built, &alone, i] {
      for (int round = 0; round < 8 && built[i] == std::vector<float>{}; ++round) {
        const std::vector<float> weights = Policy(small(), 20, 42).flat_parameters();
        if (weights != alone || round == 7) built[i] = weights;  // the first that differs, else the last
      }
    });
  for (std::thread& t : threads) t.join();
  for (const std::vector<float>& weights : built) BOOST_TEST((weights == alone));
}

// A 16-bit model keeps its weights' casts between forwards: every change of the float32 weights (a weight load, an
// optimizer's in-place step) must reach the next forward, and training must still reach the float32 weights.
BOOST_AUTO_TEST_CASE(a_16_bit_policy_computes_with_the_weights_it_has_now) {
  ModelConfig config = small();
  config.dtype = ComputeType::bfloat16;
  Policy a(config, 20, 1), b(config, 20, 2);
  const auto tokens = torch::tensor({{1L, 2L, 3L, 4L, 5L}});
  const auto logits_of = [&](Policy& p) { return logits_without_gradient(p, tokens); };
  const auto first = logits_of(a);
  BOOST_TEST(torch::equal(first, logits_of(a)));
  const auto w = b.flat_parameters();
  a.load_flat_parameters(w.data(), w.size());
  BOOST_TEST(torch::equal(logits_of(a), logits_of(b)));
  BOOST_TEST(!torch::equal(logits_of(a), first));
  {
    torch::NoGradGuard no_grad;
    for (auto& p : a.parameters()) p.mul_(1.5);  // as an optimizer steps: in place
  }
  auto stepped = a.flat_parameters();
  b.load_flat_parameters(stepped.data(), stepped.size());
  BOOST_TEST(torch::equal(logits_of(a), logits_of(b)));
  Policy unstepped(config, 20, 2);
  BOOST_TEST(!torch::equal(logits_of(a), logits_of(unstepped)));
  a.zero_gradients();
  a.logits(tokens).pow(2).sum().backward();
  double norm = 0;
  for (const FloatBuffer& g : a.gradient_buffers())
    for (std::size_t k = 0; k < g.size; ++k) norm += std::abs(g.data[k]);
  BOOST_TEST(norm > 0);
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
    // Its log-prob before the cut: training compares the policy's whole distribution with it
    BOOST_TEST(g.logprobs[0] == std::log(probs[g.tokens[0]].item<double>()), boost::test_tools::tolerance(1e-4));
  }
  BOOST_TEST(drawn.size() == nucleus.size());
}

// A top_p below the smallest float (a client may send 1e-300) keeps the most likely token, as transformers and vLLM
// do (min_tokens_to_keep): it rounded to 0, every token was cut, the log-probs were NaN and the last token came out.
BOOST_AUTO_TEST_CASE(a_vanishing_top_p_keeps_the_most_likely_token) {
  Policy policy(small(), 12, 13);
  const std::vector<std::int32_t> prompt{1, 2, 3};
  torch::NoGradGuard no_grad;
  const auto probs = torch::softmax(policy.logits(torch::tensor({1L, 2L, 3L}).unsqueeze(0))[0][-1], -1);
  const std::int64_t likeliest = probs.argmax().item<std::int64_t>();
  for (const double top_p : {1e-46, 1e-300, 1e-3}) {
    model::Sampling s;
    s.top_p = top_p;
    for (const auto& g : policy.generate(std::vector<std::vector<std::int32_t>>(20, prompt), 1, s)) {
      BOOST_TEST(g.tokens[0] == likeliest, "top_p " << top_p);
      BOOST_TEST(std::isfinite(g.logprobs[0]), "top_p " << top_p);
    }
  }
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

BOOST_AUTO_TEST_CASE(a_hugging_face_model_loads_by_transformers_names) {
  TempDir dir;
  write_tiny_qwen3(dir);
  Policy policy(hf_model(dir), 10, 1);
  const auto expected = expected_tensors(read_hf_config(dir.dir()));
  auto names = policy.parameter_names();
  BOOST_TEST(policy.vocab_size() == 40);
  BOOST_TEST(names.size() == expected.size());
  const auto parameters = policy.parameters();
  BOOST_REQUIRE_EQUAL(parameters.size(), names.size());  // indexed by name below
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const auto at = std::find(names.begin(), names.end(), expected[i].name);
    BOOST_REQUIRE_MESSAGE(at != names.end(), expected[i].name << " is not a parameter");
    const auto& p = parameters[at - names.begin()];
    BOOST_TEST(std::vector<std::int64_t>(p.sizes().begin(), p.sizes().end()) == expected[i].shape);
    BOOST_TEST(p.min().item<float>() == float(i));  // its own values, not another tensor's
    BOOST_TEST(p.max().item<float>() == float(i));
  }
}

// Gemma 2's final soft cap bounds its logits, which pass it without the cap (null); its attention cap changes them.
BOOST_AUTO_TEST_CASE(gemma2_logits_stay_within_their_soft_cap) {
  const std::string capped = R"({"architectures": ["Gemma2ForCausalLM"], "vocab_size": 40, "hidden_size": 16,
      "intermediate_size": 24, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
      "head_dim": 8, "query_pre_attn_scalar": 8, "sliding_window": 4, "max_position_embeddings": 128,
      "attn_logit_softcapping": 0.5, "final_logit_softcapping": 2.0})";
  const auto logits = [](const std::string& config) {
    TempDir dir;
    write_random_hf_model(dir, config);
    Policy policy(hf_model(dir), 10, 1);
    return logits_without_gradient(policy, torch::arange(12, torch::kLong).unsqueeze(0));
  };
  const auto without = [&](const std::string& key) {
    const std::string from = "\"" + key + "\": ";
    const std::size_t at = capped.find(from) + from.size();
    return capped.substr(0, at) + "null" + capped.substr(capped.find_first_of(",}", at));
  };
  const torch::Tensor both = logits(capped), uncapped = logits(without("final_logit_softcapping"));
  BOOST_TEST(both.abs().max().item<float>() <= 2.0f);
  BOOST_TEST(uncapped.abs().max().item<float>() > 2.0f);
  BOOST_TEST((logits(without("attn_logit_softcapping")) - both).abs().max().item<float>() > 1e-3f);
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

ModelConfig with_lora(const TempDir& dir, std::vector<std::string> targets) {
  ModelConfig c = hf_model(dir);
  c.lora_rank = 3;
  c.lora_alpha = 6;
  c.lora_targets = std::move(targets);
  return c;
}

void write_random_qwen3(const TempDir& dir) { write_random_hf_model(dir, tiny_qwen3_config); }

BOOST_AUTO_TEST_CASE(lora_trains_only_adapters_that_start_at_zero) {
  TempDir dir;
  write_random_qwen3(dir);
  Policy plain(hf_model(dir), 10, 1), adapted(with_lora(dir, {"q", "v", "gate", "down"}), 10, 1);
  const auto names = adapted.parameter_names();
  BOOST_TEST(names.size() == 2u * 4u * 2u);  // 2 layers, 4 targets, A and B
  for (const auto& n : names) BOOST_TEST(n.find(".lora_") != std::string::npos, n);
  BOOST_TEST(names[0] == "model.layers.0.self_attn.q_proj.lora_A.weight");
  const auto tokens = torch::tensor({{1L, 5L, 9L, 2L, 7L}});
  BOOST_TEST(torch::equal(plain.logits(tokens), adapted.logits(tokens)));  // B = 0: the model as it was
  adapted.zero_gradients();
  adapted.logits(tokens).pow(2).sum().backward();
  double b_gradient = 0;
  const auto gradients = adapted.gradient_buffers();
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i].find("lora_B") != std::string::npos)
      for (std::size_t k = 0; k < gradients[i].size; ++k) b_gradient += std::abs(gradients[i].data[k]);
  BOOST_TEST(b_gradient > 0);
  for (const auto& p : plain.parameters()) BOOST_TEST(p.requires_grad());  // the plain model trains everything
  // The base's CRC as an export of the adapters computes it, without the model: the one the run records.
  const HfWeights weights = HfWeights::open(dir.dir());
  BOOST_TEST(adapted.base_crc32c().has_value());
  BOOST_TEST(*adapted.base_crc32c() == base_weights_crc32c(weights, read_hf_config(dir.dir())));
}

BOOST_AUTO_TEST_CASE(merged_adapters_give_the_adapted_models_logits) {
  TempDir dir;
  write_random_qwen3(dir);
  Policy plain(hf_model(dir), 10, 1), adapted(with_lora(dir, {"q", "k", "v", "o", "gate", "up", "down"}), 10, 1);
  std::vector<float> adapters(adapted.parameter_count());
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0, 0.2f);
  for (float& a : adapters) a = normal(rng);
  adapted.load_flat_parameters(adapters.data(), adapters.size());
  torch::NoGradGuard no_grad;
  const auto tokens = torch::tensor({{3L, 1L, 4L, 1L, 5L, 9L}});
  const torch::Tensor adapted_logits = adapted.logits(tokens);
  BOOST_TEST((adapted_logits - plain.logits(tokens)).abs().max().item<double>() > 0.1);  // the adapters matter
  std::vector<float> merged;
  std::vector<std::string> merged_names;
  for (const auto& [name, buffer] : adapted.merge_adapters()) {
    merged_names.push_back(name);
    merged.insert(merged.end(), buffer.data, buffer.data + buffer.size);
  }
  BOOST_TEST(merged_names == plain.parameter_names());
  plain.load_flat_parameters(merged.data(), merged.size());
  BOOST_TEST((plain.logits(tokens) - adapted_logits).abs().max().item<double>() < 1e-4);
  // Merged in place: the adapters are zero now, and the adapted policy's logits are what they were.
  BOOST_TEST((adapted.logits(tokens) - adapted_logits).abs().max().item<double>() < 1e-4);
  const std::vector<std::string> names = adapted.parameter_names();
  const std::vector<FloatBuffer> adapters_after = adapted.parameter_buffers();
  for (std::size_t i = 0; i < names.size(); ++i) {
    const bool b_factor = names[i].find("lora_B") != std::string::npos;
    const bool zero = std::all_of(adapters_after[i].data, adapters_after[i].data + adapters_after[i].size,
                                  [](float x) { return x == 0; });
    BOOST_TEST(zero == b_factor, names[i]);
  }
}

// A merge counts what 16-bit weights keep of it: updates far under a bfloat16 step round back to the base value (an
// export of them would lose what trained), large ones do not.
BOOST_AUTO_TEST_CASE(a_merge_counts_the_updates_that_16_bit_weights_lose) {
  TempDir dir;
  write_random_qwen3(dir);
  for (const float spread : {2e-3f, 0.2f}) {
    Policy adapted(with_lora(dir, {"q", "v"}), 10, 1);
    std::vector<float> adapters(adapted.parameter_count());
    std::mt19937 rng(5);
    std::normal_distribution<float> normal(0, spread);
    for (float& a : adapters) a = normal(rng);
    adapted.load_flat_parameters(adapters.data(), adapters.size());
    MergeRounding rounding;
    adapted.merge_adapters(&rounding);
    BOOST_REQUIRE(rounding.changed > 0);
    const double lost = static_cast<double>(rounding.unchanged_in_bf16) / static_cast<double>(rounding.changed);
    const double lost_f16 = static_cast<double>(rounding.unchanged_in_f16) / static_cast<double>(rounding.changed);
    if (spread < 0.01f) {
      BOOST_TEST(lost > 0.8, "bfloat16 kept most tiny updates: " << lost);
      BOOST_TEST(lost_f16 < lost);  // three more bits
    } else {
      BOOST_TEST(lost < 0.1, "bfloat16 lost large updates: " << lost);
    }
  }
}

// A frozen base takes no gradient: its 16-bit cast is kept across training forwards too, and the adapters still
// train through it.
BOOST_AUTO_TEST_CASE(a_16_bit_lora_policy_trains_its_adapters_over_its_kept_base) {
  TempDir dir;
  write_random_qwen3(dir);
  ModelConfig config = with_lora(dir, {"q", "v", "down"});
  config.dtype = ComputeType::bfloat16;
  Policy adapted(config, 10, 1), twin(config, 10, 1);
  const auto tokens = torch::tensor({{1L, 5L, 9L, 2L, 7L}});
  const auto logits_of = [&](Policy& p) { return logits_without_gradient(p, tokens); };
  const auto before = logits_of(adapted);
  for (int round = 0; round < 2; ++round) {  // the second backward runs over the kept casts of the base
    adapted.zero_gradients();
    adapted.logits(tokens).pow(2).sum().backward();
    double b_gradient = 0;
    const auto names = adapted.parameter_names();
    const auto gradients = adapted.gradient_buffers();
    for (std::size_t i = 0; i < names.size(); ++i)
      if (names[i].find("lora_B") != std::string::npos)
        for (std::size_t k = 0; k < gradients[i].size; ++k) b_gradient += std::abs(gradients[i].data[k]);
    BOOST_TEST(b_gradient > 0, "round " << round);
  }
  std::vector<float> adapters(adapted.parameter_count());
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0, 0.2f);
  for (float& a : adapters) a = normal(rng);
  adapted.load_flat_parameters(adapters.data(), adapters.size());
  twin.load_flat_parameters(adapters.data(), adapters.size());
  BOOST_TEST(!torch::equal(logits_of(adapted), before));
  BOOST_TEST(torch::equal(logits_of(adapted), logits_of(twin)));
}

BOOST_AUTO_TEST_CASE(lora_needs_a_pretrained_model_and_known_targets) {
  ModelConfig scratch = small();
  scratch.lora_rank = 2;
  BOOST_CHECK_THROW(Policy(scratch, 20, 1), UsageError);
  TempDir dir;
  write_random_qwen3(dir);
  BOOST_CHECK_THROW(Policy(with_lora(dir, {"q", "w"}), 10, 1), UsageError);
  BOOST_CHECK_THROW(Policy(with_lora(dir, {}), 10, 1), UsageError);
  BOOST_CHECK_THROW(Policy(with_lora(dir, {"q", "v", "q"}), 10, 1), UsageError);  // one adapter per projection
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
