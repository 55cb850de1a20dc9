#include "arclight/algo/grpo.hpp"

#include <boost/test/unit_test.hpp>
#include <torch/types.h>

#include <cmath>
#include <cstdint>
#include <utility>

using namespace arclight::algo;
namespace tt = boost::test_tools;

namespace {
// One sequence of 3 tokens over a vocabulary of 2; token 1 and 2 are actions.
// Logits at position 0 favour token 1 (log-probs ln(0.8), ln(0.2)), at position 1 are even.
struct Case {
  torch::Tensor logits = torch::log(torch::tensor({{{0.2f, 0.8f}, {0.5f, 0.5f}, {0.5f, 0.5f}}})).requires_grad_(true);
  torch::Tensor tokens = torch::tensor({{0L, 1L, 0L}});
  torch::Tensor mask = torch::tensor({{0.f, 1.f, 1.f}});
  torch::Tensor temperatures = torch::ones({1, 3});
};

// Token i's log-prob under logits [B, T, V] at i - 1 over its temperature, and the entropy there, as
// model::Policy::token_logprobs gives them ([B, T - 1]).
std::pair<torch::Tensor, torch::Tensor> scores(const torch::Tensor& logits, const Case& c) {
  const std::int64_t t = c.tokens.size(1);
  const auto temperature = c.temperatures.narrow(1, 1, t - 1).unsqueeze(-1);
  const auto logp_all = torch::log_softmax(logits.narrow(1, 0, t - 1) / temperature, -1);
  return {logp_all.gather(-1, c.tokens.narrow(1, 1, t - 1).unsqueeze(-1)).squeeze(-1),
          -(logp_all.exp() * logp_all).sum(-1)};
}

torch::Tensor loss_of(const Case& c, const torch::Tensor& old_logp, const torch::Tensor& adv,
                      const torch::Tensor& reference_logits, const LossConfig& config, LossTerms* terms) {
  const auto [logprobs, entropy] = scores(c.logits, c);
  const auto reference = reference_logits.defined() ? scores(reference_logits, c).first : torch::Tensor();
  return grpo_loss(logprobs, entropy, reference, c.mask, old_logp, adv, config, terms);
}
}  // namespace

BOOST_AUTO_TEST_SUITE(grpo)

BOOST_AUTO_TEST_CASE(on_policy_loss_is_minus_the_mean_advantage) {
  Case c;
  // Behaviour log-probs equal the current ones: ratio 1.
  auto old_logp = torch::tensor({{0.f, std::log(0.8f), std::log(0.5f)}});
  auto adv = torch::tensor({{0.f, 2.f, -1.f}});
  LossTerms terms;
  auto loss = loss_of(c, old_logp, adv, {}, LossConfig{}, &terms);
  BOOST_TEST(loss.item<double>() == -(2.0 - 1.0) / 2, tt::tolerance(1e-6));
  BOOST_TEST(terms.action_tokens == 2.0);
  BOOST_TEST(terms.clip_fraction == 0.0);
  // d(loss)/d(logit) at position 0 for token 1: -(A/N) * (1 - p) = -(2/2) * 0.2.
  loss.backward();
  BOOST_TEST(c.logits.grad()[0][0][1].item<double>() == -0.2, tt::tolerance(1e-5));
  BOOST_TEST(c.logits.grad()[0][0][0].item<double>() == 0.2, tt::tolerance(1e-5));
}

BOOST_AUTO_TEST_CASE(ratios_are_clipped_by_the_sign_of_the_advantage) {
  Case c;
  // Behaviour probabilities 0.4 and 0.25: ratios 2.0 and 2.0.
  auto old_logp = torch::tensor({{0.f, std::log(0.4f), std::log(0.25f)}});
  auto adv = torch::tensor({{0.f, 1.f, -1.f}});
  LossConfig config;
  config.clip_eps = 0.2;
  LossTerms terms;
  auto loss = loss_of(c, old_logp, adv, {}, config, &terms);
  // A > 0: min(2 * 1, 1.2 * 1) = 1.2.  A < 0: min(2 * -1, 1.2 * -1) = -2.  Loss = -(1.2 - 2) / 2.
  BOOST_TEST(loss.item<double>() == 0.4, tt::tolerance(1e-5));
  // Only the first token's loss is the clip's (verl's pg_clipfrac): the second's ratio is outside the range too, but
  // its unclipped term is the one taken.
  BOOST_TEST(terms.clip_fraction == 0.5, tt::tolerance(1e-6));
  BOOST_TEST(terms.clip_fraction_lower == 0.0);  // ratio 2 with A = -1: 2 < clip_ratio_c, the dual clip is not reached
  loss.backward();
  // The clipped positive-advantage token gets no gradient through its ratio.
  auto g = c.logits.grad();
  BOOST_TEST(g[0][0].abs().sum().item<double>() == 0.0, tt::tolerance(1e-7));
}

