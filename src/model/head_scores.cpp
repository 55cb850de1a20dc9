#include "head_scores.hpp"

#include <ATen/ops/_log_softmax_backward_data.h>
#include <ATen/ops/tanh_backward.h>
#include <torch/autograd.h>

#include <algorithm>
#include <stdexcept>
#include <utility>
#include <vector>

namespace arclight::model {
namespace {

// Blocks of positions [first, first + count) of the targets [B, T], each spanning at most logits_per_block logits (one
// position of every row at least).
std::vector<std::pair<std::int64_t, std::int64_t>> blocks_of(const torch::Tensor& targets, std::int64_t vocabulary,
                                                             std::int64_t logits_per_block) {
  const std::int64_t t = targets.size(1), per_position = std::max<std::int64_t>(targets.size(0) * vocabulary, 1);
  const std::int64_t n = std::clamp<std::int64_t>(logits_per_block / per_position, 1, std::max<std::int64_t>(t, 1));
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  for (std::int64_t first = 0; first < t; first += n) out.emplace_back(first, std::min(n, t - first));
  return out;
}

}  // namespace

torch::Tensor head_logits(const Head& head, const torch::Tensor& hidden, torch::Tensor* bent) {
  auto logits =
      head.bias.defined() ? torch::linear(hidden, head.weight, head.bias) : torch::linear(hidden, head.weight);
  if (!head.softcap) return logits;
  auto t = torch::tanh(logits / *head.softcap);
  logits = t * *head.softcap;
  if (bent) *bent = std::move(t);
  return logits;
}

namespace {

// A block's log-softmax of logits / temperature [B, count, V] in the temperature's type (float32, or float64 for a
// float64 head).
torch::Tensor block_log_softmax(const torch::Tensor& capped, const torch::Tensor& temperature) {
  return torch::log_softmax(capped.to(temperature.scalar_type()) / temperature, -1);
}

// The forward's figures, a block at a time: {log-probs of the targets, entropies (none unless with_entropy)}, [B, T].
std::pair<torch::Tensor, torch::Tensor> scores_by_block(const Head& head, const torch::Tensor& hidden,
                                                        const torch::Tensor& targets, const torch::Tensor& temperature,
                                                        std::int64_t logits_per_block, bool with_entropy) {
  const auto options = temperature.options();
  auto logprobs = torch::empty(targets.sizes(), options);
  auto entropy = with_entropy ? torch::empty(targets.sizes(), options) : torch::Tensor();
  for (const auto& [first, count] : blocks_of(targets, head.weight.size(0), logits_per_block)) {
    const auto logp_all =
        block_log_softmax(head_logits(head, hidden.narrow(1, first, count)), temperature.narrow(1, first, count));
    logprobs.narrow(1, first, count)
        .copy_(logp_all.gather(-1, targets.narrow(1, first, count).unsqueeze(-1)).squeeze(-1));
    if (with_entropy) entropy.narrow(1, first, count).copy_(-(logp_all.exp() * logp_all).sum(-1));
  }
  return {logprobs, entropy};
}

// The same with a backward that keeps only its inputs and recomputes each block's logits and log-softmax: the
// log-probs' gradient a one-hot at the targets, the entropy's -p (log p + 1) (H = -sum p log p), then log_softmax's,
// the temperature's, the cap's and the product's derivatives as autograd's own operations take them (float32 for the
// softmax, the compute type elsewhere). The weight's and bias's gradients are summed over blocks in float32 (each
// block's product rounded to the compute type first, as eager's one product is); those of an input that needs none
// (a frozen head under LoRA) are not computed.
class HeadScores : public torch::autograd::Function<HeadScores> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& hidden,
                                                const torch::Tensor& weight, const torch::Tensor& bias,
                                                const torch::Tensor& targets, const torch::Tensor& temperature,
                                                double softcap, std::int64_t logits_per_block) {
    ctx->set_materialize_grads(false);
    const Head head{weight, bias_of(bias), cap_of(softcap)};
    auto [logprobs, entropy] = scores_by_block(head, hidden, targets, temperature, logits_per_block, true);
    ctx->save_for_backward({hidden, weight, bias, targets, temperature});
    ctx->saved_data["softcap"] = softcap;
    ctx->saved_data["logits_per_block"] = logits_per_block;
    return {logprobs, entropy};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &hidden = saved[0], &targets = saved[3], &temperature = saved[4];
    const Head head{saved[1], bias_of(saved[2]), cap_of(ctx->saved_data["softcap"].toDouble())};
    const torch::Tensor &d_logprobs = grads[0], &d_entropy = grads[1];
    if (!d_logprobs.defined() && !d_entropy.defined()) return torch::autograd::variable_list(7);
    const bool want_hidden = ctx->needs_input_grad(0), want_weight = ctx->needs_input_grad(1),
               want_bias = head.bias.defined() && ctx->needs_input_grad(2);
    torch::Tensor d_hidden, d_weight, d_bias;
    if (want_hidden) d_hidden = torch::zeros_like(hidden);  // the positions past the targets' stay zero
    const auto type = head.weight.scalar_type(), sums = temperature.scalar_type();  // float32, or float64's own
    if (want_weight) d_weight = torch::zeros(head.weight.sizes(), head.weight.options().dtype(sums));
    if (want_bias) d_bias = torch::zeros(head.bias.sizes(), head.bias.options().dtype(sums));
    for (const auto& [first, count] :
         blocks_of(targets, head.weight.size(0), ctx->saved_data["logits_per_block"].toInt())) {
      const auto h = hidden.narrow(1, first, count), temp = temperature.narrow(1, first, count);
      torch::Tensor bent;
      const auto logp_all = block_log_softmax(head_logits(head, h, &bent), temp);
      auto d_logp_all = torch::zeros_like(logp_all);
      if (d_logprobs.defined())
        d_logp_all.scatter_(-1, targets.narrow(1, first, count).unsqueeze(-1),
                            d_logprobs.narrow(1, first, count).unsqueeze(-1));
      if (d_entropy.defined()) {  // H = -sum p log p: dH / d log p = -p (log p + 1)
        const auto p = logp_all.exp();
        d_logp_all = d_logp_all - d_entropy.narrow(1, first, count).unsqueeze(-1) * p * (logp_all + 1);
      }
      auto d_logits =
          (at::_log_softmax_backward_data(d_logp_all, logp_all, -1, logp_all.scalar_type()) / temp).to(type);
      if (head.softcap) d_logits = at::tanh_backward(d_logits * *head.softcap, bent) / *head.softcap;
      if (want_hidden) d_hidden.narrow(1, first, count).copy_(torch::matmul(d_logits, head.weight));
      const auto rows = d_logits.reshape({-1, d_logits.size(-1)});
      if (want_weight) d_weight += torch::mm(rows.t(), h.reshape({-1, h.size(-1)}));
      if (want_bias) d_bias += rows.sum(0);
    }
    return {d_hidden,
            want_weight ? d_weight.to(type) : d_weight,
            want_bias ? d_bias.to(type) : torch::Tensor(),
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor()};
  }

