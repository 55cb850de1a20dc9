// The head's scores by blocks of positions (src/model/head_scores.hpp) against the head and the log-softmax written out
// with autograd through every op: the figures and the gradients of the hidden states, weight and bias, in float64
// (to its rounding) and in bfloat16 (one block's figures to the bit), soft cap on and off, bias or none, blocks of one
// position, two and all, gradients of both figures, of one and of the other, a frozen head; and the policy's
// token_logprobs against its logits, tied (Gemma 2, capped) and untied (a scratch model, with a bias).
#include "../../src/model/head_scores.hpp"

#include "arclight/model/policy.hpp"
#include "../temp_dir.hpp"
#include "test_models.hpp"

#include <boost/test/unit_test.hpp>
#include <torch/autograd.h>

#include <optional>
#include <stdexcept>
#include <tuple>
#include <utility>
#include <vector>

using namespace arclight;
using namespace arclight::model;

namespace {

// Two rows of 6 positions (5 targets: the last position's logits are not read), hidden 5, vocabulary 7.
struct Case {
  torch::Tensor hidden, weight, bias, targets, temperature, d_logprobs, d_entropy;
};

Case make_case(torch::ScalarType type) {
  torch::manual_seed(20261208);
  const auto options = torch::TensorOptions().dtype(torch::kDouble);
  const auto scores_type = torch::promote_types(type, torch::kFloat);
  Case c;
  c.hidden = torch::randn({2, 6, 5}, options).to(type);
  c.weight = torch::randn({7, 5}, options).to(type);
  c.bias = torch::randn({7}, options).to(type);
  c.targets = torch::randint(0, 7, {2, 5});
  c.temperature = (torch::rand({2, 5, 1}, options) + 0.5).to(scores_type);
  c.d_logprobs = torch::randn({2, 5}, options).to(scores_type);
  c.d_entropy = torch::randn({2, 5}, options).to(scores_type);
  return c;
}

// The eager composition: the decoder's head, then the loss's log-softmax over logits / temperature.
std::pair<torch::Tensor, torch::Tensor> eager(const Case& c, const Head& head, const torch::Tensor& hidden) {
  const auto x = hidden.narrow(1, 0, 5);
  auto logits = head.bias.defined() ? torch::linear(x, head.weight, head.bias) : torch::linear(x, head.weight);
  if (head.softcap) logits = torch::tanh(logits / *head.softcap) * *head.softcap;
  const auto logp_all = torch::log_softmax(logits.to(c.temperature.scalar_type()) / c.temperature, -1);
  return {logp_all.gather(-1, c.targets.unsqueeze(-1)).squeeze(-1), -(logp_all.exp() * logp_all).sum(-1)};
}

struct Result {
  torch::Tensor logprobs, entropy, d_hidden, d_weight, d_bias;
};

constexpr std::int64_t eager_head = -1;  // run's logits_per_block for the eager composition

Result run(const Case& c, std::optional<double> cap, bool with_bias, std::int64_t logits_per_block,
           bool grad_of_logprobs = true, bool grad_of_entropy = true) {
  const auto hidden = c.hidden.clone().requires_grad_();
  const Head head{c.weight.clone().requires_grad_(), with_bias ? c.bias.clone().requires_grad_() : torch::Tensor(),
                  cap};
  Result r;
  if (logits_per_block == eager_head)
    std::tie(r.logprobs, r.entropy) = eager(c, head, hidden);
  else
    r.logprobs = head_scores(head, hidden, c.targets, c.temperature, &r.entropy, logits_per_block);
  auto objective = torch::zeros({}, c.temperature.options());
  if (grad_of_logprobs) objective = objective + (r.logprobs * c.d_logprobs).sum();
  if (grad_of_entropy) objective = objective + (r.entropy * c.d_entropy).sum();
  objective.backward();
  r.d_hidden = hidden.grad();
  r.d_weight = head.weight.grad();
  if (with_bias) r.d_bias = head.bias.grad();
  return r;
}

double difference(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(head_scores_core)

BOOST_AUTO_TEST_CASE(blocks_of_positions_are_the_eager_head_and_log_softmax) {
  const Case c = make_case(torch::kDouble);
  for (const std::optional<double> cap : {std::optional<double>(), std::optional<double>(1.5)})
    for (const bool with_bias : {false, true})
      for (const std::int64_t per_block : {std::int64_t{14}, std::int64_t{28}, default_logits_per_block})
        for (const auto& [of_logprobs, of_entropy] : {std::pair{true, true}, {true, false}, {false, true}}) {
          BOOST_TEST_CONTEXT("cap " << cap.value_or(0) << ", bias " << with_bias << ", " << per_block
                                    << " logits a block, gradients of log-probs " << of_logprobs << ", of entropy "
                                    << of_entropy) {
            const Result ours = run(c, cap, with_bias, per_block, of_logprobs, of_entropy);
            const Result theirs = run(c, cap, with_bias, eager_head, of_logprobs, of_entropy);
            BOOST_TEST(difference(ours.logprobs, theirs.logprobs) < 1e-12);
            BOOST_TEST(difference(ours.entropy, theirs.entropy) < 1e-12);
            BOOST_TEST(difference(ours.d_hidden, theirs.d_hidden) < 1e-12);
            BOOST_TEST(difference(ours.d_weight, theirs.d_weight) < 1e-12);
            if (with_bias) BOOST_TEST(difference(ours.d_bias, theirs.d_bias) < 1e-12);
            BOOST_TEST(theirs.d_hidden.narrow(1, 0, 5).abs().max().item<double>() > 1e-3);
            BOOST_TEST(theirs.d_weight.abs().max().item<double>() > 1e-3);
            BOOST_TEST(ours.d_hidden.select(1, 5).abs().max().item<double>() == 0);  // the last position's
          }
        }
}

// In bfloat16 the figures of one block are eager's to the bit (the same operations); the gradients, in bfloat16 as
// eager's are (the weight's summed over blocks in float32), are as near float64's as eager's.
BOOST_AUTO_TEST_CASE(in_bfloat16_one_block_is_eager_to_the_bit_and_blocks_as_near) {
  const Case c = make_case(torch::kBFloat16), exact = make_case(torch::kDouble);
  for (const std::optional<double> cap : {std::optional<double>(), std::optional<double>(1.5)}) {
    BOOST_TEST_CONTEXT("cap " << cap.value_or(0)) {
      const Result truth = run(exact, cap, true, eager_head), theirs = run(c, cap, true, eager_head);
      const Result whole = run(c, cap, true, default_logits_per_block);
      BOOST_TEST(torch::equal(whole.logprobs, theirs.logprobs));
      BOOST_TEST(torch::equal(whole.entropy, theirs.entropy));
      for (const std::int64_t per_block : {std::int64_t{14}, default_logits_per_block}) {
        const Result ours = run(c, cap, true, per_block);
        BOOST_TEST(ours.d_hidden.scalar_type() == torch::kBFloat16);
        BOOST_TEST(ours.d_weight.scalar_type() == torch::kBFloat16);
        for (const auto& [mine, eagers, exacts] : {std::tuple{ours.d_hidden, theirs.d_hidden, truth.d_hidden},
                                                   {ours.d_weight, theirs.d_weight, truth.d_weight},
                                                   {ours.d_bias, theirs.d_bias, truth.d_bias}})
          BOOST_TEST(difference(mine, exacts) <=
                     2 * difference(eagers, exacts) + 1e-3 * exacts.abs().max().item<double>());
      }
    }
  }
}

// A frozen head (LoRA's, whose weight takes no gradient) gives the hidden states theirs; without autograd the figures
// are the same.
BOOST_AUTO_TEST_CASE(a_frozen_head_passes_the_gradient_to_the_hidden_states_only) {
  const Case c = make_case(torch::kDouble);
  const Result theirs = run(c, 1.5, false, eager_head);
  const auto hidden = c.hidden.clone().requires_grad_();
  const Head frozen{c.weight, torch::Tensor(), 1.5};
  torch::Tensor entropy;
  const auto logprobs = head_scores(frozen, hidden, c.targets, c.temperature, &entropy, 14);
  ((logprobs * c.d_logprobs).sum() + (entropy * c.d_entropy).sum()).backward();
  BOOST_TEST(difference(hidden.grad(), theirs.d_hidden) < 1e-12);
  torch::NoGradGuard no_grad;
  torch::Tensor plain_entropy;
  const auto plain = head_scores(frozen, c.hidden, c.targets, c.temperature, &plain_entropy, 14);
  BOOST_TEST(difference(plain, theirs.logprobs) < 1e-12);
  BOOST_TEST(difference(plain_entropy, theirs.entropy) < 1e-12);
  BOOST_TEST(!plain.requires_grad());
  BOOST_TEST(head_scores(frozen, c.hidden, c.targets, c.temperature, nullptr).sizes() == c.targets.sizes());
}

BOOST_AUTO_TEST_CASE(other_types_and_too_few_positions_are_refused) {
  const Case c = make_case(torch::kFloat);
  const Head head{c.weight, torch::Tensor(), std::nullopt};
  BOOST_CHECK_NO_THROW(head_scores(head, c.hidden, c.targets, c.temperature, nullptr));
  BOOST_CHECK_THROW(head_scores(head, c.hidden, c.targets, c.temperature.to(torch::kDouble), nullptr),
                    std::invalid_argument);
  BOOST_CHECK_THROW(head_scores(head, c.hidden, c.targets, c.temperature.clone().requires_grad_(), nullptr),
                    std::invalid_argument);
  BOOST_CHECK_THROW(head_scores(head, c.hidden.to(torch::kDouble), c.targets, c.temperature, nullptr),
                    std::invalid_argument);
  BOOST_CHECK_THROW(head_scores(head, c.hidden.narrow(1, 0, 4), c.targets, c.temperature, nullptr),
                    std::invalid_argument);
}

// Policy::token_logprobs against the log-softmax of Policy::logits at each token's temperature: the figures and every
// parameter's gradient, for an untied head with a bias (a scratch model) and a tied, soft-capped one (Gemma 2).
BOOST_AUTO_TEST_CASE(the_policys_token_logprobs_are_its_logits_log_softmax) {
  TempDir dir;
  write_random_hf_model(dir, R"({"architectures": ["Gemma2ForCausalLM"], "vocab_size": 40, "hidden_size": 16,
      "intermediate_size": 24, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
      "head_dim": 8, "query_pre_attn_scalar": 8, "sliding_window": 4, "max_position_embeddings": 128,
      "final_logit_softcapping": 2.0})");
  for (const bool gemma : {false, true}) {
    BOOST_TEST_CONTEXT((gemma ? "Gemma 2" : "scratch")) {
      Policy policy(gemma ? hf_model(dir) : small(), 20, 3);
      torch::manual_seed(7);
      const auto tokens = torch::randint(0, 20, {2, 9});
      const auto temperatures = torch::rand({2, 9}) + 0.5;
      const auto d_logprobs = torch::randn({2, 8}), d_entropy = torch::randn({2, 8});
      const auto gradients = [&](const auto& figures) {
        policy.zero_gradients();
        const auto [logprobs, entropy] = figures();
        ((logprobs * d_logprobs).sum() + (entropy * d_entropy).sum()).backward();
        std::vector<float> out;
        for (const FloatBuffer& g : policy.gradient_buffers()) out.insert(out.end(), g.data, g.data + g.size);
        return std::tuple{logprobs.detach(), entropy.detach(), torch::tensor(out)};
      };
      const auto [logprobs, entropy, grad] = gradients([&] {
        torch::Tensor h;
        auto lp = policy.token_logprobs(tokens, temperatures, &h);
        return std::pair{lp, h};
      });
      const auto [eager_logprobs, eager_entropy, eager_grad] = gradients([&] {
        const auto logp_all =
            torch::log_softmax(policy.logits(tokens).narrow(1, 0, 8) / temperatures.narrow(1, 1, 8).unsqueeze(-1), -1);
        return std::pair{logp_all.gather(-1, tokens.narrow(1, 1, 8).unsqueeze(-1)).squeeze(-1),
                         -(logp_all.exp() * logp_all).sum(-1)};
      });
      BOOST_TEST(difference(logprobs, eager_logprobs) < 1e-5);
      BOOST_TEST(difference(entropy, eager_entropy) < 1e-5);
      BOOST_TEST(eager_grad.abs().max().item<double>() > 1e-2);
      BOOST_TEST(difference(grad, eager_grad) < 1e-5);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