// A behaviour log-prob of -100 (the adapter takes any down to -1000) is a ratio of e^99, inf in float32: the loss and
// every gradient were NaN and the trainers skipped the step. Bounded as verl bounds it, both stay finite.
BOOST_AUTO_TEST_CASE(a_huge_ratio_leaves_the_loss_and_gradient_finite) {
  Case c;
  auto old_logp = torch::tensor({{0.f, -100.f, std::log(0.5f)}});
  auto adv = torch::tensor({{0.f, -1.f, 1.f}});
  auto reference = torch::log(torch::tensor({{{0.99f, 0.01f}, {0.5f, 0.5f}, {0.5f, 0.5f}}}));
  LossConfig config;
  config.clip_eps = 0.2;
  config.kl_coef = 0.1;
  auto loss = loss_of(c, old_logp, adv, reference, config, nullptr);
  BOOST_TEST(std::isfinite(loss.item<double>()));
  loss.backward();
  BOOST_TEST(torch::isfinite(c.logits.grad()).all().item<bool>());
}

// A token with a negative advantage whose ratio is far above 1 (a stale or mismatched behaviour log-prob 12 nats below
// the policy's) lost ratio × |A|, e^12 of it: one token set the step. The dual clip bounds it at clip_ratio_c × |A|,
// with no gradient past the bound, as verl's policy loss does.
BOOST_AUTO_TEST_CASE(a_negative_advantage_loses_at_most_clip_ratio_c_times_it) {
  Case c;
  auto old_logp = torch::tensor({{0.f, std::log(0.8f) - 12.f, std::log(0.5f)}});  // ratios e^12 and 1
  auto adv = torch::tensor({{0.f, -1.f, 1.f}});
  LossConfig config;
  config.clip_ratio_c = 3;
  LossTerms terms;
  auto loss = loss_of(c, old_logp, adv, {}, config, &terms);
  BOOST_TEST(loss.item<double>() == (3.0 - 1.0) / 2, tt::tolerance(1e-5));
  BOOST_TEST(terms.clip_fraction_lower == 0.5, tt::tolerance(1e-6));  // the first token's (verl's pg_clipfrac_lower)
  loss.backward();
  // Only the second token's (A = 1, ratio 1) gradient: none through the first.
  BOOST_TEST(c.logits.grad()[0][0].abs().sum().item<double>() == 0.0, tt::tolerance(1e-7));
  BOOST_TEST(c.logits.grad()[0][1].abs().sum().item<double>() > 0.1);
}

BOOST_AUTO_TEST_CASE(kl_and_entropy_terms) {
  Case c;
  auto old_logp = torch::tensor({{0.f, std::log(0.8f), std::log(0.5f)}});
  auto adv = torch::zeros({1, 3});
  // Reference: 0.5 / 0.5 at position 0, same as policy at position 1.
  auto ref = torch::log(torch::tensor({{{0.5f, 0.5f}, {0.5f, 0.5f}, {0.5f, 0.5f}}}));
  LossConfig config;
  config.kl_coef = 0.1;
  config.entropy_coef = 0.01;
  LossTerms terms;
  auto loss = loss_of(c, old_logp, adv, ref, config, &terms);
  // k3 at position 0: delta = ln(0.5/0.8); exp(delta) - delta - 1. At position 1: 0.
  const double delta = std::log(0.5 / 0.8);
  const double kl = (std::exp(delta) - delta - 1) / 2;
  const double h0 = -(0.2 * std::log(0.2) + 0.8 * std::log(0.8)), h1 = std::log(2.0);
  const double entropy = (h0 + h1) / 2;
  BOOST_TEST(terms.kl == kl, tt::tolerance(1e-5));
  BOOST_TEST(terms.entropy == entropy, tt::tolerance(1e-5));
  BOOST_TEST(loss.item<double>() == 0.1 * kl - 0.01 * entropy, tt::tolerance(1e-5));
}

BOOST_AUTO_TEST_CASE(each_token_is_scored_at_its_own_temperature) {
  Case c;
  // Token 1 sampled at temperature 2: the position-0 distribution is softmax(ln(0.2)/2, ln(0.8)/2) = (1/3, 2/3).
  // Token 2 at temperature 0.5: position 1 is even at any temperature.
  c.temperatures = torch::tensor({{1.f, 2.f, 0.5f}});
  auto old_logp = torch::tensor({{0.f, std::log(2.f / 3.f), std::log(0.5f)}});
  auto adv = torch::tensor({{0.f, 1.f, 1.f}});
  LossTerms terms;
  auto loss = loss_of(c, old_logp, adv, {}, LossConfig{}, &terms);
  BOOST_TEST(loss.item<double>() == -1.0, tt::tolerance(1e-5));  // both ratios 1
  BOOST_TEST(terms.clip_fraction == 0.0);
  // d(loss)/d(logit) at position 0 for token 1: -(A/N) * (1 - p) / T = -(1/2) * (1/3) / 2.
  loss.backward();
  BOOST_TEST(c.logits.grad()[0][0][1].item<double>() == -1.0 / 12, tt::tolerance(1e-5));
  // Scored at temperature 1 instead, the same behaviour log-prob would give token 1 a ratio of 0.8 / (2/3) = 1.2.
  Case one;
  const auto at_one = loss_of(one, old_logp, adv, {}, LossConfig{}, &terms);
  BOOST_TEST(at_one.item<double>() == -(1.2 + 1.0) / 2, tt::tolerance(1e-5));
}

BOOST_AUTO_TEST_SUITE_END()