 private:
  // No bias is an empty one here: LibTorch's custom functions take no undefined input.
  static torch::Tensor bias_of(const torch::Tensor& bias) { return bias.numel() > 0 ? bias : torch::Tensor(); }
  static std::optional<double> cap_of(double softcap) {
    return softcap > 0 ? std::optional<double>(softcap) : std::nullopt;
  }
};

}  // namespace

torch::Tensor head_scores(const Head& head, const torch::Tensor& hidden, const torch::Tensor& targets,
                          const torch::Tensor& temperature, torch::Tensor* entropy, std::int64_t logits_per_block) {
  if (temperature.scalar_type() != torch::promote_types(head.weight.scalar_type(), torch::kFloat) ||
      temperature.requires_grad() || hidden.size(1) < targets.size(1) ||
      hidden.scalar_type() != head.weight.scalar_type())
    throw std::invalid_argument(
        "head_scores: a temperature of the scores' type without gradient, hidden states of the head's type for every "
        "target");
  const bool with_gradient = torch::GradMode::is_enabled() && (hidden.requires_grad() || head.weight.requires_grad() ||
                                                               (head.bias.defined() && head.bias.requires_grad()));
  if (with_gradient) {
    const auto bias = head.bias.defined() ? head.bias : torch::empty({0}, head.weight.options());
    const auto out = HeadScores::apply(hidden, head.weight, bias, targets, temperature, head.softcap.value_or(0.0),
                                       logits_per_block);
    if (entropy) *entropy = out[1];
    return out[0];
  }
  auto [logprobs, figures] = scores_by_block(head, hidden, targets, temperature, logits_per_block, entropy != nullptr);
  if (entropy) *entropy = figures;
  return logprobs;
}

}  // namespace arclight::model
