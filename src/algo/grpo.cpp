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

at::Tensor grpo_loss(const at::Tensor& logprobs, const at::Tensor& entropy, const at::Tensor& reference_logprobs,
                     const at::Tensor& action_mask, const at::Tensor& behaviour_logprobs, const at::Tensor& advantages,
                     const LossConfig& config, LossTerms* terms) {
  const std::int64_t t = action_mask.size(1);  // logprobs' position i - 1 is token i's
  auto mask = action_mask.narrow(1, 1, t - 1).to(torch::kFloat);
  auto old_logp = behaviour_logprobs.narrow(1, 1, t - 1);
  auto adv = advantages.narrow(1, 1, t - 1);
  auto count = mask.sum().clamp_min(1.0);

  // verl's compute_policy_loss_vanilla: the clipped surrogate, then the dual clip for negative advantages.
  auto ratio = torch::exp((logprobs - old_logp).clamp(-max_log_ratio, max_log_ratio));
  auto clipped = ratio.clamp(1.0 - config.clip_eps, 1.0 + config.clip_eps);
  auto unclipped_loss = -adv * ratio, clipped_loss = -adv * clipped;
  auto surrogate_loss = torch::max(unclipped_loss, clipped_loss);
  auto token_loss = torch::where(adv < 0, torch::min(surrogate_loss, -adv * config.clip_ratio_c), surrogate_loss);
  auto policy_loss = (token_loss * mask).sum() / count;
  auto loss = policy_loss;

  at::Tensor kl, mean_entropy;
  if (config.kl_coef != 0.0) {
    auto delta = (reference_logprobs - logprobs).clamp(-max_log_ratio, max_log_ratio);
    kl = ((torch::exp(delta) - delta - 1.0).clamp(-max_kl_term, max_kl_term) * mask).sum() / count;
    loss = loss + config.kl_coef * kl;
  }
  if (config.entropy_coef != 0.0) {
    mean_entropy = (entropy * mask).sum() / count;
    loss = loss - config.entropy_coef * mean_entropy;
  } else if (terms) {  // a figure only, outside the graph
    torch::NoGradGuard no_grad;
    mean_entropy = (entropy.detach() * mask).sum() / count;
  }
  if (terms) {
    torch::NoGradGuard no_grad;
    terms->policy_loss = policy_loss.item<double>();
    terms->kl = kl.defined() ? kl.item<double>() : 0.0;
    terms->entropy = mean_entropy.item<double>();
    auto was_clipped = (clipped_loss > unclipped_loss).to(torch::kFloat);
    terms->clip_fraction = ((was_clipped * mask).sum() / count).item<double>();
    auto dual_clipped = ((adv < 0) & (surrogate_loss > -adv * config.clip_ratio_c)).to(torch::kFloat);
    terms->clip_fraction_lower = ((dual_clipped * mask).sum() / count).item<double>();
    terms->action_tokens = mask.sum().item<double>();
  }
  return loss;
}

}  // namespace arclight::algo
