#include "arclight/algo/grpo.hpp"

#include <torch/types.h>
#include <torch/utils.h>

namespace arclight::algo {
namespace {
// Log-ratios are bounded before exp, as verl bounds them: a behaviour log-prob of -100 (an outside agent's token the
// sampler hardly drew) made exp overflow in float32, every trainer's gradient NaN, and the whole step was skipped.
constexpr double max_log_ratio = 20;
constexpr double max_kl_term = 10;  // verl's low_var_kl bound on each token's k3 estimate
}  // namespace

at::Tensor grpo_loss(const at::Tensor& logits, const at::Tensor& tokens, const at::Tensor& action_mask,
                     const at::Tensor& behaviour_logprobs, const at::Tensor& temperatures, const at::Tensor& advantages,
                     const at::Tensor& reference_logits, const LossConfig& config, LossTerms* terms) {
  // Token i is predicted by the logits at i - 1.
  const std::int64_t t = tokens.size(1);
  const auto temperature = temperatures.narrow(1, 1, t - 1).unsqueeze(-1);
  auto logp_all = torch::log_softmax(logits.narrow(1, 0, t - 1) / temperature, -1);
  auto targets = tokens.narrow(1, 1, t - 1).unsqueeze(-1);
  auto logp = logp_all.gather(-1, targets).squeeze(-1);
  auto mask = action_mask.narrow(1, 1, t - 1).to(torch::kFloat);
  auto old_logp = behaviour_logprobs.narrow(1, 1, t - 1);
  auto adv = advantages.narrow(1, 1, t - 1);
  auto count = mask.sum().clamp_min(1.0);

  // verl's compute_policy_loss_vanilla: the clipped surrogate, then the dual clip for negative advantages.
  auto ratio = torch::exp((logp - old_logp).clamp(-max_log_ratio, max_log_ratio));
  auto clipped = ratio.clamp(1.0 - config.clip_eps, 1.0 + config.clip_eps);
  auto unclipped_loss = -adv * ratio, clipped_loss = -adv * clipped;
  auto surrogate_loss = torch::max(unclipped_loss, clipped_loss);
  auto token_loss = torch::where(adv < 0, torch::min(surrogate_loss, -adv * config.clip_ratio_c), surrogate_loss);
  auto policy_loss = (token_loss * mask).sum() / count;
  auto loss = policy_loss;

  at::Tensor kl, entropy;
  if (config.kl_coef != 0.0) {
    auto ref_logp = torch::log_softmax(reference_logits.narrow(1, 0, t - 1) / temperature, -1)
                        .gather(-1, targets)
                        .squeeze(-1)
                        .detach();
    auto delta = (ref_logp - logp).clamp(-max_log_ratio, max_log_ratio);
    kl = ((torch::exp(delta) - delta - 1.0).clamp(-max_kl_term, max_kl_term) * mask).sum() / count;
    loss = loss + config.kl_coef * kl;
  }
  if (config.entropy_coef != 0.0) {
    entropy = (-(logp_all.exp() * logp_all).sum(-1) * mask).sum() / count;
    loss = loss - config.entropy_coef * entropy;
  } else if (terms) {  // a figure only: no graph of a [batch, tokens, vocabulary] tensor kept for backward
    torch::NoGradGuard no_grad;
    entropy = (-(logp_all.exp() * logp_all).sum(-1) * mask).sum() / count;
  }
  if (terms) {
    torch::NoGradGuard no_grad;
    terms->policy_loss = policy_loss.item<double>();
    terms->kl = kl.defined() ? kl.item<double>() : 0.0;
    terms->entropy = entropy.item<double>();
    auto was_clipped = (clipped_loss > unclipped_loss).to(torch::kFloat);
    terms->clip_fraction = ((was_clipped * mask).sum() / count).item<double>();
    auto dual_clipped = ((adv < 0) & (surrogate_loss > -adv * config.clip_ratio_c)).to(torch::kFloat);
    terms->clip_fraction_lower = ((dual_clipped * mask).sum() / count).item<double>();
    terms->action_tokens = mask.sum().item<double>();
  }
  return loss;
}

}  // namespace arclight::algo
