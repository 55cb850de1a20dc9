#include "arclight/algo/grpo.hpp"

#include <ATen/ops/_log_softmax_backward_data.h>
#include <torch/autograd.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <algorithm>
#include <stdexcept>
#include <utility>
#include <vector>

namespace arclight::algo {
namespace {
// Log-ratios are bounded before exp, as verl bounds them: a behaviour log-prob of -100 (an outside agent's token the
// sampler hardly drew) made exp overflow in float32, every trainer's gradient NaN, and the whole step was skipped.
constexpr double max_log_ratio = 20;
constexpr double max_kl_term = 10;  // verl's low_var_kl bound on each token's k3 estimate

// Blocks of positions [first, first + count) of the targets [B, T], each spanning at most logits_per_block logits (one
// position of every row at least).
std::vector<std::pair<std::int64_t, std::int64_t>> token_blocks(const at::Tensor& logits, const at::Tensor& targets,
                                                                std::int64_t logits_per_block) {
  const std::int64_t t = targets.size(1), per_token = std::max<std::int64_t>(logits.size(0) * logits.size(2), 1);
  const std::int64_t n = std::clamp<std::int64_t>(logits_per_block / per_token, 1, std::max<std::int64_t>(t, 1));
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  for (std::int64_t first = 0; first < t; first += n) out.emplace_back(first, std::min(n, t - first));
  return out;
}

// A block's log-softmax of logits / temperature [B, count, V].
at::Tensor block_log_softmax(const at::Tensor& logits, const at::Tensor& temperature, std::int64_t first,
                             std::int64_t count) {
  return torch::log_softmax(logits.narrow(1, first, count) / temperature.narrow(1, first, count), -1);
}

// The forward's figures, a block at a time: {log-probs of the targets, entropies (none unless with_entropy)}, [B, T].
std::pair<at::Tensor, at::Tensor> scores_by_block(const at::Tensor& logits, const at::Tensor& targets,
                                                  const at::Tensor& temperature, std::int64_t logits_per_block,
                                                  bool with_entropy) {
  const auto options = logits.options();
  auto logprobs = torch::empty(targets.sizes(), options);
  auto entropy = with_entropy ? torch::empty(targets.sizes(), options) : at::Tensor();
  for (const auto& [first, count] : token_blocks(logits, targets, logits_per_block)) {
    const auto logp_all = block_log_softmax(logits, temperature, first, count);
    logprobs.narrow(1, first, count)
        .copy_(logp_all.gather(-1, targets.narrow(1, first, count).unsqueeze(-1)).squeeze(-1));
    if (with_entropy) entropy.narrow(1, first, count).copy_(-(logp_all.exp() * logp_all).sum(-1));
  }
  return {logprobs, entropy};
}

// The same with a backward that keeps only the logits (the policy's output, which the loss's graph holds anyway) and
// recomputes each block's
// log-softmax: the log-probs' gradient a one-hot at the targets, the entropy's -p (log p + 1) (H = -sum p log p),
// through log_softmax's own backward, as autograd takes them.
class TokenScores : public torch::autograd::Function<TokenScores> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const at::Tensor& logits,
                                                const at::Tensor& targets, const at::Tensor& temperature,
                                                std::int64_t logits_per_block) {
    ctx->set_materialize_grads(false);
    auto [logprobs, entropy] = scores_by_block(logits, targets, temperature, logits_per_block, true);
    ctx->save_for_backward({logits, targets, temperature});
    ctx->saved_data["logits_per_block"] = logits_per_block;
    return {logprobs, entropy};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &logits = saved[0], &targets = saved[1], &temperature = saved[2];
    const at::Tensor &d_logprobs = grads[0], &d_entropy = grads[1];
    if (!d_logprobs.defined() && !d_entropy.defined()) return {at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
    auto d_logits = torch::zeros_like(logits);  // the positions past the targets' (the last's logits) stay zero
    for (const auto& [first, count] : token_blocks(logits, targets, ctx->saved_data["logits_per_block"].toInt())) {
      const auto logp_all = block_log_softmax(logits, temperature, first, count);
      auto d_logp_all = torch::zeros_like(logp_all);
      if (d_logprobs.defined())
        d_logp_all.scatter_(-1, targets.narrow(1, first, count).unsqueeze(-1),
                            d_logprobs.narrow(1, first, count).unsqueeze(-1));
      if (d_entropy.defined()) {  // H = -sum p log p: dH / d log p = -p (log p + 1)
        const auto p = logp_all.exp();
        d_logp_all = d_logp_all - d_entropy.narrow(1, first, count).unsqueeze(-1) * p * (logp_all + 1);
      }
      const auto d_scaled = at::_log_softmax_backward_data(d_logp_all, logp_all, -1, logp_all.scalar_type());
      d_logits.narrow(1, first, count).copy_(d_scaled / temperature.narrow(1, first, count));
    }
    return {d_logits, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

void token_scores(const at::Tensor& logits, const at::Tensor& targets, const at::Tensor& temperature,
                  at::Tensor& logprobs, at::Tensor* entropy, std::int64_t logits_per_block) {
  if (logits.scalar_type() != temperature.scalar_type() || temperature.requires_grad() ||
      logits.size(1) < targets.size(1))
    throw std::invalid_argument(
        "token_scores: logits and temperature of one type, no gradient to the temperature, "
        "logits for every target");
  if (torch::GradMode::is_enabled() && logits.requires_grad()) {
    const auto out = TokenScores::apply(logits, targets, temperature, logits_per_block);
    logprobs = out[0];
    if (entropy) *entropy = out[1];
    return;
  }
  at::Tensor figures;
  std::tie(logprobs, figures) = scores_by_block(logits, targets, temperature, logits_per_block, entropy != nullptr);
  if (entropy) *entropy = figures;
}

at::Tensor grpo_loss(const at::Tensor& logits, const at::Tensor& tokens, const at::Tensor& action_mask,
                     const at::Tensor& behaviour_logprobs, const at::Tensor& temperatures, const at::Tensor& advantages,
                     const at::Tensor& reference_logits, const LossConfig& config, LossTerms* terms) {
  // Token i is predicted by the logits at i - 1.
  const std::int64_t t = tokens.size(1);
  const auto temperature = temperatures.narrow(1, 1, t - 1).unsqueeze(-1);
  const auto targets = tokens.narrow(1, 1, t - 1);
  at::Tensor logp, token_entropy;
  token_scores(logits, targets, temperature, logp, &token_entropy);
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
    at::Tensor ref_logp;
    {
      torch::NoGradGuard no_grad;
      token_scores(reference_logits, targets, temperature, ref_logp, nullptr);
    }
    auto delta = (ref_logp - logp).clamp(-max_log_ratio, max_log_ratio);
    kl = ((torch::exp(delta) - delta - 1.0).clamp(-max_kl_term, max_kl_term) * mask).sum() / count;
    loss = loss + config.kl_coef * kl;
  }
  if (config.entropy_coef != 0.0) {
    entropy = (token_entropy * mask).sum() / count;
    loss = loss - config.entropy_coef * entropy;
  } else if (terms) {  // a figure only, outside the graph
    torch::NoGradGuard no_grad;
    entropy = (token_entropy.detach() * mask).sum() / count;
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
