#pragma once
// The GRPO objective: a PPO-clipped ratio against the behaviour log-probs, an
// optional KL penalty to a frozen reference and an entropy bonus. Tensors are
// declared, not included: only LibTorch translation units call these.
namespace at {
class Tensor;
}

namespace arclight::algo {

struct LossConfig {
  double clip_eps = 0.2;
  // Dual clip (verl's clip_ratio_c): a token with a negative advantage loses at most clip_ratio_c × |advantage|, and
  // past that bound its gradient is 0 (unbounded, one stale token's ratio of e^12 set the whole step's direction).
  double clip_ratio_c = 3.0;
  double kl_coef = 0.0;       // weight of KL(policy || reference), k3 estimator bounded to [-10, 10] as verl's
  double entropy_coef = 0.0;  // weight of the entropy bonus
};

struct LossTerms {
  double policy_loss = 0;
  double kl = 0;
  double entropy = 0;
  double clip_fraction = 0;        // share of action tokens whose loss the clip changed (verl's pg_clipfrac)
  double clip_fraction_lower = 0;  // share whose loss the dual clip bounded (verl's pg_clipfrac_lower)
  double action_tokens = 0;
};

// The loss to minimize, averaged over action tokens.
// logprobs and entropy [B, T - 1]: the policy's log-prob of tokens 1..T-1 of each sequence and its entropy where they
// were drawn (model::Policy::token_logprobs, at each token's sampling temperature: the temperature at which its
// behaviour log-prob was taken, so that their ratio compares like with like); reference_logprobs the same of the
// frozen reference, undefined when kl_coef is 0. action_mask, behaviour_logprobs and advantages [B, T] float, aligned
// with the tokens: position i holds token i's values (position 0's are not read).
at::Tensor grpo_loss(const at::Tensor& logprobs, const at::Tensor& entropy, const at::Tensor& reference_logprobs,
                     const at::Tensor& action_mask, const at::Tensor& behaviour_logprobs, const at::Tensor& advantages,
                     const LossConfig& config, LossTerms* terms);

}  // namespace arclight::algo
